package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the benchmark briefly: every review must get the answer
// its case expects (a denial, a patch, ...), and the report must account
// for every request. Latency is not asserted here: the machine is shared.
func TestRunSmall(t *testing.T) {
	c := config{rate: 200, duration: 500 * time.Millisecond, p99: time.Second}
	rep, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// 200/s for 0.5 s = 100 requests.
	if rep.sent != 100 || rep.errors != 0 || len(rep.latencies) != 100 || len(rep.service) != 100 {
		t.Fatalf("sent %d, errors %d (%s), %d latencies", rep.sent, rep.errors, rep.firstErr, len(rep.latencies))
	}
	if rep.p(0.5) <= 0 || rep.p(0.5) > rep.p(0.99) || rep.p(0.99) > quantile(rep.latencies, 1) {
		t.Errorf("percentiles out of order: %v %v %v", rep.p(0.5), rep.p(0.99), quantile(rep.latencies, 1))
	}
	var out bytes.Buffer
	rep.print(&out, c)
	if !strings.Contains(out.String(), "PASS: p99") || !strings.Contains(out.String(), "errors 0") {
		t.Errorf("report:\n%s", out.String())
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
