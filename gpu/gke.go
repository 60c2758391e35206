package gpu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// GKE's node labels. GKE labels every GPU node with its accelerator and
// runs no GPU feature discovery by default, so its pods select GPUs by
// these rather than by nvidia.com/gpu.product (GKE's "Run GPUs in GKE
// Standard node pools" and "Running multi-instance GPUs" guides).
const (
	// LabelGKEAccelerator names the node's GPU: "nvidia-l4".
	LabelGKEAccelerator = "cloud.google.com/gke-accelerator"
	// LabelGKEPartition is the MIG profile of a node whose GPUs GKE
	// partitions ("1g.5gb"); each slice is then one nvidia.com/gpu.
	LabelGKEPartition = "cloud.google.com/gke-gpu-partition-size"
	// LabelGKESharing marks nodes whose GPUs GKE time-shares or runs MPS
	// on ("time-sharing", "mps"); pods on them select it.
	LabelGKESharing = "cloud.google.com/gke-gpu-sharing-strategy"
)

// gkeAccelerators maps GKE's accelerator values to catalog devices. Each is
// the one memory size GKE offers under that value: nvidia-tesla-v100 is
// the 16 GB SXM2 card of n1 machines, nvidia-tesla-a100 the 40 GB one of
// a2-highgpu, nvidia-h100-mega-80gb the H100 of a3-megagpu (the same 80 GB
// card with more network), nvidia-b200 the 180 GB B200 of a4-highgpu.
var gkeAccelerators = map[string]string{
	"nvidia-tesla-t4":       "T4",
	"nvidia-tesla-v100":     "V100-16GB",
	"nvidia-l4":             "L4",
	"nvidia-tesla-a100":     "A100-40GB",
	"nvidia-a100-80gb":      "A100-80GB",
	"nvidia-h100-80gb":      "H100-80GB",
	"nvidia-h100-mega-80gb": "H100-80GB",
	"nvidia-h200-141gb":     "H200",
	"nvidia-b200":           "B200",
}

// gkeUncatalogued are GKE accelerators whose memory the catalog does not
// hold: each is named, so the error can say what to give instead of
// suggesting a wrong card.
var gkeUncatalogued = map[string]string{
	"nvidia-tesla-p100": "Tesla P100 (16 GB)",
	"nvidia-tesla-p4":   "Tesla P4 (8 GB)",
	"nvidia-gb200":      "GB200 (186 GB a GPU)",
}

// FromGKEAccelerator resolves GKE's accelerator label value, and with a
// partition (LabelGKEPartition's value, "" for none) the MIG slice of it
// that each nvidia.com/gpu of the node is.
func FromGKEAccelerator(value, partition string) (Selection, error) {
	v := strings.ToLower(strings.TrimSpace(value))
	if len(v) > maxNameLen {
		return Selection{}, fmt.Errorf("%s %.24q... is too long for an accelerator name", LabelGKEAccelerator, v)
	}
	name, ok := gkeAccelerators[v]
	if !ok {
		if what, known := gkeUncatalogued[v]; known {
			return Selection{}, fmt.Errorf("%s=%s is a %s, which the GPU catalog does not hold", LabelGKEAccelerator, v, what)
		}
		return Selection{}, fmt.Errorf("%s=%q is not an accelerator headroom knows (known: %s)", LabelGKEAccelerator, clipName(v), strings.Join(GKEAccelerators(), ", "))
	}
	p := strings.TrimSpace(partition)
	if p == "" {
		sel, err := Resolve(name)
		if err == nil {
			sel.Note = joinNotes(sel.Note, fmt.Sprintf("GKE's %s=%s", LabelGKEAccelerator, v))
		}
		return sel, err
	}
	if len(p) > maxNameLen {
		return Selection{}, fmt.Errorf("%s %.24q... is too long for a MIG profile", LabelGKEPartition, p)
	}
	sel, err := Resolve(name + ":" + p)
	if err != nil {
		return Selection{}, fmt.Errorf("%s=%q on %s=%s: %v", LabelGKEPartition, p, LabelGKEAccelerator, v, err)
	}
	return sel, nil
}

// GKEAccelerators lists the GKE accelerator values FromGKEAccelerator
// resolves, sorted.
func GKEAccelerators() []string {
	out := make([]string, 0, len(gkeAccelerators))
	for k := range gkeAccelerators {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// clipName shortens a name from outside for an error message.
func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// fromGKELabels reads a node's GKE labels: the accelerator and its MIG
// partition. GKE labels no GPU count; a count from GPU feature discovery
// is read where both run, else one GPU is assumed and said.
func fromGKELabels(labels map[string]string) (Selection, error) {
	sel, err := FromGKEAccelerator(labels[LabelGKEAccelerator], labels[LabelGKEPartition])
	if err != nil {
		return Selection{}, err
	}
	sel.Count = 1
	if v, ok := labels[LabelCount]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxCount {
			return Selection{}, fmt.Errorf("bad %s label %q: want a whole number of GPUs from 1 to %d", LabelCount, v, MaxCount)
		}
		sel.Count = n
	} else {
		sel.Note = joinNotes(sel.Note, fmt.Sprintf("no %s label; assumed 1 GPU", LabelCount))
	}
	return sel, nil
}
