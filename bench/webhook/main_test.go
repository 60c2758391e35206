package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// generatorEnv makes the test binary a generator that starts a server
// child, prints the child's pid and waits to be killed.
const generatorEnv = "HEADROOM_BENCH_TEST_GENERATOR"

// TestMain lets the test binary be the server child, as the benchmark's
// own binary is, and the generator TestChildDiesWithGenerator kills.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv(serveEnv) == "1":
		os.Exit(serveMain(os.Args[1:], os.Stdin, os.Stdout))
	case os.Getenv(generatorEnv) == "1":
		srv, err := startChild("", false, false)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(srv.pid)
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// checkSmall checks a small run: every review got the answer its case
// expects (a denial, a patch, ... from the webhook; allowed from the
// no-op), the report accounts for every request of both, the percentiles
// are in order and the ratios are printed. Neither latency nor the ratios
// are asserted: the machine is shared.
func checkSmall(t *testing.T, c config, rep report) {
	t.Helper()
	want := int(float64(c.rate)*c.duration.Seconds()/float64(c.rounds)) * c.rounds
	for name, s := range map[string]side{"webhook": rep.webhook, "no-op": rep.noop} {
		if s.sent != want || s.errors != 0 || len(s.admission) != want || len(s.fromDue) != want || len(s.late) != want {
			t.Fatalf("%s: sent %d of %d, errors %d (%s), %d latencies", name, s.sent, want, s.errors, s.firstErr, len(s.admission))
		}
		for _, d := range [][]time.Duration{s.admission, s.fromDue} {
			if p50, p99, top := quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1); p50 <= 0 || p50 > p99 || p99 > top {
				t.Errorf("%s: percentiles out of order: %v %v %v", name, p50, p99, top)
			}
		}
		// Each request's latency from due time contains its admission latency.
		if quantile(s.fromDue, 0.5) < quantile(s.admission, 0.5) {
			t.Errorf("%s: p50 from due time %v under the admission p50 %v", name, quantile(s.fromDue, 0.5), quantile(s.admission, 0.5))
		}
		if s.server.AllocBytes == 0 || s.server.GOGC == 0 {
			t.Errorf("%s: server counters missing: %+v", name, s.server)
		}
	}
	if len(rep.floor) == 0 {
		t.Error("no timer floor")
	}
	var out bytes.Buffer
	rep.print(&out, c)
	for _, w := range []string{"webhook ÷ no-op:   p99 admission latency ", "no-op:\n", "errors 0"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}
}

// small is a short run's configuration: two rounds of 50 reviews each.
func small() config {
	return config{rate: 100, duration: time.Second, rounds: 2, maxP99Ratio: 1.5, maxCPURatio: 2}
}

// TestRunChild runs the default path: each server in a child process.
func TestRunChild(t *testing.T) {
	c := small()
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSmall(t, c, rep)
	if rep.webhook.pid == 0 || rep.webhook.pid == os.Getpid() || rep.noop.pid == 0 || rep.noop.pid == rep.webhook.pid {
		t.Errorf("server pids %d and %d: not two children", rep.webhook.pid, rep.noop.pid)
	}
	// The two servers' processes account for their own rounds only: the
	// webhook plans, the no-op does not, so the webhook allocates more per
	// review (the warm-up is outside the rounds).
	if rep.webhook.server.AllocBytes <= rep.noop.server.AllocBytes {
		t.Errorf("webhook allocated %d bytes, no-op %d: want the webhook's more", rep.webhook.server.AllocBytes, rep.noop.server.AllocBytes)
	}
}

func TestRunInProcess(t *testing.T) {
	c := small()
	c.duration, c.inProcess = 400*time.Millisecond, true
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSmall(t, c, rep)
	if rep.webhook.pid != 0 || rep.noop.pid != 0 {
		t.Errorf("server pids %d %d in process", rep.webhook.pid, rep.noop.pid)
	}
}

// TestChildDiesWithGenerator kills a generator with SIGKILL, which runs no
// cleanup, and expects its server child to exit by itself: the kernel
// closes the child's stdin.
func TestChildDiesWithGenerator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the child's state from /proc")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(self)
	gen.Env = append(os.Environ(), generatorEnv+"=1")
	gen.Stderr = os.Stderr
	out, err := gen.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		_ = gen.Process.Kill()
		_ = gen.Wait()
		t.Fatalf("no child pid from the generator: %v", err)
	}
	_ = gen.Process.Kill()
	_ = gen.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
			t.Fatalf("server child %d still runs 10 s after its generator died", pid)
		}
	}
}

// alive reports whether a process runs: it exists and is not a zombie
// waiting for init to reap it.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func TestVerdict(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	// A side with its p99 admission latency, p99 from due time and CPU
	// per review (over two reviews).
	sd := func(p99, due, cpu int) side {
		return side{admission: ms(1, p99), fromDue: ms(1, due), server: runtimeStats{CPU: 2 * time.Duration(cpu) * time.Microsecond},
			rounds: []roundP99{{ms(p99)[0], ms(due)[0]}}}
	}
	noop := sd(2, 3, 100)
	c := config{maxP99Ratio: 1.5, maxCPURatio: 2}
	for _, tc := range []struct {
		name string
		r    report
		ok   bool
	}{
		// 3 ms ÷ 2 ms = 1.5, 4 ÷ 3 = 1.33, 200 µs ÷ 100 µs = 2: within the targets.
		{"within the targets", report{webhook: sd(3, 4, 200), noop: noop}, true},
		{"errors", report{webhook: side{errors: 1, admission: ms(1), fromDue: ms(1)}, noop: noop}, false},
		{"no-op errors", report{webhook: sd(2, 3, 100), noop: side{errors: 1, admission: ms(1), fromDue: ms(1)}}, false},
		{"nothing answered", report{noop: noop}, false},
		// 4 ms ÷ 2 ms = 2.
		{"slow webhook", report{webhook: sd(4, 4, 100), noop: noop}, false},
		// Each request is quick once sent, but they waited behind a
		// stall: 9 ms ÷ 3 ms from due time.
		{"stalled", report{webhook: sd(2, 9, 100), noop: noop}, false},
		// 250 µs ÷ 100 µs = 2.5.
		{"costly", report{webhook: sd(2, 3, 250), noop: noop}, false},
		// No CPU time on this platform: the CPU rule does not apply.
		{"no CPU figures", report{webhook: sd(2, 3, 0), noop: sd(2, 3, 0)}, true},
		// Three pairs of rounds; a stall in the webhook's second round
		// (40 ms ÷ 2 ms) moves one pair's ratio, not the median of 1, 20
		// and 1.
		{"one stalled round", report{
			webhook: side{admission: ms(1, 2, 40, 2), fromDue: ms(1, 3, 40, 3), rounds: []roundP99{{ms(2)[0], ms(3)[0]}, {ms(40)[0], ms(40)[0]}, {ms(2)[0], ms(3)[0]}}},
			noop:    side{admission: ms(1, 2, 2, 2), fromDue: ms(1, 3, 3, 3), rounds: []roundP99{{ms(2)[0], ms(3)[0]}, {ms(2)[0], ms(3)[0]}, {ms(2)[0], ms(3)[0]}}},
		}, true},
		// Slow in every round: 3 of 3 pairs at 2.
		{"slow in every round", report{
			webhook: side{admission: ms(1, 4), fromDue: ms(1, 6), rounds: []roundP99{{ms(4)[0], ms(6)[0]}, {ms(4)[0], ms(6)[0]}, {ms(4)[0], ms(6)[0]}}},
			noop:    side{admission: ms(1, 2), fromDue: ms(1, 3), rounds: []roundP99{{ms(2)[0], ms(3)[0]}, {ms(2)[0], ms(3)[0]}, {ms(2)[0], ms(3)[0]}}},
		}, false},
	} {
		if ok, why := tc.r.verdict(c); ok != tc.ok {
			t.Errorf("%s: verdict %v (%v), want %v", tc.name, ok, why, tc.ok)
		}
	}
}

func TestRunBounds(t *testing.T) {
	for _, c := range []config{
		{rate: 0, duration: time.Second, rounds: 1},
		{rate: maxRate + 1, duration: time.Second, rounds: 1},
		{rate: 10, duration: 0, rounds: 1},
		{rate: 10, duration: maxDuration + time.Second, rounds: 1},
		{rate: 10, duration: time.Second, rounds: 0},
		{rate: 10, duration: time.Second, rounds: maxRounds + 1},
		// 10 requests in 20 rounds: none a round.
		{rate: 10, duration: time.Second, rounds: 20},
	} {
		if _, err := run(context.Background(), c); err == nil {
			t.Errorf("run(%+v) accepted", c)
		}
	}
}

// TestPacer checks that the pacer keeps the schedule: it never wakes
// early, and the whole schedule takes as long as it should.
func TestPacer(t *testing.T) {
	p, release := newPacer()
	defer release()
	for i := 1; i <= 20; i++ {
		at := offset(i, 1000)
		p.sleepUntil(at)
		if early := time.Until(p.start.Add(at)); early > 0 {
			t.Fatalf("woke %v early", early)
		}
	}
	if took := time.Since(p.start); took < 20*time.Millisecond {
		t.Errorf("20 ms of schedule took %v", took)
	}
}

func TestQuantile(t *testing.T) {
	// Nearest rank over 1..100 ms: p50 is the 50th value, p99 the 99th.
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if quantile(d, 0.5) != 50*time.Millisecond || quantile(d, 0.99) != 99*time.Millisecond || quantile(d, 1) != 100*time.Millisecond {
		t.Errorf("quantiles %v %v %v", quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1))
	}
	if quantile(nil, 0.99) != 0 {
		t.Error("quantile of nothing")
	}
}
