package gpu

import "testing"

// Every figure names a catalog device, has both a peak and a bandwidth,
// and an FP8 peak, where given, is twice the 16-bit one (the ratio of
// datasheet itself rounds 362.05 and 733).
func TestPerfTable(t *testing.T) {
	for name, p := range perf {
		sel, err := Resolve(name)
		if err != nil || sel.Device.Name != name {
			t.Errorf("%s: not a catalog device name (%v)", name, err)
			continue
		}
		d := sel.Device
		if got, ok := PerfOf(d); !ok || got != p {
			t.Errorf("%s: PerfOf does not return the table's figures", name)
		}
		if p.BF16 <= 0 || p.Bandwidth <= 0 || p.Source == "" {
			t.Errorf("%s: incomplete %+v", name, p)
		}
		if p.FP8 != 0 && (p.FP8/p.BF16 < 1.97 || p.FP8/p.BF16 > 2.03) {
			t.Errorf("%s: FP8 %g is not twice BF16 %g", name, p.FP8, p.BF16)
		}
	}
	if _, ok := PerfOf(Device{Name: "H100-80GB", MIG: "3g.40gb"}); ok {
		t.Error("a MIG slice has no published figures")
	}
}

// The PCIe card of a part listed as its SXM module, named so or by an
// instance type of such cards, has the same memory, its own peaks and no
// NVLink; the SXM name keeps NVLink.
func TestPCIeCards(t *testing.T) {
	for _, c := range []struct {
		name   string
		device string
		pcie   bool
		bw     float64
	}{
		{"A100 80GB PCIe", "A100-80GB", true, 1935e9},
		{"NVIDIA-A100-PCIE-40GB", "A100-40GB", true, 1555e9},
		{"NVIDIA-H100-PCIe", "H100-80GB", true, 2e12},
		{"Standard_NC96ads_A100_v4", "A100-80GB", true, 1935e9},
		{"A100-SXM4-80GB", "A100-80GB", false, 2039e9},
		{"p4de.24xlarge", "A100-80GB", false, 2039e9},
	} {
		sel, err := Resolve(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p, ok := PerfOf(sel.Device)
		if sel.Device.Name != c.device || sel.Device.PCIe != c.pcie || !ok || p.NVLink == c.pcie || p.Bandwidth != c.bw {
			t.Errorf("%s: %s pcie %t, NVLink %t, %.0f B/s", c.name, sel.Device.Name, sel.Device.PCIe, p.NVLink, p.Bandwidth)
		}
	}
}
