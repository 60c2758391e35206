// Package serve puts the simulated engine (package sim) behind an
// OpenAI-compatible HTTP API in real time: /v1/completions and
// /v1/chat/completions (streaming with server-sent events, or not),
// /v1/models, /health, and vLLM's /metrics under the names the vllm
// package knows for the version served. It is the engine stand-in for
// load tests and monitoring tests: the same scheduler, KV pool and
// preemptions as `headroom simulate`, answering over real HTTP.
//
// Decisions:
//   - Prompt tokens: the "prompt_tokens" extension field when a request
//     has it; a prompt of token ids counts its ids; otherwise text counts
//     4 tokens per 3 words, rounded up (ceil(words × 4 / 3): the common
//     "a token is three quarters of a word" rule for English), over the
//     prompt or all chat message contents, at least 1.
//   - Output tokens: every request generates exactly max_tokens (or
//     max_completion_tokens) tokens, as with ignore_eos, cut at
//     max-model-len; without it, 16 for completions (the OpenAI and vLLM
//     default) and max-model-len − prompt for chat (vLLM's default). Each
//     token is the text " tok", so a client counting words counts tokens.
//   - Time: the engine's clock is the injected Clock's time since Run
//     started, times TimeScale. Tokens of a step reach the client when the
//     real clock passes the step's end. /metrics latencies are in the
//     engine's (simulated) seconds: equal to real seconds at TimeScale 1.
//   - Budget: 512 MiB besides the KV pool. At most MaxRequests requests are
//     in flight (503 past them), a body over SmallBody is decoded by at
//     most Parsers requests at once, bodies are at most 32 MiB (413), and a
//     prompt is counted as it is decoded, never split into a slice of
//     words. docs/servers.md has the numbers.
package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Clock is the server's time source.
type Clock interface {
	Now() time.Time
	After(time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// After is time.After.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Server.
type Options struct {
	Engine *sim.Engine
	// Model is the name /v1/models lists and requests must use (a request
	// without "model" gets it).
	Model string
	// TimeScale is simulated seconds per real second (default 1).
	TimeScale float64
	Clock     Clock
	// Version picks the /metrics names (vllm.MetricNameAt); zero is the
	// newest.
	Version vllm.Version
	// MaxRequests bounds the requests in flight (0: DefaultMaxRequests);
	// past it a request gets 503.
	MaxRequests int
	// StreamInterval is the serve line's --stream-interval: a streamed
	// request's tokens go out every StreamInterval of them, the first and
	// the last at once (0 or 1: every step's).
	StreamInterval int
}

// The server's memory budget is 512 MiB. A request in flight holds its
// stream, its engine state and its connection (about 30 KiB), so
// DefaultMaxRequests of them take about 120 MiB; a body (at most 32 MiB)
// over SmallBody (or of unknown length) is decoded by at most Parsers
// requests at once, each holding the decoder's copy of the JSON and the
// prompt's text once (under 100 MiB for 32 MiB); the engine's KV pool is
// what its plan gives.
const (
	DefaultMaxRequests = 4096
	// Parsers decode large bodies at once; 64 more wait, at most 10 s.
	Parsers = 2
	// SmallBody is decoded without the gate: a prompt of 10,000 tokens is
	// about 50 KiB, and queueing every request's decode behind two slots
	// delayed a closed loop's first tokens by tens of milliseconds.
	SmallBody = 64 << 10
)

// errFull is a request past MaxRequests.
var errFull = errors.New("too many requests in flight")

// Server is the simulated engine over HTTP.
type Server struct {
	opt   Options
	start time.Time

	mu      sync.Mutex
	e       *sim.Engine
	streams map[uint64]*stream
	seq     uint64
	wake    chan struct{}
	started chan struct{}

	// parse admits bodies to be decoded.
	parse *graceful.Gate

	reg                *prometheus.Registry
	ttft, itl, e2e     prometheus.Histogram
	promptHist, genHis prometheus.Histogram
}

// stream is one request in flight: the driver updates it, the handler
// waits on notify and writes what is new.
type stream struct {
	arrival   float64
	lastToken float64
	generated int
	done      bool
	finish    string
	notify    chan struct{}
	// steps are the generated counts at the ends of the steps not yet
	// streamed, kept with speculative decoding, whose steps emit several
	// tokens: each step is one chunk, as vLLM streams it.
	steps []int
}

// New returns a server; call Run to drive the engine and serve Handler.
func New(opt Options) (*Server, error) {
	if opt.Engine == nil || !opt.Engine.Config().TokenEvents {
		return nil, errors.New("serve: needs an engine configured with TokenEvents")
	}
	if opt.TimeScale == 0 {
		opt.TimeScale = 1
	}
	if opt.TimeScale < 0 || math.IsNaN(opt.TimeScale) || math.IsInf(opt.TimeScale, 0) {
		return nil, fmt.Errorf("time scale %g: give a positive number", opt.TimeScale)
	}
	if opt.Clock == nil {
		opt.Clock = RealClock{}
	}
	if opt.Version.IsZero() {
		opt.Version = vllm.Newest()
	}
	if opt.MaxRequests <= 0 {
		opt.MaxRequests = DefaultMaxRequests
	}
	s := &Server{opt: opt, e: opt.Engine, streams: map[uint64]*stream{}, wake: make(chan struct{}, 1), started: make(chan struct{}),
		parse: graceful.NewGate("request bodies being read", Parsers, 64, 10*time.Second)}
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	return s, nil
}

// simNow is the engine time of the real clock's now.
func (s *Server) simNow() float64 {
	return s.opt.Clock.Now().Sub(s.start).Seconds() * s.opt.TimeScale
}

// realDelay is how long the real clock takes to reach engine time t.
func (s *Server) realDelay(t float64) time.Duration {
	return time.Duration((t - s.simNow()) / s.opt.TimeScale * float64(time.Second))
}

// Run drives the engine until ctx ends: one step at a time, each
// delivered when the real clock reaches the step's end.
func (s *Server) Run(ctx context.Context) error {
	s.start = s.opt.Clock.Now()
	close(s.started)
	var events []sim.Event
	for {
		s.mu.Lock()
		t, queued := s.e.NextEventTime()
		if !queued {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if d := s.realDelay(t); d > 0 {
			s.mu.Unlock()
			if err := s.sleep(ctx, d); err != nil {
				return nil
			}
			continue
		}
		res := s.e.Step()
		events = append(events[:0], res.Events...)
		s.mu.Unlock()
		if d := s.realDelay(res.End); d > 0 {
			if err := s.sleep(ctx, d); err != nil {
				return nil
			}
		}
		s.deliver(events, res.End)
	}
}

// sleep waits d of real time, or until ctx ends.
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-s.opt.Clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) deliver(events []sim.Event, at float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		st := s.streams[ev.Handle]
		if st == nil || ev.Preempted {
			continue
		}
		if ev.First {
			s.ttft.Observe(at - st.arrival)
		} else {
			s.itl.Observe(at - st.lastToken)
		}
		st.lastToken = at
		st.generated = ev.Generated
		if s.e.Config().Speculation != nil {
			st.steps = append(st.steps, ev.Generated)
		}
		if ev.Done {
			st.done = true
			st.finish = "length"
			s.e2e.Observe(at - st.arrival)
			s.promptHist.Observe(float64(ev.Prompt))
			s.genHis.Observe(float64(ev.Output))
			delete(s.streams, ev.Handle)
		}
		select {
		case st.notify <- struct{}{}:
		default:
		}
	}
}

// submit adds a request to the engine now; a rejection comes back as the
// error.
func (s *Server) submit(prompt, output int) (uint64, *stream, error) {
	<-s.started
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.streams) >= s.opt.MaxRequests {
		return 0, nil, errFull
	}
	s.seq++
	now := s.simNow()
	h, err := s.e.Add(sim.Request{ID: fmt.Sprint(s.seq), Arrival: now, PromptTokens: prompt, OutputTokens: output})
	if err != nil {
		return 0, nil, err
	}
	st := &stream{arrival: now, notify: make(chan struct{}, 1)}
	s.streams[h] = st
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return h, st, nil
}

// abort drops a request whose client went away.
func (s *Server) abort(h uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.streams[h]; ok {
		delete(s.streams, h)
		s.e.Abort(h)
	}
}

// snapshot reads a stream under the lock.
func (s *Server) snapshot(st *stream) (generated int, done bool, finish string, steps []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	steps, st.steps = st.steps, nil
	return st.generated, st.done, st.finish, steps
}

// Handler serves the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return graceful.Recover(mux, nil, func(w http.ResponseWriter, code int, msg string) {
		apiError(w, code, "InternalServerError", msg)
	})
}

// metricName is the name the served version exports a metric under.
func (s *Server) metricName(m vllm.Metric) (string, error) {
	n, ok := vllm.MetricNameAt(m, s.opt.Version)
	if !ok {
		return "", fmt.Errorf("vLLM %s exports no %s metric", s.opt.Version, m)
	}
	return n, nil
}

// Histogram buckets as vLLM V1 declares them (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

func (s *Server) registerMetrics() error {
	s.reg = prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": s.opt.Model, "engine": "0"}
	gauges := func(read func(sim.Gauges) float64) func() float64 {
		return func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return read(s.e.Gauges())
		}
	}
	var cs []prometheus.Collector
	add := func(m vllm.Metric, mk func(name string) prometheus.Collector) error {
		name, err := s.metricName(m)
		if err != nil {
			return err
		}
		cs = append(cs, mk(name))
		return nil
	}
	gauge := func(m vllm.Metric, help string, read func(sim.Gauges) float64) error {
		return add(m, func(n string) prometheus.Collector {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: n, Help: help, ConstLabels: labels}, gauges(read))
		})
	}
	counter := func(m vllm.Metric, help string, read func(sim.Gauges) float64) error {
		return add(m, func(n string) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: n, Help: help, ConstLabels: labels}, gauges(read))
		})
	}
	hist := func(m vllm.Metric, dst *prometheus.Histogram, help string, buckets []float64) error {
		return add(m, func(n string) prometheus.Collector {
			*dst = prometheus.NewHistogram(prometheus.HistogramOpts{Name: n, Help: help, ConstLabels: labels, Buckets: buckets})
			return *dst
		})
	}
	errs := []error{
		gauge(vllm.MetricRequestsRunning, "Number of requests in model execution batches.", func(g sim.Gauges) float64 { return float64(g.Running) }),
		gauge(vllm.MetricRequestsWaiting, "Number of requests waiting to be processed.", func(g sim.Gauges) float64 { return float64(g.Waiting) }),
		gauge(vllm.MetricKVCacheUsage, "KV-cache usage. 1 means 100 percent usage.", func(g sim.Gauges) float64 { return g.KVUsage }),
		counter(vllm.MetricPreemptions, "Cumulative number of preemption from the engine.", func(g sim.Gauges) float64 { return float64(g.Preemptions) }),
		counter(vllm.MetricPromptTokens, "Number of prefill tokens processed.", func(g sim.Gauges) float64 { return float64(g.PromptTokens) }),
		counter(vllm.MetricGenerationTokens, "Number of generation tokens processed.", func(g sim.Gauges) float64 { return float64(g.GenerationTokens) }),
		counter(vllm.MetricPrefixCacheQueries, "Prefix cache queries, in terms of number of queried tokens.", func(g sim.Gauges) float64 { return float64(g.PrefixQueries) }),
		counter(vllm.MetricPrefixCacheHits, "Prefix cache hits, in terms of number of cached tokens.", func(g sim.Gauges) float64 { return float64(g.PrefixHits) }),
		hist(vllm.MetricTTFT, &s.ttft, "Histogram of time to first token in seconds.", ttftBuckets),
		hist(vllm.MetricInterTokenLatency, &s.itl, "Histogram of inter-token latency in seconds.", itlBuckets),
		hist(vllm.MetricE2ELatency, &s.e2e, "Histogram of e2e request latency in seconds.", e2eBuckets),
	}
	if s.e.Config().Speculation != nil {
		errs = append(errs, s.specMetrics(labels, add)...)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Per-request token histograms (vllm:request_prompt_tokens,
	// vllm:request_generation_tokens): names from peers.md §5.2, stable.
	cfg := s.e.Config()
	tokBuckets := tokenBuckets(cfg.MaxModelLen)
	s.promptHist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:request_prompt_tokens", Help: "Number of prefill tokens processed.", ConstLabels: labels, Buckets: tokBuckets})
	s.genHis = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:request_generation_tokens", Help: "Number of generation tokens processed.", ConstLabels: labels, Buckets: tokBuckets})
	cs = append(cs, s.promptHist, s.genHis)
	if name, err := s.metricName(vllm.MetricCacheConfig); err == nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "Information of the KV cache config.",
			ConstLabels: prometheus.Labels{"block_size": fmt.Sprint(cfg.BlockSize), "num_gpu_blocks": fmt.Sprint(cfg.NumGPUBlocks),
				"enable_prefix_caching": fmt.Sprint(!cfg.NoPrefixCaching),
				// The stand-in says so, so that no reader takes its blocks
				// for a measurement (audit --live --learn learns nothing
				// from it).
				telemetry.LabelSimulated: "true"}}, func() float64 { return 1 }))
	}
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// tokenBuckets are vLLM's 1-2-5 buckets up to max-model-len
// (build_1_2_5_buckets).
func tokenBuckets(limit int) []float64 {
	var out []float64
	for e := 1.0; ; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * e; v <= float64(limit) {
				out = append(out, v)
			} else {
				return out
			}
		}
	}
}

// specMetrics registers vLLM's speculative-decoding counters, which a
// server with --speculative-config exports (vllm.MetricSpecDrafts ...):
// one per position for the accepted drafts, labelled position="i".
func (s *Server) specMetrics(labels prometheus.Labels, add func(vllm.Metric, func(string) prometheus.Collector) error) []error {
	count := func(m vllm.Metric, help string, read func(vllm.SpecDecodeCounts) float64, extra prometheus.Labels) error {
		return add(m, func(n string) prometheus.Collector {
			l := prometheus.Labels{}
			for k, v := range labels {
				l[k] = v
			}
			for k, v := range extra {
				l[k] = v
			}
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: n, Help: help, ConstLabels: l}, func() float64 {
				s.mu.Lock()
				defer s.mu.Unlock()
				return read(s.e.SpecCounts())
			})
		})
	}
	errs := []error{
		count(vllm.MetricSpecDrafts, "Number of spec decoding drafts.", func(c vllm.SpecDecodeCounts) float64 { return c.Drafts }, nil),
		count(vllm.MetricSpecDraftTokens, "Number of draft tokens.", func(c vllm.SpecDecodeCounts) float64 { return c.DraftTokens }, nil),
		count(vllm.MetricSpecAccepted, "Number of accepted tokens.", func(c vllm.SpecDecodeCounts) float64 { return c.Accepted }, nil),
	}
	for i := range s.e.Config().Speculation.K {
		errs = append(errs, count(vllm.MetricSpecAcceptedPerPos, "Accepted tokens per draft position.", func(c vllm.SpecDecodeCounts) float64 {
			if i < len(c.AcceptedPerPos) {
				return c.AcceptedPerPos[i]
			}
			return 0
		}, prometheus.Labels{"position": strconv.Itoa(i)}))
	}
	return errs
}
