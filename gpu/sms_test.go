package gpu

import "testing"

func TestMultiprocessors(t *testing.T) {
	for name, want := range map[string]int{"H100-80GB": 132, "A100-80GB": 108, "L40S": 142} {
		sel, err := Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := Multiprocessors(sel.Device); !ok || got != want {
			t.Errorf("Multiprocessors(%s) = %d, %t; want %d", name, got, ok, want)
		}
	}
	if _, ok := Multiprocessors(Custom(24 << 30)); ok {
		t.Error("a custom device has no known SM count")
	}
	for _, d := range Devices() {
		if _, ok := multiprocessors[d.Name]; !ok && d.Vendor == "nvidia" && d.ComputeCapability >= "7.0" {
			t.Errorf("%s: no SM count", d.Name)
		}
	}
}
