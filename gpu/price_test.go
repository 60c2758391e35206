package gpu

import (
	"math"
	"strings"
	"testing"
)

// Every default price names a catalog device, from the one source class
// the table says, and an 8-GPU instance is priced per GPU: the H100's
// $55.04 an hour for a p5.48xlarge is $6.88 a GPU.
func TestPrices(t *testing.T) {
	for name, p := range Prices() {
		sel, err := Resolve(name)
		if err != nil || sel.Device.Name != name {
			t.Errorf("%s: %v (%s)", name, err, sel.Device.Name)
		}
		if !(p.USDPerGPUHour > 0) || !strings.HasPrefix(p.Source, "AWS EC2 ") || !strings.Contains(p.Source, "us-east-1, 2025-06") {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if h := Prices()["H100-80GB"].USDPerGPUHour; math.Abs(h-6.88) > 1e-9 {
		t.Errorf("H100-80GB: $%g a GPU-hour, want $6.88 (55.04 / 8)", h)
	}
}
