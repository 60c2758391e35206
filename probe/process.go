//go:build unix

package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"headroom.dev/headroom/vllm"
)

// Process launches the real engine: `Bin serve MODEL FLAGS... --host
// 127.0.0.1 --port P` in its own process group, output read from one pipe.
type Process struct {
	// Bin is the vllm executable.
	Bin string
	// Env is added to the environment of every launch (KEY=VALUE), after
	// this process's own and the command's assignments.
	Env []string
	// Gauge, when set, is read before each launch and polled after it
	// until the memory is back; nil skips the wait.
	Gauge MemoryGauge
	// Grace is how long a stop waits after SIGTERM before SIGKILL
	// (default 20 s: vLLM's API server shuts its engine processes down).
	Grace time.Duration
	// ReleaseTimeout bounds the wait for GPU memory (default 2 minutes).
	ReleaseTimeout time.Duration
	// HealthEvery is the /health polling period (default 1 s).
	HealthEvery time.Duration
	// LogDir, when set, keeps each launch's output as
	// LogDir/launch-N-LEN.log.
	LogDir string
	// HTTP is the client for /health (default: 2 s timeout, no proxy).
	HTTP *http.Client

	mu       sync.Mutex
	launches int
}

// Defaults of Process.
const (
	defaultGrace          = 20 * time.Second
	defaultReleaseTimeout = 2 * time.Minute
	defaultHealthEvery    = time.Second
	// versionTimeout bounds `vllm --version` (it imports torch: seconds
	// on a warm cache, tens of seconds on a cold one).
	versionTimeout = 2 * time.Minute
	// drainTimeout bounds the wait for the last output once the process
	// group is gone (a process outside the group may hold the pipe).
	drainTimeout = 2 * time.Second
	tailLines    = 20
)

// Version runs `Bin --version` and reads the release.
func (p *Process) Version(ctx context.Context) (vllm.Version, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Bin, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = p.environ(nil)
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		// Anything it left in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		last := lastLine(string(out))
		if last != "" {
			last = ": " + clip(last, 200)
		}
		return vllm.Version{}, fmt.Errorf("`%s --version` failed (%v)%s", p.Bin, err, last)
	}
	return vllm.VersionFromOutput(string(out))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// environ is the launch environment: ours, the command's assignments,
// then Process.Env (later entries win in os/exec).
func (p *Process) environ(cmdEnv map[string]string) []string {
	env := append(os.Environ(), Assignments(cmdEnv)...)
	return append(env, p.Env...)
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the engine binds it; the launch then fails and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Launch starts the engine once; see Engine.
func (p *Process) Launch(ctx context.Context, l Launch) (Attempt, error) {
	start := time.Now()
	a := Attempt{MaxModelLen: l.Settings.MaxModelLen, ExitCode: -1}
	observe := l.Observe
	if observe == nil {
		observe = func(Phase, vllm.StartupReport) {}
	}
	var obsMu sync.Mutex
	say := func(ph Phase, r vllm.StartupReport) {
		obsMu.Lock()
		defer obsMu.Unlock()
		observe(ph, r)
	}

	var before []GPUMemory
	if p.Gauge != nil {
		var err error
		if before, err = p.Gauge.Read(ctx); err != nil {
			a.Notes = append(a.Notes, fmt.Sprintf("GPU memory not read before the launch (%v): not waiting for its release", err))
			before = nil
		}
	}
	port, err := freePort()
	if err != nil {
		return a, err
	}
	args := ServeArgs(l.Settings, port)
	a.Args = append([]string{p.Bin}, args...)

	p.mu.Lock()
	p.launches++
	num := p.launches
	p.mu.Unlock()
	var logFile *os.File
	if p.LogDir != "" {
		if err := os.MkdirAll(p.LogDir, 0o755); err == nil {
			logFile, _ = os.Create(filepath.Join(p.LogDir, fmt.Sprintf("launch-%d-%s.log", num, lengthName(l.Settings.MaxModelLen))))
		}
		if logFile == nil {
			a.Notes = append(a.Notes, "output not kept: cannot write to "+p.LogDir)
		} else {
			defer logFile.Close()
		}
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return a, err
	}
	cmd := exec.Command(p.Bin, args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.Env = p.environ(l.Settings.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return a, fmt.Errorf("cannot start %s: %v", p.Bin, err)
	}
	pw.Close()
	pgid := cmd.Process.Pid

	ready := make(chan struct{})
	var readyOnce sync.Once
	markReady := func() { readyOnce.Do(func() { close(ready) }) }
	var tail []string
	phase := PhaseLaunching
	sc := &vllm.LogScanner{}
	sc.OnLine = func(line string) {
		if len(tail) == tailLines {
			tail = append(tail[:0], tail[1:]...)
		}
		tail = append(tail, line)
		if logFile != nil {
			io.WriteString(logFile, line+"\n")
		}
	}
	var report vllm.StartupReport
	sc.OnEvent = func(ev vllm.LogEvent) {
		report.Add(ev)
		next := phase
		switch {
		case report.Ready:
			next = PhaseReady
			markReady()
		case report.Profiled:
			next = PhaseProfiling
		case report.Loading:
			next = PhaseLoading
		}
		phase = next
		say(phase, report)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc.ReadFrom(pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	healthCtx, stopHealth := context.WithCancel(ctx)
	go p.pollHealth(healthCtx, port, markReady)

	timeout := l.Timeout
	if timeout <= 0 {
		timeout = unknownSizeTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	exitedByItself, cancelled := false, false
	select {
	case <-ready:
		a.Outcome = Started
	case waitErr = <-exited:
		exitedByItself = true
		a.Outcome = Failed
		select {
		case <-ready:
			// Ready and gone at once: it did start.
			a.Outcome = Started
		default:
		}
	case <-timer.C:
		a.Outcome = TimedOut
	case <-ctx.Done():
		cancelled = true
		a.Outcome = Interrupted
	}
	stopHealth()
	say(PhaseStopping, sc.Report())
	p.stop(pgid, exited, exitedByItself)
	if exitedByItself {
		a.ExitCode = exitCode(waitErr)
	}
	select {
	case <-readDone:
	case <-time.After(drainTimeout):
		pr.Close()
		<-readDone
	}
	pr.Close()
	a.Report = sc.Report()
	a.Tail = append([]string(nil), tail...)
	if cancelled {
		a.Duration = time.Since(start)
		return a, ctx.Err()
	}
	if before != nil {
		say(PhaseReleasing, a.Report)
		if n := p.waitRelease(ctx, before); n != "" {
			a.Notes = append(a.Notes, n)
		}
	}
	a.Duration = time.Since(start)
	if err := ctx.Err(); err != nil {
		return a, err
	}
	return a, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// pollHealth marks the launch ready when GET /health answers 200.
func (p *Process) pollHealth(ctx context.Context, port int, ready func()) {
	client := p.HTTP
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	}
	every := p.HealthEvery
	if every <= 0 {
		every = defaultHealthEvery
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ready()
			return
		}
	}
}

// stop ends the process group: SIGTERM, SIGKILL after the grace period,
// and waits until the leader is reaped and no other member lives. When
// the leader already exited by itself, its left-over children get the
// same treatment.
func (p *Process) stop(pgid int, exited <-chan error, leaderGone bool) {
	grace := p.Grace
	if grace <= 0 {
		grace = defaultGrace
	}
	deadline := time.Now().Add(grace)
	if groupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	if !leaderGone {
		select {
		case <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
	}
	// Children may outlive the leader for a moment while they shut down.
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; groupAlive(pgid) && i < 100; i++ {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
}

// groupAlive reports whether a process of the group still runs. Killed
// members whose parent is gone stay zombies until init reaps them; they
// hold no memory and count as gone.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	live, ok := liveMembers(pgid)
	return !ok || live > 0
}

// waitRelease polls the gauge until every GPU is back to its level before
// the launch; it returns a note when that does not happen in time.
func (p *Process) waitRelease(ctx context.Context, before []GPUMemory) string {
	limit := p.ReleaseTimeout
	if limit <= 0 {
		limit = defaultReleaseTimeout
	}
	deadline := time.Now().Add(limit)
	for {
		now, err := p.Gauge.Read(ctx)
		if err != nil {
			return fmt.Sprintf("GPU memory not read after the launch (%v)", err)
		}
		done, worst, ok := released(before, now)
		if !ok {
			return "the GPUs listed changed during the launch: not waiting for the memory to be released"
		}
		if done {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("GPU memory was still %.2f GiB above its level before the launch after %s; the next launch may find less free memory", float64(worst)/(1<<30), limit)
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(500 * time.Millisecond):
		}
	}
}
