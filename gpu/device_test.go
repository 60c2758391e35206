package gpu

import "testing"

// Compute capabilities as the catalog writes them, and what is not one.
func TestParseCapability(t *testing.T) {
	for cc, want := range map[string][2]int{"8.9": {8, 9}, "10.0": {10, 0}, "9.0": {9, 0}, "": {0, 0}, "sm_90": {0, 0}, "9": {0, 0}, "-1.0": {0, 0}} {
		if a, b := ParseCapability(cc); a != want[0] || b != want[1] {
			t.Errorf("%q: %d.%d, want %d.%d", cc, a, b, want[0], want[1])
		}
	}
	if a, _ := (Device{Vendor: "amd", ComputeCapability: "9.4"}).Capability(); a != 0 {
		t.Error("an AMD device has no CUDA capability")
	}
}
