package telemetry

import (
	"time"

	"headroom.dev/headroom/vllm"
)

// DefaultWindow is the span rates and windowed percentiles are taken over.
// A minute smooths single bursts yet reacts within one HPA sync period.
const DefaultWindow = time.Minute

// Window keeps recent readings of one vLLM server so counters (preemptions)
// and the TTFT histogram become rates and percentiles over the last Span.
// It is not safe for concurrent use.
type Window struct {
	Span time.Duration
	pts  []timedSample
}

type timedSample struct {
	t time.Time
	s VLLMSample
}

// Delta is what happened between the window's oldest reading and the newest.
type Delta struct {
	// Seconds is the time covered; 0 on the first reading or right after
	// the server restarted (its counters began again).
	Seconds float64
	// Preemptions are the preemptions in the span; PreemptionsPerMinute
	// their rate.
	Preemptions          float64
	PreemptionsPerMinute float64
	// NewPreemptions are those since the previous reading alone.
	NewPreemptions float64
	// TTFT holds the first-token latencies observed in the span.
	TTFT Histogram
	// SpecDecode is the speculative-decoding counters' increase in the
	// span; nil when the server exports none.
	SpecDecode *vllm.SpecDecodeCounts
}

// Add records a reading taken at t and returns the delta over the window.
func (w *Window) Add(t time.Time, s VLLMSample) Delta {
	span := w.Span
	if span <= 0 {
		span = DefaultWindow
	}
	if n := len(w.pts); n > 0 {
		last := w.pts[n-1]
		if restarted(last.s, s) || !t.After(last.t) {
			w.pts = w.pts[:0]
		}
	}
	var prev *timedSample
	if n := len(w.pts); n > 0 {
		p := w.pts[n-1]
		prev = &p
	}
	w.pts = append(w.pts, timedSample{t, s})
	// Keep one reading at or before the window's start as the baseline.
	for len(w.pts) > 2 && !w.pts[1].t.After(t.Add(-span)) {
		w.pts = w.pts[1:]
	}
	if len(w.pts) < 2 {
		return Delta{}
	}
	base := w.pts[0]
	d := Delta{Seconds: t.Sub(base.t).Seconds()}
	d.Preemptions = s.PreemptionsTotal - base.s.PreemptionsTotal
	d.PreemptionsPerMinute = d.Preemptions / d.Seconds * 60
	if prev != nil {
		d.NewPreemptions = s.PreemptionsTotal - prev.s.PreemptionsTotal
	}
	d.TTFT = s.TTFT.Sub(base.s.TTFT)
	if s.SpecDecode != nil && base.s.SpecDecode != nil {
		c := s.SpecDecode.Since(*base.s.SpecDecode)
		d.SpecDecode = &c
	}
	return d
}

// restarted is true when the server started again: its process start time
// changed, or a counter went down.
func restarted(prev, cur VLLMSample) bool {
	if prev.ProcessStartTimeSeconds > 0 && cur.ProcessStartTimeSeconds > 0 && prev.ProcessStartTimeSeconds != cur.ProcessStartTimeSeconds {
		return true
	}
	return cur.PreemptionsTotal < prev.PreemptionsTotal || cur.TTFT.Count < prev.TTFT.Count ||
		cur.PromptTokens < prev.PromptTokens || cur.GenerationTokens < prev.GenerationTokens
}
