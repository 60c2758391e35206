package cli

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/internal/fakeopenai"
	"headroom.dev/headroom/internal/report"
)

// The synthetic ShareGPT file of package workload's tests.
const shareGPTFile = "../../workload/testdata/sharegpt/sharegpt_synthetic.json"

// benchValue reads a value of vllm bench serve's layout by its label.
func benchValue(t *testing.T, out, label string) float64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, label); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("no %q in\n%s", label, out)
	return 0
}

// A whole vllm bench serve command of a ShareGPT run, refused before
// (--dataset-name sharegpt, --goodput, the percentile flags): simulated
// on the synthetic ShareGPT file, printed in bench's layout with the
// metrics and percentiles asked for, the goodput line, and a note that the
// lengths are estimated and it replays a sample of the file.
func TestSimulateShareGPTBench(t *testing.T) {
	bench := "vllm bench serve --backend vllm --model Qwen/Qwen3-14B --dataset-name sharegpt --dataset-path " + shareGPTFile +
		" --num-prompts 40 --seed 42 --request-rate 2 --goodput ttft:2000 tpot:50 --percentile-metrics ttft,tpot,itl,e2el" +
		" --metric-percentiles 50,90,99.9 --save-result --result-dir /tmp --ignore-eos --temperature 0"
	code, out, errs := run(t, offline, "simulate", "--gpu", "A100-80GB", "--vllm-version", "0.11.0", "--bench", bench)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// The 40 requests' sizes (package workload's TestShareGPTSample, from
	// testdata/sharegpt/reference.py 40 42): prompts 2,939 tokens, outputs
	// 10,097.
	for _, line := range []string{
		"Successful requests:                     40        ",
		"Total input tokens:                      2939      ",
		"Total generated tokens:                  10097     ",
		"----------------End-to-end Latency----------------",
		"note: sharegpt: 40 requests from the 35 entries of " + shareGPTFile + " in vllm bench serve's order for --seed 42, 4 dropped by its length filter, 9 repeated",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("no line %q in\n%s", line, out)
		}
	}
	for _, label := range []string{"Request goodput (req/s):", "P90 TTFT (ms):", "P99.9 TPOT (ms):", "P50 ITL (ms):", "Mean E2EL (ms):", "Median E2EL (ms):"} {
		benchValue(t, out, label)
	}
	if strings.Contains(out, "P99 TTFT") || !strings.Contains(out, "token lengths estimated at 4 bytes of text per token") || !strings.Contains(out, "a sample of the same file") {
		t.Errorf("percentiles or note:\n%s", out)
	}
	// Percentiles rise; the median is P50.
	if p50, p90, p999 := benchValue(t, out, "P50 E2EL (ms):"), benchValue(t, out, "P90 E2EL (ms):"), benchValue(t, out, "P99.9 E2EL (ms):"); p50 > p90 || p90 > p999 || p50 != benchValue(t, out, "Median E2EL (ms):") {
		t.Errorf("E2EL percentiles %v %v %v", p50, p90, p999)
	}
}

// Goodput is the requests meeting every target per second of the run: at
// targets no request can miss it is the request throughput, at a TTFT
// target of 0 ms none meets it, and a TTFT target between counts the
// requests at or under it (the JSON gives their number). At 0.5 req/s
// the engine keeps up (it serves about 1 a second of this traffic; at 4
// it falls behind, exit 1).
func TestSimulateGoodput(t *testing.T) {
	base := []string{"simulate", "--model", "Qwen/Qwen3-14B", "--gpu", "A100-80GB", "--rate", "0.5", "--num-requests", "200",
		"--prompt-tokens", "2k", "--output-tokens", "uniform:10-300", "-o", "json"}
	get := func(goodput string) report.SimReport {
		code, out, errs := run(t, offline, append(base, "--goodput", goodput, "--metric-percentiles", "25,50,99")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var r report.SimReport
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.GoodputPerS == nil || r.GoodRequests == nil {
			t.Fatalf("%v: %.300s", err, out)
		}
		return r
	}
	all := get("ttft:1e9 tpot:1e9 e2el:1e9")
	if *all.GoodRequests != 200 || *all.GoodputPerS != math.Round(200/all.DurationS*1000)/1000 || all.InputTokens != 200*2000 {
		t.Errorf("loose targets: %d good, %v req/s, %d input tokens; want 200, %.3f, 400000", *all.GoodRequests, *all.GoodputPerS, all.InputTokens, 200/all.DurationS)
	}
	if none := get("ttft:0"); *none.GoodRequests != 0 || *none.GoodputPerS != 0 {
		t.Errorf("ttft:0: %d good", *none.GoodRequests)
	}
	// At the median TTFT about half meet it (the histogram's median is
	// within 0.4% of a request's own TTFT).
	half := get("ttft:" + strconv.FormatFloat(all.TTFT.P50, 'f', 2, 64))
	if g := *half.GoodRequests; g < 80 || g > 120 {
		t.Errorf("ttft at the median %.2f ms: %d of 200 good", all.TTFT.P50, g)
	}
	// Only the percentile the summary lacks is added to the JSON.
	if l := all.TTFT; len(l.Percentiles) != 1 || l.Percentiles[0].P != 25 || l.Percentiles[0].Value > l.P50 || l.Percentiles[0].Value <= 0 {
		t.Errorf("percentiles %+v", l.Percentiles)
	}
}

// Token counts take vLLM's suffixes in every length flag, as
// --max-model-len does: --prompt-tokens 2k is 2,000 tokens.
func TestSimulateTokenSuffix(t *testing.T) {
	code, out, errs := run(t, offline, "simulate", "--model", "Qwen/Qwen3-14B", "--gpu", "A100-80GB", "--rate", "1", "--num-requests", "5",
		"--prompt-tokens", "2k", "--output-tokens", "0.1k", "--max-model-len", "32k", "-o", "json")
	var r report.SimReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.InputTokens != 10000 || r.OutputTokens != 500 {
		t.Fatalf("exit %d %s: %d input, %d output tokens; want 10000 and 500", code, errs, r.InputTokens, r.OutputTokens)
	}
}

// Without the dataset file: one line, exit 2.
func TestSimulateDatasetMissing(t *testing.T) {
	for _, args := range [][]string{
		{"--dataset-name", "sharegpt", "--dataset-path", "/nonexistent/ShareGPT_V3.json", "--rate", "1"},
		{"--dataset-name", "custom", "--rate", "1"},
		{"--bench", "vllm bench serve --dataset-name hf --dataset-path x"},
	} {
		code, out, errs := run(t, offline, append([]string{"simulate", "--model", "Qwen/Qwen3-14B", "--gpu", "A100-80GB"}, args...)...)
		if code != ExitBadInput || strings.Count(errs, "\n") != 1 || out != "" || !strings.Contains(errs, "dataset") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}

// loadtest --bench prints bench's layout through simulate's printer, with
// goodput as bench counts it: the fake server answers every request with
// a 20 ms TTFT and 5 ms between tokens, so a TTFT target of 1 s holds for
// every request (goodput = request throughput) and one of 1 ms for none.
func TestLoadtestBench(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{TTFT: 20 * time.Millisecond, ITL: 5 * time.Millisecond, Capacity: 8})
	defer srv.Close()
	for _, c := range []struct {
		target string
		all    bool
	}{{"ttft:1000 tpot:500", true}, {"ttft:1", false}} {
		bench := "vllm bench serve --model stand-in --dataset-name sharegpt --dataset-path " + shareGPTFile +
			" --num-prompts 6 --sharegpt-output-len 4 --max-concurrency 3 --goodput " + c.target + " --percentile-metrics ttft,e2el --metric-percentiles 90"
		code, out, errs := run(t, nil, "loadtest", "--url", srv.URL, "--interval", "50ms", "--no-warmup", "--bench", bench)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, line := range []string{
			"headroom loadtest: the measured result of ",
			"============ Serving Benchmark Result ============",
			"Successful requests:                     6         ",
			"Maximum request concurrency:             3         ",
			"Total generated tokens:                  24        ",
			"---------------Time to First Token----------------",
			"----------------End-to-end Latency----------------",
			"note: sharegpt: 6 requests from the 35 entries",
		} {
			if !strings.Contains(out, line) {
				t.Errorf("%s: no line %q in\n%s", c.target, line, out)
			}
		}
		if strings.Contains(out, "Inter-token Latency") || !strings.Contains(out, "P90 TTFT (ms):") {
			t.Errorf("metrics not as asked:\n%s", out)
		}
		good, thr := benchValue(t, out, "Request goodput (req/s):"), benchValue(t, out, "Request throughput (req/s):")
		if (c.all && good != thr) || (!c.all && good != 0) {
			t.Errorf("%s: goodput %v, throughput %v", c.target, good, thr)
		}
	}
}

// Flags of a bench command that are read but not simulated say so among
// the notes, not on stderr before an error: a command without
// --ignore-eos (a real server may stop a reply early) and --lora-modules.
func TestSimulateBenchNotes(t *testing.T) {
	bench := "vllm bench serve --model Qwen/Qwen3-14B --random-input-len 100 --random-output-len 10 --num-prompts 5 --lora-modules a b"
	code, out, errs := run(t, offline, "simulate", "--gpu", "A100-80GB", "--bench", bench, "-o", "json")
	var r report.SimReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("exit %d: %s", code, errs)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "--lora-modules: the requests are simulated on the base model") || !strings.Contains(notes, "has no --ignore-eos") {
		t.Errorf("notes: %s", notes)
	}
	code, out, _ = run(t, offline, "simulate", "--gpu", "A100-80GB", "--bench", bench+" --ignore-eos", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || strings.Contains(strings.Join(r.Notes, "\n"), "ignore-eos") {
		t.Errorf("--ignore-eos given: notes %v", r.Notes)
	}
}

// --profile and a dataset both give lengths: refused in one line.
func TestSimulateProfileAndDataset(t *testing.T) {
	code, _, errs := run(t, offline, "simulate", "--model", "Qwen/Qwen3-14B", "--gpu", "A100-80GB", "--rate", "1",
		"--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--profile", "p.json")
	if code != ExitBadInput || errs != "headroom: --profile and --dataset-name sharegpt both give the requests' lengths: give one\n" {
		t.Errorf("exit %d: %q", code, errs)
	}
}
