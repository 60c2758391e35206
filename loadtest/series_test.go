package loadtest

import (
	"context"
	"testing"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// gpuReader stands in for NVML: no GPU runs here. Each reading uses 1 GiB
// more on each of two 80 GiB devices.
type gpuReader struct{ n int64 }

func (g *gpuReader) GPUs(context.Context) ([]telemetry.GPU, error) {
	g.n++
	d := telemetry.GPU{TotalBytes: 80 << 30, UsedBytes: g.n << 30}
	return []telemetry.GPU{d, d}, nil
}
func (g *gpuReader) Source() string { return telemetry.SourceNVML }
func (g *gpuReader) Close() error   { return nil }

// TestSeriesBounded: 10000 readings keep under maxPoints (4096) points:
// past it every other point goes and one point stands for 2, then 4
// readings (10000 / 4 = 2500 kept). The extremes cover every reading, and
// preemptions count across a restart of the counter: 0 → 5 → (restart)
// 2 → 4 is 5 + 2 + 2 = 9 new.
func TestSeriesBounded(t *testing.T) {
	var s Series
	g := &gpuReader{}
	pre := []float64{0, 5, 2, 4}
	for i := range 10000 {
		v := &telemetry.VLLMSample{KVCacheUsage: float64(i%100) / 100, PreemptionsTotal: pre[min(i, 3)],
			Names: map[vllm.Metric]string{vllm.MetricKVCacheUsage: "x", vllm.MetricPreemptions: "y"}}
		gpus, _ := g.GPUs(context.Background())
		if i >= 10 {
			gpus = nil
		}
		s.add(Point{TS: float64(i)}, v, gpus)
	}
	var r Result
	s.fill(&r, 1e9)
	if len(r.Series) != 2500 || s.Every != 4 || r.SeriesIntervalS != 4 {
		t.Errorf("%d points, every %d, interval %v s; want 2500, 4, 4", len(r.Series), s.Every, r.SeriesIntervalS)
	}
	if *r.MaxKVUsage != 0.99 || *r.Preemptions != 9 {
		t.Errorf("max KV %v, preemptions %v; want 0.99, 9", *r.MaxKVUsage, *r.Preemptions)
	}
	// 10 readings with GPUs: the last used 10 GiB on each of two.
	if *r.GPUMaxUsedBytes != 20<<30 || *r.GPUTotalBytes != 160<<30 {
		t.Errorf("GPU max used %d of %d, want 20 GiB of 160 GiB", *r.GPUMaxUsedBytes, *r.GPUTotalBytes)
	}
}
