package gpu

import (
	"reflect"
	"strings"
	"testing"
)

func TestResolveSpellings(t *testing.T) {
	tests := []struct {
		in, want string
		note     bool // a note must say what was assumed
	}{
		{"H100", "H100-80GB", true},
		{"h100", "H100-80GB", true},
		{"h100-80gb", "H100-80GB", false},
		{"H100_80GB", "H100-80GB", false},
		{"NVIDIA H100 80GB HBM3", "H100-80GB", false}, // nvidia-smi name
		{"NVIDIA-H100-80GB-HBM3", "H100-80GB", false}, // GFD product
		{"H100-SXM5-80GB", "H100-80GB", false},
		{"NVIDIA H100 PCIe", "H100-80GB", true},
		{"H100 NVL", "H100-94GB", false},
		{"NVIDIA-H100-NVL", "H100-94GB", false},
		{"h100 94gb", "H100-94GB", false},
		{"A100", "A100-80GB", true},
		{"a100 80g", "A100-80GB", false},
		{"A100 80GiB", "A100-80GB", false},
		{"NVIDIA-A100-SXM4-80GB", "A100-80GB", false},
		{"NVIDIA-A100-80GB-PCIe", "A100-80GB", true}, // the PCIe card (Device.PCIe)
		{"NVIDIA A100-SXM4-40GB", "A100-40GB", false},
		{"NVIDIA-A100-PCIE-40GB", "A100-40GB", true}, // the PCIe card (Device.PCIe)
		{"a100-40g", "A100-40GB", false},
		{"V100", "V100-16GB", true},
		{"Tesla-V100-SXM2-16GB", "V100-16GB", false},
		{"Tesla V100-PCIE-32GB", "V100-32GB", true}, // the PCIe card (Device.PCIe)
		{"Tesla-T4", "T4", false},
		{"t4", "T4", false},
		{"nvidia-a10g", "A10G", false},
		{"NVIDIA-A10G", "A10G", false},
		{"NVIDIA A10", "A10", false},
		{"NVIDIA-L4", "L4", false},
		{"l40s", "L40S", false},
		{"NVIDIA-L40", "L40", false},
		{"NVIDIA-H200", "H200", false},
		{"NVIDIA H200 NVL", "H200", false},
		{"h20", "H20", false},
		{"NVIDIA GH200 480GB", "GH200", false},
		{"NVIDIA-B200", "B200", false},
		{"NVIDIA B300 SXM6 AC", "B300", false},
		{"rtx4090", "RTX-4090", false},
		{"4090", "RTX-4090", false},
		{"NVIDIA GeForce RTX 4090", "RTX-4090", false},
		{"NVIDIA-GeForce-RTX-3090", "RTX-3090", false},
		{"rtx 5090", "RTX-5090", false},
		{"NVIDIA RTX A6000", "RTX-A6000", false},
		{"a6000", "RTX-A6000", false},
		{"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada", false},
		{"RTX 6000", "RTX-6000-Ada", true},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000", false},
		{"AMD Instinct MI300X", "MI300X", false},
		{"mi250x", "MI250X", false},
		{"mi325x", "MI325X", false},
		{"MI210", "MI210", false},
		{"NVIDIA-A10G-SHARED", "A10G", false},             // GFD product under time-slicing
		{"nvidia.com/gpu.product=NVIDIA-L4", "L4", false}, // label selector pasted whole
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if sel.Device.Name != tc.want || sel.Count != 1 || sel.SKU != "" {
			t.Errorf("Resolve(%q) = %d × %s (sku %q), want 1 × %s", tc.in, sel.Count, sel.Device.Name, sel.SKU, tc.want)
		}
		if (sel.Note != "") != tc.note {
			t.Errorf("Resolve(%q) note %q, want a note: %v", tc.in, sel.Note, tc.note)
		}
	}
}

func TestResolveCount(t *testing.T) {
	tests := []struct {
		in, want string
		count    int
	}{
		{"8xH100", "H100-80GB", 8},
		{"2 x A100-80GB", "A100-80GB", 2},
		{"4×L4", "L4", 4},
		{"8*H200", "H200", 8},
		{"1xrtx4090", "RTX-4090", 1},
		{"2 x A100:3g.40gb", "A100-80GB-MIG-3g.40gb", 2},
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		if sel.Device.Name != tc.want || sel.Count != tc.count {
			t.Errorf("Resolve(%q) = %d × %s, want %d × %s", tc.in, sel.Count, sel.Device.Name, tc.count, tc.want)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct{ in, wantSub string }{
		{"", "empty GPU name"},
		{"  ", "empty GPU name"},
		{"H10", `unknown GPU "H10": did you mean H100-80GB, H100-94GB, H20?`},
		{"A100-90GB", "did you mean A100-40GB, A100-80GB"}, // both one edit away; catalog order
		{"Standard_NC24ads_A100_v3", "did you mean Standard_NC24ads_A100_v4"},
		{"p4d.24xlarg", "did you mean p4d.24xlarge"},
		{"qwerty", "run `headroom gpus`"},
		{"0xH100", "bad GPU count"},
		{"99999xH100", "bad GPU count"},
		{"2xp4d.24xlarge", "not with an instance type"},
		{"T4:1g.10gb", "T4 has no MIG profiles"},
		{"A100-80GB:1g.5gb", "A100-80GB has no MIG profile 1g.5gb"},
		{"nvidia.com/mig-5g.33gb", "unknown MIG profile 5g.33gb"},
		{"Foo:1g.10gb", `unknown GPU "foo"`},
		{strings.Repeat("H", 300), "too long"},
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.in)
		if err == nil {
			t.Errorf("Resolve(%q) = %+v, want an error containing %q", tc.in, sel, tc.wantSub)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("Resolve(%q) error:\n  %v\nwant it to contain %q", tc.in, err, tc.wantSub)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Resolve(%q) error has several lines", tc.in)
		}
	}
	// No suggestions when nothing is close: better none than noise.
	_, err := Resolve("qwerty")
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("Resolve(\"qwerty\") = %v, want no suggestions", err)
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want []string
	}{
		{"H10", 3, []string{"H100-80GB", "H100-94GB", "H20"}},
		{"H1OO", 1, []string{"H100-80GB"}}, // letter O for zero
		{"rtx409", 1, []string{"RTX-4090"}},
		{"L40X", 2, []string{"L40", "L40S"}},
		{"g5.12xlarg", 1, []string{"g5.12xlarge"}},
		{"a3-highgpu-8", 1, []string{"a3-highgpu-8g"}}, // a truncated name
		{"H100", 0, nil},
		{"", 3, nil},
	}
	for _, tc := range tests {
		if got := Suggest(tc.in, tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Suggest(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"H100", "8xH100", "a100 80g", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/mig-1g.10gb",
		"Standard_NC24ads_A100_v4", "p4d.24xlarge", "a3-highgpu-8g", "H10", "x", "=", "-SHARED", "2xp4d.24xlarge",
		"A100:1g.5gb+me", "mig-9g.999gb", "0x", "nvidia.com/gpu.product="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := Resolve(s)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Errorf("Resolve(%q) error is not one line: %q", s, msg)
			}
			return
		}
		if sel.Count < 1 || sel.Device.TotalBytes <= 0 || sel.Device.Name == "" {
			t.Errorf("Resolve(%q) = %+v: want a named device with positive bytes and count", s, sel)
		}
	})
}
