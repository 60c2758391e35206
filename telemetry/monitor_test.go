package telemetry

import (
	"strings"
	"testing"
	"time"
)

func codes(as []Alert) string {
	var s []string
	for _, a := range as {
		s = append(s, a.Code)
	}
	return strings.Join(s, ",")
}

func TestMonitorKVPressure(t *testing.T) {
	m := NewMonitor(AlertRules{}, 0) // threshold 0.9 for 3 readings
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		kv      float64
		waiting float64
		want    string
	}{
		{0.95, 2, ""},
		{0.93, 3, ""},
		{0.97, 1, "kv_pressure"}, // third in a row
		{0.99, 4, ""},            // same episode: not repeated
		{0.95, 0, ""},            // nothing waits: the episode ends
		{0.95, 1, ""},
		{0.91, 1, ""},
		{0.92, 2, "kv_pressure"}, // a new episode
		{0.85, 2, ""},
	}
	for i, s := range steps {
		v := &VLLMSample{KVCacheUsage: s.kv, RequestsWaiting: s.waiting, RequestsRunning: 10}
		_, alerts := m.Observe(t0.Add(time.Duration(i)*2*time.Second), v, nil)
		if got := codes(alerts); got != s.want {
			t.Errorf("reading %d: alerts %q, want %q", i, got, s.want)
		}
		if len(alerts) == 1 && (alerts[0].Threshold != 0.9 || alerts[0].Value != s.kv || !strings.Contains(alerts[0].Message, "waiting")) {
			t.Errorf("alert %+v", alerts[0])
		}
	}
}

func TestMonitorPreemptionsAndTTFT(t *testing.T) {
	m := NewMonitor(AlertRules{KVThreshold: 0.99, KVReadings: 1}, time.Minute)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r, alerts := m.Observe(t0, &VLLMSample{PreemptionsTotal: 10, TTFT: ttftHist(50, 90, 100), TTFTP99Seconds: 1}, nil)
	// The first reading has no window: the p99 is the server's lifetime one.
	if len(alerts) != 0 || !r.TTFTKnown || r.TTFTP99Seconds != 1 || r.TTFTWindowSeconds != 0 {
		t.Fatalf("first: %+v %v", r, alerts)
	}
	// 20 s later: 3 new preemptions (9 a minute). 10 new first tokens, all
	// in (0.1, 1]: window p99 = 0.1 + 0.9*(9.9-0)/10 = 0.991.
	r, alerts = m.Observe(t0.Add(20*time.Second), &VLLMSample{PreemptionsTotal: 13, TTFT: ttftHist(50, 100, 110)}, nil)
	if codes(alerts) != "preemptions" || !near(r.Delta.PreemptionsPerMinute, 9) {
		t.Fatalf("second: %+v %v", r.Delta, alerts)
	}
	if !r.TTFTKnown || r.TTFTWindowSeconds != 20 || !near(r.TTFTP99Seconds, 0.991) {
		t.Errorf("window p99 %v over %v s", r.TTFTP99Seconds, r.TTFTWindowSeconds)
	}
	// Risk: K 0, P 9/10: 0.9.
	if !near(r.OOMRisk, 0.9) {
		t.Errorf("risk %v", r.OOMRisk)
	}
	// Still rising: same episode. Then flat: re-armed. Then rising: alert.
	for i, want := range []string{"", "", "preemptions"} {
		total := []float64{15, 15, 16}[i]
		_, alerts = m.Observe(t0.Add(time.Duration(40+20*i)*time.Second), &VLLMSample{PreemptionsTotal: total, TTFT: ttftHist(50, 100, 110)}, nil)
		if codes(alerts) != want {
			t.Errorf("step %d: %q, want %q", i, codes(alerts), want)
		}
	}
	// A failed scrape breaks nothing and raises nothing.
	r, alerts = m.Observe(t0.Add(2*time.Minute), nil, nil)
	if len(alerts) != 0 || r.OOMRisk != 0 || r.TTFTKnown {
		t.Errorf("no sample: %+v %v", r, alerts)
	}
}

func TestMonitorGPUHeadroom(t *testing.T) {
	m := NewMonitor(AlertRules{RequiredFreeBytes: 4 << 30, RequiredFreeWhy: "the plan leaves 4.00 GiB"}, 0)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	gpus := func(free0, free1 int64) []GPU {
		return []GPU{{Index: 0, FreeBytes: free0}, {Index: 1, FreeBytes: free1}}
	}
	r, alerts := m.Observe(t0, nil, gpus(6<<30, 5<<30))
	if len(alerts) != 0 || r.MinFreeBytes != 5<<30 {
		t.Fatalf("%+v %v", r, alerts)
	}
	_, alerts = m.Observe(t0.Add(time.Second), nil, gpus(6<<30, 3<<30))
	if codes(alerts) != "gpu_headroom" || *alerts[0].GPU != 1 || !strings.Contains(alerts[0].Message, "3.00 GiB free") ||
		!strings.Contains(alerts[0].Message, "the plan leaves 4.00 GiB") {
		t.Fatalf("%+v", alerts)
	}
	// GPU 0 drops too: its own alert; GPU 1 is still low: not repeated.
	_, alerts = m.Observe(t0.Add(2*time.Second), nil, gpus(1<<30, 3<<30))
	if codes(alerts) != "gpu_headroom" || *alerts[0].GPU != 0 {
		t.Fatalf("%+v", alerts)
	}
	// Unknown free memory raises nothing.
	_, alerts = m.Observe(t0.Add(3*time.Second), nil, gpus(Unknown, Unknown))
	if len(alerts) != 0 {
		t.Fatalf("%+v", alerts)
	}
}

// TestFormatCount: vLLM exports counts as floats; whole ones print as
// integers, others (a sum of rates) to one decimal.
func TestFormatCount(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 48: "48", -3: "-3", 1234567: "1234567", 12.34: "12.3", 1e15: "1000000000000000.0"} {
		if got := FormatCount(v); got != want {
			t.Errorf("FormatCount(%v) = %q, want %q", v, got, want)
		}
	}
}
