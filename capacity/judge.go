package capacity

import (
	"context"
	"errors"
	"math"
	"time"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
)

// fellBehindMiss is how far a run that fell behind is said to miss: its
// latencies would grow without bound, so the number is a rank, not a
// measurement.
const fellBehindMiss = 10

// Judge is a run against the SLO: met, and how far the worst bound is
// from its limit (value / limit; a run that fell behind is 10).
func Judge(bounds []slo.Bound, r *sim.Report) (bool, float64) {
	res := sim.CheckSLO(bounds, r)
	ok := sim.SLOMet(res) != nil && *sim.SLOMet(res) && r.FellBehind == nil
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
		worst = max(worst, fellBehindMiss)
	}
	return ok, worst
}

// watch follows a run's judged requests as they finish and ends the run
// as soon as it is sure to miss the SLO: a run that misses is needed only
// for its verdict, and most of a missing run is a queue that only grows.
//
// Sure means sure whatever the requests still to come do, given at most n
// judged requests in all: for a percentile bound q, more requests past
// the limit than n − ⌈q·n⌉ (the nearest-rank percentile of any count up
// to n is then past it; n − ⌈q·n⌉ does not fall as n grows); for a mean,
// a sum past limit × n; for a maximum, one request past it; for
// error_rate, more rejections than rate × n; for any latency bound, one
// judged rejection (CheckSLO counts those as a miss). "Past" is past the
// limit by 1% and 10 µs: sim's histograms report a value within 0.4% and
// round to 10 µs. ITL is judged at the end only (its gaps are not
// per-request).
type watch struct {
	bounds   []slo.Bound
	n        int64
	from     float64
	over     []int64
	sum      []float64
	rejected int64
	cancel   context.CancelFunc
	missed   bool
}

// watched returns a context that watch ends when the verdict is known,
// and the watch; n is the most requests the run judges, from the send
// time from on.
func watched(ctx context.Context, bounds []slo.Bound, n int64, from float64) (context.Context, *watch) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &watch{bounds: bounds, n: n, from: from, over: make([]int64, len(bounds)), sum: make([]float64, len(bounds)), cancel: cancel}
}

func past(v float64, limit time.Duration) bool {
	return v > limit.Seconds()*1.01+10e-6
}

func (w *watch) finish(ev sim.Event) {
	if w.missed || ev.Sent < w.from {
		return
	}
	ttft, tpot, e2e := ev.Latencies()
	for i, b := range w.bounds {
		var v float64
		switch b.Metric {
		case "ttft":
			v = ttft
		case "tpot":
			if ev.Output <= 1 {
				continue
			}
			v = tpot
		case "e2e":
			v = e2e
		default:
			continue
		}
		switch b.Stat {
		case "mean":
			w.sum[i] += v
			if w.sum[i] > (b.Limit.Seconds()*1.01+10e-6)*float64(w.n) {
				w.miss()
			}
		case "max":
			if past(v, b.Limit) {
				w.miss()
			}
		default:
			if !past(v, b.Limit) {
				continue
			}
			w.over[i]++
			q := b.Pick(0, 0.50, 0.90, 0.95, 0.99, 1)
			if w.over[i] > w.n-int64(math.Ceil(q*float64(w.n))) {
				w.miss()
			}
		}
	}
}

// reject counts a rejection. A rejection does not say when its request
// was sent, so a warm-up's count too: the traffic is one traffic, and a
// request a replica refuses is refused in every window.
func (w *watch) reject() {
	if w.missed {
		return
	}
	w.rejected++
	for _, b := range w.bounds {
		if b.Metric != "error_rate" || float64(w.rejected) > b.Rate*float64(w.n) {
			w.miss()
			return
		}
	}
}

func (w *watch) miss() {
	w.missed = true
	w.cancel()
}

// ended reads a run's error: the watch's own end is a miss, not an
// error.
func (w *watch) ended(parent context.Context, err error) (missed bool, _ error) {
	w.cancel()
	if err != nil && w.missed && parent.Err() == nil && errors.Is(err, context.Canceled) {
		return true, nil
	}
	return false, err
}
