// Package startup is headroom's one model of how long a vLLM server takes
// from its container's start to its first answer: the pod's start, the
// checkpoint read from where it is stored and copied to each GPU, and the
// engine's own start (profile run, torch.compile, CUDA-graph capture).
// check and the webhook size a probe's window from it, capacity delays a
// new replica by it, and probe bounds a launch by it, so the three cannot
// disagree about the same weights. It is an estimate built from stated
// rates, not a measurement: every command that prints it says which
// storage class it assumed and how to give a measured time instead.
package startup

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Storage is where the checkpoint is read from at start-up.
type Storage string

// The storage classes. Each rate is the checkpoint's read rate through
// vLLM's default loader (safetensors shards memory-mapped and read tensor
// by tensor), in bytes per second.
const (
	// Cached: the shards are already in the node's page cache (a restart
	// on the same node, a model baked into a node image that was read
	// before). Host memory is not the bound; the copy to each GPU is.
	Cached Storage = "cached"
	// Local: a node-local disk (NVMe, a hostPath, an image layer). A PCIe 4
	// NVMe reads 3-7 GB/s sequentially, but page faults on a memory-mapped
	// file tensor by tensor reach far less; 1 GB/s is our figure, the one
	// capacity's estimate used before this model (docs/capacity.md).
	Local Storage = "local"
	// Network: a network volume (a PVC on cloud block storage, NFS, EFS,
	// an object store through a streamer). 125 MiB/s is the baseline
	// throughput of AWS EBS gp3, the default volume type behind most
	// PersistentVolumeClaims on EKS (AWS documentation, "Amazon EBS General
	// Purpose SSD volumes": 125 MiB/s baseline, up to 1,000 MiB/s when
	// provisioned); a faster volume makes the estimate an upper bound.
	Network Storage = "network"
)

// DefaultStorage is assumed when the user names none: a node-local disk.
// The probe window's margin (ProbeMargin) covers a cold local read; a
// network volume is eight times slower and must be declared.
const DefaultStorage = Local

// Storages lists the classes in the order help texts name them.
var Storages = []Storage{Cached, Local, Network}

// readRate is each class's read rate in bytes per second; Cached reads at
// host-memory speed, far above the copy to the GPU, so it has none.
var readRate = map[Storage]float64{
	Local:   1e9,
	Network: 125 << 20,
}

const (
	// copyRate is the rate at which one rank's weights reach its GPU from
	// host memory through vLLM's loader, in bytes per second. PCIe 4 x16
	// moves 25 GB/s and PCIe 5 twice that, but the loader converts and
	// copies tensor by tensor on one CPU thread per rank; 3 GB/s is our
	// figure for that loop (Llama-3.1-8B's 16 GB in about 5 s). Ranks copy
	// in parallel, so it applies to one rank's share.
	copyRate = 3e9
	// PodStart is the time from scheduling to the engine's first line with
	// the image already on the node: container creation, Python imports
	// and CUDA initialisation. Our figure; an image pull adds minutes.
	PodStart = 30 * time.Second
	// EngineStart is the engine's start after the weights are in: the
	// profile run, torch.compile from a warm cache and CUDA-graph capture.
	// Our figure for a warm compile cache; published cold starts on an
	// L40S logged 96 s to 302 s of engine init (the ProbeMargin covers
	// up to twice the whole estimate).
	EngineStart = 60 * time.Second
	// ProbeMargin multiplies the estimate into the window a startup probe
	// should give: the estimate is not a measurement, and a probe that
	// fires early kills a healthy server in a restart loop, while one that
	// waits too long only delays the report of a hung one.
	ProbeMargin = 2.0
)

// Input is what the estimate reads.
type Input struct {
	// CheckpointBytes is what a node reads from storage: the checkpoint's
	// size (safetensors total_size). Every rank on a node reads through
	// the same page cache, and every node of a pipeline reads the shards
	// its layers are in, so this is the whole checkpoint. 0 = unknown:
	// RankWeightBytes × Ranks is used instead.
	CheckpointBytes int64
	// RankWeightBytes is what one GPU holds of the weights (the plan's
	// per-GPU weights), copied from host memory by that rank's worker.
	RankWeightBytes int64
	// Ranks is the number of GPUs the weights are split over (TP × PP).
	Ranks int
	// LoadFormat is vLLM's --load-format ("" = auto).
	LoadFormat string
	// Storage is where the checkpoint is read from ("" = DefaultStorage).
	Storage Storage
}

// Estimate is the expected start-up time and its parts.
type Estimate struct {
	Total, PodStart time.Duration
	// Load is the weights' read and copy: the slower of the node's read
	// from storage and one rank's copy to its GPU (they overlap, page by
	// page).
	Load, EngineStart time.Duration
	// ReadBytes is what a node reads from storage, RankBytes what one rank
	// copies to its GPU.
	ReadBytes, RankBytes int64
	Storage              Storage
	LoadFormat           string
}

// Of estimates the start-up time of in.
func Of(in Input) Estimate {
	st := in.Storage
	if st == "" {
		st = DefaultStorage
	}
	format := in.LoadFormat
	if format == "" {
		format = "auto"
	}
	read := in.CheckpointBytes
	if read <= 0 {
		read = max(in.RankWeightBytes, 0) * int64(max(in.Ranks, 1))
	}
	rank := max(in.RankWeightBytes, 0)
	if format == "dummy" {
		// --load-format dummy initialises random weights in place: nothing
		// is read or copied (vLLM's DummyModelLoader).
		read, rank = 0, 0
	}
	seconds := float64(rank) / copyRate
	if rate, ok := readRate[st]; ok {
		seconds = math.Max(seconds, float64(read)/rate)
	}
	// Whole seconds, rounded: the estimate is not finer than that, and
	// ProbeMargin covers far more than the rounding.
	load := time.Duration(math.Round(seconds)) * time.Second
	return Estimate{
		Total:    PodStart + load + EngineStart,
		PodStart: PodStart, Load: load, EngineStart: EngineStart,
		ReadBytes: read, RankBytes: rank, Storage: st, LoadFormat: format,
	}
}

// ProbeWindow is the window a startup probe should give: the estimate
// times ProbeMargin, in whole seconds.
func (e Estimate) ProbeWindow() time.Duration {
	return time.Duration(math.Ceil(e.Total.Seconds()*ProbeMargin)) * time.Second
}

// Summary says how the estimate was made, in one phrase a report can
// quote: "3m51s (30s pod start + 2m21s reading 141 GB from local storage
// + 1m0s engine start)".
func (e Estimate) Summary() string {
	how := fmt.Sprintf("reading %.0f GB from %s storage", float64(e.ReadBytes)/1e9, e.Storage)
	if e.Storage == Cached {
		how = fmt.Sprintf("copying %.0f GB a GPU from the page cache", float64(e.RankBytes)/1e9)
	}
	if e.LoadFormat == "dummy" {
		how = "no weights read (--load-format dummy)"
	}
	return fmt.Sprintf("%s (%s pod start + %s %s + %s engine start)", e.Total, e.PodStart, e.Load, how, e.EngineStart)
}

// ParseStorage reads a storage class name; "" is DefaultStorage. The
// error is one line naming the classes.
func ParseStorage(s string) (Storage, error) {
	v := Storage(strings.ToLower(strings.TrimSpace(s)))
	if v == "" {
		return DefaultStorage, nil
	}
	for _, k := range Storages {
		if v == k {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown storage class %q: give %s (where the checkpoint is read from at start-up)", s, List())
}

// List names the classes for a help text: "cached, local or network".
func List() string {
	names := make([]string, len(Storages))
	for i, k := range Storages {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
