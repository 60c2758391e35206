package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// Config is one run.
type Config struct {
	Client *Client
	// Stream supplies the requests (package workload: its Spec bounds
	// them). Open loop (Concurrency 0) sends each at its due time; a
	// closed loop keeps at most Concurrency requests in flight, each sent
	// at its due time or when a slot frees, whichever is later.
	Stream      workload.Stream
	Concurrency int
	// Duration, when > 0, stops a closed loop from sending after it (its
	// requests are due at once, so the stream cannot bound it by time).
	Duration time.Duration
	// Warmup sends two short requests before the run (not counted): they
	// show that the server answers, and their usage calibrates prompt
	// lengths before the first timed request.
	Warmup bool
	SLOs   []slo.Bound
	Seed   uint64
	// Goodput, when set, counts good requests by vllm bench serve's
	// --goodput targets (else by the per-request bounds of SLOs);
	// Percentiles (0–100) are given too in every latency.
	Goodput     workload.Goodput
	Percentiles []float64

	// Scraper reads /metrics (nil: none); GPUs reads local GPUs (nil:
	// none); Interval is the time between readings (0: 1 s).
	Scraper  *telemetry.Scraper
	GPUs     telemetry.GPUReader
	Interval time.Duration
	// Progress is called after each reading.
	Progress func(Progress, *Point)
	// OnDone, when set, sees every request when it ends (a trace); it may
	// be called from several goroutines at once.
	OnDone func(Item, *Outcome)
	// MaxInFlight bounds the requests in flight, and so the connections
	// and their goroutines (0: DefaultMaxInFlight). An open loop whose
	// requests come due past it sends them as slots free, late (the send
	// lag says by how much, and a note says how many); a closed loop
	// cannot ask for more.
	MaxInFlight int
	// WarmupTimeout bounds each warm-up request (0: DefaultWarmupTimeout);
	// OnWarmup, when set, is told before each one is sent.
	WarmupTimeout time.Duration
	OnWarmup      func(i, n, words int)
}

// DefaultMaxInFlight is the most requests in flight: a streaming request
// holds a connection, its buffers and two goroutines, about 40 KiB, so
// 4096 of them stay near 160 MiB; a million at once (--burst
// 1000000x1@0s) ran out of memory at 1.45 GiB.
const DefaultMaxInFlight = 4096

// DefaultWarmupTimeout bounds a warm-up request: two short prompts that
// a server which answers at all answers well within it. The run's own
// --timeout (minutes) is for requests under load.
const DefaultWarmupTimeout = 30 * time.Second

// ErrTooManyInFlight is a closed loop past Config.MaxInFlight.
var ErrTooManyInFlight = errors.New("too many requests in flight")

// ErrWarmup wraps a failed warm-up: the server could not be used at all.
var ErrWarmup = errors.New("the server did not answer the first requests")

// Warm-up prompt lengths: two lengths give the calibration its line
// (rate and fixed template tokens); both are short so a busy server
// answers them quickly.
var warmupWords = [2]int{32, 256}

// Run sends the schedule and returns the report. It returns early with
// ctx's end (the report then covers what ran) or an error wrapping
// ErrWarmup when the warm-up requests fail.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	clock := cfg.Client.Clock
	maxInFlight := cfg.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	if cfg.Concurrency > maxInFlight {
		return nil, fmt.Errorf("%w: a closed loop of %d is past the %d requests in flight this client holds", ErrTooManyInFlight, cfg.Concurrency, maxInFlight)
	}
	cal := NewCalibration()
	if cfg.Warmup {
		wt := cfg.WarmupTimeout
		if wt <= 0 {
			wt = DefaultWarmupTimeout
		}
		for i, n := range warmupWords {
			if cfg.OnWarmup != nil {
				cfg.OnWarmup(i+1, len(warmupWords), n)
			}
			// The bound is the request's own timeout, not a deadline on
			// ctx: a context that ends is the run interrupted, and the
			// warm-up's bound firing was reported as that.
			wc := *cfg.Client
			wc.Target.Timeout = wt
			o := wc.Do(ctx, Prompt{Seed: cfg.Seed, Stream: 0xca1 + uint64(i), Words: n}, 1)
			if ctx.Err() != nil {
				break // interrupted: the report says so, with nothing sent
			}
			if o.Err != "" {
				return nil, fmt.Errorf("%w: %s (%s; each warm-up request has %s)", ErrWarmup, o.ErrText, o.Err, wt)
			}
			if o.Usage != nil {
				cal.Observe(n, o.Usage.PromptTokens)
			}
		}
	}

	stats := NewStats(cfg.SLOs)
	stats.goodput, stats.percentiles = cfg.Goodput, cfg.Percentiles
	interval := cfg.Interval
	if interval <= 0 {
		interval = time.Second
	}
	w := &watcher{scraper: cfg.Scraper, gpus: cfg.GPUs, interval: interval, clock: clock,
		stats: stats, progress: cfg.Progress}
	start := clock.Now()
	wctx, stopWatch := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	wwg.Add(1)
	go func() {
		defer wwg.Done()
		w.read(wctx, 0)
		w.run(wctx, start)
	}()

	var inflight sync.WaitGroup
	// sent is read where the loop releases the request, before its
	// goroutine starts (Go starts one within microseconds): the send lag
	// is the loop's own lateness.
	send := func(i uint64, it Item, p Prompt, nwords int, sent time.Duration) {
		defer inflight.Done()
		o := Outcome{Due: it.Due, PromptWords: nwords, Prompt: it.Prompt, Sent: sent}
		stats.Sent(&o)
		c := cfg.Client
		if it.Endpoint != "" && it.Endpoint != c.Target.Endpoint {
			// A logged request calls the endpoint it called, as the
			// prediction prices it.
			own := *c
			own.Target.Endpoint = it.Endpoint
			c = &own
		}
		r := c.Do(ctx, p, it.Output)
		r.Due, r.Sent, r.PromptWords, r.Prompt = o.Due, o.Sent, o.PromptWords, o.Prompt
		if r.Usage != nil && r.Err == "" {
			cal.Observe(nwords, r.Usage.PromptTokens)
		}
		stats.Add(&r, clock.Now().Sub(start))
		if cfg.OnDone != nil {
			cfg.OnDone(it, &r)
		}
	}
	// A prompt is a seed and a length until it is sent: its text is
	// generated into the request body as the connection takes it.
	build := func(i uint64, it Item) (Prompt, int) {
		n := cal.Words(it.Prompt)
		return Prompt{Seed: cfg.Seed, Stream: i, Words: n}, n
	}

	var schedErr error
	var late int64
	if cfg.Concurrency <= 0 {
		slots := make(chan struct{}, maxInFlight)
		schedErr = openLoop(ctx, cfg, clock, start, build, func(i uint64, it Item, p Prompt, n int) bool {
			select {
			case slots <- struct{}{}:
			default:
				late++
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return false
				}
			}
			inflight.Add(1)
			sent := clock.Now().Sub(start)
			go func() {
				defer func() { <-slots }()
				send(i, it, p, n, sent)
			}()
			return true
		})
	} else {
		schedErr = closedLoop(ctx, cfg, clock, start, build, func(i uint64, it Item, p Prompt, n int) {
			inflight.Add(1)
			send(i, it, p, n, clock.Now().Sub(start))
		})
	}
	inflight.Wait()
	stopWatch()
	wwg.Wait()
	// A last reading after the drain: the counters' final values; an
	// interrupted run gives it 250 ms, so that the whole run ends within
	// a second of the signal.
	last, stopLast := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
	if ctx.Err() == nil {
		last, stopLast = context.WithCancel(context.WithoutCancel(ctx))
	}
	w.read(last, clock.Now().Sub(start))
	stopLast()

	t := cfg.Client.Target
	r := &Result{Target: TargetInfo{URL: t.URL(), Model: t.Model, Endpoint: t.Endpoint}}
	r.Load.Mode, r.Load.Concurrency = "open", cfg.Concurrency
	if cfg.Concurrency > 0 {
		r.Load.Mode = "closed"
	}
	stats.summarize(r)
	if cfg.Concurrency > 0 {
		// A closed loop sends when a request ends: its rate is the
		// server's, not a measure of the client.
		r.SendRate = SendRate{}
	}
	w.series.fill(r, interval)
	r.Calibration.TokensPerWord, r.Calibration.FixedTokens = cal.Rate()
	r.Calibration.TokensPerWord, r.Calibration.FixedTokens = round3(r.Calibration.TokensPerWord), round3(r.Calibration.FixedTokens)
	if w.metricsOff {
		r.Notes = append(r.Notes, fmt.Sprintf("no server metrics: %v", w.firstErr))
	} else if w.scrapeErrors > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d metric readings failed, the first: %v", w.scrapeErrors, w.firstErr))
	}
	if schedErr != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("stopped early: %v", schedErr))
	}
	if late > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d requests came due while %d were in flight, the most this client holds: they were sent as requests ended (see the send lag)", late, maxInFlight))
	}
	if ctx.Err() != nil {
		r.Notes = append(r.Notes, "interrupted: the report covers what ran")
	}
	r.judge(cfg.SLOs)
	return r, nil
}

// Item is one request to send: its workload id, due from the start of
// the run, its prompt's length in tokens as asked for, and max_tokens.
type Item struct {
	ID             string
	Due            time.Duration
	Prompt, Output int64
	// Endpoint is the API the request calls where its line says (a
	// logged request's own, workload.Request.Endpoint); "" calls the
	// Target's.
	Endpoint string
}

// next reads the stream's next request as an item; ok is false at its end.
func next(st workload.Stream) (Item, bool, error) {
	r, err := st.Next()
	if errors.Is(err, io.EOF) {
		return Item{}, false, nil
	}
	if err != nil {
		return Item{}, false, err
	}
	due := time.Duration(min(r.At, maxDue) * float64(time.Second))
	return Item{ID: r.ID, Due: due, Prompt: int64(r.Prompt), Output: int64(r.Output), Endpoint: r.Endpoint}, true, nil
}

// maxDue bounds a due time (in seconds) so it fits a Duration: 100 years.
const maxDue = 100 * 365 * 24 * 3600.0

// openLoop sends each item at its due time, whatever the earlier ones are
// doing: the prompt is built first, then the loop sleeps to the due time
// and hands the request to its own goroutine.
func openLoop(ctx context.Context, cfg Config, clock Clock, start time.Time,
	build func(uint64, Item) (Prompt, int), fire func(uint64, Item, Prompt, int) bool) error {
	for i := uint64(0); ; i++ {
		it, ok, err := next(cfg.Stream)
		if err != nil || !ok {
			return err
		}
		p, n := build(i, it)
		if clock.SleepUntil(ctx, start.Add(it.Due)) != nil {
			return nil
		}
		if !fire(i, it, p, n) {
			return nil
		}
	}
}

// closedLoop keeps cfg.Concurrency requests in flight: each worker takes
// the next item when its last request ends and sends it at its due time
// (at once when it is past).
func closedLoop(ctx context.Context, cfg Config, clock Clock, start time.Time,
	build func(uint64, Item) (Prompt, int), do func(uint64, Item, Prompt, int)) error {
	var mu sync.Mutex
	var n uint64
	var schedErr error
	take := func() (uint64, Item, bool) {
		mu.Lock()
		defer mu.Unlock()
		if schedErr != nil || ctx.Err() != nil {
			return 0, Item{}, false
		}
		if cfg.Duration > 0 && clock.Now().Sub(start) >= cfg.Duration {
			return 0, Item{}, false
		}
		it, ok, err := next(cfg.Stream)
		if err != nil || !ok {
			schedErr = err
			return 0, Item{}, false
		}
		i := n
		n++
		return i, it, true
	}
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, it, ok := take()
				if !ok {
					return
				}
				p, words := build(i, it)
				if clock.SleepUntil(ctx, start.Add(it.Due)) != nil {
					return
				}
				// Due, for the send lag, is when the slot let it go.
				it.Due = max(it.Due, clock.Now().Sub(start))
				do(i, it, p, words)
			}
		}()
	}
	wg.Wait()
	return schedErr
}
