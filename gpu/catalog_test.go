package gpu

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// gib2 prints bytes as GiB with two decimals, the way PyTorch and vLLM log
// them, so catalog values can be checked against logged figures.
func gib2(b int64) string { return fmt.Sprintf("%.2f", float64(b)/(1<<30)) }

func TestH100MatchesCalibrationLogs(t *testing.T) {
	sel, err := Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	total := sel.Device.TotalBytes
	// memory/testdata/vllm-0.19.0-h100.csv: 52 start-ups log gpu_total_gib
	// 79.19 and requested_gib 75.23 at gpu_memory_utilization 0.95, where
	// vLLM computes requested = ceil(total × 0.95).
	if got := gib2(total); got != "79.19" {
		t.Errorf("H100-80GB total = %s GiB, vLLM logs 79.19", got)
	}
	requested := int64(math.Ceil(float64(total) * 0.95))
	if got := gib2(requested); got != "75.23" {
		t.Errorf("H100-80GB requested at 0.95 = %s GiB, vLLM logs 75.23", got)
	}
}

func TestLoggedTotals(t *testing.T) {
	// Totals as logged by PyTorch ("total capacity of X GiB") or vLLM on
	// each card; each catalog value must print the same with two decimals.
	tests := []struct{ name, gib string }{
		{"T4", "14.75"},
		{"V100-16GB", "15.78"},
		{"V100-32GB", "31.75"},
		{"K80", "11.17"},
		{"A10G", "22.19"},
		{"L4", "22.03"},
		{"A40", "44.35"},
		{"L40S", "44.39"},
		{"A100-40GB", "39.39"},
		{"A100-80GB", "79.15"}, // doctor/testdata/corpus/seed001-oom.txt: "GPU 0 has a total capacity of 79.15 GiB"
		{"H100-94GB", "93.10"},
		{"H200", "139.81"},
		{"B200", "178.40"},
		{"RTX-3090", "23.55"},
		{"RTX-4090", "23.55"},
		{"RTX-A6000", "47.54"},
		{"MI300X", "191.98"},
		{"MI210", "63.98"}, // 68,702,699,520 / 2^30 = 63.984
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.name)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.name, err)
			continue
		}
		if got := gib2(sel.Device.TotalBytes); got != tc.gib {
			t.Errorf("%s total = %s GiB, logs show %s", tc.name, got, tc.gib)
		}
		if sel.Device.Estimated {
			t.Errorf("%s is marked estimated but its figure is a logged one", tc.name)
		}
	}
	// RTX 5090: vLLM logs 31.4 GiB (one decimal).
	sel, _ := Resolve("RTX 5090")
	if got := fmt.Sprintf("%.1f", float64(sel.Device.TotalBytes)/(1<<30)); got != "31.4" {
		t.Errorf("RTX-5090 total = %s GiB, logs show 31.4", got)
	}
}

func TestCatalogSanity(t *testing.T) {
	devs := Devices()
	if len(devs) < 30 {
		t.Fatalf("catalog has %d devices, want at least the 30 named in the design", len(devs))
	}
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d.Name] {
			t.Errorf("duplicate device %s", d.Name)
		}
		seen[d.Name] = true
		// Reported memory is the marketing size less ECC and driver
		// reservations: below it, but never by more than 15%.
		if d.NominalBytes <= 0 || d.TotalBytes >= d.NominalBytes || d.TotalBytes*100 <= d.NominalBytes*85 {
			t.Errorf("%s: total %d not within (85%%, 100%%) of nominal %d", d.Name, d.TotalBytes, d.NominalBytes)
		}
		if d.Source == "" {
			t.Errorf("%s has no source", d.Name)
		}
		if d.Estimated != strings.Contains(d.Source, "estimate") {
			t.Errorf("%s: Estimated=%v but source %q", d.Name, d.Estimated, d.Source)
		}
		switch d.Vendor {
		case "nvidia":
			var major, minor int
			if _, err := fmt.Sscanf(d.ComputeCapability, "%d.%d", &major, &minor); err != nil || major < 3 {
				t.Errorf("%s: bad compute capability %q", d.Name, d.ComputeCapability)
			}
		case "amd":
			if d.ComputeCapability != "" {
				t.Errorf("%s: AMD device with compute capability %q", d.Name, d.ComputeCapability)
			}
		default:
			t.Errorf("%s: vendor %q", d.Name, d.Vendor)
		}
		if d.MIG != "" || d.Parent != "" {
			t.Errorf("%s: whole GPU marked as MIG slice", d.Name)
		}
	}
	for _, want := range []string{"T4", "V100-16GB", "V100-32GB", "A10G", "A10", "A2", "A16", "L4", "L40", "L40S",
		"A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200", "H20", "GH200", "B200", "B300",
		"RTX-3090", "RTX-4090", "RTX-5090", "RTX-A6000", "RTX-6000-Ada", "RTX-PRO-6000",
		"MI210", "MI250X", "MI300X", "MI325X"} {
		if !seen[want] {
			t.Errorf("catalog lacks %s", want)
		}
	}
}

func TestComputeCapability(t *testing.T) {
	// CUDA compute capabilities from NVIDIA's table of CUDA GPUs.
	tests := map[string]string{
		"T4": "7.5", "V100": "7.0", "A100": "8.0", "A10G": "8.6", "L4": "8.9", "L40S": "8.9",
		"H100": "9.0", "H200": "9.0", "B200": "10.0", "RTX 3090": "8.6", "RTX 4090": "8.9", "RTX 5090": "12.0",
	}
	for name, want := range tests {
		sel, err := Resolve(name)
		if err != nil {
			t.Errorf("Resolve(%q): %v", name, err)
			continue
		}
		if sel.Device.ComputeCapability != want {
			t.Errorf("%s compute capability %q, want %q", name, sel.Device.ComputeCapability, want)
		}
	}
}

func TestNoKeyCollisions(t *testing.T) {
	// Two devices must never share a normalised spelling, and no device
	// spelling may equal an instance type's, or lookups would depend on
	// table order.
	owner := map[string]string{}
	for _, e := range catalog {
		for _, a := range append([]string{e.dev.Name}, e.aliases...) {
			k := key(a)
			if k == "" {
				t.Errorf("%s: alias %q normalises to nothing", e.dev.Name, a)
			}
			if o, ok := owner[k]; ok && o != e.dev.Name {
				t.Errorf("alias %q of %s collides with %s (key %q)", a, e.dev.Name, o, k)
			}
			owner[k] = e.dev.Name
		}
	}
	for _, b := range bareNames {
		if o, ok := owner[key(b.alias)]; ok {
			t.Errorf("bare name %q is also an alias of %s", b.alias, o)
		}
		for _, c := range b.candidates {
			if _, ok := index().byName[c]; !ok {
				t.Errorf("bare name %q names unknown device %s", b.alias, c)
			}
		}
	}
	skus := map[string]string{}
	for _, r := range skuTable {
		k := skuKey(r.name)
		if o, ok := skus[k]; ok {
			t.Errorf("instance type %s collides with %s", r.name, o)
		}
		skus[k] = r.name
		if o, ok := owner[k]; ok {
			t.Errorf("instance type %s collides with device %s", r.name, o)
		}
	}
}

func TestDevicesIsACopy(t *testing.T) {
	a := Devices()
	a[0].TotalBytes = 1
	if b := Devices(); b[0].TotalBytes == 1 {
		t.Error("Devices returns the catalog itself; callers could change it")
	}
}
