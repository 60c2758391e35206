package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
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
	// FrontEnd is the API server's CPU time; zero delivers every token at
	// the end of its step and hands every request to the engine when sent.
	FrontEnd FrontEnd
	// Concurrency, when > 0, is a closed loop: at most this many requests
	// in flight (sent, not yet answered in full), the next sent when one
	// finishes or at its own arrival time, whichever is later (vllm bench
	// serve --max-concurrency).
	Concurrency int
	// SendUntil, when > 0, sends no request after this time (a closed
	// loop's duration: its requests are all due at once).
	SendUntil float64
	// MaxBacklog bounds the requests in flight (sent, not yet answered or
	// refused). Past it the run stops and Report.FellBehind says so: the
	// answer is known, and memory stays bounded. 0 means
	// DefaultMaxBacklog(max-num-seqs).
	MaxBacklog int
	// Percentiles (0–100) are given too in every Latency's Percentiles,
	// for vllm bench serve's --metric-percentiles.
	Percentiles []float64
}

// MaxBacklogBound is the most requests DefaultMaxBacklog lets a run hold
// in flight, whatever --max-num-seqs says: about 350 bytes each (the
// request, its KV block list, the API server's job), 354 MiB of peak RSS
// measured at the bound.
const MaxBacklogBound = 1_000_000

// DefaultMaxBacklog is the requests in flight Run allows before it stops:
// 100 for every one vLLM can run at once (--max-num-seqs), at least
// 100,000 (any all-at-once benchmark of vllm bench serve fits) and at most
// MaxBacklogBound.
func DefaultMaxBacklog(maxNumSeqs int) int {
	return min(max(100*min(maxNumSeqs, MaxBacklogBound), 100_000), MaxBacklogBound)
}

// Horizon is the latest simulated time Run sends a request at: 100 years.
// The clock is float64 seconds, which resolve a microsecond up to about
// 140 years; past that, steps of milliseconds vanish into the rounding
// and every latency would read 0.
const Horizon = 100 * 365.25 * 24 * 3600

// Backlog says that requests arrive faster than the engine serves them:
// from SinceS to AtS, the second half of the time requests were sent, the
// queue never emptied and the requests in flight grew past the arrivals'
// own noise (flow.behind), ArrivalsPerS against ServedPerS. Or the run
// stopped at InFlightBound requests in flight (RunOptions.MaxBacklog).
type Backlog struct {
	// Waiting is the requests queued (in the API server and the engine's
	// waiting queue) at AtS.
	Waiting int     `json:"waiting"`
	AtS     float64 `json:"at_s"`
	SinceS  float64 `json:"since_s"`
	// ArrivalsPerS is the rate of requests sent from SinceS to AtS (0
	// when every request was due at once); ServedPerS the requests of
	// this traffic's mix the engines serve a second: the tokens they
	// computed then (prompts admitted, tokens sampled) over the tokens a
	// request sent then brings, since answers lag by a request's latency.
	ArrivalsPerS float64 `json:"arrivals_per_s"`
	ServedPerS   float64 `json:"served_per_s"`
	// Replicas is a first estimate of the replicas that would hold the
	// traffic: arrivals over served, times the ServingReplicas that served
	// them (a fleet's; absent for one server), rounded up (0 when none
	// was served).
	Replicas        int `json:"replicas_estimate,omitempty"`
	ServingReplicas int `json:"serving_replicas,omitempty"`
	// InFlight is the requests sent and not yet answered at AtS;
	// InFlightBound, when set, is the bound the run stopped at.
	InFlight      int `json:"in_flight"`
	InFlightBound int `json:"in_flight_bound,omitempty"`
}

// Say is the backlog in one line, for an engine called who ("one L40S",
// "a fleet of 4 replicas of one H100-80GB").
func (b *Backlog) Say(who string) string {
	var msg string
	switch {
	case b.ArrivalsPerS > 0 && b.ServedPerS == 0:
		msg = fmt.Sprintf("%s answers no request of this traffic by t=%.1f s, while %s req/s arrive; the queue grows without bound", who, b.AtS, rate(b.ArrivalsPerS))
	case b.ArrivalsPerS > 0:
		msg = fmt.Sprintf("%s serves about %s req/s of this traffic; %s arrive; the queue grows without bound", who, rate(b.ServedPerS), rate(b.ArrivalsPerS))
		if b.Replicas > max(b.ServingReplicas, 1) {
			msg += fmt.Sprintf(" (about %d replicas would hold it: %s, rounded up, a first estimate)", b.Replicas, b.division())
		}
	case b.ServedPerS > 0:
		msg = fmt.Sprintf("%s serves about %s req/s of this traffic, and the requests arrive at once", who, rate(b.ServedPerS))
	default:
		msg = fmt.Sprintf("the requests arrive at once, faster than %s answers any", who)
	}
	if b.InFlightBound > 0 {
		msg += fmt.Sprintf("; the run stopped at t=%.1f s with %d requests in flight, the simulator's bound of %d", b.AtS, b.InFlight, b.InFlightBound)
	} else {
		msg += fmt.Sprintf("; %d waiting at t=%.1f s", b.Waiting, b.AtS)
	}
	return msg
}

// division is the replicas estimate as the sum that gives it: the rates
// as the line says them, or with as many more digits as it takes for the
// sum shown to round up to Replicas ("1.63 ÷ 0.136" for 12, not "1.6 ÷
// 0.1", whose quotient is 16).
func (b *Backlog) division() string {
	n := max(b.ServingReplicas, 1)
	times := ""
	if n > 1 {
		times = fmt.Sprintf(" × %d", n)
	}
	a, s := rate(b.ArrivalsPerS), rate(b.ServedPerS)
	for digits := 3; digits <= 17; digits++ {
		av, _ := strconv.ParseFloat(a, 64)
		sv, _ := strconv.ParseFloat(s, 64)
		if sv > 0 && int(math.Ceil(av/sv*float64(n))) == b.Replicas {
			break
		}
		a, s = strconv.FormatFloat(b.ArrivalsPerS, 'g', digits, 64), strconv.FormatFloat(b.ServedPerS, 'g', digits, 64)
	}
	return a + " ÷ " + s + times
}

func (b *Backlog) String() string { return b.Say("the engine") }

// rate renders req/s with two significant digits at least: "4.9", "20",
// "0.013".
func rate(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.1f", v)
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.2g", v)
}

// Latency is a distribution of latencies in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	// Percentiles are those RunOptions.Percentiles asked for.
	Percentiles []Percentile `json:"percentiles,omitempty"`
}

// Percentile is one percentile (0–100) of a latency, in milliseconds.
type Percentile struct {
	P     float64 `json:"p"`
	Value float64 `json:"value"`
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
	// Arrivals (requests sent) and Replicas (the most that held GPUs) are
	// a fleet's (RunFleet).
	Arrivals int64 `json:"arrivals,omitempty"`
	Replicas int   `json:"replicas,omitempty"`
}

// Report is the outcome of a run. Latencies are what the client sees, as
// vllm bench serve measures them: TTFT from sending a request to its first
// token, TPOT (E2E − TTFT) / (output − 1) per request, ITL the gaps between
// a request's tokens, E2E from sending to the last token.
type Report struct {
	// Requests counts finished requests; Rejected those the engine
	// refused, by reason in RejectedBy.
	Requests   int64            `json:"requests"`
	Rejected   int64            `json:"rejected"`
	RejectedBy map[string]int64 `json:"rejected_by,omitempty"`
	// DurationS is simulated time from 0 to the last token delivered.
	DurationS   float64 `json:"duration_s"`
	Steps       int64   `json:"steps"`
	Preemptions int64   `json:"preemptions"`
	// PreemptedRequests counts finished requests preempted at least once.
	PreemptedRequests int64   `json:"preempted_requests"`
	TTFT              Latency `json:"ttft_ms"`
	TPOT              Latency `json:"tpot_ms"`
	ITL               Latency `json:"itl_ms"`
	E2E               Latency `json:"e2e_ms"`
	MaxKVUsage        float64 `json:"max_kv_usage"`
	// MaxRunning and MaxWaiting are the most requests running and
	// waiting at a step's end: a fleet's (and a data-parallel server's)
	// summed over its engines, its MaxKVUsage the busiest engine's.
	MaxRunning int `json:"max_running"`
	MaxWaiting int `json:"max_waiting"`
	// MaxEngineRunning is, for a fleet, the most one engine ran at once:
	// the batch its clock priced (0 for one engine: MaxRunning).
	MaxEngineRunning int      `json:"-"`
	RequestsPerS     float64  `json:"requests_per_s"`
	OutputTokensPerS float64  `json:"output_tokens_per_s"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	PrefixHitRate    float64  `json:"prefix_cache_hit_rate"`
	WindowS          float64  `json:"window_s"`
	Series           []Window `json:"series"`
	// FellBehind is set when arrivals outgrew what the engine served, or
	// the run stopped at the backlog bound.
	FellBehind *Backlog `json:"fell_behind,omitempty"`
	// BeyondHorizon counts requests due after Horizon, not sent.
	BeyondHorizon int64 `json:"beyond_horizon,omitempty"`
	// LatenciesPastRange counts the requests whose E2E passed 2^40 µs
	// (12.7 days), the latency histograms' range: their percentiles there
	// read 12.7 days; the maxima and means are exact.
	LatenciesPastRange int64 `json:"latencies_past_range,omitempty"`
	// StepSplit is where the engine's busy time went over the run's
	// steps, by the roofline's mechanisms (nil with a fixed step time).
	StepSplit *StepParts `json:"step_time_split,omitempty"`
	// SpecDecode is what vLLM's spec_decode counters would read after
	// the run, with speculative decoding (specReport).
	SpecDecode *vllm.SpecAcceptance `json:"spec_decode,omitempty"`
}

// stats accumulates a run in bounded memory: latencies in microsecond
// histograms (traffic.Histogram: within 0.4%), the series in at most
// maxWindows windows.
type stats struct {
	ttft, tpot, itl, e2e traffic.Histogram
	rep                  Report
	maxWindows           int
	percentiles          []float64
	// firstAt is the delivery time of the first token of each request in
	// flight that has one; lastOut the last delivery.
	firstAt map[uint64]float64
	lastOut float64
	anyOut  bool
	// chunks times the gaps with a stream interval (nil: every token).
	chunks *chunker
	// maxTTFT, maxTPOT and maxE2E are the exact maxima in seconds, the
	// sums the exact means' (seconds, TPOT over its requests), and
	// pastRange counts the latencies past the histograms' range, which
	// count them at its top.
	maxTTFT, maxTPOT, maxE2E float64
	sumTTFT, sumTPOT, sumE2E float64
	pastRange                int64
}

func newStats(opt RunOptions) *stats {
	s := &stats{maxWindows: opt.MaxWindows, firstAt: map[uint64]float64{}, percentiles: opt.Percentiles, chunks: newChunker(opt.FrontEnd.StreamInterval)}
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

// deliver counts a step's output as the client receives it at time at:
// first tokens start their TTFT, finished requests end, and every other
// request's chunk is one inter-token gap since the previous delivery (a
// running request gets a chunk every step, of several tokens when drafts
// were accepted, which vllm bench serve times as one gap; one skipped for
// a step, or preempted, is counted as if it had not been), or, with a
// stream interval, a chunk every few steps (chunker).
func (s *stats) deliver(d *delivery, at float64, done func(Event)) {
	n := d.outputs - d.firsts
	switch {
	case s.chunks != nil:
		finished := 0
		for i := range d.events {
			if d.events[i].Done && !d.events[i].First {
				finished++
			}
		}
		s.chunks.add(&s.itl, d, n, finished, at)
	case n > 0 && s.anyOut:
		s.itl.AddN(micros(at-s.lastOut), int64(n))
	}
	s.lastOut, s.anyOut = at, true
	for i := range d.events {
		ev := d.events[i]
		if ev.First {
			s.firstAt[ev.Handle] = at
		}
		if !ev.Done {
			continue
		}
		first, ok := s.firstAt[ev.Handle]
		if !ok {
			first = at
		}
		delete(s.firstAt, ev.Handle)
		ev.Arrival, ev.FirstToken, ev.Finish = ev.Sent, first, at
		s.finish(ev)
		done(ev)
	}
}

func (s *stats) finish(ev Event) {
	s.rep.Requests++
	s.rep.InputTokens += int64(ev.Prompt)
	s.rep.OutputTokens += int64(ev.Output)
	if ev.Preemptions > 0 {
		s.rep.PreemptedRequests++
	}
	ttft, tpot, e2e := ev.Latencies()
	s.ttft.Add(micros(ttft))
	s.e2e.Add(micros(e2e))
	s.maxTTFT, s.maxE2E = max(s.maxTTFT, ttft), max(s.maxE2E, e2e)
	s.sumTTFT += ttft
	s.sumE2E += e2e
	if e2e >= histogramRange {
		// E2E is the longest of the three: TTFT and TPOT pass the range
		// only where it does.
		s.pastRange++
	}
	if ev.Output > 1 {
		s.tpot.Add(micros(tpot))
		s.maxTPOT = max(s.maxTPOT, tpot)
		s.sumTPOT += tpot
	}
}

// histogramRange is the latency past which the histograms count a value
// at their top (traffic.Histogram: 2^40 µs, 12.7 days).
const histogramRange = float64(1<<40) / 1e6

// Latencies are a finished request's TTFT, TPOT and E2E in seconds, as
// vllm bench serve defines them: TPOT is (E2E − TTFT) / (output − 1), and
// 0 for a request of one output token (which bench leaves out of its TPOT
// statistics and counts as meeting a --goodput TPOT target).
func (ev Event) Latencies() (ttft, tpot, e2e float64) {
	ttft, e2e = ev.FirstToken-ev.Arrival, ev.Finish-ev.Arrival
	if ev.Output > 1 {
		tpot = (ev.Finish - ev.FirstToken) / float64(ev.Output-1)
	}
	return ttft, tpot, e2e
}

// window returns the series entry for time t, merging windows when the
// series grows past its bound.
func (s *stats) window(t float64) *Window {
	// Compared as floats first: t / WindowS may pass what an int holds.
	for t/s.rep.WindowS >= float64(s.maxWindows) {
		s.merge()
	}
	i := max(int(t/s.rep.WindowS), 0)
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
			w.Arrivals += o.Arrivals
			w.Replicas = max(w.Replicas, o.Replicas)
		}
		merged = append(merged, w)
	}
	s.rep.Series = merged
}

func (s *stats) step(res *StepResult, g Gauges) {
	if !res.NoBatch {
		s.rep.Steps++
	}
	if res.HasParts {
		if s.rep.StepSplit == nil {
			s.rep.StepSplit = &StepParts{}
		}
		s.rep.StepSplit.Add(res.Parts)
	}
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

// msOf is seconds as the report's milliseconds, to 10 µs.
func msOf(sec float64) float64 { return math.Round(sec*1e5) / 100 }

func latency(h *traffic.Histogram, percentiles []float64) Latency {
	if h.Count() == 0 {
		return Latency{}
	}
	ms := func(v int64) float64 { return math.Round(float64(v)/10) / 100 }
	l := Latency{
		Mean: math.Round(h.Mean()/10) / 100,
		P50:  ms(h.Quantile(0.50)),
		P90:  ms(h.Quantile(0.90)),
		P95:  ms(h.Quantile(0.95)),
		P99:  ms(h.Quantile(0.99)),
		Max:  ms(h.Max()),
	}
	for _, p := range percentiles {
		l.Percentiles = append(l.Percentiles, Percentile{P: p, Value: ms(h.Quantile(p / 100))})
	}
	return l
}

// Run sends src's requests to e through the API server (opt.FrontEnd) and
// steps the engine until everything is answered. A request from src is
// sent at its Arrival (open loop), or, with opt.Concurrency, when a slot is
// free (closed loop). It stops with the first error of src, an arrival out
// of order, ctx's end (checked every 1024 steps), or a backlog past
// opt.MaxBacklog (Report.FellBehind). Memory is bounded whatever the
// number of requests: requests are read as they are sent and forgotten
// when they finish.
func Run(ctx context.Context, e *Engine, src Source, opt RunOptions) (*Report, error) {
	if err := opt.FrontEnd.check(); err != nil {
		return nil, err
	}
	if !e.cfg.FirstEvents {
		e.cfg.FirstEvents = true
		defer func() { e.cfg.FirstEvents = false }()
	}
	r := runner{e: e, src: src, opt: opt, st: newStats(opt), fe: &frontEnd{cost: opt.FrontEnd}, ctx: ctx}
	if r.opt.MaxBacklog <= 0 {
		r.opt.MaxBacklog = DefaultMaxBacklog(e.cfg.MaxNumSeqs)
	}
	if err := r.read(); err != nil {
		return nil, err
	}
	for {
		// The engine's next step starts now when it has work, else at the
		// next request the API server hands it.
		horizon := math.Inf(1)
		if e.Busy() {
			horizon = e.Now()
		}
		if err := r.until(horizon, true); err != nil || r.st.rep.FellBehind != nil {
			if err != nil {
				return nil, err
			}
			break
		}
		res := e.Step()
		if res.Idle {
			break
		}
		if err := r.until(res.End, false); err != nil {
			return nil, err
		}
		if r.st.rep.FellBehind != nil {
			break
		}
		r.fe.push(&res, res.Sampled, res.First)
		g := e.Gauges()
		r.st.step(&res, g)
		if r.st.rep.Steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	if r.st.rep.FellBehind == nil && r.opt.Concurrency <= 0 {
		r.st.rep.FellBehind = r.flow.behind()
	}
	for r.beyond {
		// What is left is due past the horizon too (the source is in
		// arrival order): counted, not held.
		if _, err := r.src.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		r.st.rep.BeyondHorizon++
		if r.st.rep.BeyondHorizon%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return r.st.report(e), nil
}

// flow samples the requests sent and answered at sends, in bounded memory
// (at most maxFlowSamples, every stride-th send), to tell a backlog that
// grows from one that drains.
type flow struct {
	samples []flowSample
	last    flowSample
	stride  int64
	n       int64
}

type flowSample struct {
	t                    float64
	sent, left, answered int64
	// sentWork is the prompt and output tokens of the requests sent,
	// doneWork the tokens the engines computed (prompt tokens of admitted
	// requests and sampled tokens, vLLM's counters).
	sentWork, doneWork int64
	// waiting is the requests queued in the API server and the engine;
	// queued the same but the request just sent: 0 when the sent request
	// finds the API server and the engine's queue empty (not saturated).
	waiting, queued int
	// steps counts the engine steps ended so far (all engines'); replicas
	// is the replicas serving at the send (1 for one server), engines
	// their engines.
	steps             int64
	replicas, engines int
}

const maxFlowSamples = 2048

func (f *flow) add(x flowSample) {
	f.last = x
	if f.stride == 0 {
		f.stride = 1
	}
	if f.n%f.stride == 0 {
		if len(f.samples) == maxFlowSamples {
			k := 0
			for i := 0; i < len(f.samples); i += 2 {
				f.samples[k] = f.samples[i]
				k++
			}
			f.samples = f.samples[:k]
			f.stride *= 2
		}
		if f.n%f.stride == 0 {
			f.samples = append(f.samples, x)
		}
	}
	f.n++
}

// behind judges the sends over the second half of the time requests
// were sent: the engine fell behind when its waiting queue never emptied
// there (it served all it could) and the requests in flight grew, by more
// than √n in each of the half's two quarters and more than 2√n over the
// half (n arrivals, their Poisson spread). A stable engine answers as
// many requests as arrive once its latency has passed, so its backlog
// only wanders; one that falls behind grows by the excess of arrivals
// over its rate all along, which a long run tells from noise however
// small the excess.
func (f *flow) behind() *Backlog {
	if len(f.samples) == 0 {
		return nil
	}
	all := append(f.samples, f.last)
	t0, t1 := all[0].t, f.last.t
	if !(t1 > t0) {
		return nil
	}
	index := func(t float64) int {
		return min(sort.Search(len(all), func(i int) bool { return all[i].t >= t }), len(all)-1)
	}
	ia, ib := index(t0+(t1-t0)/2), index(t0+3*(t1-t0)/4)
	for _, x := range all[ia:] {
		if x.queued == 0 {
			return nil
		}
	}
	a, b, c := all[ia], all[ib], f.last
	if c.steps-a.steps < minBehindSteps*int64(max(c.engines, 1)) {
		// The judged sends came in fewer steps than the engines' pace
		// shows in: all at once, as far as they can tell, so a finite
		// burst like --rate inf's, whose queue drains once it stops, not
		// a rate they fall behind.
		return nil
	}
	grew := func(x, y flowSample, sigmas float64) bool {
		arrived := y.sent - x.sent
		return arrived >= 16 && float64(arrived-(y.left-x.left)) > sigmas*math.Sqrt(float64(arrived))
	}
	if !grew(a, b, 1) || !grew(b, c, 1) || !grew(a, c, 2) || !(c.t > a.t) {
		return nil
	}
	return f.backlog(a, c)
}

// minBehindSteps is the steps each engine must end, on average, within
// the judged sends for a growing queue to be a rate it falls behind: its
// pace over k steps is known to a step's work in k, and 16 steps put that
// within the 1/16 the sends' own count (at least 16) allows.
const minBehindSteps = 16

// backlog is the rates from a to c.
func (f *flow) backlog(a, c flowSample) *Backlog {
	b := &Backlog{Waiting: c.waiting, InFlight: int(c.sent - c.left), AtS: round6(c.t), SinceS: round6(a.t)}
	if c.replicas > 1 {
		b.ServingReplicas = c.replicas
	}
	if span := c.t - a.t; span > 0 {
		b.ArrivalsPerS = math.Round(float64(c.sent-a.sent)/span*1000) / 1000
		served := float64(c.answered-a.answered) / span
		if sent, work := c.sent-a.sent, c.sentWork-a.sentWork; sent > 0 && work > 0 {
			// The engines' work over a request's: answers lag by a
			// request's latency, which a long request's minutes make
			// most of a window, while the work is done as it comes.
			served = float64(c.doneWork-a.doneWork) / span / (float64(work) / float64(sent))
		}
		b.ServedPerS = math.Round(served*1000) / 1000
	} else if c.t > 0 {
		b.ServedPerS = math.Round(float64(c.answered)/c.t*1000) / 1000
	}
	if b.ArrivalsPerS > 0 && b.ServedPerS > 0 {
		b.Replicas = int(math.Ceil(b.ArrivalsPerS / b.ServedPerS * float64(max(c.replicas, 1))))
	}
	return b
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// runner is one Run: the client, the API server and the engine, moved
// forward in time order.
type runner struct {
	e   *Engine
	src Source
	opt RunOptions
	st  *stats
	fe  *frontEnd
	// next is the request src gives next, if have.
	next     Request
	have     bool
	lastDue  float64
	inFlight int
	sent     int64
	rejected int64
	// sentWork is the prompt and output tokens sent (flowSample).
	sentWork int64
	flow     flow
	// beyond is set once a request is due past the Horizon.
	beyond bool
	// ctx is checked every 4,096 sends: a traffic the engine refuses
	// whole takes no step, and the steps' check never comes.
	ctx context.Context
}

func (r *runner) read() error {
	var err error
	r.next, err = r.src.Next()
	r.have = err == nil
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if r.have && !(r.next.Arrival <= Horizon) {
		// Due past the horizon (or never): Run counts it and the rest.
		r.have, r.beyond = false, true
		r.st.rep.BeyondHorizon++
		return nil
	}
	if r.have {
		if r.next.Arrival < r.lastDue {
			return fmt.Errorf("%w: request %s arrives at %.6fs, before the previous one (%.6fs)", ErrUnsorted, r.next.ID, r.next.Arrival, r.lastDue)
		}
		r.lastDue = r.next.Arrival
	}
	return nil
}

// until processes the client's sends and the API server's completions up
// to time t. With idle, an engine without work stops the wait at the
// first request handed to it (the engine then starts at that time, with
// whatever else arrives at the same instant).
func (r *runner) until(t float64, idle bool) error {
	for {
		tSend := math.Inf(1)
		if r.have && (r.opt.Concurrency <= 0 || r.inFlight < r.opt.Concurrency) {
			tSend = max(r.next.Arrival, r.fe.now)
			if r.opt.SendUntil > 0 && tSend > r.opt.SendUntil {
				r.have = false
				tSend = math.Inf(1)
			}
		}
		tFE, ok := r.fe.next()
		if !ok {
			tFE = math.Inf(1)
		}
		at := min(tSend, tFE)
		if at > t || math.IsInf(at, 1) {
			if !math.IsInf(t, 1) {
				r.fe.advance(t)
			}
			return nil
		}
		if tSend <= tFE {
			r.fe.advance(at)
			q := r.next
			q.Sent = at
			r.fe.submit(q)
			r.inFlight++
			r.sent++
			r.sentWork += int64(q.PromptTokens + q.OutputTokens)
			r.flow.add(flowSample{t: at, sent: r.sent, left: r.st.rep.Requests + r.rejected, answered: r.st.rep.Requests,
				sentWork: r.sentWork, doneWork: r.e.gauges.PromptTokens + r.e.gauges.GenerationTokens,
				waiting: len(r.fe.jobs) + r.e.waiting.len(), queued: len(r.fe.jobs) - 1 + r.e.waiting.len(), steps: r.st.rep.Steps, replicas: 1, engines: 1})
			if err := r.read(); err != nil {
				return err
			}
			if r.sent%4096 == 0 {
				if err := r.ctx.Err(); err != nil {
					return err
				}
			}
			if r.inFlight > r.opt.MaxBacklog {
				b := r.flow.behind()
				if b == nil {
					b = r.flow.backlog(r.flow.samples[0], r.flow.last)
				}
				b.InFlightBound = r.opt.MaxBacklog
				r.st.rep.FellBehind = b
				return nil
			}
			continue
		}
		in, out := r.fe.complete()
		if out != nil {
			r.st.deliver(out, r.fe.now, r.done)
			continue
		}
		if in == nil {
			continue
		}
		q := *in
		q.Arrival = r.fe.now
		if _, err := r.e.Add(q); err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) {
				return err
			}
			r.inFlight--
			r.rejected++
			r.st.rep.RejectedBy[rej.Reason]++
			if r.opt.OnReject != nil {
				r.opt.OnReject(rej)
			}
			continue
		}
		if idle && math.IsInf(t, 1) {
			t = r.fe.now
		}
	}
}

func (r *runner) done(ev Event) {
	r.inFlight--
	if r.opt.OnFinish != nil {
		r.opt.OnFinish(ev)
	}
}

func (s *stats) report(e *Engine) *Report {
	r := s.reportOf(e.Gauges())
	if e.spec != nil {
		// One engine's counters have the positions too.
		r.SpecDecode = specReport(e.SpecCounts())
	}
	return r
}

// reportOf is the report of a run whose engine (or engines) ended with
// the counters g, at g.Now.
func (s *stats) reportOf(g Gauges) *Report {
	r := s.rep
	r.DurationS = math.Round(max(g.Now, s.lastOut)*1e6) / 1e6
	r.Preemptions = g.Preemptions
	r.Rejected = g.Rejected
	if len(r.RejectedBy) == 0 {
		r.RejectedBy = nil
	}
	p := s.percentiles
	r.TTFT, r.TPOT, r.ITL, r.E2E = latency(&s.ttft, p), latency(&s.tpot, p), latency(&s.itl, p), latency(&s.e2e, p)
	if s.pastRange > 0 {
		// The histograms hold a latency past their range at its top; the
		// maxima and means, kept apart, are exact.
		r.LatenciesPastRange = s.pastRange
		r.TTFT.Max, r.TPOT.Max, r.E2E.Max = msOf(s.maxTTFT), msOf(s.maxTPOT), msOf(s.maxE2E)
		r.TTFT.Mean, r.E2E.Mean = msOf(s.sumTTFT/float64(s.ttft.Count())), msOf(s.sumE2E/float64(s.e2e.Count()))
		if n := s.tpot.Count(); n > 0 {
			r.TPOT.Mean = msOf(s.sumTPOT / float64(n))
		}
	}
	if r.DurationS > 0 {
		r.RequestsPerS = math.Round(float64(r.Requests)/r.DurationS*1000) / 1000
		r.OutputTokensPerS = math.Round(float64(r.OutputTokens)/r.DurationS*10) / 10
	}
	if g.PrefixQueries > 0 {
		r.PrefixHitRate = math.Round(float64(g.PrefixHits)/float64(g.PrefixQueries)*1e4) / 1e4
	}
	r.MaxKVUsage = math.Round(r.MaxKVUsage*1e4) / 1e4
	if r.StepSplit != nil {
		c := *r.StepSplit
		for _, v := range []*float64{&c.Dense, &c.Experts, &c.Attention, &c.AllReduce, &c.GEMMFloors, &c.SmallKernels, &c.Launch, &c.Draft, &c.CPU, &c.Overlapped} {
			*v = math.Round(*v*1e6) / 1e6
		}
		r.StepSplit = &c
	}
	for i := range r.Series {
		r.Series[i].KVUsage = math.Round(r.Series[i].KVUsage*1e4) / 1e4
	}
	if g.SpecDrafts > 0 {
		r.SpecDecode = specReport(vllm.SpecDecodeCounts{Drafts: float64(g.SpecDrafts), DraftTokens: float64(g.SpecDraftTokens), Accepted: float64(g.SpecAccepted)})
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
