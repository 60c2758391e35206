package gpu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Selection is what a GPU name resolves to: Count devices, possibly as one
// cloud instance type.
type Selection struct {
	// Device is one of the GPUs.
	Device Device `json:"device"`
	// Count is how many of them; at least 1.
	Count int `json:"count"`
	// SKU is the instance type the name was, if it was one.
	SKU string `json:"sku,omitempty"`
	// Cloud is the SKU's cloud ("azure", "azure-local", "aws", "gcp").
	Cloud string `json:"cloud,omitempty"`
	// Note says what was assumed, e.g. which variant a bare "A100" meant.
	Note string `json:"note,omitempty"`
}

// maxNameLen bounds the names Resolve reads; real names are far shorter.
const maxNameLen = 200

// MaxCount bounds a count of GPUs: written before a name ("8xH100"), a
// node label, or --gpu-count.
const MaxCount = 4096

// countRE reads an optional count before a device name: "8xH100",
// "2 x A100-80GB", "4×L4", "8*H200".
var countRE = regexp.MustCompile(`^([0-9]{1,6})\s*(?:x|X|×|\*)\s*(\S.*)$`)

// Resolve turns whatever names a GPU into a Selection. It accepts
//   - a catalog device in any common spelling, case and separator
//     ("H100", "h100-80gb", "NVIDIA H100 80GB HBM3", "a100 80g", "rtx4090",
//     "4090", "nvidia-a10g"), optionally with a count ("8xH100");
//   - a cloud instance type ("p4d.24xlarge", "Standard_NC24ads_A100_v4",
//     "a3-highgpu-8g"), any case;
//   - an NVIDIA GPU-feature-discovery product label ("NVIDIA-A100-SXM4-80GB",
//     "Tesla-T4", "NVIDIA-H100-80GB-HBM3-SHARED");
//   - a MIG slice ("A100-80GB:3g.40gb", "a100-80gb-mig-3g.40gb",
//     "nvidia.com/mig-1g.10gb", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb").
//
// An unknown name gives an error naming the three closest known names.
func Resolve(name string) (Selection, error) {
	s := strings.TrimSpace(name)
	if s == "" {
		return Selection{}, fmt.Errorf("empty GPU name: give a device (H100), an instance type (p5.48xlarge) or a MIG slice (A100-80GB:3g.40gb); run `headroom gpus` to list all")
	}
	if len(s) > maxNameLen {
		return Selection{}, fmt.Errorf("GPU name %.24q... is too long: give a device (H100), an instance type or a MIG slice", s)
	}
	count := 0
	if m := countRE.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > MaxCount {
			return Selection{}, fmt.Errorf("bad GPU count %q in %q: give 1 to %d, e.g. 8xH100", m[1], s, MaxCount)
		}
		count, s = n, m[2]
	}
	sel, err := resolveOne(s)
	if err != nil {
		return Selection{}, err
	}
	if count > 0 {
		if sel.SKU != "" {
			return Selection{}, fmt.Errorf("%q: a count goes with a device (8xH100), not with an instance type; %s already has %d GPUs", name, sel.SKU, sel.Count)
		}
		sel.Count = count
	}
	return sel, nil
}

// resolveOne resolves a name without a count prefix.
func resolveOne(s string) (Selection, error) {
	// A label selector copied whole: "nvidia.com/gpu.product=NVIDIA-L4".
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	// GFD appends "-SHARED" to the product when time-slicing or MPS renames it.
	if len(s) > len("-shared") && strings.EqualFold(s[len(s)-len("-shared"):], "-shared") {
		s = s[:len(s)-len("-shared")]
	}
	if sel, ok, err := resolveMIG(s); ok {
		return sel, err
	}
	ix := index()
	if i, ok := ix.skus[skuKey(s)]; ok {
		r := skuTable[i]
		sel := Selection{Device: catalog[ix.byName[r.device]].dev, Count: r.count, SKU: r.name, Cloud: r.cloud}
		return pcieCard(sel, pcieSKUs[r.name]), nil
	}
	if t, ok := ix.devices[key(s)]; ok {
		sel := Selection{Device: catalog[t.candidates[0]].dev, Count: 1, Note: t.note}
		return pcieCard(sel, strings.Contains(strings.ToLower(s), "pcie")), nil
	}
	return Selection{}, unknownError(s)
}

// pcieSKUs are the instance types whose GPUs are PCIe cards of a part the
// catalog lists as its SXM module: Azure's NC A100 v4 series (A100 80GB
// PCIe cards; Azure's "NC A100 v4-series" page).
var pcieSKUs = map[string]bool{"Standard_NC24ads_A100_v4": true, "Standard_NC48ads_A100_v4": true, "Standard_NC96ads_A100_v4": true}

// pcieCard marks sel's device as the PCIe card where pcie is true and the
// catalog has the card's own figures (pcieNote); other devices stay.
func pcieCard(sel Selection, pcie bool) Selection {
	if _, ok := pciePerf[sel.Device.Name]; !pcie || !ok {
		return sel
	}
	sel.Device.PCIe = true
	sel.Note = joinNotes(sel.Note, "the PCIe card: no NVLink between GPUs, and its own peaks")
	return sel
}

func unknownError(s string) error {
	if sugg := Suggest(s, 3); len(sugg) > 0 {
		return fmt.Errorf("unknown GPU %q: did you mean %s? run `headroom gpus` to list all, or give --gpu-memory", s, strings.Join(sugg, ", "))
	}
	return fmt.Errorf("unknown GPU %q: run `headroom gpus` to list all, or give --gpu-memory", s)
}

// GPU-feature-discovery node labels read by FromNodeLabels.
const (
	LabelProduct      = "nvidia.com/gpu.product"
	LabelCount        = "nvidia.com/gpu.count"
	LabelMemory       = "nvidia.com/gpu.memory" // MiB per GPU, as nvidia-smi shows it
	LabelComputeMajor = "nvidia.com/gpu.compute.major"
	LabelComputeMinor = "nvidia.com/gpu.compute.minor"
)

// labelReservePercent is the share of nvidia.com/gpu.memory taken off when a node's
// product is not in the catalog. The label is nvidia-smi's total, which
// includes memory the driver keeps; CUDA reports 0.6% (H100: 81090 of 81559
// MiB) to 2.1% (L4: 22559 of 23034 MiB) less. Decision: take off 2%, the
// larger end, so an unknown GPU is not credited with memory it lacks.
const labelReservePercent = 2

// FromNodeLabels reads a Kubernetes node's NVIDIA GPU-feature-discovery
// labels: the product names the device, gpu.count the number. A node
// without them is read by GKE's accelerator label (FromGKEAccelerator). A product
// the catalog does not know is sized from gpu.memory (MiB per GPU) less an
// estimated driver reservation. With MIG's "single" strategy GFD reports
// the slice as the product ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") and the
// slice count as gpu.count, which this reads as such.
func FromNodeLabels(labels map[string]string) (Selection, error) {
	product := strings.TrimSpace(labels[LabelProduct])
	if product == "" && strings.TrimSpace(labels[LabelGKEAccelerator]) != "" {
		return fromGKELabels(labels)
	}
	if product == "" {
		return Selection{}, fmt.Errorf("node has no %s label (nor GKE's %s): is NVIDIA GPU feature discovery (or the GPU operator) running on it?", LabelProduct, LabelGKEAccelerator)
	}
	count, countNote := 1, ""
	if v, ok := labels[LabelCount]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxCount {
			return Selection{}, fmt.Errorf("bad %s label %q: want a whole number of GPUs from 1 to %d", LabelCount, v, MaxCount)
		}
		count = n
	} else {
		countNote = fmt.Sprintf("no %s label; assumed 1 GPU", LabelCount)
	}
	var labelBytes int64
	if v, ok := labels[LabelMemory]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		// 64 MiB to 16 TiB: anything outside is not a GPU's memory.
		if err != nil || n < 64 || n > 1<<24 {
			return Selection{}, fmt.Errorf("bad %s label %q: want the GPU's memory in MiB, e.g. 81559", LabelMemory, v)
		}
		labelBytes = n * mib
	}

	sel, err := resolveOne(product)
	switch {
	case err == nil && sel.SKU == "" && (labelBytes == 0 || sel.Device.TotalBytes <= labelBytes):
		sel.Count = count
		sel.Note = joinNotes(sel.Note, countNote)
		return sel, nil
	case labelBytes == 0:
		return Selection{}, fmt.Errorf("unknown GPU product %q and no %s label to size it by: give the GPU with --gpu or --gpu-memory", product, LabelMemory)
	}
	note := fmt.Sprintf("product %q is not in the catalog; sized from %s less %d%% for the driver's reservation", product, LabelMemory, labelReservePercent)
	if err == nil {
		note = fmt.Sprintf("%s reports less memory than the catalog's %s; sized from %s less %d%% for the driver's reservation", LabelMemory, sel.Device.Name, LabelMemory, labelReservePercent)
	}
	dev := Device{
		Name:              product,
		TotalBytes:        labelBytes / 100 * (100 - labelReservePercent) / mib * mib,
		ComputeCapability: labelCompute(labels),
		Vendor:            "nvidia",
		Source:            fmt.Sprintf("estimate from node label %s=%s (MiB) less %d%%", LabelMemory, labels[LabelMemory], labelReservePercent),
		NominalBytes:      labelBytes,
		Estimated:         true,
	}
	return Selection{Device: dev, Count: count, Note: joinNotes(note, countNote)}, nil
}

// labelCompute reads "major.minor" from GFD labels, or "" when absent or odd.
func labelCompute(labels map[string]string) string {
	major, err1 := strconv.Atoi(strings.TrimSpace(labels[LabelComputeMajor]))
	minor, err2 := strconv.Atoi(strings.TrimSpace(labels[LabelComputeMinor]))
	if err1 != nil || err2 != nil || major < 1 || major > 99 || minor < 0 || minor > 9 {
		return ""
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
