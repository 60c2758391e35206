package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// maxProbeRate is the highest rate the SLO capacity's search tries: a
// replica that meets the SLO there serves requests too light to size.
const maxProbeRate = 1 << 16

// ErrTooLight is a traffic one replica serves within the SLO at every
// rate the search tries.
var ErrTooLight = errors.New("too light to size")

// open opens the spec's requests as a sim source.
func (c *sizer) open(spec workload.Spec) (sim.Source, func(), error) {
	st, closer, err := spec.Open(c.req.Open)
	if err != nil {
		return nil, nil, err
	}
	return sim.FromWorkload(st), func() { closer.Close() }, nil
}

// oneReplica runs the capacity probe at rate on one replica of rep. With
// early it stops as soon as the run is sure to miss (its miss is then
// +Inf: how far is not known). Requests the replica refuses are counted
// into refused by reason, with one example's detail.
func (c *sizer) oneReplica(ctx context.Context, rep Replica, rate float64, early bool) (bool, float64, *sim.Report, error) {
	spec := Probe(c.req.Traffic, rate)
	src, closer, err := c.open(spec)
	if err != nil {
		return false, 0, nil, err
	}
	defer closer()
	runCtx, w := watched(ctx, c.req.SLO, int64(spec.NumRequests), 0)
	opt := sim.RunOptions{FrontEnd: rep.FrontEnd}
	if early {
		opt.OnFinish = w.finish
	}
	opt.OnReject = func(r *sim.Rejection) {
		c.refusal(r)
		if early {
			w.reject()
		}
	}
	r, err := rep.run(runCtx, src, opt)
	c.runs.oneReplica.Add(1)
	c.progress.run()
	if missed, err := w.ended(ctx, err); err != nil {
		return false, 0, nil, err
	} else if missed {
		return false, math.Inf(1), nil, nil
	}
	ok, worst := Judge(c.req.SLO, r)
	return ok, worst, r, nil
}

// run simulates src on one replica: its engine, or its data-parallel
// engines behind their one API server.
func (r Replica) run(ctx context.Context, src sim.Source, opt sim.RunOptions) (*sim.Report, error) {
	if r.Engines > 1 {
		return sim.RunDataParallel(ctx, r.Config, src, opt, r.Engines)
	}
	e, err := sim.New(r.Config)
	if err != nil {
		return nil, err
	}
	return sim.Run(ctx, e, src, opt)
}

// refusal notes a request the replica refuses.
func (c *sizer) refusal(r *sim.Rejection) {
	if c.refused == nil {
		c.refused = map[string]int64{}
		c.refusedExample = r.Detail
	}
	c.refused[r.Reason]++
}

// refusedSay says the refusals in words, or "" when there were none.
func (c *sizer) refusedSay(of int) string {
	if len(c.refused) == 0 {
		return ""
	}
	var parts []string
	var n int64
	for reason, k := range c.refused {
		parts = append(parts, fmt.Sprintf("%d %s", k, reason))
		n += k
	}
	sort.Strings(parts)
	return fmt.Sprintf("one replica refuses %d of the first %d requests of the traffic (%s; for example: %s), so no fleet of it meets the SLO",
		n, of, strings.Join(parts, ", "), c.refusedExample)
}

// sloCapacity is the highest rate one replica serves within the SLO. From
// start (0: 1 req/s) the rate is doubled until missed (or halved until
// met), then bisected until the missed rate is within 2% of the met one.
// 0 when even 1/1024 req/s misses, or when the replica refuses requests
// of the traffic; miss is then the closest run's. Runs that only give a
// verdict stop as soon as they miss; the halving's runs go to the end,
// since the closest run's miss is the answer when none meets.
func (c *sizer) sloCapacity(ctx context.Context, rep Replica, start float64) (float64, float64, error) {
	lo, hi := 0.0, 0.0
	r := 1.0
	if start > 0 {
		r = start
	}
	ok, miss, met, err := c.oneReplica(ctx, rep, r, false)
	if err != nil {
		return 0, 0, err
	}
	closest := met
	if !ok && len(c.refused) > 0 {
		// Requests the replica refuses are misses at any rate and on any
		// number of replicas (an error_rate bound alone may allow them).
		c.refusedWhy = c.refusedSay(Probe(c.req.Traffic, r).NumRequests)
		return 0, miss, nil
	}
	step := 2.0
	if start > 0 {
		// A start from a capacity already measured brackets it in a step
		// or two.
		step = 1.25
	}
	if ok {
		c.met = met
		lo = r
		for hi == 0 && r < maxProbeRate {
			r = min(r*step, maxProbeRate)
			ok, _, met, err = c.oneReplica(ctx, rep, r, true)
			if err != nil {
				return 0, 0, err
			}
			if ok {
				c.met, lo = met, r
			} else {
				hi = r
			}
		}
		if hi == 0 {
			return 0, 0, fmt.Errorf("%w: one replica meets the SLO at every rate up to %d req/s", ErrTooLight, maxProbeRate)
		}
	} else {
		hi = r
		for lo == 0 && r > 1.0/1024 {
			r /= step
			var m float64
			if ok, m, met, err = c.oneReplica(ctx, rep, r, false); err != nil {
				return 0, 0, err
			}
			if m < miss {
				miss, closest = m, met
			}
			if ok {
				c.met, lo = met, r
			} else {
				hi = r
			}
		}
		if lo == 0 {
			c.closestBehind = closest != nil && closest.FellBehind != nil
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
		if ok, _, met, err = c.oneReplica(ctx, rep, mid, true); err != nil {
			return 0, 0, err
		}
		if ok {
			c.met, lo = met, mid
		} else {
			hi = mid
		}
	}
	return lo, 0, nil
}

// chooseSeqs sets out's capacity and replica: the max-num-seqs the
// capacity probe at rate favours (sim.ChooseMaxNumSeqs over the option's
// candidates), kept when one replica then carries more within the SLO.
// The second search starts from the first capacity.
func (c *sizer) chooseSeqs(ctx context.Context, out *Sizing, capacity float64) error {
	out.SLOCapacityPerS = capacity
	if c.opt.AtMaxNumSeqs == nil || len(c.opt.SeqsCandidates) < 2 {
		return nil
	}
	top := c.rep.Config.MaxNumSeqs
	probe := Probe(c.req.Traffic, capacity)
	reps := map[int]Replica{top: c.rep}
	choice, err := sim.ChooseMaxNumSeqs(ctx, sim.SeqsSearch{
		Candidates: c.opt.SeqsCandidates,
		Config: func(n int) (sim.Config, bool, error) {
			r, ok := reps[n]
			if !ok {
				var fits bool
				var err error
				if r, fits, err = c.opt.AtMaxNumSeqs(n); err != nil || !fits {
					return sim.Config{}, false, err
				}
				reps[n] = r
			}
			return r.Config, true, nil
		},
		Open:         func() (sim.Source, func(), error) { return c.open(probe) },
		Run:          sim.RunOptions{FrontEnd: c.rep.FrontEnd},
		DataParallel: c.rep.Engines,
		Reference:    top,
		Parallel:     workers(),
	})
	if err != nil {
		return err
	}
	c.runs.oneReplica.Add(int64(len(choice.Trials)))
	n := choice.MaxNumSeqs
	rep, ok := reps[n]
	if n == top || !ok {
		return nil
	}
	c.progress.setPhase(phaseCapacity, fmt.Sprintf("one replica's SLO capacity at max-num-seqs %d", n))
	kept := c.met
	cap2, _, err := c.sloCapacity(ctx, rep, capacity)
	if err != nil {
		return err
	}
	if cap2 <= capacity {
		c.met = kept
		return nil
	}
	out.SeqsNote = fmt.Sprintf("max-num-seqs %d, chosen by simulation: one replica carries %.3g req/s within the SLO, against %.3g at %d", n, cap2, capacity, top)
	out.SLOCapacityPerS, out.Replica, out.MaxNumSeqs = cap2, rep, n
	c.rep = rep
	return nil
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
	src, closer, err := c.open(Probe(c.req.Traffic, rate))
	if err != nil {
		return 0, 0, err
	}
	defer closer()
	s := &scrapes{}
	if _, err := sim.RunFleet(ctx, c.rep.Config, src, sim.FleetOptions{RunOptions: sim.RunOptions{FrontEnd: c.rep.FrontEnd},
		Replicas: 1, Engines: c.rep.Engines, Scaler: s, ScaleInterval: 5}); err != nil {
		return 0, 0, err
	}
	c.runs.oneReplica.Add(1)
	c.progress.run()
	n := len(s.waiting)
	if n == 0 {
		return 0, 0, nil
	}
	sort.Ints(s.waiting)
	return float64(s.waiting[min(n-1, int(math.Ceil(0.95*float64(n)))-1)]), s.kvUsage / float64(n), nil
}
