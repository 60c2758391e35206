package host

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

const gib = 1 << 30
const mib = 1 << 20

// How a term is known.
const (
	// BasisMechanism: the size follows from code read in vLLM or PyTorch.
	BasisMechanism = "mechanism"
	// BasisReport: the size is what issue reports measured.
	BasisReport = "report"
	// BasisAssumption: neither code nor a report gives the size; the
	// figure is ours and says so.
	BasisAssumption = "assumption"
)

// What kind of memory a term is, which decides whether the kernel can
// take it back under the pod's limit.
const (
	// KindAnon is process memory: counted against the limit, never
	// reclaimed without swap.
	KindAnon = "anon"
	// KindPinned is page-locked host memory (cudaHostAlloc,
	// cudaHostRegister): never reclaimed or swapped.
	KindPinned = "pinned"
	// KindShared is shared memory (tmpfs, /dev/shm): unreclaimable while
	// the files exist, charged to the pod that writes it.
	KindShared = "shared"
	// KindPageCache is file pages read from the checkpoint: charged to the
	// pod while resident, but clean, so the kernel drops them under the
	// limit instead of killing the pod.
	KindPageCache = "page_cache"
)

// When a term is held.
const (
	PhaseLoading = "loading"
	PhaseServing = "serving"
	PhaseBoth    = "both"
)

// Term names (Term.Term), stable strings of the JSON contract.
const (
	TermServerProcesses  = "server_processes"
	TermWorkerProcesses  = "worker_processes"
	TermRequestBuffers   = "request_buffers"
	TermWeightLoading    = "weight_loading"
	TermOffloadedWeights = "offloaded_weights"
	TermOffloadedKV      = "offloaded_kv_cache"
	TermLoRAAdapters     = "lora_adapters"
	TermProcessorCache   = "processor_cache"
	TermShmRings         = "shm_rings"
	TermNCCLShm          = "nccl_shm"
)

// Term is one consumer of the pod's host memory.
type Term struct {
	Term string `json:"term"`
	// Bytes is the term's size; HighBytes the upper end of what the
	// sources allow (equal when they agree).
	Bytes     int64 `json:"bytes"`
	HighBytes int64 `json:"high_bytes"`
	// Kind is KindAnon, KindPinned, KindShared or KindPageCache;
	// Reclaimable is true for page cache, which the limit does not need
	// to hold.
	Kind        string `json:"kind"`
	Reclaimable bool   `json:"reclaimable"`
	// Shm is true for a term that lives in /dev/shm: it needs room there
	// as well as under the memory limit.
	Shm bool `json:"shm"`
	// Phase is PhaseLoading, PhaseServing or PhaseBoth.
	Phase string `json:"phase"`
	// Basis is BasisMechanism, BasisReport or BasisAssumption; Source
	// names the code or the reports; Detail is the arithmetic.
	Basis  string `json:"basis"`
	Source string `json:"source"`
	Detail string `json:"detail"`
}

// Processes are the vLLM processes of the pod.
type Processes struct {
	// APIServers serve HTTP and tokenize; EngineCores schedule (one per
	// data-parallel rank). Workers drive one GPU each; with one GPU per
	// engine the worker runs inside the engine core's process and
	// EngineCores counts none of its own.
	APIServers  int `json:"api_servers"`
	EngineCores int `json:"engine_cores"`
	Workers     int `json:"workers"`
}

// Finding is a warning of the host plan, with a stable code.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Warning codes of the host plan.
const (
	// CodeHostRegisterLimit: one offloaded KV region of 512 GiB or more,
	// which cudaHostRegister refuses.
	CodeHostRegisterLimit = "kv_offload_region_too_large"
	// CodeNotModelled: a setting whose host memory the plan does not size
	// (its term is a floor or absent).
	CodeNotModelled = "host_term_not_modelled"
)

// Plan is the host side of a vLLM pod: `plan -o json`'s host object.
type Plan struct {
	// MemoryLimitBytes is the memory limit to set (MemoryLimit as a
	// Kubernetes quantity): RequiredHighBytes rounded up to a GiB. The
	// request is the same: a GPU pod evicted or placed on a node without
	// the memory loses its GPUs' work.
	MemoryLimitBytes int64  `json:"memory_limit_bytes"`
	MemoryLimit      string `json:"memory_limit"`
	// RequiredBytes is the unreclaimable memory at the larger of the two
	// phases: a limit below it is OOMKilled. RequiredHighBytes is the same
	// at the upper end of the sources.
	RequiredBytes     int64 `json:"required_bytes"`
	RequiredHighBytes int64 `json:"required_high_bytes"`
	// LoadingBytes and ServingBytes are the unreclaimable memory while
	// the weights load and once serving.
	LoadingBytes int64 `json:"loading_bytes"`
	ServingBytes int64 `json:"serving_bytes"`
	// PageCacheBytes is what loading reads through the page cache.
	PageCacheBytes int64 `json:"page_cache_bytes"`
	// ShmBytes is what the pod writes to /dev/shm at most; ShmNeeded is
	// true past a container's default 64 MiB, and ShmSizeLimit is the
	// sizeLimit of the emptyDir to mount there.
	ShmBytes     int64     `json:"shm_bytes"`
	ShmNeeded    bool      `json:"shm_needed"`
	ShmSizeLimit string    `json:"shm_size_limit,omitempty"`
	Processes    Processes `json:"processes"`
	Terms        []Term    `json:"terms"`
	Warnings     []Finding `json:"warnings"`
	Notes        []string  `json:"notes"`
}

// Options say which part of a server one pod runs, and in what
// environment; the zero value is a pod that runs it all, with the
// environment of the command line.
type Options struct {
	// GPUs is the pod's GPUs; 0 means every GPU of the plan.
	GPUs int
	// Worker is true for a pod without the API server and engine core (a
	// worker of a multi-node group).
	Worker bool
	// Env is the engine's environment (the container's and the command
	// line's); nil means the command line's (Settings.Env).
	Env map[string]string
}

// Sizes the plan uses, each with its source.
const (
	// workerBaseline is a GPU worker's own memory (Python, PyTorch, the
	// CUDA context's host side, NCCL): "+3 GB" per worker beside the
	// pinned KV cache in #48436, and anon-rss 3,131,928 kB per TP worker
	// in #57469 (testdata rows 256–258, 261).
	workerBaseline = 3 * gib
	// workerBaselineHigh is #53042's: anon 35.0 GiB on a node of four
	// GB200 ranks (row 254), 8.75 GiB each with the node's other
	// processes.
	workerBaselineHigh = 35 * gib / 4
	// serverBaseline is an API server's or a separate engine core's own
	// memory: no report measures it; 1 GiB (2 at most) is our figure for
	// a process that imports PyTorch and holds a tokenizer.
	serverBaseline     = 1 * gib
	serverBaselineHigh = 2 * gib
	// bytesPerTokenSlot is InputBatch's host arrays per request slot and
	// token: token_ids_cpu (int32) and is_token_ids (bool), each
	// max_num_seqs × max_model_len (vllm/v1/worker/gpu_input_batch.py).
	bytesPerTokenSlot = 4 + 1
	// Message-queue rings in /dev/shm (shm_broadcast.py ShmRingBuffer,
	// chunk bytes × chunks): the executor's broadcast to its workers
	// (VLLM_MQ_MAX_CHUNK_BYTES_MB 16 MiB × 10), each worker's response
	// queue (10 MiB × 10), each tensor-parallel group's broadcaster
	// (4 MiB × 6). Nominal sizes: newer releases check that much is free
	// before creating them (check_shm_free_space).
	ringBroadcast = 160 * mib
	ringResponse  = 100 * mib
	ringTPGroup   = 24 * mib
	// ncclSegment is one NCCL shared-memory segment between two GPUs of a
	// node: "/dev/shm/nccl-... (size 9637888)" failed in a pod whose
	// /dev/shm was 64M at TP 2 (production-stack #276, row 262). One
	// segment per ordered pair is our reading of NCCL's SHM transport
	// (one buffer per direction), not a measurement.
	ncclSegment = 9637888
	// DefaultShmBytes is a container's own /dev/shm: the container
	// runtimes' 64 MiB, as df showed in production-stack #276.
	DefaultShmBytes = 64 * mib
	// shardBytes is one checkpoint file, read whole by the eager
	// strategy and by .bin checkpoints: transformers' save_pretrained
	// writes shards of at most max_shard_size, "5GB" by default. An
	// assumption: a checkpoint may be cut otherwise.
	shardBytes = 5_000_000_000
	// hostRegisterMax is the largest region cudaHostRegister took in
	// #51080 (row 260): 549.7e9 bytes registered, 549.9e9 failed, so
	// 512 GiB is the bound.
	hostRegisterMax = 512 * gib
)

// Build plans the host side of the pod that runs (part of) the server b
// plans. The error is for a plan without a GPU worker.
func Build(b memory.Budget, pod Options) (Plan, error) {
	set := b.Settings
	tp, pp, dp := max(set.TensorParallelSize, 1), max(set.PipelineParallelSize, 1), max(set.DataParallelSize, 1)
	gpus := tp * pp * dp
	if pod.GPUs > 0 && pod.GPUs < gpus {
		gpus = pod.GPUs
	}
	if gpus <= 0 {
		return Plan{}, fmt.Errorf("host plan: no GPU worker")
	}
	// share is the part of the server this pod holds.
	share := float64(gpus) / float64(tp*pp*dp)
	engines := max(int(math.Round(float64(dp)*share)), 1)
	multiproc := tp*pp > 1
	p := Plan{Processes: Processes{Workers: gpus}}
	if !pod.Worker {
		p.Processes.APIServers = set.APIServers()
		if multiproc {
			p.Processes.EngineCores = engines
		}
	}
	env := pod.Env
	if env == nil {
		env = set.Env
	}
	c := planner{b: b, set: set, tp: tp, pp: pp, gpus: gpus, engines: engines, share: share, multiproc: multiproc, env: env, plan: &p}
	c.processes()
	c.requestBuffers()
	c.weightLoading()
	c.offloadedWeights()
	c.offloadedKV()
	c.loraAdapters()
	c.processorCache()
	c.shm()
	if set.Set[vllm.FlagSwapSpace] {
		p.Notes = append(p.Notes, "--swap-space: 0 bytes; the V1 engine never allocates it (num_cpu_blocks is 0, vLLM #27984), and releases from 0.18.0 refuse the flag (#36216)")
	}
	p.total()
	return p, nil
}

// planner holds what every term reads.
type planner struct {
	b            memory.Budget
	set          vllm.Settings
	tp, pp, gpus int
	engines      int
	share        float64
	multiproc    bool
	env          map[string]string
	plan         *Plan
}

func (c *planner) add(t Term) {
	if t.HighBytes < t.Bytes {
		t.HighBytes = t.Bytes
	}
	c.plan.Terms = append(c.plan.Terms, t)
}

func (c *planner) warn(code, format string, args ...any) {
	c.plan.Warnings = append(c.plan.Warnings, Finding{Code: code, Message: fmt.Sprintf(format, args...)})
}

// processes are the baselines of the pod's processes.
func (c *planner) processes() {
	pr := c.plan.Processes
	if n := pr.APIServers + pr.EngineCores; n > 0 {
		who := fmt.Sprintf("%d API %s", pr.APIServers, plural(pr.APIServers, "server", "servers"))
		if pr.EngineCores > 0 {
			who += fmt.Sprintf(" + %d engine %s", pr.EngineCores, plural(pr.EngineCores, "core", "cores"))
		}
		c.add(Term{Term: TermServerProcesses, Bytes: int64(n) * serverBaseline, HighBytes: int64(n) * serverBaselineHigh,
			Kind: KindAnon, Phase: PhaseBoth, Basis: BasisAssumption,
			Source: "no report measures an API server or an engine core apart from its workers; a process that imports PyTorch and holds a tokenizer",
			Detail: fmt.Sprintf("%s × %s (at most %s)", who, gibs(serverBaseline), gibs(serverBaselineHigh))})
	}
	c.add(Term{Term: TermWorkerProcesses, Bytes: int64(pr.Workers) * workerBaseline, HighBytes: int64(pr.Workers) * workerBaselineHigh,
		Kind: KindAnon, Phase: PhaseBoth, Basis: BasisReport,
		Source: "vLLM #48436 (3 GB a worker beside its pinned KV cache), #57469 (anon-rss 3,131,928 kB a TP worker); #53042 (anon 35.0 GiB on a node of 4 GB200 ranks) for the upper end",
		Detail: fmt.Sprintf("%d GPU %s × %s (at most %s)", pr.Workers, plural(pr.Workers, "worker", "workers"), gibs(workerBaseline), gibs(workerBaselineHigh))})
}

// requestBuffers are each worker's per-request token arrays.
func (c *planner) requestBuffers() {
	seqs, ctx := int64(c.set.MaxNumSeqs), int64(c.b.MaxModelLen)
	if seqs <= 0 || ctx <= 0 {
		return
	}
	per := bytesPerTokenSlot * seqs * ctx
	c.add(Term{Term: TermRequestBuffers, Bytes: int64(c.gpus) * per, Kind: KindAnon, Phase: PhaseServing, Basis: BasisMechanism,
		Source: "vllm/v1/worker/gpu_input_batch.py: token_ids_cpu (int32) and is_token_ids (bool) of max_num_seqs × max_model_len per worker",
		Detail: fmt.Sprintf("%d %s × 5 B × %d max-num-seqs × %d max-model-len", c.gpus, plural(c.gpus, "worker", "workers"), seqs, ctx)})
}

// checkpointBytes is the pod's part of the checkpoint.
func (c *planner) checkpointBytes() int64 {
	total := c.b.Model.CheckpointBytes
	if total <= 0 {
		total = c.b.WeightsTotal
	}
	// Data-parallel ranks read the same files: the pod reads its
	// pipeline stages' part once.
	stagesHere := math.Min(1, c.share*float64(max(c.set.DataParallelSize, 1)))
	return int64(float64(total) * stagesHere)
}

// weightLoading is what reading the checkpoint holds, by load format.
func (c *planner) weightLoading() {
	ck := c.checkpointBytes()
	if ck <= 0 {
		return
	}
	format := strings.ToLower(c.set.LoadFormat())
	strategy := c.set.SafetensorsLoadStrategy
	pageCache := Term{Term: TermWeightLoading, Bytes: ck, Kind: KindPageCache, Reclaimable: true, Phase: PhaseLoading, Basis: BasisMechanism,
		Source: "safetensors files are mmapped (vllm/model_executor/model_loader/weight_utils.py): their pages pass through the page cache, charged to the pod while resident",
		Detail: fmt.Sprintf("the pod's checkpoint, %s, read once", gibs(ck))}
	switch {
	case format == "dummy":
		return
	case format == "fastsafetensors":
		c.plan.Notes = append(c.plan.Notes, "--load-format fastsafetensors streams the weights to the GPUs (GPUDirect Storage where there is one) with little host staging: no loading term")
		return
	case format == "runai_streamer" || format == "runai_streamer_sharded":
		if limit, ok := c.set.StreamerMemoryLimit(); ok {
			c.add(Term{Term: TermWeightLoading, Bytes: int64(c.gpus) * limit, Kind: KindAnon, Phase: PhaseLoading, Basis: BasisMechanism,
				Source: "the Run:ai streamer reads through a CPU buffer of memory_limit (--model-loader-extra-config) in each worker",
				Detail: fmt.Sprintf("%d %s × memory_limit %s", c.gpus, plural(c.gpus, "worker", "workers"), gibs(limit))})
			return
		}
		rank := c.b.WeightsTotal / int64(c.tp*c.pp)
		c.add(Term{Term: TermWeightLoading, Bytes: int64(c.gpus) * rank, Kind: KindAnon, Phase: PhaseLoading, Basis: BasisAssumption,
			Source: "the Run:ai streamer reads through a CPU buffer bounded by memory_limit in --model-loader-extra-config; its default is not known here, so a worker's whole share is assumed",
			Detail: fmt.Sprintf("%d %s × %s (a rank's weights)", c.gpus, plural(c.gpus, "worker", "workers"), gibs(rank))})
		c.warn(CodeNotModelled, "--load-format %s: its CPU buffer is taken as each worker's whole share of the weights (%s); set memory_limit in --model-loader-extra-config to bound it", format, gibs(rank))
		return
	case strategy == "eager" || format == "pt":
		per := min(int64(shardBytes), ck)
		why := "--safetensors-load-strategy eager reads each file whole into memory (weight_utils.py)"
		if format == "pt" {
			why = "--load-format pt loads each .bin file whole with torch.load (weight_utils.py)"
		}
		c.add(Term{Term: TermWeightLoading, Bytes: int64(c.gpus) * per, Kind: KindAnon, Phase: PhaseLoading, Basis: BasisAssumption,
			Source: why + "; one file at a time per worker, of transformers' default max_shard_size (5 GB), an assumption about how the checkpoint is cut",
			Detail: fmt.Sprintf("%d %s × %s (one shard)", c.gpus, plural(c.gpus, "worker", "workers"), gibs(per))})
		c.plan.PageCacheBytes = ck
		return
	case strategy == "prefetch":
		pageCache.Source = "--safetensors-load-strategy prefetch reads every file into the page cache before the mmapped load (weight_utils.py); a limit below it drops the prefetched pages before they are used"
	case format != "" && format != "auto" && format != "safetensors":
		c.warn(CodeNotModelled, "--load-format %s: its host staging is not modelled; the page cache of the checkpoint (%s) is assumed", format, gibs(ck))
	}
	c.add(pageCache)
}

// offloadedWeights are --cpu-offload-gb's host copies: each rank moves
// its parameters one at a time until the budget is reached
// (maybe_offload_to_cpu, vllm/model_executor/models/utils.py: the check
// is before each parameter, so the last one may overshoot), each copy a
// pinned allocation that PyTorch's CachingHostAllocator rounds up to a
// power of two.
func (c *planner) offloadedWeights() {
	if c.set.CPUOffloadGiB <= 0 {
		return
	}
	budget := int64(c.set.CPUOffloadGiB * gib)
	pin := !truthy(c.env[vllm.EnvWeightOffloadNoPin])
	dtype := max(c.b.DtypeBytes, 1)
	var exact, held int64
	ranks := 0
	stages := memory.StageLayers(c.b.Model.Layers, c.pp)
	// Each stage's TP ranks hold equal tensors; the pod holds gpus of
	// the tp × pp × dp ranks, spread evenly over the stages.
	perStage := float64(c.gpus) / float64(len(stages))
	for _, st := range stages {
		var e, h int64
	layers:
		for i := st[0]; i < st[1]; i++ {
			for _, t := range memory.LayerTensors(c.b.Model, i, c.tp, dtype) {
				if e >= budget {
					break layers
				}
				e += t
				if pin {
					h += nextPow2(t)
				} else {
					h += t
				}
			}
		}
		exact += int64(float64(e) * perStage)
		held += int64(float64(h) * perStage)
		ranks++
	}
	kind, basis, source := KindPinned, BasisMechanism, "vllm maybe_offload_to_cpu (model_executor/models/utils.py) pins each parameter's host copy; PyTorch's CachingHostAllocator rounds each pinned block up to a power of two; #56410 measured 1.15× (an 8B in fp16) to 1.87×"
	if !pin {
		kind, source = KindAnon, vllm.EnvWeightOffloadNoPin+" is set: plain host copies of exactly the parameters' size"
	}
	ratio := 0.0
	if exact > 0 {
		ratio = float64(held) / float64(exact)
	}
	c.add(Term{Term: TermOffloadedWeights, Bytes: held, Kind: kind, Phase: PhaseBoth, Basis: basis, Source: source,
		Detail: fmt.Sprintf("--cpu-offload-gb %g on each of %d %s: %s of parameters, held as %s (%.2f×)", c.set.CPUOffloadGiB, c.gpus, plural(c.gpus, "worker", "workers"), gibs(exact), gibs(held), ratio)})
}

// kvLayers is how many layers of [first, last) keep a KV cache tensor.
func kvLayers(s model.Spec, first, last int) int {
	n := 0
	for i := first; i < last; i++ {
		switch s.LayerKind(i).Kind {
		case model.Full, model.Sliding, model.MLA:
			n++
		}
	}
	return n
}

// offloadedKV is the CPU KV cache of --kv-offloading-size (or the
// OffloadingConnector's cpu_bytes_to_use), per engine and summed over its
// ranks.
func (c *planner) offloadedKV() {
	size, from := c.set.KVOffloadBytes()
	if size <= 0 {
		return
	}
	if c.set.KVOffloadingBackend == "lmcache" {
		c.add(Term{Term: TermOffloadedKV, Bytes: int64(float64(size) * c.share * float64(max(c.set.DataParallelSize, 1))), Kind: KindAnon, Phase: PhaseServing, Basis: BasisAssumption,
			Source: "--kv-offloading-backend lmcache: LMCache sizes its own CPU buffer; the size asked for is taken",
			Detail: fmt.Sprintf("%s %s per engine", from, gibs(size))})
		c.warn(CodeNotModelled, "--kv-offloading-backend lmcache: LMCache's own CPU buffer is taken as the %s asked for", gibs(size))
		return
	}
	// The pod's part of each engine: its ranks' shares.
	ranksHere := c.gpus
	if vllm.KVOffloadSharedRegion(c.set.Version) {
		bytes := int64(float64(size) / float64(c.tp*c.pp) * float64(ranksHere))
		c.add(Term{Term: TermOffloadedKV, Bytes: bytes, Kind: KindShared, Shm: true, Phase: PhaseServing, Basis: BasisMechanism,
			Source: "vLLM #50094: one mmap in /dev/shm, registered with cudaHostRegister, exactly the size asked for; #50358 refuses to start when /dev/shm has less free",
			Detail: fmt.Sprintf("%s %s per engine × %d %s here, in /dev/shm (vLLM %s)", from, gibs(size), c.engines, plural(c.engines, "engine", "engines"), c.set.Version)})
		if size >= hostRegisterMax {
			c.warn(CodeHostRegisterLimit, "%s %s: cudaHostRegister failed for one region of 512 GiB or more (vLLM #51080: 549.7e9 bytes registered, 549.9e9 failed); stay below it", from, gibs(size))
		}
		return
	}
	// Before #50094: one pinned tensor per KV tensor of each rank, the
	// rank's share split evenly over its layers (CPUOffloadingWorker's
	// torch.zeros(pin_memory=True)); PyTorch rounds each to a power of
	// two. K and V held apart or together give the same rounding: a
	// halved tensor rounds to half.
	perRank := size / int64(c.tp*c.pp)
	stages := memory.StageLayers(c.b.Model.Layers, c.pp)
	perStage := float64(ranksHere) / float64(len(stages))
	var held float64
	n0 := 0
	for i, st := range stages {
		n := max(kvLayers(c.b.Model, st[0], st[1]), 1)
		if i == 0 {
			n0 = n
		}
		held += float64(int64(n)*nextPow2(perRank/int64(n))) * perStage
	}
	bytes := int64(held)
	c.add(Term{Term: TermOffloadedKV, Bytes: bytes, Kind: KindPinned, Phase: PhaseServing, Basis: BasisMechanism,
		Source: "CPUOffloadingWorker pins one torch tensor per KV tensor, each rounded up to a power of two by PyTorch's CachingHostAllocator; shows as Shmem (vLLM #53042: 1.925× of 200 GiB; #48436: 80 GiB at TP 2 held 64 GiB a worker; #50094's probe: 6, 10 and 12 GiB pinned took 8, 16 and 16)",
		Detail: fmt.Sprintf("%s %s per engine: %s a rank over %d KV tensors, each rounded to %s, × %d %s (vLLM %s, before the /dev/shm region)", from, gibs(size), gibs(perRank), n0, gibs(nextPow2(perRank/int64(n0))), ranksHere, plural(ranksHere, "rank", "ranks"), c.set.Version)})
}

// loraAdapters are the adapters each worker keeps in host memory with
// --enable-lora: --max-cpu-loras of them (--max-loras by default), each
// loaded whole and pinned where pinning is available (vllm-features §1.3),
// sized at --max-lora-rank, their bound.
func (c *planner) loraAdapters() {
	n := c.set.CPULoRAs()
	if n == 0 {
		return
	}
	per, err := memory.LoRAAdapterBytes(c.b.Model, c.set, max(c.b.DtypeBytes, 1))
	if err != nil || per <= 0 {
		return
	}
	_, rank := c.set.LoRASlots()
	c.add(Term{Term: TermLoRAAdapters, Bytes: int64(c.gpus) * int64(n) * per, Kind: KindPinned, Phase: PhaseServing, Basis: BasisMechanism,
		Source: "vllm/lora/worker_manager.py: each worker's LRU cache of max_cpu_loras adapters, loaded whole with pin_memory; an adapter's size is its own rank's, max_lora_rank bounds it",
		Detail: fmt.Sprintf("%d %s × %d %s × %s (rank %d, at most)", c.gpus, plural(c.gpus, "worker", "workers"), n, plural(n, "adapter", "adapters"), gibs(per), rank)})
}

// processorCache is the multimodal processor cache of the API servers and
// the engine cores: the docstring's mm_processor_cache_gb × (api servers +
// data-parallel ranks) is the upper end; since #23018 the API servers keep
// keys only when the engine does, so the engine's part is the size.
func (c *planner) processorCache() {
	s := c.b.Model
	if s.Vision == nil || c.set.LanguageModelOnly() || allZero(c.set.LimitMMPerPrompt) {
		return
	}
	per, shm := c.set.MMProcessorCache()
	if per <= 0 {
		return
	}
	engines := int64(c.engines)
	if c.plan.Processes.APIServers == 0 {
		return
	}
	t := Term{Term: TermProcessorCache, Bytes: engines * per, HighBytes: int64(c.plan.Processes.APIServers)*per + engines*per,
		Kind: KindAnon, Phase: PhaseServing, Basis: BasisMechanism,
		Source: "vllm/config/multimodal.py: mm_processor_cache_gb per process, × (API servers + data-parallel ranks) at most; #23018 keeps only keys in the API servers",
		Detail: fmt.Sprintf("%s × %d %s (× %d with the API servers' copies)", gibs(per), engines, plural(int(engines), "engine", "engines"), int64(c.plan.Processes.APIServers)+engines)}
	if shm {
		t.Kind, t.Shm, t.HighBytes = KindShared, true, t.Bytes
		t.Source = "--mm-processor-cache-type shm: one ring of mm_processor_cache_gb in /dev/shm per engine (vllm/config/multimodal.py)"
		t.Detail = fmt.Sprintf("%s × %d %s in /dev/shm", gibs(per), engines, plural(int(engines), "engine", "engines"))
	}
	c.add(t)
}

// allZero reports --limit-mm-per-prompt with every modality at 0: vLLM
// then runs text-only and keeps no processor cache.
func allZero(m *vllm.MMLimits) bool {
	if m == nil || len(m.Limits) == 0 {
		return false
	}
	for _, l := range m.Limits {
		if l.Count > 0 {
			return false
		}
	}
	return true
}

// shm are the engine's message-queue rings and NCCL's segments in
// /dev/shm; a server on one GPU creates none (UniProcExecutor).
func (c *planner) shm() {
	if !c.multiproc {
		return
	}
	groups := c.gpus / c.tp // tensor-parallel groups in the pod
	rings := int64(c.engines)*ringBroadcast + int64(c.gpus)*ringResponse
	detail := fmt.Sprintf("%d × 160 MiB executor broadcast + %d × 100 MiB worker responses", c.engines, c.gpus)
	if c.tp > 1 {
		rings += int64(groups) * ringTPGroup
		detail += fmt.Sprintf(" + %d × 24 MiB tensor-parallel broadcaster", groups)
	}
	c.add(Term{Term: TermShmRings, Bytes: rings, Kind: KindShared, Shm: true, Phase: PhaseServing, Basis: BasisMechanism,
		Source: "vllm/distributed/device_communicators/shm_broadcast.py (ShmRingBuffer), multiproc_executor.py, parallel_state.py: nominal sizes, which newer releases check are free before creating them",
		Detail: detail})
	// NCCL shares memory between the GPUs of the pod that talk: those of
	// one tensor-parallel group, and neighbouring pipeline stages.
	local := min(c.gpus, c.tp*c.pp)
	pairs := int64(local) * int64(local-1)
	if pairs > 0 {
		c.add(Term{Term: TermNCCLShm, Bytes: pairs * ncclSegment, Kind: KindShared, Shm: true, Phase: PhaseServing, Basis: BasisReport,
			Source: "production-stack #276: NCCL's /dev/shm/nccl-* segment of 9,637,888 bytes did not fit a 64M /dev/shm at TP 2; one segment per ordered pair of GPUs is our reading of NCCL's shared-memory transport",
			Detail: fmt.Sprintf("%d ordered GPU pairs × 9,637,888 B", pairs)})
	}
}

// total sums the terms into the plan's answers.
func (p *Plan) total() {
	var load, serve, loadHigh, serveHigh int64
	for _, t := range p.Terms {
		if t.Kind == KindPageCache {
			p.PageCacheBytes += t.Bytes
		}
		if t.Shm {
			p.ShmBytes += t.Bytes
		}
		if t.Reclaimable {
			continue
		}
		if t.Phase != PhaseServing {
			load += t.Bytes
			loadHigh += t.HighBytes
		}
		if t.Phase != PhaseLoading {
			serve += t.Bytes
			serveHigh += t.HighBytes
		}
	}
	p.LoadingBytes, p.ServingBytes = load, serve
	p.RequiredBytes, p.RequiredHighBytes = max(load, serve), max(loadHigh, serveHigh)
	p.MemoryLimitBytes = roundUp(p.RequiredHighBytes, gib)
	p.MemoryLimit = Quantity(p.MemoryLimitBytes)
	p.ShmNeeded = p.ShmBytes > DefaultShmBytes
	if p.ShmNeeded {
		p.ShmSizeLimit = Quantity(roundUp(p.ShmBytes, gib))
	}
	if p.Terms == nil {
		p.Terms = []Term{}
	}
	if p.Warnings == nil {
		p.Warnings = []Finding{}
	}
	if p.Notes == nil {
		p.Notes = []string{}
	}
}

// Name is the term in words ("offloaded kv cache").
func (t Term) Name() string { return strings.ReplaceAll(t.Term, "_", " ") }

// Largest are the n largest terms the memory limit must hold (page cache
// left out), largest first: what the memory goes to.
func (p Plan) Largest(n int) []Term {
	var ts []Term
	for _, t := range p.Terms {
		if !t.Reclaimable {
			ts = append(ts, t)
		}
	}
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Bytes > ts[j].Bytes })
	return ts[:min(n, len(ts))]
}

// ShmList names what the pod writes to /dev/shm, in the terms' order:
// "offloaded kv cache 64.00 GiB, shm rings 0.57 GiB".
func (p Plan) ShmList() string {
	var parts []string
	for _, t := range p.Terms {
		if t.Shm {
			parts = append(parts, t.Name()+" "+gibs(t.Bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// Quantity writes bytes as the Kubernetes quantity a manifest takes:
// whole GiB as "96Gi", else whole MiB, else bytes.
func Quantity(b int64) string {
	switch {
	case b > 0 && b%gib == 0:
		return fmt.Sprintf("%dGi", b/gib)
	case b > 0 && b%mib == 0:
		return fmt.Sprintf("%dMi", b/mib)
	}
	return fmt.Sprintf("%d", b)
}

// nextPow2 is the power of two at or above n (PyTorch's
// c10::llvm::PowerOf2Ceil), n itself for n ≤ 1.
func nextPow2(n int64) int64 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

func gibs(b int64) string { return memory.GiB(b) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// truthy reads an environment switch as vLLM's envs.py does: "1" or
// "true", any case.
func truthy(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true"
}
