package telemetry

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The gauges the alert rules and the dashboard read beside vLLM's own:
// the plan's parts, vLLM's cache configuration as numbers, and the
// restarts the exporter saw.
func TestExporterPlanDriftAndRestarts(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const start = "process_start_time_seconds 1.76040312358e+09"
	if !strings.Contains(string(page), start) {
		t.Fatal("the recorded page has no process start time")
	}
	// The same server, started anew: a later start time, counters from 0.
	restartedPage := strings.Replace(string(page), start, "process_start_time_seconds 1.76040400000e+09", 1)
	// A server without the process collector whose counters fell back.
	noStart := strings.Replace(string(page), start, "", 1)
	fellBack := strings.Replace(noStart, `vllm:prompt_tokens_total{model_name="Qwen/Qwen3-8B",engine="0"} 9.120451e+06`,
		`vllm:prompt_tokens_total{model_name="Qwen/Qwen3-8B",engine="0"} 120.0`, 1)
	fellBack = strings.Replace(fellBack, `vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 231.0`,
		`vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 0.0`, 1)
	pages := []string{string(page), string(page), restartedPage, noStart, fellBack}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		w.Write([]byte(pages[min(i, len(pages)-1)]))
	}))
	defer srv.Close()

	// A plan made by hand: the exporter serves what it is given.
	plan := &memory.Budget{
		PerGPU: memory.Parts{Total: 80 << 30, Requested: 72 << 30, Weights: 15 << 30, Activation: 2 << 30,
			NonTorch: 1 << 29, CUDAGraph: 1 << 28, KVCache: 54 << 30, Context: 1 << 29},
		Footprint: 72<<30 + 1<<29, NumBlocks: 29000,
		Settings: vllm.Settings{GPUMemoryUtilization: 0.9},
	}
	var clock atomic.Int64
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e := NewExporter(ExporterOptions{Scraper: &Scraper{URL: srv.URL + "/metrics", Timeout: 2 * time.Second}, Plan: plan,
		Now: func() time.Time { return t0.Add(time.Duration(clock.Add(int64(15 * time.Second)))) }})
	h := httptest.NewServer(e.Handler())
	defer h.Close()

	fams := scrapeExporter(t, h.URL)
	for _, c := range []struct {
		name string
		want float64
	}{
		// vllm:cache_config_info's labels: num_gpu_blocks="29751", gpu_memory_utilization="0.9".
		{MetricVLLMNumGPUBlocks, 29751},
		{MetricVLLMUtilization, 0.9},
		{MetricPlanNumGPUBlocks, 29000},
		{MetricPlanUtilization, 0.9},
		{MetricPlanTotal, 80 << 30},
		{MetricPlanFootprint, 72<<30 + 1<<29},
	} {
		if got := gaugeValue(t, fams, c.name); !near(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	parts := map[string]float64{}
	for _, m := range fams[MetricPlanMemory].GetMetric() {
		parts[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	want := map[string]float64{PartWeights: 15 << 30, PartActivation: 2 << 30, PartNonTorch: 1 << 29,
		PartCUDAGraphs: 1 << 28, PartKVCache: 54 << 30, PartContext: 1 << 29}
	for k, v := range want {
		if parts[k] != v {
			t.Errorf("%s{part=%q} = %v, want %v", MetricPlanMemory, k, parts[k], v)
		}
	}
	if len(parts) != len(want) {
		t.Errorf("parts %v", parts)
	}

	restarts := func() float64 {
		t.Helper()
		f := scrapeExporter(t, h.URL)[MetricVLLMRestarts]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("%s missing", MetricVLLMRestarts)
		}
		return f.GetMetric()[0].GetCounter().GetValue()
	}
	// Scrapes 2..5: the same server, a new start time, no start time (not
	// a restart by itself), counters fallen back.
	for i, want := range []float64{0, 1, 1, 2} {
		if got := restarts(); got != want {
			t.Errorf("scrape %d: restarts %v, want %v", i+2, got, want)
		}
	}
}

// Without a plan, no plan gauges.
func TestExporterNoPlanGauges(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "vllm", "vllm-0.6.3-v0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) }))
	defer srv.Close()
	h := httptest.NewServer(NewExporter(ExporterOptions{Scraper: &Scraper{URL: srv.URL, Timeout: 2 * time.Second}}).Handler())
	defer h.Close()
	fams := scrapeExporter(t, h.URL)
	for _, name := range []string{MetricPlanMemory, MetricPlanNumGPUBlocks, MetricPlanUtilization, MetricPlanTotal, MetricPlanFootprint} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s served without a plan", name)
		}
	}
	if _, ok := fams[MetricVLLMRestarts]; !ok {
		t.Errorf("%s not served", MetricVLLMRestarts)
	}
}

// TestExporterKVBelowPlan: a stand-in reporting 9000 blocks against the
// plan's 29000 (31%) is logged once with its share, its simulated mark
// and a cause; the gauges give both counts for the alert.
func TestExporterKVBelowPlan(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	short := strings.Replace(string(page), `num_gpu_blocks="29751"`, `num_gpu_blocks="9000",simulated="true"`, 1)
	if short == string(page) {
		t.Fatal("the recorded page has no num_gpu_blocks label to change")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(short)) }))
	defer srv.Close()
	plan := &memory.Budget{PerGPU: memory.Parts{Total: 80 << 30, KVCache: 54 << 30}, NumBlocks: 29000, KVTokens: 29000 * 16,
		Settings: vllm.Settings{GPUMemoryUtilization: 0.9, BlockSize: 16}}
	var logs strings.Builder
	e := NewExporter(ExporterOptions{Scraper: &Scraper{URL: srv.URL + "/metrics", Timeout: 2 * time.Second}, Plan: plan,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	h := httptest.NewServer(e.Handler())
	defer h.Close()
	fams := scrapeExporter(t, h.URL)
	if got := gaugeValue(t, fams, MetricVLLMNumGPUBlocks); got != 9000 {
		t.Errorf("%s = %v", MetricVLLMNumGPUBlocks, got)
	}
	if got := gaugeValue(t, fams, MetricPlanNumGPUBlocks); got != 29000 {
		t.Errorf("%s = %v", MetricPlanNumGPUBlocks, got)
	}
	scrapeExporter(t, h.URL)
	out := logs.String()
	// 9000 / 29000 = 0.310.
	if strings.Count(out, "far below the plan") != 1 || !strings.Contains(out, "share=0.310") || !strings.Contains(out, "simulated=true") || !strings.Contains(out, "cause=") {
		t.Errorf("logs:\n%s", out)
	}
}
