package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLog(t *testing.T, gz bool) string {
	t.Helper()
	var b bytes.Buffer
	// 90 requests of 600 + 100 = 700 tokens (M), 10 of 9,000 + 1,000 =
	// 10,000 tokens (XL), one minute apart.
	for i := range 100 {
		in, out := 600, 100
		if i%10 == 0 {
			in, out = 9000, 1000
		}
		fmt.Fprintf(&b, "2025-06-20T12:%02d:00Z input_tokens=%d output_tokens=%d\n", i%60, in, out)
	}
	name := filepath.Join(t.TempDir(), "requests.log")
	data := b.Bytes()
	if gz {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
		name += ".gz"
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestProfileJSON(t *testing.T) {
	code, out, errs := run(t, offline, "profile", writeLog(t, true), "-o", "json", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Requests int64 `json:"requests"`
		Total    struct {
			Mean float64 `json:"mean"`
			P50  int64   `json:"p50"`
			P90  int64   `json:"p90"`
			P99  int64   `json:"p99"`
			Max  int64   `json:"max"`
		} `json:"total_tokens"`
		Buckets []struct {
			Name      string `json:"name"`
			MaxTokens *int64 `json:"max_tokens"`
			Count     int64  `json:"count"`
		} `json:"buckets"`
		Windows []json.RawMessage `json:"windows"`
		Pools   []struct {
			Name        string   `json:"name"`
			MaxModelLen int      `json:"max_model_len"`
			Args        []string `json:"vllm_args"`
		} `json:"pools"`
		Concurrency []json.RawMessage `json:"concurrency"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// Mean: (90 × 700 + 10 × 10,000) / 100 = 1,630 (exact). p50 and p90
	// (rank 90 is the last short one) are 700 read from its histogram
	// bucket [700, 703] (width 4 between 512 and 1023): its middle, 701.
	// p99 lies in 10,000's bucket [9984, 10047], whose middle 10,015 is
	// clamped to the largest value, 10,000.
	if r.Requests != 100 || r.Total.Mean != 1630 || r.Total.P50 != 701 || r.Total.P90 != 701 || r.Total.P99 != 10000 || r.Total.Max != 10000 {
		t.Errorf("totals %+v", r.Total)
	}
	if len(r.Buckets) != 4 || r.Buckets[1].Count != 90 || r.Buckets[3].Count != 10 || r.Buckets[3].MaxTokens != nil || *r.Buckets[0].MaxTokens != 512 {
		t.Errorf("buckets %+v", r.Buckets)
	}
	// 100 minutes from 12:00 wrap within the hour: 12 five-minute windows.
	if len(r.Windows) != 12 {
		t.Errorf("%d windows", len(r.Windows))
	}
	// The long pool: the longest request, 10,000, rounded up to 10,240.
	if len(r.Pools) != 2 || r.Pools[0].MaxModelLen != 2048 || r.Pools[1].MaxModelLen != 10240 || len(r.Concurrency) != 2 {
		t.Errorf("pools %+v concurrency %d", r.Pools, len(r.Concurrency))
	}
}

func TestProfileTableAndErrors(t *testing.T) {
	code, out, _ := run(t, offline, "profile", writeLog(t, false), "--buckets", "1k,4k,16k", "--window", "0")
	if code != 0 || !strings.Contains(out, "100 requests") || !strings.Contains(out, "<= 1,024") || strings.Contains(out, "Windows of") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	empty := filepath.Join(t.TempDir(), "x.log")
	os.WriteFile(empty, []byte("no counts here\n"), 0o644)
	for _, args := range [][]string{
		{"profile"},
		{"profile", empty},
		{"profile", empty + ".missing"},
		{"profile", writeLog(t, false), "--buckets", "9,3"},
		{"profile", writeLog(t, false), "-o", "xml"},
	} {
		code, _, errs := run(t, offline, args...)
		if code != ExitBadInput || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestProfilePastedCommand: files before -- and the vLLM command after it
// name the deployment (the command's words are not taken for files).
func TestProfilePastedCommand(t *testing.T) {
	code, out, errs := run(t, offline, "profile", writeLog(t, false), "--gpu", "H100-80GB", "-o", "json",
		"--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "16384")
	var r struct {
		Sources []string `json:"sources"`
		Plan    struct {
			Model       string `json:"model"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, errs)
	}
	if len(r.Sources) != 1 || r.Plan.Model != "meta-llama/Llama-3.1-8B-Instruct" || r.Plan.MaxModelLen != 16384 {
		t.Errorf("%+v", r)
	}
}

// profile reads what simulate reads, by the same rules: a trace simulate
// wrote is timed by its arrival_s (windows, a replayable log), a log
// simulate refuses is refused (exit 2); the deployment's plan is judged
// as plan judges it (--max-model-len past the model: exit 1, its problem
// said); a pool's length is the pool's, never "yours".
func TestProfileReadsWhatSimulateReads(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if code, _, errs := run(t, offline, append(simBase, "--rate", "1", "--num-requests", "400", "--prompt-tokens", "uniform:100-4000", "--output-tokens", "64", "--trace", trace)...); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	code, out, errs := run(t, offline, "profile", trace, "--window", "1m")
	if code != 0 || !strings.HasPrefix(out, "400 requests from ") || !strings.Contains(out, "\nWindows of 1m0s: ") {
		t.Errorf("a trace: exit %d: %s%s", code, out, errs)
	}
	for name, body := range map[string]string{
		"huge.jsonl": `{"arrival_s":0,"prompt_tokens":99999999999,"output_tokens":5}` + "\n",
		"neg.jsonl":  `{"arrival_s":0,"prompt_tokens":-5,"output_tokens":5}` + "\n",
		"abc.jsonl":  `{"arrival_s":0,"prompt_tokens":"abc","output_tokens":5}` + "\n",
	} {
		f := writeFile(t, name, body)
		pc, _, perr := run(t, offline, "profile", f)
		sc, _, serr := run(t, offline, append(simBase, "--requests", f)...)
		if pc != ExitBadInput || sc != ExitBadInput || !strings.Contains(perr, "prompt_tokens") || !strings.Contains(serr, "prompt_tokens") {
			t.Errorf("%s: profile exit %d (%s), simulate exit %d (%s)", name, pc, perr, sc, serr)
		}
	}
	code, _, errs = run(t, offline, "profile", trace, "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--max-model-len", "1000000")
	if code != ExitNoFit || !strings.Contains(errs, "--max-model-len 1000000 is longer than the model's maximum of 32768 tokens") {
		t.Errorf("--max-model-len past the model: exit %d: %s", code, errs)
	}
	code, out, errs = run(t, offline, "profile", trace, "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4")
	if code != 0 || strings.Contains(out, ": yours") || !strings.Contains(out, ": the pool's longest requests, and it fits") {
		t.Errorf("pools: exit %d: %s%s", code, out, errs)
	}
}
