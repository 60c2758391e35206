package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, content string) string {
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
	unsorted := writeFile(t, "u.jsonl", `{"arrival_s":2,"prompt_tokens":4,"output_tokens":2}
{"arrival_s":1,"prompt_tokens":4,"output_tokens":2}
`)
	garbage := writeFile(t, "g.jsonl", `{"arrival_s":0,"prompt_tokens":4,"output_tokens":2}
this is not a request
`)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"unsorted":  {[]string{"--requests", unsorted}, "line 2: arrivals out of order"},
		"garbage":   {[]string{"--requests", garbage}, "line 2: not a request"},
		"no file":   {[]string{"--requests", "/nonexistent/r.jsonl"}, "no such file"},
		"no rate":   {nil, "no traffic"},
		"both":      {[]string{"--requests", garbage, "--rate", "1"}, "either --requests or --rate"},
		"burst":     {[]string{"--rate", "1", "--burst", "lots"}, "--burst"},
		"dist":      {[]string{"--rate", "1", "--prompt-tokens", "normal:5"}, "token distribution"},
		"step time": {[]string{"--rate", "1", "--step-time", "slow"}, "--step-time"},
		"slo":       {[]string{"--rate", "1", "--slo", "ttft=2s"}, "--slo"},
		"output":    {[]string{"--rate", "1", "-o", "xml"}, "unknown output format"},
	} {
		code, _, errs := run(t, offline, append(simBase, c.args...)...)
		if code != ExitBadInput || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q, want 2 and one line with %q", name, code, errs, c.want)
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

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --serve listens, answers /health and a completion, and stops with its
// context (exit 0).
func TestSimulateServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb syncBuffer
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
