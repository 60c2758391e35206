package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/internal/testkit"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var simBase = []string{"simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--vllm-version", "0.19.0"}

// The max-num-seqs trace of the sim package through the CLI: three
// requests of 4 prompt + 2 output tokens at t=0, max-num-seqs 2, 1 s
// steps. A and B: first token at 1 s, done at 2 s; C admitted at 2 s,
// first token at 3 s, done at 4 s.
func TestSimulateJSON(t *testing.T) {
	reqs := writeFile(t, "r.jsonl", `{"id":"A","arrival_s":0,"prompt_tokens":4,"output_tokens":2}
{"id":"B","arrival_s":0,"prompt_tokens":4,"output_tokens":2}
{"id":"C","arrival_s":0,"prompt_tokens":4,"output_tokens":2}
`)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	code, out, errs := run(t, offline, append(simBase, "--max-num-seqs", "2", "--step-time", "fixed:1s", "--requests", reqs, "--trace", trace, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"requests", "duration_s", "steps", "preemptions", "ttft_ms", "tpot_ms", "e2e_ms", "max_kv_usage", "max_waiting", "series"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s missing from %s", k, out)
		}
	}
	if m["requests"].(float64) != 3 || m["duration_s"].(float64) != 4 || m["steps"].(float64) != 4 {
		t.Errorf("requests/duration/steps: %v %v %v", m["requests"], m["duration_s"], m["steps"])
	}
	if ttft := m["ttft_ms"].(map[string]any); ttft["max"].(float64) != 3000 || ttft["p50"].(float64) < 996 || ttft["p50"].(float64) > 1004 {
		t.Errorf("ttft: %v", ttft)
	}
	code, out, _ = run(t, offline, append(simBase, "--max-num-seqs", "2", "--step-time", "fixed:1s", "--requests", reqs, "-o", "yaml")...)
	if code != 0 || !strings.Contains(out, "\nttft_ms:\n") || !strings.Contains("\n"+out, "\nduration_s: 4\n") {
		t.Errorf("yaml: exit %d:\n%s", code, out)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `"id":"C","arrival_s":0,"first_token_s":3,"finish_s":4`) {
		t.Errorf("trace:\n%s", data)
	}
}

// The same traffic against a TTFT p99 of 2 s: C's 3 s misses it (exit 1);
// 5 s is met (exit 0).
func TestSimulateSLO(t *testing.T) {
	reqs := writeFile(t, "r.jsonl", `{"arrival_s":0,"prompt_tokens":4,"output_tokens":2}
{"arrival_s":0,"prompt_tokens":4,"output_tokens":2}
{"arrival_s":0,"prompt_tokens":4,"output_tokens":2}
`)
	args := append(simBase, "--max-num-seqs", "2", "--step-time", "fixed:1s", "--requests", reqs)
	code, out, _ := run(t, offline, append(args, "--slo", "ttft_p99=2s")...)
	if code != ExitNoFit || !strings.Contains(out, "MISSED") {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	if code, out, _ := run(t, offline, append(args, "--slo", "ttft_p99=5s,e2e_max=4s")...); code != 0 {
		t.Errorf("exit %d, want 0:\n%s", code, out)
	}
}

func TestSimulateBadInput(t *testing.T) {
	badLine := writeFile(t, "b.jsonl", `{"arrival_s":0,"prompt_tokens":4,"output_tokens":2}
{"arrival_s":[1],"prompt_tokens":4}
`)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"bad line":  {[]string{"--requests", badLine}, "line 2: arrival_s must be a number, not a JSON array"},
		"no file":   {[]string{"--requests", "/nonexistent/r.jsonl"}, "--requests /nonexistent/r.jsonl: no such file"},
		"no rate":   {nil, "no traffic"},
		"burst":     {[]string{"--rate", "1", "--burst", "lots"}, "--burst"},
		"dist":      {[]string{"--rate", "1", "--prompt-tokens", "normal:5"}, "token length"},
		"absurd":    {[]string{"--rate", "1e12", "--duration", "1s"}, "at most 10000000"},
		"conc 0":    {[]string{"--concurrency", "0"}, "--concurrency must be 1 or more"},
		"ratio":     {[]string{"--rate", "1", "--prompt-tokens", "100", "--range-ratio", "-0.5"}, "--range-ratio"},
		"bench":     {[]string{"--bench", "vllm bench serve --dataset-name sharegpt --dataset-path x.json"}, "--dataset-path x.json: no such file"},
		"bench+":    {[]string{"--bench", "vllm bench serve --random-input-len 10", "--rate", "3"}, "give one"},
		"step time": {[]string{"--rate", "1", "--step-time", "slow"}, "--step-time"},
		"slo":       {[]string{"--rate", "1", "--slo", "ttft=2s"}, "--slo"},
		"output":    {[]string{"--rate", "1", "-o", "xml"}, "unknown output format"},
		"graphs":    {[]string{"--rate", "1", "--", "vllm", "serve", "--compilation-config", `{"cudagraph_mode":"HALF"}`}, "not a CUDA-graph mode"},
	} {
		code, _, errs := run(t, offline, append(simBase, c.args...)...)
		if code != ExitBadInput || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want 2 and one line with %q", name, code, errs, c.want)
		}
	}
}

// The graphs the clock priced are in the settings: a gpt-oss recipe's
// line (PIECEWISE, captures up to 2,048 tokens) against vLLM 0.13's
// defaults at --max-num-seqs 4 (FULL_AND_PIECEWISE, min(2 × 4, 512) = 8),
// and --enforce-eager (none).
func TestSimulateGraphSettings(t *testing.T) {
	for _, c := range []struct {
		flags   []string
		mode    string
		capture int
	}{
		{[]string{"--compilation-config", `{"cudagraph_mode":"PIECEWISE","max_cudagraph_capture_size":2048}`}, "PIECEWISE", 2048},
		{nil, "FULL_AND_PIECEWISE", 8},
		{[]string{"--enforce-eager"}, "NONE", 0},
	} {
		args := append([]string{"simulate", "--gpu", "H100-80GB", "--vllm-version", "0.13.0", "--concurrency", "4", "--num-requests", "8", "-o", "json",
			"--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "4"}, c.flags...)
		code, out, errs := run(t, offline, args...)
		var r struct {
			Settings struct {
				Mode    string `json:"cudagraph_mode"`
				Capture int    `json:"max_cudagraph_capture_size"`
			} `json:"settings"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Settings.Mode != c.mode || r.Settings.Capture != c.capture {
			t.Errorf("%v: exit %d %s: %+v, want %s up to %d tokens", c.flags, code, errs, r.Settings, c.mode, c.capture)
		}
	}
}

// A prompt longer than max-model-len and a request that can never fit a
// pool of 64 blocks (1024 tokens) are rejected per request and counted;
// the rest runs.
func TestSimulateRejections(t *testing.T) {
	reqs := writeFile(t, "r.jsonl", `{"arrival_s":0,"prompt_tokens":9000,"output_tokens":2}
{"arrival_s":0,"prompt_tokens":2000,"output_tokens":2}
{"arrival_s":1,"prompt_tokens":100,"output_tokens":2}
`)
	code, out, errs := run(t, offline, append(simBase, "--max-model-len", "8192", "--num-gpu-blocks-override", "65", "--step-time", "fixed:10ms", "--requests", reqs, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m struct {
		Requests   int64            `json:"requests"`
		Rejected   int64            `json:"rejected"`
		RejectedBy map[string]int64 `json:"rejected_by"`
		Settings   struct {
			NumGPUBlocks int `json:"num_gpu_blocks"`
		} `json:"settings"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m.Requests != 1 || m.Rejected != 2 || m.RejectedBy["prompt_too_long"] != 1 || m.RejectedBy["never_fits"] != 1 || m.Settings.NumGPUBlocks != 65 {
		t.Errorf("%+v", m)
	}
}

// A synthetic run through the table and --compare: the recommended row
// is there, with the same traffic.
func TestSimulateCompareTable(t *testing.T) {
	code, out, errs := run(t, offline, append(simBase, "--rate", "5", "--duration", "30s", "--compare", "--max-model-len", "16384")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"TTFT", "TPOT", "E2E", "given", "recommended", "step time: roofline"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing:\n%s", want, out)
		}
	}
}

// --serve listens, answers /health and a completion, and stops with its
// context (exit 0).
func TestSimulateServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb testkit.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, append(simBase, "--serve", "--listen", "127.0.0.1:0", "--time-scale", "100", "--served-model-name", "m"),
			Env{Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string { return offline[k] }})
	}()
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, after, ok := strings.Cut(errb.String(), "on http://"); ok {
			base = "http://" + strings.Fields(after)[0]
		}
	}
	if base == "" {
		t.Fatalf("no address in %q", errb.String())
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m","prompt":"a b c","max_tokens":2}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %v %v", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"completion_tokens":2`) {
		t.Errorf("completion: %s", body)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d: %s", c, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--serve did not stop with its context")
	}
}

// --plot writes an SVG or a PNG by extension, and refuses other names.
func TestSimulatePlot(t *testing.T) {
	dir := t.TempDir()
	args := append(simBase, "--rate", "2", "--duration", "20s", "--step-time", "fixed:20ms")
	for name, magic := range map[string]string{"kv.svg": "<svg", "kv.png": "\x89PNG"} {
		p := filepath.Join(dir, name)
		if code, _, errs := run(t, offline, append(args, "--plot", p)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data[:min(len(data), 512)]), magic) {
			t.Errorf("%s: not a %q file (%v)", name, magic, err)
		}
		if name == "kv.svg" && !strings.Contains(string(data), "KV-cache usage") {
			t.Error("the SVG has no KV-cache panel")
		}
	}
	if code, _, errs := run(t, offline, append(args, "--plot", filepath.Join(dir, "kv.pdf"))...); code != ExitBadInput || !strings.Contains(errs, ".svg or .png") {
		t.Errorf("pdf: exit %d: %s", code, errs)
	}
}

// One request at a time (0.1 req/s, 1 prompt token, 50 output tokens),
// so TPOT is one decode step: weights / (bandwidth × share) + the cache's
// read, the KV of at most 51 tokens being 0.04% of the 8B model's 16 GB;
// the step's 1 ms of CPU hides under it (async scheduling, the default of
// the newest vLLM), and its 32 layers × 6 small kernels take 3 µs each
// (0.576 ms) and its 129 GEMMs 3.92 µs each beyond their read (0.506 ms)
// whatever the shares. A calibration of half the weights' bandwidth
// share (0.4 for 0.8) doubles the rest of the step.
func TestSimulateCalibration(t *testing.T) {
	base := writeFile(t, "base.jsonl", `{"gpu":"H100-80GB","bandwidth_efficiency":0.8,"overhead_s":0.001,"seq_overhead_s":0}
`)
	cal := writeFile(t, "cal.jsonl", `{"gpu":"A100-80GB","flops_efficiency":0.1,"bandwidth_efficiency":0.1,"overhead_s":0.5}
{"gpu":"H100-80GB","flops_efficiency":0.5,"bandwidth_efficiency":0.4,"overhead_s":0.001,"seq_overhead_s":0}
`)
	args := append(simBase, "--rate", "0.1", "--duration", "100s", "--prompt-tokens", "fixed:1", "--output-tokens", "fixed:50", "-o", "json")
	tpot := func(extra ...string) float64 {
		code, out, errs := run(t, offline, append(args, extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var r struct {
			TPOT struct{ Mean float64 } `json:"tpot_ms"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.TPOT.Mean
	}
	def, slow := tpot("--calibration", base), tpot("--calibration", cal)
	const fixed = 32*6*3e-3 + 129*3.92e-3 // ms
	if r := (slow - fixed) / (def - fixed); r < 1.98 || r > 2.02 {
		t.Errorf("TPOT %v ms at 0.8, %v ms at 0.4: ratio %.3f beyond the small kernels' and GEMM floors' %.3f ms, want 2", def, slow, r, fixed)
	}
	// Without --calibration, the corrections loadtest appends to the cache
	// (XDG_CACHE_HOME/headroom/step-calibration.jsonl) are used, and said.
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, "headroom"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "headroom", "step-calibration.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": cache}
	code, out, errs := run(t, env, append(args[:len(args)-2:len(args)-2], "-o", "table")...)
	if code != 0 || !strings.Contains(out+errs, "step time calibrated by "+filepath.Join(cache, "headroom", "step-calibration.jsonl")) {
		t.Errorf("the cached calibration is not said: exit %d:\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, env, args...)
	var r struct {
		TPOT struct{ Mean float64 } `json:"tpot_ms"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.TPOT.Mean != slow {
		t.Errorf("with the cached calibration TPOT is %v ms, want %v as with --calibration (exit %d, %v): %s", r.TPOT.Mean, slow, code, err, errs)
	}

	bad := writeFile(t, "bad.jsonl", `{"gpu":"H100-80GB","flops_efficiency":-1}`+"\n")
	if code, _, errs := run(t, offline, append(args, "--calibration", bad)...); code != ExitBadInput || !strings.Contains(errs, "line 1") {
		t.Errorf("bad calibration: exit %d: %s", code, errs)
	}
}

// --compare with a profile: `headroom profile -o json` of a log (90%
// short requests, 10% long) proposes a short and a long pool; simulate
// runs the given settings, the recommended ones and each pool on the same
// synthetic traffic drawn from the profile, the pools seeing only their
// requests.
func TestSimulateComparePools(t *testing.T) {
	var log strings.Builder
	for i := range 600 {
		prompt := 200 + i%800
		if i%10 == 0 {
			prompt = 9000 + i
		}
		fmt.Fprintf(&log, "2025-06-01T10:%02d:%02dZ prompt_tokens=%d completion_tokens=%d\n", i/60, i%60, prompt, 20+i%200)
	}
	logFile := writeFile(t, "req.log", log.String())
	code, prof, errs := run(t, offline, "profile", logFile, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--max-model-len", "20480", "-o", "json")
	if code != 0 {
		t.Fatalf("profile: exit %d: %s", code, errs)
	}
	profFile := writeFile(t, "profile.json", prof)
	code, out, errs := run(t, offline, append(simBase, "--max-model-len", "20480", "--rate", "2", "--duration", "60s", "--step-time", "fixed:5ms",
		"--profile", profFile, "--compare", "-o", "json")...)
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	var r struct {
		Requests int64
		Compare  []report.CompareRow `json:"compare"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	labels := []string{}
	var pooled int64
	for _, c := range r.Compare {
		labels = append(labels, c.Label)
		if strings.HasPrefix(c.Label, "pool ") {
			pooled += c.Requests
			if c.MaxTokens <= 0 {
				t.Errorf("%s has no token bound", c.Label)
			}
		}
	}
	// Tried: the given 1024 (vLLM's default on an H100, also the
	// recommended value without a typical context), 8, 16, ..., 512: 8.
	if strings.Join(labels, ",") != "given,recommended,simulated best max-num-seqs (of 8 tried),pool short,pool long" {
		t.Fatalf("rows: %v", labels)
	}
	// Every request is routed to exactly one pool.
	if pooled != r.Requests || r.Compare[0].Requests != r.Requests {
		t.Errorf("pools served %d requests, the given settings %d", pooled, r.Requests)
	}
}

// Every figure of a roofline simulation carries its evidence and band: vLLM
// 0.19.0 lies outside the training runs (0.10.2–0.11.0), so the run is
// extrapolated and says why; at 0.11.0 the same run is fitted. A fixed
// step time has no fit behind it and no band.
func TestSimulateConfidence(t *testing.T) {
	reqs := writeFile(t, "r.jsonl", `{"id":"A","arrival_s":0,"prompt_tokens":400,"output_tokens":20}
{"id":"B","arrival_s":0.1,"prompt_tokens":400,"output_tokens":20}
`)
	code, out, errs := run(t, offline, append(simBase, "--requests", reqs)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"output tokens/s (±", ", extrapolated)", "band", "evidence: extrapolated", "  - vLLM 0.19.0: the rows run 0.10.2–0.11.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	args := []string{"simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--vllm-version", "0.11.0", "--requests", reqs, "-o", "json"}
	code, out, errs = run(t, offline, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m struct {
		Confidence *struct {
			Evidence string   `json:"evidence"`
			Outside  []string `json:"outside"`
			TPOTPct  float64  `json:"tpot_pct"`
		} `json:"confidence"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if c := m.Confidence; c == nil || c.Evidence != "fitted" || len(c.Outside) != 0 || c.TPOTPct <= 0 {
		t.Errorf("confidence: %+v in %s", m.Confidence, out)
	}
	code, out, _ = run(t, offline, append(simBase, "--requests", reqs, "-o", "bench")...)
	if code != 0 || !strings.Contains(out, "note: bands from the fit's cross-validation") || !strings.Contains(out, "(extrapolated: vLLM 0.19.0: the rows run 0.10.2–0.11.0") {
		t.Errorf("bench layout: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, offline, append(simBase, "--requests", reqs, "--step-time", "fixed:10ms", "-o", "json")...)
	if code != 0 || strings.Contains(out, `"confidence"`) {
		t.Errorf("fixed step time: exit %d, %s", code, out)
	}
}

// Where the engine's busy time went: on the roofline, step_time_split's
// parts less what overlapped are the busy time, within the run's length,
// and the table says so in one line; a fixed step time has no parts.
func TestSimulateStepSplit(t *testing.T) {
	args := append(simBase, "--rate", "1", "--num-requests", "50")
	code, out, errs := run(t, offline, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		DurationS float64            `json:"duration_s"`
		Split     map[string]float64 `json:"step_time_split"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	var busy float64
	for _, k := range []string{"dense_gemms_s", "expert_gemms_s", "attention_s", "all_reduce_s", "gemm_floors_s", "small_kernels_s", "eager_launch_s", "engine_cpu_s"} {
		v, ok := r.Split[k]
		if !ok {
			t.Errorf("step_time_split has no %s: %v", k, r.Split)
		}
		busy += v
	}
	busy -= r.Split["overlapped_s"]
	if r.Split["dense_gemms_s"] <= 0 || r.Split["overlapped_s"] <= 0 || busy <= 0 || busy > r.DurationS {
		t.Errorf("busy %.3f s of %.3f: %v", busy, r.DurationS, r.Split)
	}
	if code, out, _ := run(t, offline, args...); code != 0 || !strings.Contains(out, "\nengine busy ") || !strings.Contains(out, "dense GEMMs") {
		t.Errorf("table: exit %d:\n%s", code, out)
	}
	if code, out, _ := run(t, offline, append(args, "--step-time", "fixed:10ms", "-o", "json")...); code != 0 || strings.Contains(out, "step_time_split") {
		t.Errorf("fixed step time: exit %d, split in %s", code, out)
	}
}

// A kernel table (bench/gpu-kernels) through --calibration: its shares
// are its GPU's seconds over the datasheet of --gpu, so a table of
// another GPU is refused in one line (exit 2), and on an unfitted GPU its
// kernel shares are scaled by what serving reaches of the H100's kernels.
// The H200 row is the first 8,192-row GEMM of the committed H200 table
// (sim/testdata/kernels/h200-sxm.csv, measured on 2026-11-27); the L40S
// row is made up, its seconds set for 0.7 of the L40S's 362.05 TFLOP/s
// (1.0995e12 FLOPs / (0.7 × 362.05e12) = 4.3384 ms), so the clock takes
// 0.7 × 0.499 = 0.35 of the peak (0.499: what serving reaches of the H100's
// GEMMs under the refit Hopper clock).
func TestSimulateKernelTable(t *testing.T) {
	table := func(gpu, row string) string {
		return writeFile(t, "kernels.csv", "# headroom gpu-kernels 1\n# gpu: "+gpu+"\n# driver: 580.159.04\n# torch: 2.11.0+cu130\n# cuda: 13.0\nkind,dtype,shape,tokens_per_expert,seconds,flops,bytes\n"+row+"\n")
	}
	h200 := table("NVIDIA H200", "gemm,bf16,m=8192 n=896 k=896,,2.341799997e-05,1.315333734e+10,3.096576000e+07")
	args := []string{"simulate", "--model", "Qwen/Qwen3-8B", "--rate", "1", "--duration", "10s", "--calibration", h200}
	code, _, errs := run(t, offline, append(args, "--gpu", "L40S")...)
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "a kernel table of NVIDIA H200 (H200), not of L40S") || !strings.Contains(errs, "--gpu H200") {
		t.Errorf("another GPU's table: exit %d: %s", code, errs)
	}
	if code, out, errs := run(t, offline, append(args, "--gpu", "H200", "-v")...); code != 0 || !strings.Contains(out, "kernel table of NVIDIA H200") || strings.Contains(out, "what serving reaches") {
		t.Errorf("the H200's own table on the H200 (fitted: Hopper): exit %d: %s%s", code, out, errs)
	}
	// On the L40S, unfitted (sm_89), an L40S table's GEMM share is scaled.
	l40s := table("NVIDIA L40S", "gemm,bf16,m=8192 n=8192 k=8192,,4.338440e-03,1.099511628e+12,4.026531840e+08")
	if code, out, errs := run(t, offline, "simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "L40S", "--rate", "1", "--duration", "10s", "--calibration", l40s, "-v"); code != 0 ||
		!strings.Contains(out, "its kernel shares × what serving reaches of the H100's (GEMMs 0.499") || !strings.Contains(out, "GEMMs x0.35,") {
		t.Errorf("an L40S table on the L40S: exit %d: %s%s", code, out, errs)
	}
}

// A calibration that would price a step at infinity is refused in one
// line: a CPU time past its bound, or measured steps whose fit gives a
// share of almost nothing (a step of 1e300 s for one token; found by
// FuzzCalibrationFile, which before the bounds answered with an infinite
// duration).
func TestSimulateCalibrationBounds(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"gpu":"H100-80GB","overhead_s":1e300}`, "overhead_s must be in [0, 10]"},
		{`{"gpu":"H100-80GB","flops_efficiency":1e-9}`, "flops_efficiency and bandwidth_efficiency must be in [0.001, 1]"},
		{`{"gpu":"H100-80GB","batch":{"Tokens":1},"seconds":1e300}`, "its measured step fits no step time a GPU could have"},
		// A step of -1 s (or 0 s) was dropped without a word.
		{`{"gpu":"H100-80GB","batch":{"Requests":1,"Tokens":1,"Decodes":1},"seconds":-1}`, "line 1: a measured step of -1 s: give the seconds it took, more than 0"},
		{`{"gpu":"H100-80GB","batch":{"Requests":1,"Tokens":1,"Decodes":1},"seconds":0}`, "line 1: a measured step of 0 s"},
	} {
		code, _, errs := run(t, offline, append(simBase, "--rate", "1", "--duration", "10s", "--calibration", writeFile(t, "cal.jsonl", c.line+"\n"))...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d: %s", c.line, code, errs)
		}
	}
}

// A data-parallel server is its engines behind one API server: Qwen3-8B
// on H100s, 2,000 requests of 1,000-token prompts and 200-token outputs.
// One engine
// serves about 9.6 req/s of it: at 20 req/s it falls behind (exit 1);
// two data-parallel engines take the 20 req/s, each at about the TPOT one
// engine has at 10 (within 10%: the balancing is by outstanding requests,
// not an even split), and the report says how it simulated them.
func TestSimulateDataParallel(t *testing.T) {
	sim := func(rate string, dp string) (int, simJSON, string) {
		t.Helper()
		code, out, errs := run(t, offline, "simulate", "--gpu", "H100-80GB", "--vllm-version", "0.11.0", "--rate", rate, "--num-requests", "2000",
			"--prompt-tokens", "1000", "--output-tokens", "200", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--data-parallel-size", dp)
		var r simJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("rate %s dp %s: exit %d %s %v", rate, dp, code, errs, err)
		}
		return code, r, errs
	}
	if code, _, _ := sim("20", "1"); code != 1 {
		t.Errorf("one engine at 20 req/s: exit %d, want 1 (fell behind)", code)
	}
	code2, two, errs := sim("20", "2")
	_, one, _ := sim("10", "1")
	if code2 != 0 || math.Abs(two.TPOT.Mean/one.TPOT.Mean-1) > 0.10 {
		t.Errorf("two engines at 20 req/s: exit %d %s, TPOT %.1f ms; one engine at 10: %.1f ms", code2, errs, two.TPOT.Mean, one.TPOT.Mean)
	}
	if !strings.Contains(strings.Join(two.Notes, "\n"), "--data-parallel-size 2: simulated as 2 engines") {
		t.Errorf("notes %q", two.Notes)
	}
}

// simJSON is what these tests read of simulate -o json.
type simJSON struct {
	TPOT  struct{ Mean float64 } `json:"tpot_ms"`
	Notes []string               `json:"notes"`
}

// Requests that all pass max-model-len are the answer "this server
// cannot serve it": 20 prompts of 200,000 tokens against Llama-3.1-8B's
// 131,072 are all refused (prompt_too_long), and simulate says so first
// and exits 1, instead of "no request finished" and exit 0.
func TestSimulateAllRefused(t *testing.T) {
	code, out, errs := run(t, offline, append(simBase, "--rate", "5", "--num-requests", "20", "--prompt-tokens", "200000")...)
	if code != ExitNoFit || !strings.HasPrefix(out, "REFUSED: one H100-80GB refuses every request of this traffic (20 prompt_too_long), as vLLM would: 200000 prompt tokens") ||
		!strings.Contains(out, "max-model-len 131072") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
	code, _, errs = run(t, offline, append(simBase, "--rate", "5", "--num-requests", "20", "--prompt-tokens", "200000", "-o", "json")...)
	if code != ExitNoFit || !strings.Contains(errs, "headroom: one H100-80GB refuses every request") {
		t.Errorf("-o json: exit %d: %s", code, errs)
	}
}

// p5.48xlarge is 8 H100s; Llama-3.1-70B's 131 GiB of weights fit on 4
// of them at tensor parallel 4, which `headroom plan` takes ("set
// --tensor-parallel-size 4: the fewest of the 8 × H100-80GB given that
// fit"): simulate runs that engine, on 4 GPUs, and says so, where it ran
// tensor parallel 1 on one GPU and stopped. One H100 with no count is
// planned as given, as plan plans it: it does not fit, and the lines say
// what would.
func TestSimulateTakesPlansLayout(t *testing.T) {
	code, out, errs := run(t, offline, "simulate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "p5.48xlarge", "--rate", "2", "--num-requests", "50", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.SimReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.GPUCount != 4 || r.Requests != 50 || !strings.Contains(strings.Join(r.Notes, "\n"), "set --tensor-parallel-size 4: the fewest of the 8 × H100-80GB given that fit") {
		t.Errorf("%d GPUs, %d requests, notes %q", r.GPUCount, r.Requests, r.Notes)
	}
	code, _, errs = run(t, offline, "simulate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-80GB", "--rate", "2", "--num-requests", "50")
	if code != ExitNoFit || !strings.Contains(errs, "headroom: would fit: use 4 × H100-80GB with --tensor-parallel-size 4") {
		t.Errorf("one H100: exit %d: %s", code, errs)
	}
}

// The plan's findings reach simulate as they reach plan: a flag one edit
// from a known one stops it (exit 1: vLLM's parser would refuse it),
// even with a KV pool given; a flag headroom does not know is a warning
// beside the run.
func TestSimulatePlanFindings(t *testing.T) {
	base := []string{"simulate", "--gpu", "H100-80GB", "--rate", "5", "--num-requests", "20", "--step-time", "fixed:10ms"}
	code, _, errs := run(t, offline, append(base, "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilisation", "0.5")...)
	if code != ExitNoFit || !strings.Contains(errs, "did you mean --gpu-memory-utilization?") {
		t.Errorf("misspelt: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, offline, append(base, "--num-gpu-blocks-override", "1000", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilisation", "0.5")...)
	if code != ExitNoFit || !strings.Contains(errs, "did you mean --gpu-memory-utilization?") {
		t.Errorf("misspelt with a pool given: exit %d: %s", code, errs)
	}
	code, out, errs := run(t, offline, append(base, "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--some-new-flag", "3")...)
	if code != 0 || !strings.Contains(out, "\nwarning: may move memory, not modelled: --some-new-flag") {
		t.Errorf("unknown: exit %d: %s%s", code, out, errs)
	}
}

// A fleet says its own numbers: 3 replicas of at most 4 running each,
// 15 requests due at once, round-robin: 12 run and 3 wait over the
// fleet; its engine time is each engine's mean. 4 replicas that fall
// behind estimate the replicas of the whole fleet.
func TestSimulateFleetSaysFleet(t *testing.T) {
	code, out, errs := run(t, offline, append(simBase, "--replicas", "3", "--max-num-seqs", "4", "--rate", "inf", "--num-requests", "15", "--step-time", "fixed:10ms")...)
	if code != 0 || !strings.Contains(out, "peak: running 12, waiting 3 over the fleet; KV cache") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
	code, out, errs = run(t, offline, append(simBase, "--replicas", "2", "--max-num-seqs", "1", "--max-num-batched-tokens", "2048", "--rate", "25", "--num-requests", "800",
		"--prompt-tokens", "1", "--output-tokens", "10", "--arrival", "constant", "--step-time", "fixed:10ms")...)
	if code != ExitNoFit || !strings.Contains(out, "FELL BEHIND: a fleet of 2 replicas of one H100-80GB serves about 20 req/s of this traffic; 25 arrive") ||
		!strings.Contains(out, "about 3 replicas would hold it: 25 ÷ 20 × 2, rounded up") {
		t.Errorf("behind: exit %d: %s%s", code, out, errs)
	}
}

// An output that cannot be written is bad input before the run, naming
// its path; one that can is made, and a run that writes nothing to it
// leaves nothing behind.
func TestSimulateOutputsCheckedFirst(t *testing.T) {
	for _, flag := range []string{"--plot", "--trace"} {
		name := "/nonexistent/out.svg"
		code, _, errs := run(t, offline, append(simBase, "--rate", "5", flag, name)...)
		if code != ExitBadInput || strings.TrimSpace(errs) != "headroom: "+flag+" "+name+": no such file or directory" {
			t.Errorf("%s: exit %d: %q", flag, code, errs)
		}
	}
	plot := filepath.Join(t.TempDir(), "p.svg")
	code, _, errs := run(t, offline, append(simBase, "--rate", "5", "--plot", plot, "--max-model-len", "1")...)
	if _, err := os.Stat(plot); code == 0 || err == nil {
		t.Errorf("a failed run: exit %d (%s), and its plot %v", code, errs, err)
	}
}
