package gpu

import (
	"strings"
	"testing"
)

// GKE's accelerator values name one card each; the memory is the
// catalog's for that card (an L4 reports 22559 MiB = 22.03 GiB, as vLLM
// logs it), so a pod that selects nvidia-l4 is planned as one that selects
// nvidia.com/gpu.product=NVIDIA-L4.
func TestFromGKEAccelerator(t *testing.T) {
	tests := []struct {
		value, partition string
		device           string
		bytes            int64
	}{
		{"nvidia-l4", "", "L4", 22559 * mib},
		{"nvidia-tesla-t4", "", "T4", 0},
		{"nvidia-tesla-v100", "", "V100-16GB", 0},
		// nvidia-tesla-a100 is a2-highgpu's 40 GB card (40335 MiB), not the
		// 80 GB one a bare "A100" means elsewhere.
		{"nvidia-tesla-a100", "", "A100-40GB", 40335 * mib},
		{"nvidia-a100-80gb", "", "A100-80GB", 0},
		{"nvidia-h100-80gb", "", "H100-80GB", 0},
		{"nvidia-h100-mega-80gb", "", "H100-80GB", 0},
		{"nvidia-h200-141gb", "", "H200", 0},
		{"nvidia-b200", "", "B200", 0},
		{" NVIDIA-L4 ", "", "L4", 22559 * mib},
		// A 1g.5gb partition of the 40 GB A100 is a slice of 4864 MiB
		// (nvidia-smi mig -lgip), not the whole card.
		{"nvidia-tesla-a100", "1g.5gb", "A100-40GB-MIG-1g.5gb", 4864 * mib},
		{"nvidia-h100-80gb", "3g.40gb", "H100-80GB-MIG-3g.40gb", 40448 * mib},
	}
	for _, tc := range tests {
		sel, err := FromGKEAccelerator(tc.value, tc.partition)
		if err != nil {
			t.Errorf("%q %q: %v", tc.value, tc.partition, err)
			continue
		}
		if sel.Device.Name != tc.device || sel.Count != 1 {
			t.Errorf("%q %q: %s × %d, want %s", tc.value, tc.partition, sel.Device.Name, sel.Count, tc.device)
		}
		if tc.bytes != 0 && sel.Device.TotalBytes != tc.bytes {
			t.Errorf("%q %q: %d bytes, want %d", tc.value, tc.partition, sel.Device.TotalBytes, tc.bytes)
		}
	}
	for _, v := range GKEAccelerators() {
		if _, err := FromGKEAccelerator(v, ""); err != nil {
			t.Errorf("%s is listed but does not resolve: %v", v, err)
		}
	}
}

func TestFromGKEAcceleratorErrors(t *testing.T) {
	tests := []struct{ value, partition, want string }{
		// Known to GKE, not to the catalog: said as such, never taken for
		// the nearest name (a P100 is not a P4 or an A100).
		{"nvidia-tesla-p100", "", "is a Tesla P100 (16 GB), which the GPU catalog does not hold"},
		{"nvidia-tesla-p4", "", "is a Tesla P4 (8 GB)"},
		{"nvidia-gb200", "", "is a GB200 (186 GB a GPU)"},
		{"nvidia-tesla-x1", "", "is not an accelerator headroom knows (known: nvidia-a100-80gb, "},
		{"", "", "is not an accelerator headroom knows"},
		{"nvidia-l4", "9g.99gb", `cloud.google.com/gke-gpu-partition-size="9g.99gb" on cloud.google.com/gke-accelerator=nvidia-l4`},
		{strings.Repeat("a", 300), "", "is too long"},
	}
	for _, tc := range tests {
		_, err := FromGKEAccelerator(tc.value, tc.partition)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%.20q %q: %v, want %q", tc.value, tc.partition, err, tc.want)
		}
	}
}

// A node GKE labels, without GPU feature discovery: FromNodeLabels reads
// its accelerator (doctor reads a describe's labels and node selectors
// so), one GPU assumed and said; with GFD's count too, that count.
func TestFromNodeLabelsGKE(t *testing.T) {
	sel, err := FromNodeLabels(map[string]string{LabelGKEAccelerator: "nvidia-l4", "cloud.google.com/gke-nodepool": "l4-pool"})
	if err != nil || sel.Device.Name != "L4" || sel.Count != 1 || !strings.Contains(sel.Note, "assumed 1 GPU") {
		t.Fatalf("%+v %v", sel, err)
	}
	sel, err = FromNodeLabels(map[string]string{LabelGKEAccelerator: "nvidia-tesla-a100", LabelGKEPartition: "1g.5gb", LabelCount: "7"})
	if err != nil || sel.Device.Name != "A100-40GB-MIG-1g.5gb" || sel.Count != 7 {
		t.Fatalf("%+v %v", sel, err)
	}
	// GPU feature discovery's product names the card where both are there.
	sel, err = FromNodeLabels(map[string]string{LabelGKEAccelerator: "nvidia-l4", LabelProduct: "NVIDIA-A10G"})
	if err != nil || sel.Device.Name != "A10G" {
		t.Fatalf("%+v %v", sel, err)
	}
	if _, err := FromNodeLabels(map[string]string{LabelGKEAccelerator: "nvidia-l4", LabelCount: "x"}); err == nil || !strings.Contains(err.Error(), "bad nvidia.com/gpu.count") {
		t.Errorf("bad count: %v", err)
	}
}

// FuzzFromGKEAccelerator: any label values give a device with memory and
// one GPU, or a one-line error; never a panic.
func FuzzFromGKEAccelerator(f *testing.F) {
	f.Add("nvidia-l4", "")
	f.Add("nvidia-tesla-a100", "1g.5gb")
	f.Add("nvidia-tesla-p100", "")
	f.Add("nvidia-h100-80gb", "7g.80gb")
	f.Add("", "3g.40gb")
	f.Fuzz(func(t *testing.T, value, partition string) {
		sel, err := FromGKEAccelerator(value, partition)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			return
		}
		if sel.Count != 1 || sel.Device.TotalBytes <= 0 {
			t.Errorf("FromGKEAccelerator(%q, %q) = %+v", value, partition, sel)
		}
	})
}
