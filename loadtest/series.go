package loadtest

import (
	"context"
	"time"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Point is one reading of the time series: the server's metrics (null when
// not read), local GPU memory, and the client's own counts.
type Point struct {
	TS           float64  `json:"t_s"`
	KVUsage      *float64 `json:"kv_usage"`
	Running      *float64 `json:"running"`
	Waiting      *float64 `json:"waiting"`
	Preemptions  *float64 `json:"preemptions"`
	GPUUsedBytes *int64   `json:"gpu_used_bytes"`
	// ITLMS is the mean gap between content chunks of the chunks that
	// arrived in the interval before this reading (null without any).
	ITLMS  *float64 `json:"itl_ms"`
	Sent   int64    `json:"sent"`
	Done   int64    `json:"done"`
	Failed int64    `json:"failed"`
}

// maxPoints bounds the series: past it, every other point is dropped and
// the interval kept doubles, so an hour at 1 s keeps 1 s and a day keeps
// 32 s.
const maxPoints = 4096

// Series is the bounded time series with the extremes over every reading
// (not only those kept).
type Series struct {
	Points []Point
	// Every is how many readings one kept point stands for.
	Every int
	n     int

	maxKV, maxRunning, maxWaiting float64
	haveKV                        bool
	havePre                       bool
	preBase, preLast, preAdded    float64
	gpuMax, gpuTotal              int64
	haveGPU                       bool
	haveMetrics                   bool
	// spec sums the spec-decode counters' increases between readings (a
	// restart's counters count from zero); specLast is the last reading.
	spec, specLast *vllm.SpecDecodeCounts
}

// add takes one reading; v is nil when the metrics were not read, gpus nil
// without GPU readings.
func (s *Series) add(p Point, v *telemetry.VLLMSample, gpus []telemetry.GPU) {
	f := func(x float64) *float64 { return &x }
	if v != nil {
		s.haveMetrics = true
		if v.Has(vllm.MetricKVCacheUsage) {
			p.KVUsage = f(v.KVCacheUsage)
			s.maxKV = max(s.maxKV, v.KVCacheUsage)
			s.haveKV = true
		}
		if v.Has(vllm.MetricRequestsRunning) {
			p.Running = f(v.RequestsRunning)
			s.maxRunning = max(s.maxRunning, v.RequestsRunning)
		}
		if v.Has(vllm.MetricRequestsWaiting) {
			p.Waiting = f(v.RequestsWaiting)
			s.maxWaiting = max(s.maxWaiting, v.RequestsWaiting)
		}
		if v.Has(vllm.MetricPreemptions) {
			// The counter counts since the server started; a fall means
			// it restarted, and its new count is all new.
			c := v.PreemptionsTotal
			switch {
			case !s.havePre:
				s.preBase, s.havePre = c, true
			case c < s.preLast:
				s.preAdded += c
			default:
				s.preAdded += c - s.preLast
			}
			s.preLast = c
			p.Preemptions = f(s.preAdded)
		}
		if c := v.SpecDecode; c != nil {
			s.addSpec(*c)
		}
	}
	if used, total, ok := telemetry.Sum(gpus); ok {
		p.GPUUsedBytes = &used
		s.gpuMax, s.gpuTotal, s.haveGPU = max(s.gpuMax, used), total, true
	}
	if s.Every == 0 {
		s.Every = 1
	}
	if s.n%s.Every == 0 {
		s.Points = append(s.Points, p)
		if len(s.Points) >= maxPoints {
			kept := s.Points[:0]
			for i := 0; i < len(s.Points); i += 2 {
				kept = append(kept, s.Points[i])
			}
			s.Points = kept
			s.Every *= 2
		}
	}
	s.n++
}

// fill copies the series and its extremes into r.
func (s *Series) fill(r *Result, interval time.Duration) {
	r.Series = s.Points
	if r.Series == nil {
		r.Series = []Point{}
	}
	r.SeriesIntervalS = interval.Seconds() * float64(max(s.Every, 1))
	f := func(x float64) *float64 { return &x }
	if s.haveKV {
		r.MaxKVUsage = f(s.maxKV)
	}
	if s.havePre {
		r.Preemptions = f(s.preAdded)
	}
	if s.haveMetrics {
		r.MaxRunning, r.MaxWaiting = f(s.maxRunning), f(s.maxWaiting)
	}
	if s.spec != nil {
		if a, ok := s.spec.Acceptance(); ok {
			r.SpecDecode = &a
		}
	}
	if s.haveGPU {
		m, t := s.gpuMax, s.gpuTotal
		r.GPUMaxUsedBytes, r.GPUTotalBytes = &m, &t
	}
}

// watcher reads the metrics and GPUs every interval while the run goes.
type watcher struct {
	scraper  *telemetry.Scraper
	gpus     telemetry.GPUReader
	interval time.Duration
	clock    Clock
	stats    *Stats
	progress func(Progress, *Point)
	series   Series
	// scrapeErrors counts failed scrapes after the first success;
	// firstErr is the first failure, for a note.
	scrapeErrors int
	firstErr     error
	metricsOff   bool
	// the ITL totals at the last reading
	itlCount int64
	itlSum   time.Duration
}

// read takes one reading at elapsed.
func (w *watcher) read(ctx context.Context, elapsed time.Duration) {
	p := Point{TS: round3(elapsed.Seconds())}
	pr := w.stats.progress()
	p.Sent, p.Done, p.Failed = pr.Sent, pr.Done, pr.Failed
	if n := pr.ITLCount - w.itlCount; n > 0 {
		v := round3(float64((pr.ITLSum - w.itlSum).Microseconds()) / float64(n) / 1000)
		p.ITLMS = &v
	}
	w.itlCount, w.itlSum = pr.ITLCount, pr.ITLSum
	var v *telemetry.VLLMSample
	if w.scraper != nil && !w.metricsOff {
		s, err := w.scraper.Scrape(ctx)
		switch {
		case err == nil:
			v = &s
		case ctx.Err() != nil:
		case !w.series.haveMetrics:
			// The first reading decides: a server without vLLM's
			// /metrics is measured without them.
			w.firstErr, w.metricsOff = err, true
		default:
			w.scrapeErrors++
			if w.firstErr == nil {
				w.firstErr = err
			}
		}
	}
	var gpus []telemetry.GPU
	if w.gpus != nil {
		if g, err := w.gpus.GPUs(ctx); err == nil {
			gpus = g
		}
	}
	w.series.add(p, v, gpus)
	if w.progress != nil {
		pr.Elapsed = elapsed
		w.progress(pr, &p)
	}
}

// run reads every interval from start until ctx ends.
func (w *watcher) run(ctx context.Context, start time.Time) {
	for k := 1; ; k++ {
		if w.clock.SleepUntil(ctx, start.Add(time.Duration(k)*w.interval)) != nil {
			return
		}
		w.read(ctx, w.clock.Now().Sub(start))
	}
}

// addSpec adds the counters' increase since the previous reading: the
// first reading is the baseline (the server's drafts before the run are
// not the run's).
func (s *Series) addSpec(c vllm.SpecDecodeCounts) {
	if s.specLast == nil {
		s.specLast, s.spec = &c, &vllm.SpecDecodeCounts{}
		return
	}
	sum := s.spec.Add(c.Since(*s.specLast))
	s.spec = &sum
	s.specLast = &c
}
