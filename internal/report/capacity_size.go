package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// sizer sizes one GPU option.
type sizer struct {
	e     *Engine
	files Files
	req   CapacityRequest
	tr    *trace
	// met is the last one-replica run that met the SLO: the bisection
	// only raises the met rate, so after sloCapacity it is the run at
	// the capacity.
	met *sim.Report
}

func (c *sizer) progress(format string, a ...any) {
	if c.req.Progress != nil {
		c.req.Progress(fmt.Sprintf(format, a...))
	}
}

func sizeOption(ctx context.Context, env Env, files Files, req CapacityRequest, tr *trace, name string, prices map[string]Price) (CapacityOption, string, error) {
	er := req.Engine
	er.Plan.GPU = name
	e, err := NewEngine(ctx, env, files, er)
	var nf *NoFitError
	var fitNote string
	if errors.As(err, &nf) {
		// The given settings do not start here: the planner's recommended
		// ones (a shorter max-model-len, another utilization) may.
		rec, rerr := memory.Recommend(e.Input, memory.Options{Policy: req.Policy})
		if rerr != nil || rec.MaxModelLen <= 0 {
			return CapacityOption{GPU: e.Evidence.Sel.Device.Name, GPUsPerReplica: e.Budget.Count, NoFit: true,
				Notes: []string{nf.Error()}}, e.Evidence.Spec.ID, nil
		}
		set := e.Budget.Settings
		set.GPUMemoryUtilization, set.MaxModelLen, set.MaxNumSeqs = rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs
		set.NumGPUBlocksOverride = 0
		e2, aerr := e.At(set)
		if aerr != nil || !e2.Budget.Fits {
			return CapacityOption{GPU: e.Evidence.Sel.Device.Name, GPUsPerReplica: e.Budget.Count, NoFit: true,
				Notes: []string{nf.Error()}}, e.Evidence.Spec.ID, nil
		}
		e, err = e2, nil
		fitNote = fmt.Sprintf("%s: the given settings do not fit, so the recommended ones: --max-model-len %d --gpu-memory-utilization %.2f --max-num-seqs %d",
			e.Evidence.Sel.Device.Name, rec.MaxModelLen, rec.GPUMemoryUtilization, rec.MaxNumSeqs)
	}
	if err != nil {
		return CapacityOption{}, "", err
	}
	dev := e.Evidence.Sel.Device.Name
	o := CapacityOption{GPU: dev, GPUsPerReplica: e.Budget.Count, Settings: e.Settings(), Notes: e.Notes}
	if fitNote != "" {
		o.Notes = append(append([]string(nil), o.Notes...), fitNote)
	}
	if p, ok := prices[dev]; ok {
		o.USDPerGPUHour, o.PriceSource = p.USDPerGPUHour, p.Source
	} else {
		o.Notes = append(o.Notes, fmt.Sprintf("no price for %s: give --price %s=USD_PER_HOUR", dev, dev))
	}
	c := &sizer{e: e, files: files, req: req, tr: tr}
	c.progress("%s: one replica's SLO capacity", dev)
	capacity, miss, err := c.sloCapacity(ctx)
	if err != nil {
		return o, "", err
	}
	if capacity == 0 {
		o.Miss = round3(miss)
		return o, e.Evidence.Spec.ID, nil
	}
	// max-num-seqs: the one the traffic favours at the SLO capacity
	// (simulate --compare's search, at that rate), kept when one replica
	// then carries more within the SLO.
	if n, err := c.chooseSeqs(ctx, capacity); err != nil {
		return o, "", err
	} else if n != e.Config.MaxNumSeqs {
		set := e.Budget.Settings
		set.MaxNumSeqs = n
		if e2, err := e.At(set); err == nil && e2.Budget.Fits {
			c2 := &sizer{e: e2, files: files, req: req, tr: tr}
			c.progress("%s: one replica's SLO capacity at max-num-seqs %d", dev, n)
			cap2, _, err := c2.sloCapacity(ctx)
			if err != nil {
				return o, "", err
			}
			if cap2 > capacity {
				o.Notes = append(o.Notes, fmt.Sprintf("max-num-seqs %d, chosen by simulation: one replica carries %.3g req/s within the SLO, against %.3g at %d", n, cap2, capacity, e.Config.MaxNumSeqs))
				c, e, capacity = c2, e2, cap2
				o.Settings = e.Settings()
			}
		}
	}
	o.SLOCapacityPerS = capacity
	o.CapacityProbe = CapacityProbe(req.Workload, capacity).Describe()
	if _, ok := e.Timer.(*sim.Roofline); ok {
		conf := sim.ConfidenceOfRun(e.Budget, c.met)
		o.Confidence = &conf
	}
	if err := c.windows(ctx, &o); err != nil {
		return o, "", err
	}
	if !o.Met {
		return o, e.Evidence.Spec.ID, nil
	}
	if err := c.replays(ctx, &o); err != nil {
		return o, "", err
	}
	return o, e.Evidence.Spec.ID, nil
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// judge is a run against the SLO: met, and how far the worst bound is
// from its limit (value / limit; a run that fell behind is 10).
func judge(bounds []slo.Bound, r *sim.Report) (bool, float64) {
	res := CheckSLO(bounds, r)
	ok := met(res) != nil && *met(res) && r.FellBehind == nil
	worst := 0.0
	for _, s := range res {
		switch {
		case s.LimitMS > 0:
			worst = max(worst, s.ValueMS/s.LimitMS)
		case s.LimitRate > 0:
			worst = max(worst, s.Rate/s.LimitRate)
		}
	}
	if r.FellBehind != nil {
		worst = max(worst, 10)
	}
	return ok, worst
}

// oneReplica runs the capacity probe at rate on one replica.
func (c *sizer) oneReplica(ctx context.Context, rate float64) (bool, float64, error) {
	rep, _, err := c.e.Run(ctx, c.files, CapacityProbe(c.req.Workload, rate), sim.RunOptions{})
	if err != nil {
		return false, 0, err
	}
	ok, worst := judge(c.req.SLO, rep)
	if ok {
		c.met = rep
	}
	return ok, worst, nil
}

// sloCapacity is the highest rate one replica serves within the SLO: from
// 1 req/s doubled until missed (or halved until met), then bisected until
// the missed rate is within 2% of the met one. 0 when even 1/1024 req/s
// misses; miss is then the closest run's.
func (c *sizer) sloCapacity(ctx context.Context) (float64, float64, error) {
	lo, hi := 0.0, 0.0
	r := 1.0
	ok, miss, err := c.oneReplica(ctx, r)
	if err != nil {
		return 0, 0, err
	}
	if ok {
		lo = r
		for hi == 0 && r < 1<<16 {
			r *= 2
			if ok, _, err = c.oneReplica(ctx, r); err != nil {
				return 0, 0, err
			}
			if ok {
				lo = r
			} else {
				hi = r
			}
		}
		if hi == 0 {
			return lo, 0, nil
		}
	} else {
		hi = r
		for lo == 0 && r > 1.0/1024 {
			r /= 2
			var m float64
			if ok, m, err = c.oneReplica(ctx, r); err != nil {
				return 0, 0, err
			}
			miss = min(miss, m)
			if ok {
				lo = r
			} else {
				hi = r
			}
		}
		if lo == 0 {
			return 0, miss, nil
		}
	}
	// Rates are tried at the report's resolution (0.001 req/s), so the
	// capacity reported is a rate that was run and met, probe for probe.
	for hi/lo > 1.02 {
		mid := round3(math.Sqrt(lo * hi))
		if mid <= lo || mid >= hi {
			break
		}
		if ok, _, err = c.oneReplica(ctx, mid); err != nil {
			return 0, 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, 0, nil
}

// chooseSeqs is the max-num-seqs the capacity probe at rate favours
// (sim.ChooseMaxNumSeqs over the usual candidates and the planner's rule).
func (c *sizer) chooseSeqs(ctx context.Context, rate float64) (int, error) {
	top := c.e.Config.MaxNumSeqs
	rec, err := memory.Recommend(c.e.Input, memory.Options{})
	if err != nil {
		return top, nil
	}
	probe := CapacityProbe(c.req.Workload, rate)
	engines := map[int]*Engine{top: c.e}
	choice, err := sim.ChooseMaxNumSeqs(ctx, sim.SeqsSearch{
		Candidates: sim.SeqsCandidates(top, rec.MaxNumSeqs),
		Config: func(n int) (sim.Config, bool, error) {
			e, ok := engines[n]
			if !ok {
				set := c.e.Budget.Settings
				set.MaxNumSeqs = n
				var err error
				if e, err = c.e.At(set); err != nil {
					return sim.Config{}, false, err
				}
				engines[n] = e
			}
			return e.Config, e.Budget.Fits, nil
		},
		Open: func() (sim.Source, func(), error) {
			st, closer, err := probe.Open(c.files.open)
			if err != nil {
				return nil, nil, err
			}
			return sim.FromWorkload(st), func() { closer.Close() }, nil
		},
		Run:       sim.RunOptions{FrontEnd: c.e.FrontEnd},
		Reference: top,
		Parallel:  runtime.GOMAXPROCS(0),
	})
	if err != nil {
		return top, err
	}
	return choice.MaxNumSeqs, nil
}

// fleet replays a window (after its warm-up) through n replicas.
func (c *sizer) fleet(ctx context.Context, warm, reqs []workload.Request, start float64, n int) (bool, float64, error) {
	origin := max(start-warmUpS, 0)
	src := &sliceSource{reqs: [][]workload.Request{warm, reqs}, origin: origin}
	rep, err := sim.RunFleet(ctx, c.e.Config, src, sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.e.FrontEnd, Window: 60},
		Replicas: n, Router: c.req.Router, JudgeFrom: start - origin})
	if err != nil {
		return false, 0, err
	}
	ok, worst := judge(c.req.SLO, rep.Fleet)
	return ok, worst, nil
}

// windows finds each window's fewest replicas: from the rate's guess (the
// window's rate over one replica's capacity), down while one fewer still
// meets the SLO, up while it misses. Windows are independent, so they are
// sized on every CPU at once, a few windows read ahead (memory: those
// windows' requests).
func (c *sizer) windows(ctx context.Context, o *CapacityOption) error {
	w := c.req.WindowS
	o.Windows = make([]CapacityWindow, len(c.tr.counts))
	workers := max(runtime.GOMAXPROCS(0), 1)
	type job struct {
		i          int
		warm, reqs []workload.Request
	}
	jobs := make(chan job, workers)
	errs := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				cw, err := c.window(ctx, o.SLOCapacityPerS, j.i, j.warm, j.reqs)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				o.Windows[j.i] = cw
				c.progress("%s: window at %s, %.3g req/s: %d replicas", o.GPU, time.Duration(cw.StartS*float64(time.Second)), cw.RatePerS, cw.Replicas)
			}
		}()
	}
	err := c.tr.each(ctx, c.files, func(i int, warm, reqs []workload.Request) error {
		// each reuses its slices: the job keeps copies.
		select {
		case jobs <- job{i, slices.Clone(warm), slices.Clone(reqs)}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(jobs)
	wg.Wait()
	select {
	case werr := <-errs:
		return werr
	default:
	}
	if err != nil {
		return err
	}
	o.Met = true
	sum := 0
	for _, cw := range o.Windows {
		if !cw.Met {
			o.Met = false
			o.Miss = max(o.Miss, cw.Miss)
		}
		o.PeakReplicas = max(o.PeakReplicas, cw.Replicas)
		sum += cw.Replicas
	}
	n := float64(len(o.Windows))
	o.MeanReplicas = round3(float64(sum) / n)
	o.PeakGPUs = o.PeakReplicas * o.GPUsPerReplica
	o.MeanGPUs = round3(o.MeanReplicas * float64(o.GPUsPerReplica))
	o.GPUHours = round3(float64(sum) * w * float64(o.GPUsPerReplica) / 3600)
	o.CostUSD = math.Round(o.GPUHours*o.USDPerGPUHour*100) / 100
	return nil
}

// window sizes window i.
func (c *sizer) window(ctx context.Context, capacity float64, i int, warm, reqs []workload.Request) (CapacityWindow, error) {
	w := c.req.WindowS
	start := float64(i) * w
	cw := CapacityWindow{StartS: start, Requests: len(reqs), RatePerS: round3(float64(len(reqs)) / w), Replicas: 1, Met: true}
	if len(reqs) == 0 {
		return cw, nil
	}
	n := min(max(int(math.Ceil(cw.RatePerS/capacity)), 1), c.req.MaxReplicas)
	ok, miss, err := c.fleet(ctx, warm, reqs, start, n)
	if err != nil {
		return cw, err
	}
	if ok {
		for n > 1 {
			down, _, err := c.fleet(ctx, warm, reqs, start, n-1)
			if err != nil {
				return cw, err
			}
			if !down {
				break
			}
			n--
		}
	}
	for !ok && n < c.req.MaxReplicas {
		n++
		if ok, miss, err = c.fleet(ctx, warm, reqs, start, n); err != nil {
			return cw, err
		}
	}
	cw.Replicas, cw.Met = n, ok
	if !ok {
		cw.Miss = round3(miss)
	}
	return cw, nil
}

// scrapes records what an autoscaler would scrape from one replica.
type scrapes struct {
	waiting []int
	kvUsage float64
}

func (s *scrapes) Desired(m sim.FleetMetrics) int {
	s.waiting = append(s.waiting, m.Waiting)
	s.kvUsage += m.KVUsage
	return 1
}

// knee runs one replica at rate, scraped every 5 s: the mean KV usage and
// the 95th percentile of the waiting requests.
func (c *sizer) knee(ctx context.Context, rate float64) (waitingP95, kv float64, err error) {
	st, closer, err := CapacityProbe(c.req.Workload, rate).Open(c.files.open)
	if err != nil {
		return 0, 0, err
	}
	defer closer.Close()
	s := &scrapes{}
	if _, err := sim.RunFleet(ctx, c.e.Config, sim.FromWorkload(st), sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.e.FrontEnd},
		Replicas: 1, Scaler: s, ScaleInterval: 5}); err != nil {
		return 0, 0, err
	}
	n := len(s.waiting)
	if n == 0 {
		return 0, 0, nil
	}
	sort.Ints(s.waiting)
	return float64(s.waiting[min(n-1, int(math.Ceil(0.95*float64(n)))-1)]), s.kvUsage / float64(n), nil
}

// hpaTolerance is the HorizontalPodAutoscaler's default tolerance
// (--horizontal-pod-autoscaler-tolerance 0.1).
const hpaTolerance = 0.1

// replays derives the autoscaler's thresholds from one replica's knee and
// replays the trace with it, and with the static fleet sized for the peak.
//
// Three metrics, the HPA taking the most replicas any asks for: the
// answered requests per second, whose target is the rate a replica should
// carry (r: the SLO capacity less headroom for the rise of the rate over a
// start-up and for the HPA's tolerance); the KV usage one replica shows at
// r; the waiting requests it shows at its SLO capacity (the 95th
// percentile of its scrapes, at least 1). The rate grows in proportion to
// a replica's load, as the HPA's arithmetic assumes (the sum over the
// fleet divided by the per-replica target). KV usage grows faster: a
// busier replica's requests last longer (TPOT grows with the batch) and
// hold their blocks longer, so three replicas at r/3 show less than a
// third of the target each and KV usage alone would fold them into one
// replica at more than r; on Llama-3.1-8B on an H100 the usage at r/8 is a
// third of r's over 8. With the rate beside it, KV usage guards against
// traffic whose requests grow longer than the trace's, and the waiting
// requests against a queue that forms.
func (c *sizer) replays(ctx context.Context, o *CapacityOption) error {
	startup, source := c.req.StartupS, "--startup-time"
	if startup <= 0 {
		startup, source = StartupEstimate(c.e)
	}
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
	c.progress("%s: the autoscaler's thresholds at %.3g req/s a replica", o.GPU, target)
	_, targetKV, err := c.knee(ctx, target)
	if err != nil {
		return err
	}
	kneeWaiting, _, err := c.knee(ctx, o.SLOCapacityPerS)
	if err != nil {
		return err
	}
	minR := o.PeakReplicas
	for _, w := range o.Windows {
		minR = min(minR, w.Replicas)
	}
	a := &Autoscaler{TargetWaiting: math.Max(1, kneeWaiting), TargetKV: math.Round(targetKV*1000) / 1000,
		TargetRatePerS: round3(target), StartupS: startup, StartupSource: source, CoolDownS: c.req.CoolDownS, IntervalS: c.req.IntervalS,
		MinReplicas: minR, MaxReplicas: min(c.req.MaxReplicas, 2*o.PeakReplicas)}
	v := c.e.Budget.Settings.Version
	a.WaitingMetric, _ = vllm.MetricNameAt(vllm.MetricRequestsWaiting, v)
	a.KVMetric, _ = vllm.MetricNameAt(vllm.MetricKVCacheUsage, v)
	if e2e, ok := vllm.MetricNameAt(vllm.MetricE2ELatency, v); ok {
		a.RateMetric = e2e + "_count"
	}
	hpa := &sim.HPA{TargetRate: a.TargetRatePerS, TargetWaiting: a.TargetWaiting, TargetKV: a.TargetKV, Tolerance: hpaTolerance, CoolDownS: a.CoolDownS, Min: a.MinReplicas, Max: a.MaxReplicas}
	c.progress("%s: replaying the autoscaler and %d replicas", o.GPU, o.PeakReplicas)
	// The two replays are independent: the static one on another CPU.
	var static FleetRun
	var staticErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		static, staticErr = c.replay(ctx, o, o.PeakReplicas, nil, 0)
	}()
	a.Replay, err = c.replay(ctx, o, o.Windows[0].Replicas, hpa, startup)
	<-done
	if err != nil {
		return err
	}
	if staticErr != nil {
		return staticErr
	}
	a.Replay.Replicas = "autoscaled"
	o.Autoscaler = a
	static.Replicas = fmt.Sprintf("%d, static", o.PeakReplicas)
	o.Static = &static
	return nil
}

// replay serves the whole trace with a fleet (autoscaled when scaler is
// not nil) and judges it per window.
func (c *sizer) replay(ctx context.Context, o *CapacityOption, replicas int, scaler sim.Scaler, startup float64) (FleetRun, error) {
	st, closer, err := c.req.Workload.Open(c.files.open)
	if err != nil {
		return FleetRun{}, err
	}
	defer closer.Close()
	var run FleetRun
	opt := sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.e.FrontEnd, Window: c.req.WindowS / 10},
		Replicas: replicas, Router: c.req.Router, SLOWindow: c.req.WindowS, MaxReplicas: c.req.MaxReplicas,
		OnWindow: func(start float64, r *sim.Report) {
			run.Windows++
			if ok, miss := judge(c.req.SLO, r); ok {
				run.WindowsMet++
			} else {
				run.Missed = append(run.Missed, MissedWindow{StartS: start, Miss: round3(miss)})
			}
		}}
	if scaler != nil {
		opt.Scaler, opt.ScaleInterval, opt.StartupS = scaler, c.req.IntervalS, startup
	}
	rep, err := sim.RunFleet(ctx, c.e.Config, sim.FromWorkload(st), opt)
	if err != nil {
		return FleetRun{}, err
	}
	f := rep.Fleet
	run.PeakReplicas = rep.PeakReplicas
	run.GPUHours = round3(rep.ReplicaSeconds * float64(o.GPUsPerReplica) / 3600)
	run.CostUSD = math.Round(run.GPUHours*o.USDPerGPUHour*100) / 100
	run.Requests, run.Preemptions, run.TTFT, run.TPOT, run.FellBehind = f.Requests, f.Preemptions, f.TTFT, f.TPOT, f.FellBehind
	if run.Windows > 0 {
		run.SLOAttainment = math.Round(float64(run.WindowsMet)/float64(run.Windows)*1e4) / 1e4
	}
	run.Series = f.Series
	sort.Slice(run.Missed, func(i, j int) bool { return run.Missed[i].StartS < run.Missed[j].StartS })
	return run, nil
}

// StartupEstimate is the time from the decision to add a replica to its
// first request served, when --startup-time is not given: 30 s to start
// the pod (the image already on the node), the weights read at 1 GB/s (a
// node-local NVMe or page cache; a network volume is slower), and 60 s for
// vLLM's engine start (the profile run, torch.compile from its cache, the
// CUDA-graph capture). It is an estimate, not a measurement: the source
// says so.
func StartupEstimate(e *Engine) (float64, string) {
	weights := float64(e.Budget.PerGPU.Weights) * float64(max(e.Budget.Count, 1))
	load := weights / 1e9
	s := math.Round(30 + load + 60)
	return s, fmt.Sprintf("estimate: 30 s pod start + %.0f GB of weights at 1 GB/s + 60 s profile, compile cache and CUDA-graph capture; measure yours (pod start to /health) and give --startup-time", weights/1e9)
}
