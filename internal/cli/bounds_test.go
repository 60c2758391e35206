package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// boundsAS is the address space a child may reserve: the 4 GB limit the
// bad-input sweep ran under, less a quarter. Go reserves about 0.8 GB of
// address space before its heap; glibc's per-thread malloc arenas (64 MiB
// each, for cgo's threads) are held to one so they do not count.
const boundsAS = 3 << 30

// child runs headroom (the test binary's Main) as a process under
// boundsAS, with stdin, and returns its exit code, output and peak
// resident memory.
func child(t *testing.T, stdin []byte, args ...string) (code int, stdout, stderr string, rss int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildMain$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, "\x1f"), childASEnv+"="+strconv.Itoa(boundsAS), "MALLOC_ARENA_MAX=1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	return cmd.ProcessState.ExitCode(), out.String(), errb.String(), rss
}

// oneLine reports whether s is one line of headroom's (no trace of a
// crash: Go's fatal errors exit 2 too), after any progress lines.
func oneLine(s string) bool {
	for strings.HasPrefix(s, "headroom simulate: ") {
		_, s, _ = strings.Cut(s, "\n")
	}
	return strings.Count(s, "\n") == 1 && strings.HasPrefix(s, "headroom: ") && !strings.Contains(s, "goroutine") && !strings.Contains(s, "fatal error")
}

// Every case of the bad-input sweep ends with one line and exit 2, or an
// answer within the documented memory bound (sim/README.md, Bounds), in
// a process whose address space is limited to 3 GiB (ulimit -v). Before,
// each of them panicked, died out of memory, or answered with an all-zero
// report.
func TestSimulateBoundedCases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// 300 MiB of empty lines in about 300 KiB of gzip: the bomb of the
	// sweep (3 MB to 3 GB) cut to a tenth, past the 16 MiB read before the
	// ratio counts.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	nl := bytes.Repeat([]byte{'\n'}, 1<<20)
	for range 300 {
		zw.Write(nl)
	}
	zw.Close()
	bombFile := file("bomb.jsonl.gz", bomb.Bytes())
	random := make([]byte, 2<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	randomFile := file("random.bin", random)
	emptyFile := file("empty.jsonl", nil)
	// A valid request on a 50 MB line.
	long := file("long.jsonl", []byte(`{"arrival_s":0,"prompt_tokens":10,"output_tokens":2,"prompt":"`+strings.Repeat("x", 50<<20)+`"}`+"\n"))
	huge := file("huge.jsonl", []byte(`{"arrival_s":0,"prompt_tokens":10,"output_tokens":2}`+"\n"+`{"arrival_s":1,"prompt_tokens":1e15,"output_tokens":2}`+"\n"))
	hugeOut := file("hugeout.jsonl", []byte(`{"arrival_s":0,"prompt_tokens":10,"output_tokens":1e15}`+"\n"))

	qwen := []string{"simulate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S"}
	minBlocks := map[string]int{"4096GiB block 1": 60_000_000, "100000GiB": 100_000_000, "100000GiB block 1": 1_600_000_000}
	custom := []string{"simulate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--step-time", "fixed:15ms", "--rate", "10"}
	ones := []string{"--rate", "inf", "--num-requests", "10000000", "--prompt-tokens", "1", "--output-tokens", "1", "-o", "json"}
	for _, c := range []struct {
		name  string
		args  []string
		stdin []byte
		code  int
		// want is in the one line of stderr (exit 2) or in stdout.
		want string
		// rss bounds the peak resident memory, MiB.
		rss int64
	}{
		{"rate 1e-300", append(qwen, "--rate", "1e-300"), nil, ExitBadInput, "no request arrives within the simulator's horizon of 100 years", 200},
		{"rate 1e-20", append(qwen, "--rate", "1e-20"), nil, ExitBadInput, "no request arrives within the simulator's horizon of 100 years", 200},
		{"bench rate 1e-300", []string{"simulate", "--gpu", "L40S", "--bench", "vllm bench serve --model Qwen/Qwen2.5-7B-Instruct --dataset-name random --request-rate 1e-300"}, nil,
			ExitBadInput, "no request arrives within the simulator's horizon", 200},
		{"num-prompts 1e12", []string{"simulate", "--gpu", "L40S", "--bench", "vllm bench serve --model Qwen/Qwen2.5-7B-Instruct --num-prompts 1e12"}, nil,
			ExitBadInput, "--num-prompts 1e12: want a whole number from 1 to 10000000", 200},
		{"blocks 1e12", append(qwen, "--rate", "1", "--num-gpu-blocks-override", "1000000000000"), nil,
			ExitBadInput, "num_gpu_blocks 1000000000000: more than the 2147483647 blocks", 200},
		// About 70 million blocks of 1 token (the pool's nominal size alone
		// was 1.3 GB of lists), 108 million of 16, 1.7 billion of 1 (13 GiB):
		// minBlocks below checks the pool is that large.
		{"4096GiB block 1", append(custom, "--gpu-memory", "4096GiB", "--block-size", "1"), nil, 0, "KV blocks of 1 tokens", 200},
		{"100000GiB", append(custom, "--gpu-memory", "100000GiB"), nil, 0, "KV blocks of 16 tokens", 200},
		{"100000GiB block 1", append(custom, "--gpu-memory", "100000GiB", "--block-size", "1"), nil, 0, "KV blocks of 1 tokens", 200},
		// Ten million 1-token requests at once stop at the 1,000,000 in
		// flight the simulator holds (about 250 bytes each), however many
		// --max-num-seqs lets the engine run.
		// (vLLM refuses a batched-token budget under --max-num-seqs, and
		// headroom plans no more than a million sequences at once.)
		{"inf, max-num-seqs 1e9", append(append(qwen, ones...), "--max-num-seqs", "1000000000"), nil, ExitBadInput, "past the 1048576 headroom plans", 200},
		{"inf, max-num-seqs 1e4", append(append(qwen, ones...), "--max-num-seqs", "10000", "--max-num-batched-tokens", "10000"), nil, ExitNoFit, `"in_flight_bound": 1000000`, 600},
		{"gzip bomb", append(qwen, "--requests", bombFile), nil, ExitBadInput, "gzip expands past the bound: ", 200},
		{"gzip bomb, doctor", []string{"doctor", bombFile}, nil, ExitBadInput, "gzip expands past the bound: ", 200},
		{"empty file", append(qwen, "--requests", emptyFile), nil, ExitBadInput, "empty.jsonl: no request records: it is empty", 200},
		{"empty stdin", append(qwen, "--requests", "-"), []byte{}, ExitBadInput, "--requests -: no request records: it is empty", 200},
		{"random bytes", append(qwen, "--requests", randomFile), nil, ExitBadInput, "random.bin: binary data, not a text log (a NUL byte at byte ", 200},
		{"random stdin", append(qwen, "--requests", "-"), random, ExitBadInput, "--requests -: binary data, not a text log", 200},
		{"50 MB line", append(qwen, "--requests", long), nil, ExitBadInput, "long.jsonl: line 1: longer than the 16 MiB (16777216 bytes) a request line may have", 200},
		{"prompt 1e15", append(qwen, "--requests", huge), nil, ExitBadInput, "huge.jsonl: line 2: prompt_tokens 1e15: more than the 10000000 tokens a request may have", 200},
		{"output 1e15", append(qwen, "--requests", hugeOut), nil, ExitBadInput, "line 1: output_tokens 1e15: more than the 10000000 tokens a request may have", 200},
		{"loadtest empty", []string{"loadtest", "--url", "http://127.0.0.1:1", "--model", "m", "--requests", emptyFile}, nil, ExitBadInput, "no request records: it is empty", 200},
		{"loadtest random", []string{"loadtest", "--url", "http://127.0.0.1:1", "--model", "m", "--requests", randomFile}, nil, ExitBadInput, "binary data, not a text log", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs, rss := child(t, c.stdin, c.args...)
			t.Logf("peak RSS %d MiB", rss>>20)
			switch {
			case code != c.code:
				t.Errorf("exit %d, want %d: %.500s", code, c.code, errs)
			case code == ExitBadInput && (!oneLine(errs) || !strings.Contains(errs, c.want)):
				t.Errorf("stderr %.500q, want one line with %q", errs, c.want)
			case code != ExitBadInput && !strings.Contains(out, c.want):
				t.Errorf("stdout %.1000s\nwant %q (stderr %.300s)", out, c.want, errs)
			}
			if min := minBlocks[c.name]; min > 0 {
				n := 0
				if m := regexp.MustCompile(`([0-9,]+) KV blocks of`).FindStringSubmatch(out); m != nil {
					n, _ = strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
				}
				if n < min {
					t.Errorf("%d KV blocks, want at least %d", n, min)
				}
			}
			if rss > c.rss<<20 {
				t.Errorf("peak RSS %d MiB, over %d MiB", rss>>20, c.rss)
			}
		})
	}
}

// The sweep's overload: 20 requests a second of 2,000-token prompts on
// one L40S, which serves about 5 (1,000 requests finish in 202 s). The
// first line says so, the exit is 1, and the JSON carries both rates; at
// 3 a second the same engine keeps up (exit 0, no fell_behind).
func TestSimulateOverloadFirst(t *testing.T) {
	args := []string{"simulate", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S", "--prompt-tokens", "2000"}
	code, out, errs := run(t, offline, append(args, "--rate", "20")...)
	first, _, _ := strings.Cut(out, "\n")
	if code != ExitNoFit || !strings.HasPrefix(first, "FELL BEHIND: one L40S serves about ") || !strings.Contains(first, " arrive; the queue grows without bound") {
		t.Fatalf("exit %d, first line %q (%s)", code, first, errs)
	}
	code, out, errs = run(t, offline, append(args, "--rate", "20", "-o", "json")...)
	var r struct {
		FellBehind *struct {
			Arrivals float64 `json:"arrivals_per_s"`
			Served   float64 `json:"served_per_s"`
			Replicas int     `json:"replicas_estimate"`
		} `json:"fell_behind"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != ExitNoFit || r.FellBehind == nil {
		t.Fatalf("exit %d, %v: %.300s %s", code, err, out, errs)
	}
	// Poisson arrivals at 20/s measured over the later half of 50 s: 500
	// of them, within 20 ± 3 (more than 3 standard deviations, √500/25).
	// Served: 1,000 requests in 202 s is 4.94/s over the whole run.
	if b := r.FellBehind; b.Arrivals < 17 || b.Arrivals > 23 || b.Served < 4.5 || b.Served > 5.5 || b.Replicas < 4 || b.Replicas > 5 {
		t.Errorf("fell_behind %+v", *b)
	}
	code, out, errs = run(t, offline, append(args, "--rate", "3", "-o", "json")...)
	if code != 0 || strings.Contains(out, "fell_behind") {
		t.Errorf("--rate 3: exit %d, %s", code, errs)
	}
}

// A request whose prompt and output pass max-model-len is refused as
// vLLM's server refuses it (400), not simulated up to the limit.
func TestSimulateRefusesPastContext(t *testing.T) {
	reqs := writeFile(t, "r.jsonl", `{"arrival_s":0,"prompt_tokens":3000,"output_tokens":6000}
{"arrival_s":1,"prompt_tokens":100,"output_tokens":2}
`)
	code, out, errs := run(t, offline, append(simBase, "--max-model-len", "8192", "--step-time", "fixed:10ms", "--requests", reqs, "-o", "json")...)
	var m struct {
		Requests   int64            `json:"requests"`
		RejectedBy map[string]int64 `json:"rejected_by"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || code != 0 || m.Requests != 1 || m.RejectedBy["exceeds_max_model_len"] != 1 {
		t.Errorf("exit %d %v: %+v %s", code, err, m, errs)
	}
}

// plan --profile on a log of 10 requests a second of 2,000-token prompts,
// which one L40S serves about 5 of: every max-num-seqs candidate falls
// behind, so the verdict says the traffic is not met (exit 1), not FITS
// with a number. profile's long pool (6,000-token prompts at 5 a second,
// about 2 served) says the same; its short pool keeps up.
func TestPlanProfileSaysOverload(t *testing.T) {
	var log strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&log, `{"arrival_s":%.1f,"prompt_tokens":2000,"output_tokens":128}`+"\n", float64(i)/10)
	}
	name := writeFile(t, "over.jsonl", log.String())
	code, out, errs := run(t, offline, "plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S", "--profile", name)
	if code != ExitNoFit || !strings.Contains(out, "Verdict    DOES NOT MEET THE TRAFFIC: no max-num-seqs meets this traffic: one L40S serves about ") || strings.Contains(out, "Verdict    FITS") {
		t.Errorf("plan --profile: exit %d (%s)\n%s", code, errs, out)
	}
	log.Reset()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4000 {
		in := 300
		if i%2 == 1 {
			in = 6000
		}
		fmt.Fprintf(&log, "%s input_tokens=%d output_tokens=200\n", t0.Add(time.Duration(i)*100*time.Millisecond).Format("2006-01-02T15:04:05.000"), in)
	}
	name = writeFile(t, "pools.log", log.String())
	code, out, errs = run(t, offline, "profile", name, "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S")
	first, _, _ := strings.Cut(out, "\n")
	if code != ExitNoFit || !strings.HasPrefix(first, "DOES NOT MEET THE TRAFFIC: long pool: no max-num-seqs meets this traffic: one L40S serves about ") ||
		strings.Contains(out, "DOES NOT MEET THE TRAFFIC: short pool") {
		t.Errorf("profile: exit %d (%s)\n%s", code, errs, out)
	}
}

// An interrupt while the requests are read (a log too long to wait for)
// ends simulate with one line that says so, not a report of what was read.
func TestSimulateInterruptedSaysSo(t *testing.T) {
	name := writeFile(t, "long.jsonl", strings.Repeat("\n", 1<<20)+`{"arrival_s":0,"prompt_tokens":10,"output_tokens":2}`+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, append(simBase, "--requests", name), Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return offline[k] }})
	if code != ExitBadInput || errb.String() != "headroom: interrupted: no report (the run, or the reading of its requests, was stopped)\n" || out.Len() > 0 {
		t.Errorf("exit %d, stderr %q, stdout %.200q", code, errb.String(), out.String())
	}
}
