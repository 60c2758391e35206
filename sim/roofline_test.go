package sim

import (
	"math"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// A model of 1e9 active parameters, 2e9 weight bytes and 1e5 KV bytes per
// token on a device of 1e15 FLOP/s and 1e12 B/s, measured at bandwidth
// efficiency 0.8, FLOPs efficiency 0.5 and 2 ms overhead:
//
//	decode, 1 token over 1000:     bytes 2e9 + 1e8 = 2.1e9;   2.1e9 / 0.8e12 + 0.002 = 0.004625 s
//	decode, 64 tokens over 64000:  bytes 2e9 + 6.4e9 = 8.4e9; 8.4e9 / 0.8e12 + 0.002 = 0.0125 s
//	prefill, 8192 tokens:          FLOPs 2 × 1e9 × 8192 = 1.6384e13 (compute-bound: 0.0164 s > 0.0028 s);
//	                               1.6384e13 / 0.5e15 + 0.002 = 0.034768 s
//
// Fit recovers the three corrections from these steps.
func TestFitRecoversCalibration(t *testing.T) {
	m := Roofline{ActiveParams: 1e9, WeightBytes: 2e9, KVBytesPerToken: 1e5, PeakFLOPs: 1e15, Bandwidth: 1e12}
	samples := []Sample{
		{Batch{Requests: 1, Tokens: 1, ContextTokens: 1000}, 0.004625},
		{Batch{Requests: 64, Tokens: 64, ContextTokens: 64000}, 0.0125},
		{Batch{Requests: 1, Tokens: 8192, ContextTokens: 8192}, 0.034768},
	}
	c := Fit(m, DefaultCalibration, samples)
	if math.Abs(c.BandwidthEfficiency-0.8) > 1e-9 || math.Abs(c.Overhead-0.002) > 1e-9 || math.Abs(c.FLOPsEfficiency-0.5) > 1e-9 {
		t.Errorf("fit: %+v, want bandwidth 0.8, overhead 0.002, flops 0.5", c)
	}
	// With the fitted values the model reproduces the measurements.
	m.BandwidthEfficiency, m.FLOPsEfficiency, m.Overhead = c.BandwidthEfficiency, c.FLOPsEfficiency, c.Overhead
	for _, s := range samples {
		if got := m.StepTime(s.Batch); math.Abs(got-s.Seconds) > 1e-9 {
			t.Errorf("%+v: model %v, measured %v", s.Batch, got, s.Seconds)
		}
	}
}

// Llama-3.1-8B on one H100-80GB, default calibration: a decode step of
// one request over 1000 tokens reads the weights (the plan's
// weights_total) and 1000 × 131072 B of KV (32 layers × 8 KV heads × 128
// × 2 (K, V) × 2 B) at 0.8 × 3.35 TB/s, plus 1 ms.
func TestRooflineLlama8BH100(t *testing.T) {
	spec, _ := catalog.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	sel, _ := gpu.Resolve("H100-80GB")
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: 1, Settings: vllm.Settings{Version: vllm.Newest()}})
	if err != nil {
		t.Fatal(err)
	}
	if b.ModelKVBytesPerToken != 32*8*128*2*2 {
		t.Fatalf("KV per token %d", b.ModelKVBytesPerToken)
	}
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	want := (float64(b.WeightsTotal)+1000*131072)/(0.8*3.35e12) + 0.001
	if got := m.StepTime(Batch{Requests: 1, Tokens: 1, ContextTokens: 1000}); math.Abs(got-want) > 1e-12 {
		t.Errorf("decode step %v, want %v", got, want)
	}
	if _, err := RooflineFor(memory.Budget{Device: gpu.Device{Name: "RTX-4090"}}, DefaultCalibration); err == nil {
		t.Error("a GPU without datasheet figures must ask for a fixed step time")
	}
}
