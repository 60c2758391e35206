package telemetry

import (
	"math"
	"testing"
	"time"
)

func ttftHist(counts ...float64) Histogram {
	// Bounds 0.1, 1, +Inf; counts cumulative.
	return Histogram{Count: counts[2], Buckets: []Bucket{{0.1, counts[0]}, {1, counts[1]}, {math.Inf(1), counts[2]}}}
}

func TestWindow(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	w := Window{Span: time.Minute}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

	if d := w.Add(at(0), VLLMSample{PreemptionsTotal: 100, TTFT: ttftHist(10, 20, 20)}); d.Seconds != 0 {
		t.Fatalf("first reading has a span: %+v", d)
	}
	// 30 s later, 5 more preemptions: 5 / 30 s = 10 a minute.
	d := w.Add(at(30), VLLMSample{PreemptionsTotal: 105, TTFT: ttftHist(10, 25, 30)})
	if d.Seconds != 30 || d.Preemptions != 5 || d.PreemptionsPerMinute != 10 || d.NewPreemptions != 5 {
		t.Errorf("at 30s: %+v", d)
	}
	if d.TTFT.Count != 10 || d.TTFT.Buckets[1].Count != 5 {
		t.Errorf("TTFT window %+v", d.TTFT)
	}
	// At 60 s the baseline is still t0 (exactly one span back): 9 in 60 s.
	d = w.Add(at(60), VLLMSample{PreemptionsTotal: 109, TTFT: ttftHist(10, 25, 30)})
	if d.Seconds != 60 || d.Preemptions != 9 || d.PreemptionsPerMinute != 9 || d.NewPreemptions != 4 {
		t.Errorf("at 60s: %+v", d)
	}
	// At 95 s the reading at 30 s is the newest one at or before 35 s:
	// 109-105 = 4 preemptions in 65 s.
	d = w.Add(at(95), VLLMSample{PreemptionsTotal: 109, TTFT: ttftHist(10, 25, 30)})
	if d.Seconds != 65 || d.Preemptions != 4 || d.NewPreemptions != 0 || !near(d.PreemptionsPerMinute, 4.0/65*60) {
		t.Errorf("at 95s: %+v", d)
	}
	// The server restarted: counters fell, so the window starts over.
	d = w.Add(at(100), VLLMSample{PreemptionsTotal: 0})
	if d.Seconds != 0 || d.PreemptionsPerMinute != 0 {
		t.Errorf("after restart: %+v", d)
	}
	d = w.Add(at(110), VLLMSample{PreemptionsTotal: 1})
	if d.Seconds != 10 || d.PreemptionsPerMinute != 6 {
		t.Errorf("10 s after restart: %+v", d)
	}
}
