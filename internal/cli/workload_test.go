package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/workload"
)

func readTrace(t *testing.T, name string) map[string]workload.Trace {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]workload.Trace{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l workload.Trace
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[l.ID] = l
	}
	return out
}

// One description of a workload, given to simulate and to loadtest (against
// simulate --serve), sends the same requests: the same ids with the same
// prompt and output lengths, due at the same times. The two traces are
// compared request by request: simulate's arrival_s is when its client
// sent each request (in an open loop, when it was due); loadtest's due_s is
// the same time, and its arrival_s is later by its send lag only.
// A ShareGPT replay (its prompts' sizes, outputs fixed short to keep the
// live run brief) is one description too.
func TestOneWorkloadTwoCommands(t *testing.T) {
	for _, traffic := range [][]string{
		{"--rate", "20", "--num-requests", "30", "--prompt-tokens", "uniform:50-200", "--output-tokens", "uniform:2-8", "--seed", "7"},
		{"--rate", "20", "--num-requests", "30", "--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--sharegpt-output-len", "4", "--seed", "7"},
	} {
		oneWorkloadTwoCommands(t, traffic)
	}
}

func oneWorkloadTwoCommands(t *testing.T, traffic []string) {
	plan := []string{"--model", "Qwen/Qwen3-0.6B", "--gpu", "H100-80GB"}
	dir := t.TempDir()
	simTrace, loadTrace := filepath.Join(dir, "sim.jsonl"), filepath.Join(dir, "load.jsonl")
	if code, _, errs := run(t, offline, append(append(append([]string{"simulate"}, plan...), traffic...), "--trace", simTrace, "-o", "json")...); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	base := serveSimulated(t, plan...)
	if code, _, errs := run(t, offline, append(append([]string{"loadtest", "--url", base}, traffic...), "--trace", loadTrace, "-o", "json")...); code != 0 {
		t.Fatalf("loadtest: exit %d: %s", code, errs)
	}
	sim, load := readTrace(t, simTrace), readTrace(t, loadTrace)
	if len(sim) != 30 || len(load) != 30 {
		t.Fatalf("%d simulated and %d sent requests, want 30 each", len(sim), len(load))
	}
	for id, s := range sim {
		l, ok := load[id]
		if !ok {
			t.Errorf("%s simulated, not sent", id)
			continue
		}
		if s.Prompt != l.Prompt || s.Output != l.Output || l.Due == nil || math.Abs(s.Arrival-*l.Due) > 1e-6 {
			t.Errorf("%s: simulated %+v, sent %+v", id, s, l)
			continue
		}
		if lag := l.Arrival - *l.Due; lag < 0 || lag > 0.25 || l.Error != "" {
			t.Errorf("%s: sent %.3f s after its due time (error %q)", id, lag, l.Error)
		}
	}
}

// A pasted vllm bench serve command is simulated and printed in the
// layout vllm bench serve prints; the command of a published run (gpustack's
// Qwen3-14B on an A100 SXM, vLLM 0.11.0, sim/testdata/serving/train.csv)
// gives its numbers within the simulator's bounds (throughput and TPOT
// 15%, TTFT 25%), the same as -o json.
func TestSimulateBench(t *testing.T) {
	bench := "vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --model Qwen/Qwen3-14B --dataset-name random " +
		"--random-input-len 4000 --random-output-len 200 --num-prompts 500 --seed 42"
	args := []string{"simulate", "--gpu", "A100-80GB", "--vllm-version", "0.11.0", "--bench", bench}
	code, out, errs := run(t, offline, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, line := range []string{
		"============ Serving Benchmark Result ============",
		"Successful requests:                     500       ",
		"Total input tokens:                      2000000   ",
		"Total generated tokens:                  100000    ",
		"---------------Time to First Token----------------",
		"-----Time per Output Token (excl. 1st token)------",
		"---------------Inter-token Latency----------------",
		"==================================================",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("no line %q in\n%s", line, out)
		}
	}
	value := func(label string) float64 { return benchValue(t, out, label) }
	// Published: 1.23 req/s, mean TTFT 197,625 ms, mean TPOT 254.61 ms.
	for _, c := range []struct {
		label     string
		published float64
		bound     float64
	}{{"Request throughput (req/s):", 1.23, 0.15}, {"Mean TTFT (ms):", 197625.03, 0.25}, {"Mean TPOT (ms):", 254.61, 0.15}} {
		if got := value(c.label); math.Abs(got/c.published-1) > c.bound {
			t.Errorf("%s %.2f, published %.2f: beyond %.0f%%", c.label, got, c.published, 100*c.bound)
		}
	}
	code, js, errs := run(t, offline, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, errs)
	}
	var r report.SimReport
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "Qwen/Qwen3-14B" || r.Requests != 500 || fmt.Sprintf("%.2f", r.RequestsPerS) != fmt.Sprintf("%.2f", value("Request throughput (req/s):")) ||
		fmt.Sprintf("%.2f", r.TTFT.Mean) != fmt.Sprintf("%.2f", value("Mean TTFT (ms):")) {
		t.Errorf("json: %s %d requests, %.2f req/s, TTFT %.2f", r.Model, r.Requests, r.RequestsPerS, r.TTFT.Mean)
	}
}

// childSimulate runs headroom in a child process of the test binary, so
// the parent can read its peak memory.
const childEnv = "HEADROOM_TEST_CHILD_ARGS"

// childASEnv, when set, is the child's address-space limit in bytes.
const childASEnv = "HEADROOM_TEST_CHILD_AS"

func TestChildMain(t *testing.T) {
	args := os.Getenv(childEnv)
	if args == "" {
		t.Skip("runs as the child of TestSimulateMemoryBounded and the bounds tests")
	}
	if as, _ := strconv.ParseUint(os.Getenv(childASEnv), 10, 64); as > 0 {
		// The address-space limit (ulimit -v) the parent asked for: an
		// allocation past it fails here as it would on a small machine.
		lim := syscall.Rlimit{Cur: as, Max: as}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			t.Fatal(err)
		}
	}
	os.Exit(Main(context.Background(), strings.Split(args, "\x1f"), Env{Stdout: os.Stdout, Stderr: os.Stderr,
		Getenv: func(k string) string { return offline[k] }}))
}

// An absurd rate (a million requests a second for 10 s, ten million
// requests, the most one run takes) stops at the backlog bound (100
// requests in flight per --max-num-seqs: 102,400 for vLLM's 1024 on an
// H100) with exit 1 and the answer in one line, instead of
// holding every request: the process's peak memory (its maximum resident
// set, read from the kernel) stays under 200 MiB, the bound the README
// documents. More than ten million requests are refused before anything
// runs.
func TestSimulateMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	args := []string{"simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--rate", "1e6", "--duration", "10s", "-o", "json"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildMain$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitNoFit {
		t.Fatalf("exit %v, want %d: %s", err, ExitNoFit, errb.String())
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if !strings.Contains(errb.String(), "headroom: one H100-80GB serves about ") || !strings.Contains(errb.String(), " arrive; the queue grows without bound") ||
		!strings.Contains(errb.String(), "the run stopped at t=0.1 s with 102401 requests in flight, the simulator's bound of 102400") {
		t.Errorf("stderr: %s", errb.String())
	}
	var r report.SimReport
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil || r.FellBehind == nil || r.FellBehind.InFlight != 102401 {
		t.Errorf("report %v: %.300s", err, out.String())
	}
	t.Logf("peak RSS %d MiB", rss>>20)
	if rss > 200<<20 {
		t.Errorf("peak RSS %d MiB, over the 200 MiB bound", rss>>20)
	}
	code, _, errs := run(t, offline, "simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--rate", "1e12", "--duration", "1s")
	if code != ExitBadInput || !strings.Contains(errs, "1 trillion requests: at most 10000000 in one run") {
		t.Errorf("--rate 1e12: exit %d: %s", code, errs)
	}
}
