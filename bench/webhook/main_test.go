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
		srv, err := startChild("", false)
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
// expects (a denial, a patch, ...), the report accounts for every request,
// and the percentiles are in order. Latency is not asserted: the machine is
// shared.
func checkSmall(t *testing.T, c config, rep report) {
	t.Helper()
	want := int(float64(c.rate) * c.duration.Seconds())
	if rep.sent != want || rep.errors != 0 || len(rep.admission) != want || len(rep.fromDue) != want || len(rep.late) != want {
		t.Fatalf("sent %d of %d, errors %d (%s), %d latencies", rep.sent, want, rep.errors, rep.firstErr, len(rep.admission))
	}
	if len(rep.floor) == 0 {
		t.Error("no timer floor")
	}
	for _, d := range [][]time.Duration{rep.admission, rep.fromDue} {
		if p50, p99, top := quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1); p50 <= 0 || p50 > p99 || p99 > top {
			t.Errorf("percentiles out of order: %v %v %v", p50, p99, top)
		}
	}
	// Each request's latency from due time contains its admission latency.
	if quantile(rep.fromDue, 0.5) < quantile(rep.admission, 0.5) {
		t.Errorf("p50 from due time %v under the admission p50 %v", quantile(rep.fromDue, 0.5), quantile(rep.admission, 0.5))
	}
	if rep.server.AllocBytes == 0 || rep.server.GOGC == 0 {
		t.Errorf("server counters missing: %+v", rep.server)
	}
	var out bytes.Buffer
	rep.print(&out, c)
	if !strings.Contains(out.String(), "PASS: admission latency p99") || !strings.Contains(out.String(), "errors 0") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestRunChild runs the default path: the server in a child process.
func TestRunChild(t *testing.T) {
	c := config{rate: 100, duration: time.Second, p99: time.Second}
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSmall(t, c, rep)
	if rep.serverPID == 0 || rep.serverPID == os.Getpid() {
		t.Errorf("server pid %d: not a child", rep.serverPID)
	}
}

func TestRunInProcess(t *testing.T) {
	c := config{rate: 100, duration: 300 * time.Millisecond, p99: time.Second, inProcess: true}
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSmall(t, c, rep)
	if rep.serverPID != 0 {
		t.Errorf("server pid %d in process", rep.serverPID)
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
	c := config{p99: 5 * time.Millisecond}
	for _, tc := range []struct {
		name string
		r    report
		ok   bool
	}{
		{"fast", report{admission: ms(1, 2, 3), fromDue: ms(2, 3, 4), floor: ms(1)}, true},
		{"errors", report{errors: 1, admission: ms(1), fromDue: ms(1), floor: ms(1)}, false},
		{"nothing answered", report{}, false},
		{"slow server", report{admission: ms(1, 6), fromDue: ms(1, 6), floor: ms(2)}, false},
		// 7 ms from due time is within 5 ms plus a 2 ms timer floor.
		{"late sender within the floor", report{admission: ms(1, 4), fromDue: ms(2, 7), floor: ms(2)}, true},
		// Each request is quick once sent, but they waited behind a stall.
		{"stalled", report{admission: ms(1, 2), fromDue: ms(1, 20), floor: ms(2)}, false},
	} {
		if ok, why := tc.r.verdict(c); ok != tc.ok {
			t.Errorf("%s: verdict %v (%v), want %v", tc.name, ok, why, tc.ok)
		}
	}
}

func TestRunBounds(t *testing.T) {
	for _, c := range []config{
		{rate: 0, duration: time.Second},
		{rate: maxRate + 1, duration: time.Second},
		{rate: 10, duration: 0},
		{rate: 10, duration: maxDuration + time.Second},
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
