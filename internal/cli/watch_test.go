package cli

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// telemetryVLLM serves recorded vLLM expositions from telemetry/testdata,
// one page per request (the last one repeats).
func telemetryVLLM(t *testing.T, pages ...string) *httptest.Server {
	t.Helper()
	var bodies [][]byte
	for _, p := range pages {
		if !strings.Contains(p, "\n") {
			b, err := os.ReadFile(filepath.Join("..", "..", "telemetry", "testdata", "vllm", p))
			if err != nil {
				t.Fatal(err)
			}
			p = string(b)
		}
		bodies = append(bodies, []byte(p))
	}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		i := int(n.Add(1)) - 1
		w.Write(bodies[min(i, len(bodies)-1)])
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWatchJSON(t *testing.T) {
	srv := telemetryVLLM(t, "vllm-0.6.3-v0.txt")
	code, out, errs := run(t, nil, "watch", "--url", srv.URL, "--count", "2", "--interval", "1ms", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 readings:\n%s", out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil {
		t.Fatal(err)
	}
	// vLLM 0.6.3 names KV usage vllm:gpu_cache_usage_perc, a fraction.
	want := map[string]any{
		"kv_cache_usage":         0.9473684210526315,
		"num_requests_running":   12.0,
		"num_requests_waiting":   3.0,
		"num_preemptions_total":  7.0,
		"preemptions_per_minute": 0.0,
		"gpu_used_bytes":         nil,
		"gpu_total_bytes":        nil,
	}
	for k, v := range want {
		got, ok := rec[k]
		if !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// The TTFT page is the same both times: no first token in the window,
	// so no TTFT over it (the lifetime p99, 1.0 + 1.5 × 5/13 = 1.577 s,
	// would read as current).
	if rec["ttft_p99_seconds"] != nil || rec["ttft_window_seconds"] != nil {
		t.Errorf("ttft_p99_seconds %v over %v s, want null", rec["ttft_p99_seconds"], rec["ttft_window_seconds"])
	}
	if names := rec["metric_names"].(map[string]any); names["kv_cache_usage"] != "vllm:gpu_cache_usage_perc" {
		t.Errorf("metric names %v", names)
	}
}

func TestWatchTextAndAlerts(t *testing.T) {
	// 0.11 page: KV 0.9412 with 17 waiting. Then 5 more preemptions.
	page, err := os.ReadFile(filepath.Join("..", "..", "telemetry", "testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	more := strings.Replace(string(page), "} 231.0", "} 236.0", 1)
	srv := telemetryVLLM(t, string(page), more)
	alerts := filepath.Join(t.TempDir(), "alerts.jsonl")
	code, out, errs := run(t, nil, "watch", "--url", srv.URL+"/metrics", "--count", "3", "--interval", "1ms",
		"--kv-readings", "2", "--alerts", alerts)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want one line per reading:\n%s", out)
	}
	for _, want := range []string{"KV 94.1%", "running 48", "waiting 17", "TTFT p99 -", "risk "} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	// Reading 2: preemptions rose and KV stayed high for 2 readings.
	b, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var a struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Value   float64 `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("alert line %q: %v", l, err)
		}
		codes = append(codes, a.Code)
	}
	if strings.Join(codes, ",") != "kv_pressure,preemptions" {
		t.Errorf("alerts %v", codes)
	}
	if strings.Count(errs, "ALERT") != 2 || !strings.Contains(errs, "ALERT kv_pressure") {
		t.Errorf("stderr %q", errs)
	}
}

func TestWatchPlannedHeadroom(t *testing.T) {
	// The GPU reports an H100 with 6399 MiB free; the plan for Llama 3.1
	// 8B on it says how much must stay free. The watch must use exactly
	// the planner's margin: total minus footprint.
	smi := telemetryFakeSMI(t, "query-gpu-570-nounits.csv", "compute-apps-empty.csv")
	srv := telemetryVLLM(t, "vllm-0.11.0-v1.txt")
	code, out, errs := run(t, offline, "watch", "--url", srv.URL, "--count", "1", "-o", "json",
		"--nvidia-smi", smi, "--vllm-version", "0.19.0",
		"--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.95")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	spec, ok := catalog.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	if !ok {
		t.Fatal("catalog lacks Llama 3.1 8B")
	}
	sel, err := gpu.Resolve("NVIDIA H100 80GB HBM3")
	if err != nil {
		t.Fatal(err)
	}
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: sel.Count, Settings: vllm.Settings{
		Model: "meta-llama/Llama-3.1-8B-Instruct", MaxModelLen: 8192, GPUMemoryUtilization: 0.95, Version: vllm.MustVersion("0.19.0")}})
	if err != nil {
		t.Fatal(err)
	}
	margin := b.PerGPU.Total - b.Footprint
	if !strings.Contains(errs, "less than "+memory.GiB(margin)+" free") {
		t.Fatalf("stderr %q does not name the plan's margin %s", errs, memory.GiB(margin))
	}
	var rec struct {
		Alerts  []map[string]any `json:"alerts"`
		MinFree int64            `json:"gpu_min_free_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.MinFree != 6399<<20 {
		t.Errorf("min free %d", rec.MinFree)
	}
	alerted := len(rec.Alerts) == 1 && rec.Alerts[0]["code"] == "gpu_headroom"
	if alerted != (int64(6399<<20) < margin) {
		t.Errorf("6399 MiB free against a %s margin: alerts %v", memory.GiB(margin), rec.Alerts)
	}
}

func TestWatchBadInput(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"watch"}, "no --url"},
		{[]string{"watch", "--url", "ftp://x"}, "http or https"},
		{[]string{"watch", "--url", closed.URL}, "cannot scrape"},
		{[]string{"watch", "--url", "x:1", "--kv-threshold", "1.5"}, "--kv-threshold"},
		{[]string{"watch", "--url", "x:1", "-o", "xml"}, "unknown output format"},
		{[]string{"watch", "--url", "x:1", "stray"}, "unexpected argument"},
	}
	for _, tt := range tests {
		code, out, errs := run(t, offline, tt.args...)
		if code != ExitBadInput || out != "" || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
}

// -o yaml: one YAML document per reading, the fields of the JSON.
func TestWatchYAML(t *testing.T) {
	srv := telemetryVLLM(t, "vllm-0.6.3-v0.txt")
	code, out, errs := run(t, nil, "watch", "--url", srv.URL, "--count", "2", "--interval", "1ms", "-o", "yaml")
	if code != 0 || strings.Count(out, "---\n") != 2 || strings.Count(out, "\nkv_cache_usage: ") != 2 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
}

// TTFT p99 is the window's: a second page with 100 more first tokens, all
// between 0.1 and 0.25 s, gives a p99 of 0.1 + 0.15 × 99/100 = 0.2485 s
// (interpolated in the bucket, as histogram_quantile does), over the
// window between the readings; the first reading has no window: "-".
func TestWatchTTFTOverTheWindow(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "telemetry", "testdata", "vllm", "vllm-0.6.3-v0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	more := string(page)
	for _, b := range []struct{ le, old, new string }{{"0.25", "870.0", "970.0"}, {"0.5", "950.0", "1050.0"}, {"0.75", "975.0", "1075.0"}, {"1.0", "985.0", "1085.0"},
		{"2.5", "998.0", "1098.0"}, {"5.0", "1000.0", "1100.0"}, {"7.5", "1000.0", "1100.0"}, {"10.0", "1000.0", "1100.0"}, {"+Inf", "1000.0", "1100.0"}} {
		more = strings.Replace(more, `le="`+b.le+`"} `+b.old, `le="`+b.le+`"} `+b.new, 1)
	}
	more = strings.Replace(more, `vllm:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1000.0`, `vllm:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1100.0`, 1)
	srv := telemetryVLLM(t, string(page), more)
	code, out, errs := run(t, nil, "watch", "--url", srv.URL, "--count", "2", "--interval", "1ms", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var first, second map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("want 2 readings:\n%s", out)
	}
	if first["ttft_p99_seconds"] != nil {
		t.Errorf("the first reading: ttft_p99_seconds %v, want null", first["ttft_p99_seconds"])
	}
	if p99, ok := second["ttft_p99_seconds"].(float64); !ok || math.Abs(p99-0.2485) > 1e-6 || !(second["ttft_window_seconds"].(float64) > 0) {
		t.Errorf("the second reading: ttft_p99_seconds %v over %v s", second["ttft_p99_seconds"], second["ttft_window_seconds"])
	}
}
