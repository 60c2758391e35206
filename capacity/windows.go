package capacity

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// learned is what the replays made so far say: per fleet size, the
// busiest window it served within the SLO and the lightest it missed. A
// window at rate λ then needs at most n replicas when a window at λ or
// more met on n, and more than n when one at λ or less missed on n: the
// fewest replicas a window needs rises with its rate. Two windows of
// nearly the same rate may be sized one replica apart by their own
// searches (the noise of their arrivals); either answer is within the
// SLO capacity's own resolution, 2% of the rate, and
// TestRoundsAgreeWithExhaustive holds the answers to that.
type learned struct {
	metMax  map[int]float64
	missMin map[int]float64
}

func (l *learned) add(n int, rate float64, met bool) {
	if met {
		l.metMax[n] = max(l.metMax[n], rate)
		return
	}
	if v, ok := l.missMin[n]; !ok || rate < v {
		l.missMin[n] = rate
	}
}

// bounds is what the replays say of a window at rate: it misses on fewer
// than lo replicas and meets on hi (hi is maxN+1 when nothing says).
func (l *learned) bounds(rate float64, maxN int) (lo, hi int) {
	lo, hi = 1, maxN+1
	for n, r := range l.missMin {
		if r <= rate {
			lo = max(lo, n+1)
		}
	}
	for n, r := range l.metMax {
		if r >= rate {
			hi = min(hi, n)
		}
	}
	return lo, hi
}

// guess is the fleet to try first for a window at rate: the replicas of
// the nearest window that met, scaled by the rates (a fleet carries more
// per replica than one replica alone: round-robin evens out its
// arrivals), else the rate over one replica's SLO capacity.
func (l *learned) guess(rate, single float64) int {
	// The least busy window that met at or above the rate, else the
	// busiest below it; ties to the fewer replicas (the map's order must
	// not choose).
	n, at := 0, 0.0
	for k, r := range l.metMax {
		if r >= rate && (n == 0 || r < at || (r == at && k < n)) {
			n, at = k, r
		}
	}
	if n == 0 {
		for k, r := range l.metMax {
			if r > at || (r == at && k < n) {
				n, at = k, r
			}
		}
	}
	if n == 0 {
		return max(int(math.Ceil(rate/single-1e-9)), 1)
	}
	return max(int(math.Ceil(float64(n)*rate/at-1e-9)), 1)
}

// rounds orders the windows to size: sorted by rate, the middle one first,
// then the middles of the halves, and so on, as a bisection visits them.
// Every window of a round is sized from what the rounds before learned,
// so the answer does not depend on which worker ends first, and each
// round's windows, bracketed by windows already replayed, are mostly
// answered without a replay of their own. Windows without requests are
// left out (one replica, met).
func rounds(rates []float64) [][]int {
	var idx []int
	for i, r := range rates {
		if r > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return rates[idx[a]] < rates[idx[b]] })
	var out [][]int
	var visit func(lo, hi, depth int)
	visit = func(lo, hi, depth int) {
		if lo >= hi {
			return
		}
		mid := lo + (hi-lo)/2
		for len(out) <= depth {
			out = append(out, nil)
		}
		out[depth] = append(out[depth], idx[mid])
		visit(lo, mid, depth+1)
		visit(mid+1, hi, depth+1)
	}
	visit(0, len(idx), 0)
	for _, r := range out {
		sort.Ints(r)
	}
	return out
}

// windows finds each window's fewest replicas, round by round (rounds);
// within a round, windows are sized on every CPU at once, a few read
// ahead (memory: those windows' requests).
func (c *sizer) windows(ctx context.Context, o *Sizing) error {
	w := c.req.WindowS
	n := len(c.tr.counts)
	o.Windows = make([]Window, n)
	rates := make([]float64, n)
	for i, k := range c.tr.counts {
		span := c.tr.span(i)
		rates[i] = round3(float64(k) / span)
		o.Windows[i] = Window{StartS: float64(i) * w, SpanS: round3(span), Requests: k, RatePerS: rates[i], Replicas: 1, Met: true}
	}
	l := &learned{metMax: map[int]float64{}, missMin: map[int]float64{}}
	order := rounds(rates)
	if c.req.exhaustive {
		order = [][]int{nil}
		for i, r := range rates {
			if r > 0 {
				order[0] = append(order[0], i)
			}
		}
	}
	total := 0
	for _, r := range order {
		total += len(r)
	}
	c.progress.windows(0, total)
	done := 0
	for _, round := range order {
		// What the round decides from the rounds before, and which of its
		// windows need a replay.
		type todo struct{ lo, hi, guess int }
		plan := map[int]todo{}
		for _, i := range round {
			lo, hi := 1, c.req.MaxReplicas+1
			if !c.req.exhaustive {
				lo, hi = l.bounds(rates[i], c.req.MaxReplicas)
				if lo > hi {
					// The replays disagree about this rate (their noise):
					// it is searched as if nothing were known.
					lo, hi = 1, c.req.MaxReplicas+1
				}
			}
			if lo == hi && hi <= c.req.MaxReplicas {
				o.Windows[i].Replicas = hi
				c.runs.windowsInferred.Add(1)
				done++
				continue
			}
			plan[i] = todo{lo, min(hi, c.req.MaxReplicas+1), l.guess(rates[i], c.capacityPerS)}
		}
		results := make(map[int]windowResult, len(plan))
		var mu sync.Mutex
		err := c.parallel(ctx, func(i int) bool { _, ok := plan[i]; return ok }, func(ctx context.Context, i int, warm, reqs []workload.Request) error {
			p := plan[i]
			res, err := c.window(ctx, i, warm, reqs, p.lo, p.hi, p.guess)
			if err != nil {
				return err
			}
			mu.Lock()
			results[i] = res
			done++
			c.progress.windows(done, total)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		// Learned in the window's order, so the table is the same
		// whichever worker ended first.
		for _, i := range round {
			res, ok := results[i]
			if !ok {
				continue
			}
			for _, t := range res.tried {
				l.add(t.n, rates[i], t.met)
			}
			o.Windows[i].Replicas, o.Windows[i].Met, o.Windows[i].Miss, o.Windows[i].Replayed = res.n, res.met, res.miss, true
		}
		c.progress.windows(done, total)
	}
	o.Met = true
	// Replica-seconds over the windows' own spans: a short last window
	// holds its replicas for its span, not a whole window.
	held, spans := 0.0, 0.0
	for i, cw := range o.Windows {
		if !cw.Met {
			o.Met = false
			o.Miss = max(o.Miss, cw.Miss)
		}
		o.PeakReplicas = max(o.PeakReplicas, cw.Replicas)
		held += float64(cw.Replicas) * c.tr.span(i)
		spans += c.tr.span(i)
	}
	g := c.opt.GPUsPerReplica
	o.MeanReplicas = round3(held / spans)
	o.PeakGPUs = o.PeakReplicas * g
	o.MeanGPUs = round3(o.MeanReplicas * float64(g))
	o.GPUHours = round3(held * float64(g) / 3600)
	o.CostUSD = cents(o.GPUHours * c.opt.USDPerGPUHour)
	return nil
}

func cents(usd float64) float64 { return math.Round(usd*100) / 100 }

// parallel runs fn on the windows want asks for, on every CPU, reading
// the traffic once with a few windows read ahead. The first error ends
// every run.
func (c *sizer) parallel(ctx context.Context, want func(int) bool, fn func(ctx context.Context, i int, warm, reqs []workload.Request) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		i          int
		warm, reqs []workload.Request
	}
	k := workers()
	jobs := make(chan job, k)
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := fn(ctx, j.i, j.warm, j.reqs); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	err := c.tr.each(ctx, want, nil, func(i int, warm, reqs []workload.Request) error {
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
	return err
}

// windowResult is one window's search: the answer and every replay made.
type windowResult struct {
	n     int
	met   bool
	miss  float64
	tried []tried
}

type tried struct {
	n   int
	met bool
}

// window sizes window i, known to miss on fewer than lo replicas and to
// meet on hi (hi past MaxReplicas: not known): the fewest replicas that
// meet the SLO, searched from guess. While one side of the bracket is
// open the search gallops (steps of 1, 2, 4, ... away from the last
// verdict), then bisects. Replays that only give a verdict stop as soon
// as they miss; one on MaxReplicas goes to the end, since its miss is
// the answer when it misses.
func (c *sizer) window(ctx context.Context, i int, warm, reqs []workload.Request, lo, hi, guess int) (windowResult, error) {
	maxN := c.req.MaxReplicas
	var res windowResult
	try := func(n int) (bool, float64, error) {
		ok, miss, err := c.fleet(ctx, warm, reqs, float64(i)*c.req.WindowS, n, n < maxN)
		if err == nil {
			res.tried = append(res.tried, tried{n, ok})
		}
		return ok, miss, err
	}
	if lo > maxN {
		// Busier than a window that missed on the most replicas allowed:
		// replayed there, for how far it misses.
		ok, miss, err := try(maxN)
		res.n, res.met, res.miss = maxN, ok, round3(miss)
		return res, err
	}
	n := min(max(guess, lo), min(hi, maxN))
	if n == hi {
		// Known to meet there (and lo < hi): only the way down is open.
		n = hi - 1
	}
	loKnown := false // a miss was seen at lo-1 in this search
	step := 1
	for {
		ok, miss, err := try(n)
		if err != nil {
			return res, err
		}
		if ok {
			hi = n
		} else {
			lo, loKnown = n+1, true
			if n == maxN {
				res.n = maxN
				if !math.IsInf(miss, 1) {
					res.miss = round3(miss)
				}
				return res, nil
			}
		}
		if lo >= hi {
			res.n, res.met = hi, true
			return res, nil
		}
		switch {
		case ok && !loKnown:
			n = max(hi-step, lo)
		case !ok && hi > maxN:
			n = min(lo-1+step, maxN)
		default:
			n = lo + (hi-lo)/2
		}
		step *= 2
	}
}

// fleet replays a window (after its warm-up) through n replicas; with
// early, it stops as soon as it is sure to miss (its miss is then +Inf).
func (c *sizer) fleet(ctx context.Context, warm, reqs []workload.Request, start float64, n int, early bool) (bool, float64, error) {
	origin := max(start-warmUpS, 0)
	src := &sliceSource{reqs: [][]workload.Request{warm, reqs}, origin: origin}
	runCtx, w := watched(ctx, c.req.SLO, int64(len(reqs)), start-origin)
	opt := sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.rep.FrontEnd, Window: 60},
		Replicas: n, Engines: c.rep.Engines, Router: c.req.Router, JudgeFrom: start - origin, FleetOnly: true}
	if early {
		opt.OnFinish = w.finish
		opt.OnReject = func(*sim.Rejection) { w.reject() }
	}
	rep, err := sim.RunFleet(runCtx, c.rep.Config, src, opt)
	c.runs.windowReplays.Add(1)
	if missed, err := w.ended(ctx, err); err != nil {
		return false, 0, err
	} else if missed {
		return false, math.Inf(1), nil
	}
	ok, worst := Judge(c.req.SLO, rep.Fleet)
	return ok, worst, nil
}
