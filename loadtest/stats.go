package loadtest

import (
	"math"
	"sort"
	"sync"
	"time"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/workload"
)

// Stats collects outcomes in bounded memory: latencies go into
// traffic.Histogram (log-linear buckets) in microseconds, so a quantile is
// within 0.4% of the exact order statistic, and the table stays 34 KiB
// each whatever the number of requests. Quantiles are by nearest rank;
// vllm bench serve interpolates (numpy's default), which differs by less
// than one sample's gap. It is safe for concurrent use.
type Stats struct {
	mu                        sync.Mutex
	slos                      []slo.Bound
	ttft, tpot, itl, e2e, lag traffic.Histogram
	promptTok, outputTok      traffic.Histogram
	requested                 traffic.Histogram
	sent, done, failed, good  int64
	errors                    map[string]int64
	errText                   map[string]string
	firstSent, lastSent       time.Duration
	lastDone                  time.Duration
	noUsage                   int64
	// promptDone sums the prompt tokens asked for of the requests that
	// succeeded (vllm bench serve's "Total input tokens").
	promptDone int64
	// goodput, when set, judges a good request by vllm bench serve's
	// --goodput targets instead of the per-request SLO bounds;
	// percentiles are the extra percentiles each Latency gives.
	goodput     workload.Goodput
	percentiles []float64
}

// NewStats returns empty stats that count goodput under slos.
func NewStats(slos []slo.Bound) *Stats {
	return &Stats{slos: slos, errors: map[string]int64{}, errText: map[string]string{}}
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// Sent counts a request as sent at sent (from the run's start).
func (s *Stats) Sent(o *Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == 0 || o.Sent < s.firstSent {
		s.firstSent = o.Sent
	}
	s.lastSent = max(s.lastSent, o.Sent)
	s.sent++
	s.lag.Add(micros(max(o.Sent-o.Due, 0)))
	s.requested.Add(o.Prompt)
}

// Add counts a finished request; end is its end from the run's start.
func (s *Stats) Add(o *Outcome, end time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastDone = max(s.lastDone, end)
	if o.Err != "" {
		s.failed++
		s.errors[o.Err]++
		if _, ok := s.errText[o.Err]; !ok {
			s.errText[o.Err] = o.ErrText
		}
		return
	}
	s.done++
	s.promptDone += o.Prompt
	s.ttft.Add(micros(o.TTFT))
	s.e2e.Add(micros(o.E2E))
	for _, g := range o.ITL {
		s.itl.Add(micros(g))
	}
	if t, ok := o.TPOT(); ok {
		s.tpot.Add(micros(t))
	}
	if o.Usage != nil {
		s.promptTok.Add(o.Usage.PromptTokens)
	} else {
		s.noUsage++
	}
	s.outputTok.Add(o.OutputTokens())
	if len(s.goodput) > 0 {
		tpot, _ := o.TPOT()
		if s.goodput.Meets(msOf(o.TTFT), msOf(tpot), msOf(o.E2E)) {
			s.good++
		}
	} else if meets(s.slos, o) {
		s.good++
	}
}

// Progress is a live view of a run.
type Progress struct {
	Elapsed            time.Duration
	Sent, Done, Failed int64
	TTFTP50            time.Duration
	HaveTTFT           bool
	// ITLCount and ITLSum are the gaps between content chunks so far, for
	// the mean ITL of each reading's interval.
	ITLCount int64
	ITLSum   time.Duration
}

func (s *Stats) progress() Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Progress{Sent: s.sent, Done: s.done, Failed: s.failed, ITLCount: s.itl.Count(),
		ITLSum: time.Duration(s.itl.Sum()) * time.Microsecond}
	if s.ttft.Count() > 0 {
		p.TTFTP50, p.HaveTTFT = time.Duration(s.ttft.Quantile(0.5))*time.Microsecond, true
	}
	return p
}

// Latency is one latency's distribution in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	// Percentiles are those Config.Percentiles asked for.
	Percentiles []sim.Percentile `json:"percentiles,omitempty"`
}

func ms(us float64) float64 { return math.Round(us) / 1000 }

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latency(h *traffic.Histogram, percentiles []float64) Latency {
	if h.Count() == 0 {
		return Latency{}
	}
	q := func(p float64) float64 { return ms(float64(h.Quantile(p))) }
	l := Latency{Count: h.Count(), Mean: ms(h.Mean()), P50: q(0.5), P90: q(0.9), P95: q(0.95), P99: q(0.99), Max: ms(float64(h.Max()))}
	for _, p := range percentiles {
		l.Percentiles = append(l.Percentiles, sim.Percentile{P: p, Value: q(p / 100)})
	}
	return l
}

// summarize fills the request part of r.
func (s *Stats) summarize(r *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Requests, r.Completed, r.Failed = s.sent, s.done, s.failed
	r.Errors = map[string]int64{}
	for k, v := range s.errors {
		r.Errors[k] = v
	}
	kinds := make([]string, 0, len(s.errText))
	for k := range s.errText {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		r.ErrorExamples = append(r.ErrorExamples, ErrorExample{Kind: k, Message: s.errText[k]})
	}
	p := s.percentiles
	r.TTFT, r.TPOT, r.ITL, r.E2E = latency(&s.ttft, p), latency(&s.tpot, p), latency(&s.itl, p), latency(&s.e2e, p)
	r.SendLag = latency(&s.lag, nil)
	r.Goodput = s.goodput
	r.PromptTokens = TokenStats{Requested: s.requested.Summary(), Served: s.promptTok.Summary()}
	r.OutputTokens = s.outputTok.Summary()
	r.TotalPromptTokens, r.TotalOutputTokens = s.promptDone, int64(s.outputTok.Sum())
	r.WithoutUsage = s.noUsage

	r.DurationS = round3(s.lastDone.Seconds())
	if s.lastSent > s.firstSent && s.sent > 1 {
		r.SendRate.Achieved = round3(float64(s.sent-1) / (s.lastSent - s.firstSent).Seconds())
	}
	if r.DurationS > 0 {
		d := r.DurationS
		out := float64(s.outputTok.Sum())
		r.Throughput = Throughput{
			RequestsPerS:     round3(float64(s.done) / d),
			OutputTokensPerS: round3(out / d),
			TotalTokensPerS:  round3((out + float64(s.promptTok.Sum())) / d),
			GoodputPerS:      round3(float64(s.good) / d),
		}
	}
	r.Good = s.good
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
