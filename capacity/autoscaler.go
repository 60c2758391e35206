package capacity

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/vllm"
)

// Autoscaler is the thresholds derived from one replica's SLO knee and
// their replay over the traffic: the fleet handed over.
type Autoscaler struct {
	// TargetWaiting is vllm:num_requests_waiting per replica, TargetKV
	// vllm:kv_cache_usage_perc (0..1) averaged over replicas: the HPA's
	// AverageValue targets.
	TargetWaiting float64 `json:"target_num_requests_waiting"`
	TargetKV      float64 `json:"target_kv_cache_usage"`
	// WaitingMetric and KVMetric are those metrics' names in the vLLM
	// version planned; RateMetric the counter of answered requests whose
	// rate per replica is held at TargetRatePerS.
	WaitingMetric string `json:"waiting_metric"`
	KVMetric      string `json:"kv_metric"`
	RateMetric    string `json:"rate_metric"`
	// TargetRatePerS is the answered requests per second a replica
	// carries, the rate metric's target: the SLO capacity less the
	// headroom for the rise of the rate over a start-up and the HPA's
	// tolerance. The KV and waiting targets are one replica's at its SLO
	// capacity: guards (see autoscale).
	TargetRatePerS float64 `json:"target_rate_per_s"`
	StartupS       float64 `json:"startup_s"`
	StartupSource  string  `json:"startup_source"`
	CoolDownS      float64 `json:"cool_down_s"`
	IntervalS      float64 `json:"interval_s"`
	MinReplicas    int     `json:"min_replicas"`
	MaxReplicas    int     `json:"max_replicas"`
	// Policy says which bound on the replicas was handed over: "capped at
	// the ideal peak" (MaxReplicas is the most replicas any window needs)
	// or "uncapped" (twice that), and why; RateAsks is the count the rate
	// target alone asks for at the busiest window (its rate over
	// TargetRatePerS, rounded up), the peak an uncapped HPA heads for.
	Policy   string `json:"policy"`
	RateAsks int    `json:"rate_asks_at_peak"`
	// Flaps counts the replay's reversals: a replica added within twice
	// the cool-down of one removed, or removed within it of one added.
	Flaps  int      `json:"flaps"`
	Replay FleetRun `json:"replay"`
	// AutoscaledGPUHours is, when a static fleet is handed over
	// (PolicyStatic), what the autoscaler it replaced took.
	AutoscaledGPUHours float64 `json:"autoscaled_gpu_hours,omitempty"`
	// EnginesPerReplica is a data-parallel replica's engines (absent for
	// one). vLLM labels each engine's gauges with its index, so a sum
	// over a replica's series holds that many engines' KV usage: the
	// manifests divide by it (KEDA's query) or multiply the target (the
	// HPA's), where TargetKV is the engines' mean.
	EnginesPerReplica int `json:"engines_per_replica,omitempty"`
}

// FleetRun is a fleet over the whole traffic: replayed (the autoscaler),
// or worked out from the windows (a static fleet, Replayed false: the
// latencies and preemptions of a run it did not make are null).
type FleetRun struct {
	Replicas      string       `json:"replicas"`
	Replayed      bool         `json:"replayed"`
	Windows       int          `json:"windows"`
	WindowsMet    int          `json:"windows_met"`
	SLOAttainment float64      `json:"slo_attainment"`
	PeakReplicas  int          `json:"peak_replicas"`
	GPUHours      float64      `json:"gpu_hours"`
	CostUSD       float64      `json:"cost_usd"`
	Requests      int64        `json:"requests"`
	Preemptions   *int64       `json:"preemptions"`
	TTFT          *sim.Latency `json:"ttft_ms"`
	TPOT          *sim.Latency `json:"tpot_ms"`
	FellBehind    *sim.Backlog `json:"fell_behind,omitempty"`
	// Missed are the windows that missed the SLO: their start and the
	// largest value over its limit (1.2: 20% over).
	Missed []MissedWindow `json:"missed,omitempty"`
	// Series is replicas and arrivals over time (the plot's).
	Series []sim.Window `json:"series,omitempty"`
}

// MissedWindow is a window of a replay that missed the SLO.
type MissedWindow struct {
	StartS float64 `json:"start_s"`
	Miss   float64 `json:"miss"`
}

// hpaTolerance is the HorizontalPodAutoscaler's default tolerance
// (--horizontal-pod-autoscaler-tolerance 0.1).
const hpaTolerance = 0.1

// Policies of the replica bound an autoscaler is handed with.
const (
	PolicyCapped   = "capped at the ideal peak"
	PolicyUncapped = "uncapped"
	// PolicyStatic is a fleet that does not move (MinReplicas =
	// MaxReplicas): handed over where it meets every window for less
	// than the autoscaler, or meets windows it missed.
	PolicyStatic = "static"
)

// autoscale derives the autoscaler's thresholds from one replica's knee,
// replays the traffic with them, and works out the static fleet sized
// for the peak.
//
// Three metrics, the HPA taking the most replicas any asks for: the
// answered requests per second, whose target is the rate a replica should
// carry (r: the SLO capacity less headroom for the rise of the rate over a
// start-up and for the HPA's tolerance); the KV usage one replica shows at
// its SLO capacity (the mean of its scrapes) and the waiting requests it
// shows there (the 95th percentile, at least 1). The rate grows in
// proportion to a replica's load, as the HPA's arithmetic assumes (the sum
// over the fleet divided by the per-replica target), so it sizes the
// fleet. KV usage grows faster: a busier replica's requests last longer
// (TPOT grows with the batch) and hold their blocks longer, so three
// replicas at r/3 show less than a third of the target each and KV usage
// alone would fold them into one replica at more than r. Its target was
// once the usage at r: then it asked for a replica the rate did not, and
// the new replica's share lowered every replica's usage below the target
// again, and the HPA gave it back a cool-down later (Llama-3.1-8B on L40S,
// 2 to 30 req/s over 6 hours: 5 and 6 replicas alternating at the peak).
// At the knee it is a guard only: against requests longer than the
// trace's, as the waiting requests are against a queue that forms.
//
// The headroom in r makes the rate target ask for more replicas at the
// peak than the peak window needs (Qwen3-14B on H100-80GB, 2 to 30 req/s
// over a day: 10 against 7, flapping between 8 and 10 at noon). So the
// HPA is first replayed capped at the ideal peak; only when that misses a
// window is the uncapped one replayed too, and the one that meets more
// windows (then costs less) is handed over.
func (c *sizer) autoscale(ctx context.Context, o *Sizing) error {
	startup := c.opt.StartupS
	// The rate may rise while a new replica starts: the largest rise of
	// one window's rate over the window before, over the time from a
	// scrape to a ready replica.
	rise := 0.0
	for i := 1; i < len(o.Windows); i++ {
		a, b := o.Windows[i-1].RatePerS, o.Windows[i].RatePerS
		if a > 0 && b > a {
			rise = max(rise, (b-a)/a*(startup+c.req.IntervalS)/c.req.WindowS)
		}
	}
	rise = min(rise, 1)
	target := o.SLOCapacityPerS / ((1 + rise) * (1 + hpaTolerance))
	c.progress.setPhase(phaseReplay, fmt.Sprintf("the autoscaler's thresholds at %.3g req/s a replica", o.SLOCapacityPerS))
	kneeWaiting, targetKV, err := c.knee(ctx, o.SLOCapacityPerS)
	if err != nil {
		return err
	}
	minR, peakRate := o.PeakReplicas, 0.0
	for _, w := range o.Windows {
		minR = min(minR, w.Replicas)
		peakRate = max(peakRate, w.RatePerS)
	}
	a := &Autoscaler{TargetWaiting: math.Max(1, kneeWaiting), TargetKV: round3(targetKV),
		TargetRatePerS: round3(target), StartupS: startup, StartupSource: c.opt.StartupSource, CoolDownS: c.req.CoolDownS, IntervalS: c.req.IntervalS,
		MinReplicas: minR, MaxReplicas: o.PeakReplicas, Policy: PolicyCapped}
	if c.rep.Engines > 1 {
		a.EnginesPerReplica = c.rep.Engines
	}
	a.RateAsks = int(math.Ceil(peakRate/a.TargetRatePerS - 1e-9))
	v := c.opt.Version
	a.WaitingMetric, _ = vllm.MetricNameAt(vllm.MetricRequestsWaiting, v)
	a.KVMetric, _ = vllm.MetricNameAt(vllm.MetricKVCacheUsage, v)
	if e2e, ok := vllm.MetricNameAt(vllm.MetricE2ELatency, v); ok {
		a.RateMetric = e2e + "_count"
	}
	hpa := func(maxN int) *sim.HPA {
		return &sim.HPA{TargetRate: a.TargetRatePerS, TargetWaiting: a.TargetWaiting, TargetKV: a.TargetKV, Tolerance: hpaTolerance,
			CoolDownS: a.CoolDownS, Min: a.MinReplicas, Max: maxN}
	}
	c.progress.setPhase(phaseReplay, fmt.Sprintf("replaying the autoscaler, %d to %d replicas", a.MinReplicas, a.MaxReplicas))
	capped, err := c.replay(ctx, o, a, hpa(o.PeakReplicas), o.Windows[0].Replicas, -1)
	if err != nil {
		return err
	}
	a.Replay, a.Flaps = capped.run, capped.flaps
	uncapped := min(c.req.MaxReplicas, 2*o.PeakReplicas)
	if capped.run.WindowsMet < capped.run.Windows && uncapped > o.PeakReplicas {
		c.progress.setPhase(phaseReplay, fmt.Sprintf("replaying the autoscaler uncapped, up to %d replicas", uncapped))
		// It is the better one only if it misses fewer windows: past as
		// many as the capped one missed, it stops.
		free, err := c.replay(ctx, o, a, hpa(uncapped), o.Windows[0].Replicas, capped.run.Windows-capped.run.WindowsMet)
		if err != nil {
			return err
		}
		if !free.stopped && (free.run.WindowsMet > capped.run.WindowsMet ||
			(free.run.WindowsMet == capped.run.WindowsMet && free.run.GPUHours < capped.run.GPUHours)) {
			a.Replay, a.Flaps, a.MaxReplicas, a.Policy = free.run, free.flaps, uncapped, PolicyUncapped
		}
	}
	a.Replay.Replicas = "autoscaled"
	o.Autoscaler = a
	// The static fleet: the per-window peak all along. Every window has
	// at least the replicas its own replay met the SLO on, so it is worked
	// out, not replayed, unless it is a candidate to hand over.
	static := FleetRun{Replicas: fmt.Sprintf("%d, static", o.PeakReplicas), Windows: len(o.Windows), WindowsMet: len(o.Windows), SLOAttainment: 1,
		PeakReplicas: o.PeakReplicas, GPUHours: c.staticHours(o, o.PeakReplicas)}
	static.CostUSD = cents(static.GPUHours * c.opt.USDPerGPUHour)
	for _, w := range o.Windows {
		static.Requests += int64(w.Requests)
	}
	o.Static = &static
	var flat *replayed
	if a.MinReplicas == o.PeakReplicas && o.Windows[0].Replicas == o.PeakReplicas {
		// Capped at its floor, the HPA never moved: that replay was the
		// static fleet's.
		flat = &capped
	}
	if err := c.preferStatic(ctx, o, a, flat); err != nil {
		return err
	}
	if a.MinReplicas == a.MaxReplicas {
		// A floor at the peak is a fleet that never moves.
		a.Policy = PolicyStatic
	}
	return nil
}

// maxStaticTries bounds the static fleets replayed in the place of an
// autoscaler: the peak and two more replicas.
const maxStaticTries = 3

// staticHours is the GPU-hours of n replicas over the whole traffic.
func (c *sizer) staticHours(o *Sizing, n int) float64 {
	spans := 0.0
	for i := range o.Windows {
		spans += c.tr.span(i)
	}
	return round3(float64(n*c.opt.GPUsPerReplica) * spans / 3600)
}

// preferStatic hands over a static fleet in the autoscaler's place where
// one meets every window for less, or where the autoscaler misses windows
// a static fleet meets: an autoscaler that costs more than a fleet that
// never moves is no answer (on a flat load the uncapped HPA, asked for
// more than the peak by its rate target's headroom, flapped above it).
// The static fleets tried are replayed, from the per-window peak up, each
// only while it would cost less than the autoscaler; the first that meets
// every window is handed over. flat is the capped replay when that was
// already the peak's static fleet.
func (c *sizer) preferStatic(ctx context.Context, o *Sizing, a *Autoscaler, flat *replayed) error {
	missed := a.Replay.WindowsMet < a.Replay.Windows
	for n := o.PeakReplicas; n <= c.req.MaxReplicas && n < o.PeakReplicas+maxStaticTries; n++ {
		hours := c.staticHours(o, n)
		if !missed && hours >= a.Replay.GPUHours {
			return nil
		}
		run := flat
		if n != o.PeakReplicas || run == nil {
			c.progress.setPhase(phaseReplay, fmt.Sprintf("replaying a static fleet of %d replicas", n))
			// The peak's runs to the end: it is the static fleet the
			// report shows; a larger one only needs a verdict.
			allowed := 0
			if n == o.PeakReplicas {
				allowed = -1
			}
			r, err := c.replay(ctx, o, a, nil, n, allowed)
			if err != nil {
				return err
			}
			run = &r
		}
		run.run.Replicas = fmt.Sprintf("%d, static", n)
		if n == o.PeakReplicas {
			st := run.run
			o.Static = &st
		}
		if run.stopped || run.run.WindowsMet < run.run.Windows {
			continue
		}
		if !missed && run.run.GPUHours >= a.Replay.GPUHours {
			return nil
		}
		a.AutoscaledGPUHours = a.Replay.GPUHours
		a.Replay, a.Flaps, a.MinReplicas, a.MaxReplicas, a.Policy = run.run, 0, n, n, PolicyStatic
		return nil
	}
	return nil
}

// replayed is one replay of the autoscaler.
type replayed struct {
	run   FleetRun
	flaps int
	// stopped: the replay ended early, once it had missed more windows
	// than it was allowed.
	stopped bool
}

// flapRecorder is the HPA with its decisions kept: a reversal within
// twice the cool-down of the change before it is a flap.
type flapRecorder struct {
	*sim.HPA
	within  float64
	lastAt  float64
	lastDir int
	flaps   int
}

func (f *flapRecorder) Desired(m sim.FleetMetrics) int {
	want := f.HPA.Desired(m)
	dir := 0
	switch {
	case want > m.Replicas:
		dir = 1
	case want < m.Replicas:
		dir = -1
	}
	if dir != 0 {
		if f.lastDir == -dir && m.Now-f.lastAt <= f.within {
			f.flaps++
		}
		f.lastAt, f.lastDir = m.Now, dir
	}
	return want
}

// replay serves the whole traffic with a fleet of start replicas, scaled
// by hpa (nil: a static fleet), and judges it per window. With allowed
// >= 0 it stops once more than allowed windows missed (stopped is then
// set, and the run is not whole).
func (c *sizer) replay(ctx context.Context, o *Sizing, a *Autoscaler, hpa *sim.HPA, start, allowed int) (replayed, error) {
	src, closer, err := c.tr.source()
	if err != nil {
		return replayed{}, err
	}
	defer closer()
	var out replayed
	run := &out.run
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	end := float64(len(o.Windows)) * c.req.WindowS
	rec := &flapRecorder{HPA: hpa, within: 2 * a.CoolDownS}
	var scaler sim.Scaler = rec
	if hpa == nil {
		scaler = nil
	}
	opt := sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.rep.FrontEnd, Window: c.req.WindowS / 10},
		Replicas: start, Engines: c.rep.Engines, Router: c.req.Router, SLOWindow: c.req.WindowS, MaxReplicas: c.req.MaxReplicas,
		Scaler: scaler, ScaleInterval: a.IntervalS, StartupS: a.StartupS, FleetOnly: true,
		OnWindow: func(start float64, r *sim.Report) {
			mu.Lock()
			defer mu.Unlock()
			run.Windows++
			if ok, miss := Judge(c.req.SLO, r); ok {
				run.WindowsMet++
			} else {
				run.Missed = append(run.Missed, MissedWindow{StartS: start, Miss: round3(miss)})
				if allowed >= 0 && len(run.Missed) > allowed {
					out.stopped = true
					cancel()
				}
			}
			c.progress.replay(start / end)
		}}
	rep, err := sim.RunFleet(runCtx, c.rep.Config, src, opt)
	c.runs.replays.Add(1)
	if err != nil {
		if out.stopped && ctx.Err() == nil {
			return out, nil
		}
		return replayed{}, err
	}
	f := rep.Fleet
	run.Replayed = true
	run.PeakReplicas = rep.PeakReplicas
	run.GPUHours = round3(rep.ReplicaSeconds * float64(c.opt.GPUsPerReplica) / 3600)
	run.CostUSD = cents(run.GPUHours * c.opt.USDPerGPUHour)
	run.Requests, run.FellBehind = f.Requests, f.FellBehind
	pre, ttft, tpot := f.Preemptions, f.TTFT, f.TPOT
	run.Preemptions, run.TTFT, run.TPOT = &pre, &ttft, &tpot
	if run.Windows > 0 {
		run.SLOAttainment = math.Round(float64(run.WindowsMet)/float64(run.Windows)*1e4) / 1e4
	}
	run.Series = f.Series
	sort.Slice(run.Missed, func(i, j int) bool { return run.Missed[i].StartS < run.Missed[j].StartS })
	out.flaps = rec.flaps
	return out, nil
}
