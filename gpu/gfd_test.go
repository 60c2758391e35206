package gpu

import (
	"strconv"
	"strings"
	"testing"
)

func TestFromNodeLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		device string
		count  int
		bytes  int64 // 0: the catalog device's own
		note   string
	}{
		{"p5 node", map[string]string{
			LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "8", LabelMemory: "81559",
			LabelComputeMajor: "9", LabelComputeMinor: "0",
		}, "H100-80GB", 8, 0, ""},
		{"g5.12xlarge node", map[string]string{
			LabelProduct: "NVIDIA-A10G", LabelCount: "4", LabelMemory: "23028",
		}, "A10G", 4, 0, ""},
		{"T4 node without memory label", map[string]string{
			LabelProduct: "Tesla-T4", LabelCount: "1",
		}, "T4", 1, 0, ""},
		{"time-sliced", map[string]string{
			LabelProduct: "NVIDIA-L4-SHARED", LabelCount: "1", LabelMemory: "23034",
		}, "L4", 1, 0, ""},
		{"no count label", map[string]string{
			LabelProduct: "NVIDIA-A100-SXM4-40GB",
		}, "A100-40GB", 1, 0, "assumed 1 GPU"},
		{"MIG single strategy", map[string]string{
			LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", LabelCount: "7", LabelMemory: "4864",
		}, "A100-40GB-MIG-1g.5gb", 7, 0, ""},
		// Unknown product: sized from the label less 2%, whole MiB:
		// 32768 MiB × 0.98 = 32112.64 -> 32112 MiB.
		{"unknown product", map[string]string{
			LabelProduct: "NVIDIA-Future-GPU", LabelCount: "2", LabelMemory: "32768",
			LabelComputeMajor: "12", LabelComputeMinor: "1",
		}, "NVIDIA-Future-GPU", 2, 32112 << 20, "not in the catalog"},
		// The label says less memory than the catalog's figure for the
		// product (a 40 GB card labelled as the 80 GB one): the label wins.
		// 40960 MiB × 0.98 = 40140.8 -> 40140 MiB.
		{"label below catalog", map[string]string{
			LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "1", LabelMemory: "40960",
		}, "NVIDIA-A100-SXM4-80GB", 1, 40140 << 20, "reports less memory than the catalog's A100-80GB"},
	}
	for _, tc := range tests {
		sel, err := FromNodeLabels(tc.labels)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if sel.Device.Name != tc.device || sel.Count != tc.count {
			t.Errorf("%s: got %d × %s, want %d × %s", tc.name, sel.Count, sel.Device.Name, tc.count, tc.device)
		}
		if tc.bytes != 0 && sel.Device.TotalBytes != tc.bytes {
			t.Errorf("%s: %d bytes, want %d", tc.name, sel.Device.TotalBytes, tc.bytes)
		}
		if tc.bytes != 0 && !sel.Device.Estimated {
			t.Errorf("%s: a size from labels must be marked estimated", tc.name)
		}
		if !strings.Contains(sel.Note, tc.note) || (tc.note == "") != (sel.Note == "") {
			t.Errorf("%s: note %q, want %q", tc.name, sel.Note, tc.note)
		}
	}
	sel, _ := FromNodeLabels(map[string]string{LabelProduct: "X", LabelMemory: "1024", LabelComputeMajor: "12", LabelComputeMinor: "1"})
	if sel.Device.ComputeCapability != "12.1" {
		t.Errorf("compute capability from labels = %q, want 12.1", sel.Device.ComputeCapability)
	}
}

func TestFromNodeLabelsErrors(t *testing.T) {
	tests := []struct {
		labels  map[string]string
		wantSub string
	}{
		{map[string]string{}, "no nvidia.com/gpu.product label"},
		{map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "eight"}, "bad nvidia.com/gpu.count"},
		{map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "0"}, "bad nvidia.com/gpu.count"},
		{map[string]string{LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelMemory: "80GiB"}, "bad nvidia.com/gpu.memory"},
		{map[string]string{LabelProduct: "NVIDIA-Future-GPU", LabelCount: "1"}, "unknown GPU product"},
	}
	for _, tc := range tests {
		sel, err := FromNodeLabels(tc.labels)
		if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("FromNodeLabels(%v) = %+v, %v; want error containing %q", tc.labels, sel, err, tc.wantSub)
		}
	}
}

func FuzzFromNodeLabels(f *testing.F) {
	f.Add("NVIDIA-H100-80GB-HBM3", "8", "81559")
	f.Add("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "7", "4864")
	f.Add("NVIDIA-Future-GPU", "2", "32768")
	f.Add("", "", "")
	f.Add("Tesla-T4", "-1", "1")
	f.Fuzz(func(t *testing.T, product, count, memory string) {
		labels := map[string]string{LabelProduct: product}
		if count != "" {
			labels[LabelCount] = count
		}
		if memory != "" {
			labels[LabelMemory] = memory
		}
		sel, err := FromNodeLabels(labels)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			return
		}
		if sel.Count < 1 || sel.Device.TotalBytes <= 0 {
			t.Errorf("FromNodeLabels(%q, %q, %q) = %+v", product, count, memory, sel)
		}
		if mib, err := strconv.ParseInt(strings.TrimSpace(memory), 10, 64); err == nil && sel.Device.TotalBytes > mib<<20 {
			t.Errorf("device reports %d bytes, more than the node's label %s MiB", sel.Device.TotalBytes, memory)
		}
	})
}
