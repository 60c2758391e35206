package sim

import (
	"context"
	"errors"
	"io"
	"math"
	"sort"

	"headroom.dev/headroom/traffic"
)

// Source yields requests in arrival order; io.EOF ends it.
type Source interface {
	Next() (Request, error)
}

// RunOptions steer Run.
type RunOptions struct {
	// Window is the series' window in simulated seconds (default 10). When
	// the series would pass MaxWindows (default 720), neighbouring windows
	// merge and the window doubles, so memory stays bounded.
	Window     float64
	MaxWindows int
	// OnFinish, when not nil, sees every finished request (the trace).
	OnFinish func(Event)
	// OnReject, when not nil, sees every rejected request.
	OnReject func(*Rejection)
}

// Latency is a distribution of latencies in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Window is one window of the time series.
type Window struct {
	StartS float64 `json:"start_s"`
	// KVUsage is the largest KV-cache usage at a step end in the window.
	KVUsage     float64 `json:"kv_usage"`
	Running     int     `json:"running"`
	Waiting     int     `json:"waiting"`
	Preemptions int64   `json:"preemptions"`
	Finished    int64   `json:"finished"`
}

// Report is the outcome of a run.
type Report struct {
	// Requests counts finished requests; Rejected those the engine
	// refused, by reason in RejectedBy.
	Requests   int64            `json:"requests"`
	Rejected   int64            `json:"rejected"`
	RejectedBy map[string]int64 `json:"rejected_by,omitempty"`
	// DurationS is simulated time from 0 to the last step's end.
	DurationS   float64 `json:"duration_s"`
	Steps       int64   `json:"steps"`
	Preemptions int64   `json:"preemptions"`
	// PreemptedRequests counts finished requests preempted at least once.
	PreemptedRequests int64    `json:"preempted_requests"`
	TTFT              Latency  `json:"ttft_ms"`
	TPOT              Latency  `json:"tpot_ms"`
	E2E               Latency  `json:"e2e_ms"`
	MaxKVUsage        float64  `json:"max_kv_usage"`
	MaxRunning        int      `json:"max_running"`
	MaxWaiting        int      `json:"max_waiting"`
	RequestsPerS      float64  `json:"requests_per_s"`
	OutputTokensPerS  float64  `json:"output_tokens_per_s"`
	PrefixHitRate     float64  `json:"prefix_cache_hit_rate"`
	WindowS           float64  `json:"window_s"`
	Series            []Window `json:"series"`
}

// stats accumulates a run in bounded memory: latencies in microsecond
// histograms (traffic.Histogram: within 0.4%), the series in at most
// maxWindows windows.
type stats struct {
	ttft, tpot, e2e traffic.Histogram
	rep             Report
	maxWindows      int
	outTokens       int64
}

func newStats(opt RunOptions) *stats {
	s := &stats{maxWindows: opt.MaxWindows}
	s.rep.WindowS = opt.Window
	if s.rep.WindowS <= 0 {
		s.rep.WindowS = 10
	}
	if s.maxWindows <= 0 {
		s.maxWindows = 720
	}
	s.rep.RejectedBy = map[string]int64{}
	return s
}

func micros(sec float64) int64 { return int64(math.Round(sec * 1e6)) }

func (s *stats) finish(ev Event) {
	s.rep.Requests++
	s.outTokens += int64(ev.Output)
	if ev.Preemptions > 0 {
		s.rep.PreemptedRequests++
	}
	s.ttft.Add(micros(ev.FirstToken - ev.Arrival))
	s.e2e.Add(micros(ev.Finish - ev.Arrival))
	// TPOT as vllm bench serve defines it: (e2e − ttft) / (output − 1),
	// for requests of more than one output token.
	if ev.Output > 1 {
		s.tpot.Add(micros((ev.Finish - ev.FirstToken) / float64(ev.Output-1)))
	}
}

// window returns the series entry for time t, merging windows when the
// series grows past its bound.
func (s *stats) window(t float64) *Window {
	i := int(t / s.rep.WindowS)
	for i >= s.maxWindows {
		s.merge()
		i = int(t / s.rep.WindowS)
	}
	for len(s.rep.Series) <= i {
		s.rep.Series = append(s.rep.Series, Window{StartS: float64(len(s.rep.Series)) * s.rep.WindowS})
	}
	return &s.rep.Series[i]
}

func (s *stats) merge() {
	old := s.rep.Series
	s.rep.WindowS *= 2
	merged := old[:0:0]
	for i := 0; i < len(old); i += 2 {
		w := old[i]
		w.StartS = float64(i/2) * s.rep.WindowS
		if i+1 < len(old) {
			o := old[i+1]
			w.KVUsage = max(w.KVUsage, o.KVUsage)
			w.Running = max(w.Running, o.Running)
			w.Waiting = max(w.Waiting, o.Waiting)
			w.Preemptions += o.Preemptions
			w.Finished += o.Finished
		}
		merged = append(merged, w)
	}
	s.rep.Series = merged
}

func (s *stats) step(res *StepResult, g Gauges) {
	s.rep.Steps++
	w := s.window(res.Start)
	w.KVUsage = max(w.KVUsage, g.KVUsage)
	w.Running = max(w.Running, g.Running)
	w.Waiting = max(w.Waiting, g.Waiting)
	w.Preemptions += int64(res.Preempted)
	for i := range res.Events {
		if res.Events[i].Done {
			w.Finished++
		}
	}
	s.rep.MaxKVUsage = max(s.rep.MaxKVUsage, g.KVUsage)
	s.rep.MaxRunning = max(s.rep.MaxRunning, g.Running)
	s.rep.MaxWaiting = max(s.rep.MaxWaiting, g.Waiting)
}

func latency(h *traffic.Histogram) Latency {
	if h.Count() == 0 {
		return Latency{}
	}
	ms := func(v int64) float64 { return math.Round(float64(v)/10) / 100 }
	return Latency{
		Mean: math.Round(h.Mean()/10) / 100,
		P50:  ms(h.Quantile(0.50)),
		P90:  ms(h.Quantile(0.90)),
		P99:  ms(h.Quantile(0.99)),
		Max:  ms(h.Max()),
	}
}

// Run feeds src to e and steps it until both are exhausted. It stops with
// the first error of src, an arrival out of order, or ctx's end (checked
// every 1024 steps). Memory is bounded whatever the number of requests:
// requests are read as they arrive and forgotten when they finish.
func Run(ctx context.Context, e *Engine, src Source, opt RunOptions) (*Report, error) {
	st := newStats(opt)
	next, err := src.Next()
	have := err == nil
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	for {
		for have {
			if t, queued := e.NextEventTime(); queued && next.Arrival > t {
				break
			}
			if _, err := e.Add(next); err != nil {
				var rej *Rejection
				if !errors.As(err, &rej) {
					return nil, err
				}
				st.rep.RejectedBy[rej.Reason]++
				if opt.OnReject != nil {
					opt.OnReject(rej)
				}
			}
			if next, err = src.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					return nil, err
				}
				have = false
			}
		}
		res := e.Step()
		if res.Idle {
			if !have {
				break
			}
			continue
		}
		g := e.Gauges()
		st.step(&res, g)
		for _, ev := range res.Events {
			if ev.Done {
				st.finish(ev)
				if opt.OnFinish != nil {
					opt.OnFinish(ev)
				}
			}
		}
		if st.rep.Steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return st.report(e), nil
}

func (s *stats) report(e *Engine) *Report {
	r := s.rep
	g := e.Gauges()
	r.DurationS = math.Round(e.Now()*1e6) / 1e6
	r.Preemptions = g.Preemptions
	r.Rejected = g.Rejected
	if len(r.RejectedBy) == 0 {
		r.RejectedBy = nil
	}
	r.TTFT, r.TPOT, r.E2E = latency(&s.ttft), latency(&s.tpot), latency(&s.e2e)
	if r.DurationS > 0 {
		r.RequestsPerS = math.Round(float64(r.Requests)/r.DurationS*1000) / 1000
		r.OutputTokensPerS = math.Round(float64(s.outTokens)/r.DurationS*10) / 10
	}
	if g.PrefixQueries > 0 {
		r.PrefixHitRate = math.Round(float64(g.PrefixHits)/float64(g.PrefixQueries)*1e4) / 1e4
	}
	r.MaxKVUsage = math.Round(r.MaxKVUsage*1e4) / 1e4
	for i := range r.Series {
		r.Series[i].KVUsage = math.Round(r.Series[i].KVUsage*1e4) / 1e4
	}
	return &r
}

// SortedReasons returns the rejection reasons of r in a stable order.
func (r *Report) SortedReasons() []string {
	out := make([]string, 0, len(r.RejectedBy))
	for k := range r.RejectedBy {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
