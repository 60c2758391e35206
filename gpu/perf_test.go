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
