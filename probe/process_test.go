//go:build unix

package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"headroom.dev/headroom/internal/standin"
	"headroom.dev/headroom/vllm"
)

// These tests launch real processes: the engine stand-in
// probe/testdata/fakevllm, built here with `go build`, stands in for vllm
// and the GPU under it (no GPU where these tests run). It prints vLLM's
// lines for a hidden KV capacity, serves /health, and can hang, crash,
// ignore SIGTERM or start an engine-core child in its process group.

func TestMain(m *testing.M) { standin.Main(m) }

// fakeProcess is a Process running the stand-in with env; the pid file
// and argument log live in a temporary directory.
func fakeProcess(t *testing.T, env ...string) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	env = append(env, "FAKEVLLM_PIDFILE="+filepath.Join(dir, "pids"), "FAKEVLLM_ARGSFILE="+filepath.Join(dir, "args"))
	return &Process{Bin: standin.Bin(t), Env: env, Grace: 2 * time.Second, HealthEvery: 50 * time.Millisecond}, dir
}

// pids reads the "PID PGID" lines the stand-in wrote.
func pids(t *testing.T, dir string) (procs []int, groups map[int]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	groups = map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var pid, pgid int
		if _, err := fmt.Sscanf(line, "%d %d", &pid, &pgid); err != nil {
			t.Fatalf("pid file line %q: %v", line, err)
		}
		procs = append(procs, pid)
		groups[pgid] = true
	}
	return procs, groups
}

// assertGone checks that nothing of the launches lives: every recorded
// process is gone or a zombie, and every process group ends with ESRCH
// (killed orphans are zombies until init reaps them, hence the wait).
func assertGone(t *testing.T, dir string) {
	t.Helper()
	procs, groups := pids(t, dir)
	for _, pid := range procs {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] != "Z" {
				t.Errorf("process %d still runs (state %s)", pid, f[0])
			}
		}
	}
	for pg := range groups {
		if groupAlive(pg) {
			t.Errorf("process group %d has live members", pg)
		}
		deadline := time.Now().Add(15 * time.Second)
		for syscall.Kill(-pg, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if err := syscall.Kill(-pg, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill(-%d, 0) = %v; want ESRCH", pg, err)
		}
	}
}

func settings(extra ...string) vllm.Settings {
	s, err := vllm.ParseCommand(append([]string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"}, extra...))
	if err != nil {
		panic(err)
	}
	return s
}

func TestProcessAutoSplitLines(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_VERSION=0.19.0", "FAKEVLLM_KV_TOKENS=30000", "FAKEVLLM_SPLIT=1", "FAKEVLLM_CHILD=1")
	r, err := Run(context.Background(), Config{
		Engine:   p,
		Settings: settings("--port", "8000", "--gpu-memory-utilization", "0.92"),
		Model:    spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:   device(t, "L4"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxModelLen != 30000 || r.Launches != 1 || r.KVCacheTokens != 30000 || r.Version != v019 {
		t.Errorf("result %+v", r)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "args"))
	args := strings.TrimSpace(string(b))
	if !strings.HasPrefix(args, "serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.92 --max-model-len auto --host 127.0.0.1 --port ") || strings.Contains(args, "8000") {
		t.Errorf("launched with %q", args)
	}
	assertGone(t, dir)
}

// TestProcessHealthOnly: no uvicorn line is printed; /health decides.
func TestProcessHealthOnly(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_VERSION=0.19.0", "FAKEVLLM_KV_TOKENS=30000", "FAKEVLLM_NO_READY_LINE=1")
	a, err := p.Launch(context.Background(), Launch{Settings: settings("--max-model-len", "16384"), Timeout: 20 * time.Second})
	if err != nil || a.Outcome != Started || a.Report.Ready || a.Report.KVTokens != 30000 {
		t.Errorf("attempt %+v, %v", a, err)
	}
	assertGone(t, dir)
}

// TestProcessTwoLaunches: a release without auto takes two launches, and
// the launch that started leaves a calibration record.
func TestProcessTwoLaunches(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_VERSION=0.10.0", "FAKEVLLM_KV_TOKENS=20000")
	path := filepath.Join(t.TempDir(), "headroom", "calibration.jsonl")
	r, err := Run(context.Background(), Config{
		Engine:      p,
		Settings:    settings(),
		Model:       spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:      device(t, "L4"),
		Calibration: func(rec Record) error { return AppendRecord(path, rec) },
	})
	if err != nil || r.MaxModelLen != 20000 || r.Launches != 2 {
		t.Fatalf("result %+v, %v", r, err)
	}
	if h := r.History[0]; h.Outcome != Failed || h.ExitCode != 1 || !strings.Contains(h.Reason, "estimated maximum model length is 20000") {
		t.Errorf("first launch %+v", h)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, skipped, err := ReadRecords(f)
	if err != nil || skipped != 0 || len(recs) != 1 || recs[0].MaxModelLen != 20000 || recs[0].KVTokens != 20000 {
		t.Errorf("records %+v, %d skipped, %v", recs, skipped, err)
	}
	assertGone(t, dir)
}

// TestProcessHang: an engine that hangs and ignores SIGTERM, with a child
// that does too, is killed at the timeout, group and all.
func TestProcessHang(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_FAIL=hang", "FAKEVLLM_IGNORE_TERM=1", "FAKEVLLM_CHILD=1")
	p.Grace = 300 * time.Millisecond
	start := time.Now()
	a, err := p.Launch(context.Background(), Launch{Settings: settings("--max-model-len", "8192"), Timeout: time.Second})
	if err != nil || a.Outcome != TimedOut || !a.Report.Loading {
		t.Errorf("attempt %+v, %v", a, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	assertGone(t, dir)
}

func TestProcessExitsBeforeLogging(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_FAIL=silent")
	r, err := Run(context.Background(), Config{Engine: p, Settings: settings(), Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Version: v010})
	if !errors.Is(err, ErrNothingStarts) || !strings.Contains(err.Error(), "exited with status 1 before logging anything") {
		t.Errorf("err %v", err)
	}
	if r.Launches != 1 || r.History[0].Report.Lines != 0 {
		t.Errorf("result %+v", r)
	}
	assertGone(t, dir)
}

func TestProcessCrash(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_FAIL=crash", "FAKEVLLM_CRASH_AFTER=3", "FAKEVLLM_CHILD=1")
	a, err := p.Launch(context.Background(), Launch{Settings: settings("--max-model-len", "8192"), Timeout: 20 * time.Second})
	if err != nil || a.Outcome != Failed || a.ExitCode != 1 || a.Report.Lines != 3 || len(a.Tail) != 3 {
		t.Errorf("attempt %+v, %v", a, err)
	}
	assertGone(t, dir)
}

// TestProcessInterrupted cancels the probe while the engine loads (as
// Ctrl-C does): Run returns at once and the process group is gone.
func TestProcessInterrupted(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_VERSION=0.10.0", "FAKEVLLM_LOAD_DELAY=60s", "FAKEVLLM_CHILD=1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Config{
		Engine: p, Settings: settings(), Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"),
		Progress: func(pr Progress) {
			if pr.Phase == PhaseLoading {
				cancel()
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	assertGone(t, dir)
}

func TestProcessVersion(t *testing.T) {
	p, _ := fakeProcess(t, "FAKEVLLM_VERSION=0.11.0+cu128")
	v, err := p.Version(context.Background())
	if err != nil || v != vllm.MustVersion("0.11.0+cu128") {
		t.Errorf("got %v, %v", v, err)
	}
	p, _ = fakeProcess(t, "FAKEVLLM_VERSION_OUTPUT=dev")
	if v, err := p.Version(context.Background()); err == nil {
		t.Errorf("got %v for an unknown version", v)
	}
}

// TestProcessUnknownVersion: the probe does not try auto and says so.
func TestProcessUnknownVersion(t *testing.T) {
	p, dir := fakeProcess(t, "FAKEVLLM_VERSION_OUTPUT=main-branch build", "FAKEVLLM_VERSION=0.10.0", "FAKEVLLM_KV_TOKENS=20000")
	r, err := Run(context.Background(), Config{Engine: p, Settings: settings(), Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4")})
	if err != nil || r.MaxModelLen != 20000 || r.History[0].MaxModelLen == vllm.AutoMaxModelLen || !strings.Contains(strings.Join(r.Notes, " "), "version unknown") {
		t.Errorf("result %+v, %v", r, err)
	}
	assertGone(t, dir)
}

// stepGauge reports memory in use that falls back to its first level
// after a few reads (the engine's memory being released), or never.
type stepGauge struct {
	mu    sync.Mutex
	reads int
	high  int // reads that report the engine's memory
}

func (g *stepGauge) Read(context.Context) ([]GPUMemory, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	used := int64(1 << 30)
	if g.reads > 1 && (g.high < 0 || g.reads <= 1+g.high) {
		used = 70 << 30
	}
	return []GPUMemory{{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalBytes: 80 << 30, UsedBytes: used}}, nil
}

func (g *stepGauge) Source() string { return "test" }

func TestProcessWaitsForRelease(t *testing.T) {
	p, _ := fakeProcess(t, "FAKEVLLM_KV_TOKENS=30000")
	g := &stepGauge{high: 2}
	p.Gauge = g
	a, err := p.Launch(context.Background(), Launch{Settings: settings("--max-model-len", "8192"), Timeout: 20 * time.Second})
	if err != nil || a.Outcome != Started || len(a.Notes) != 0 || g.reads != 4 {
		t.Errorf("attempt %+v after %d reads, %v", a, g.reads, err)
	}
	p.Gauge = &stepGauge{high: -1}
	p.ReleaseTimeout = 300 * time.Millisecond
	a, err = p.Launch(context.Background(), Launch{Settings: settings("--max-model-len", "8192"), Timeout: 20 * time.Second})
	if err != nil || len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "69.00 GiB above") {
		t.Errorf("attempt notes %q, %v", a.Notes, err)
	}
}

func TestProcessMissingBinary(t *testing.T) {
	p := &Process{Bin: filepath.Join(t.TempDir(), "no-vllm")}
	if _, err := p.Launch(context.Background(), Launch{Settings: settings(), Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("err %v", err)
	}
}

func TestServeArgs(t *testing.T) {
	s := settings("--max-model-len", "4096", "--port=9000", "--host", "0.0.0.0", "--trust-remote-code", "--port", "9001")
	got := strings.Join(ServeArgs(s, 1234), " ")
	want := "serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096 --trust-remote-code --host 127.0.0.1 --port 1234"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
