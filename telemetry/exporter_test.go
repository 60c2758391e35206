package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeExporter GETs the exporter's /metrics over HTTP and parses it.
func scrapeExporter(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func gaugeValue(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) != 1 {
		t.Fatalf("%s: missing or not one series: %v", name, f)
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

func TestExporterEndToEnd(t *testing.T) {
	// vLLM 0.11 serving the recorded page; the second scrape sees 5 more
	// preemptions.
	page, err := os.ReadFile(filepath.Join("testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	later := strings.Replace(string(page), `vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 231.0`,
		`vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 236.0`, 1)
	if later == string(page) {
		t.Fatal("the recorded page has no preemption line to change")
	}
	var n atomic.Int32
	var up atomic.Bool
	up.Store(true)
	vllmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if n.Add(1) == 1 {
			w.Write(page)
			return
		}
		w.Write([]byte(later))
	}))
	defer vllmSrv.Close()

	smi, _ := fakeSMI(t, "query-gpu-570-nounits.csv", "compute-apps-empty.csv", 0)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	e := NewExporter(ExporterOptions{
		Scraper:           &Scraper{URL: vllmSrv.URL + "/metrics", Timeout: 2 * time.Second},
		GPUs:              &SMIReader{Path: smi},
		RequiredFreeBytes: 4 << 30,
		Now:               func() time.Time { return t0.Add(time.Duration(clock.Load())) },
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, e.Handler()) }()
	base := "http://" + ln.Addr().String()

	fams := scrapeExporter(t, base)
	// From the page: KV 0.9412, 48 running, 17 waiting; TTFT p99 since
	// start 2.5 + 2.5*30/55 (see TestParseVLLMMetrics).
	checks := []struct {
		name string
		want float64
	}{
		{"headroom_up", 1},
		{"headroom_kv_cache_usage", 0.9412},
		{"headroom_queue_depth", 17},
		{"headroom_requests_running", 48},
		{"headroom_preemptions_per_minute", 0},
		{"headroom_ttft_p99_seconds", 2.5 + 2.5*30/55},
		// K = (0.9412-0.8)/0.2 = 0.706, Q = 17/65, no preemption rate yet,
		// 6399 MiB free > 4 GiB required so G = 0.
		{"headroom_oom_risk", 0.706 * (1 + 17.0/65) / 2},
		{"headroom_gpu_memory_required_free_bytes", 4 << 30},
		// query-gpu-570-nounits.csv: 74621 MiB used of 81559, 6399 free.
		{"headroom_gpu_memory_used_bytes", 74621 << 20},
		{"headroom_gpu_memory_total_bytes", 81559 << 20},
		{"headroom_gpu_memory_headroom_bytes", (6399 - 4096) << 20},
	}
	for _, c := range checks {
		if got := gaugeValue(t, fams, c.name); !near(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	labels := fams["headroom_gpu_memory_used_bytes"].GetMetric()[0].GetLabel()
	if len(labels) != 2 || labels[0].GetValue() != "0" || labels[1].GetValue() != "GPU-b2c6f0d4-1e3a-7c59-a8b4-6d2e0f1c3a57" {
		t.Errorf("GPU labels %v", labels)
	}

	// 30 s later, 5 more preemptions: 10 a minute, so P = 1 and the risk is 1.
	clock.Store(int64(30 * time.Second))
	fams = scrapeExporter(t, base)
	if got := gaugeValue(t, fams, "headroom_preemptions_per_minute"); got != 10 {
		t.Errorf("preemptions per minute %v, want 10", got)
	}
	if got := gaugeValue(t, fams, "headroom_oom_risk"); got != 1 {
		t.Errorf("risk %v, want 1", got)
	}

	// vLLM down: headroom_up 0, no stale vLLM gauges, GPU gauges stay.
	up.Store(false)
	clock.Store(int64(40 * time.Second))
	fams = scrapeExporter(t, base)
	if got := gaugeValue(t, fams, "headroom_up"); got != 0 {
		t.Errorf("headroom_up %v", got)
	}
	if _, ok := fams["headroom_kv_cache_usage"]; ok {
		t.Error("stale KV gauge served while vLLM is down")
	}
	if _, ok := fams["headroom_gpu_memory_headroom_bytes"]; !ok {
		t.Error("GPU gauges lost while vLLM is down")
	}

	// Graceful shutdown on cancel.
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := http.Get(base + "/metrics"); err == nil {
		t.Error("still serving after shutdown")
	}
}

// A quantity the server does not export, or exports as no number (NaN,
// 1e308 preemptions), has no gauge: absent, never 0, so an HPA or an
// alert reads "unknown", not "idle". The recorded page, with the queue's
// series removed, the KV usage NaN and the preemptions 1e308, serves the
// running count alone; the risk, which rests on the KV usage, is not
// served; the log says what was left out, once.
func TestExporterLeavesOutWhatIsUnknown(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	for _, r := range [][2]string{
		{`vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B",engine="0"} 17.0` + "\n", ""},
		{`vllm:kv_cache_usage_perc{model_name="Qwen/Qwen3-8B",engine="0"} 0.9412`, `vllm:kv_cache_usage_perc{model_name="Qwen/Qwen3-8B",engine="0"} NaN`},
		{`vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 231.0`, `vllm:num_preemptions_total{model_name="Qwen/Qwen3-8B",engine="0"} 1e308`},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("the recorded page has no %q", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	vllmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(text)) }))
	defer vllmSrv.Close()
	var log strings.Builder
	e := NewExporter(ExporterOptions{Scraper: &Scraper{URL: vllmSrv.URL + "/metrics", Timeout: 2 * time.Second},
		Log: slog.New(slog.NewTextHandler(&log, nil))})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	for range 2 {
		fams := scrapeExporter(t, srv.URL)
		if got := gaugeValue(t, fams, "headroom_requests_running"); got != 48 {
			t.Errorf("running %v, want 48", got)
		}
		for _, name := range []string{"headroom_kv_cache_usage", "headroom_queue_depth", "headroom_preemptions_per_minute", "headroom_oom_risk"} {
			if _, ok := fams[name]; ok {
				t.Errorf("%s served from a value the server did not give", name)
			}
		}
	}
	if n := strings.Count(log.String(), "left_out="); n != 1 || !strings.Contains(log.String(), "vllm:kv_cache_usage_perc is NaN") {
		t.Errorf("want one log line of what was left out, got %d:\n%s", n, log.String())
	}
}
