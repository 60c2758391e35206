package capacity

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// option is an option of model on one device, vLLM's defaults at the
// newest release, on the device's fitted clock with its API server.
func option(t testing.TB, modelID, device string) Option {
	t.Helper()
	spec, ok := catalog.Lookup(modelID)
	if !ok {
		t.Fatalf("no %s in the catalog", modelID)
	}
	sel, err := gpu.Resolve(device)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: 1, Settings: vllm.Settings{Version: vllm.Newest()}})
	if err != nil {
		t.Fatal(err)
	}
	cal, _ := sim.CalibrationFor(sel.Device)
	timer, err := sim.RooflineFor(plan, cal)
	if err != nil {
		t.Fatal(err)
	}
	return Option{GPU: device, GPUsPerReplica: 1, Replica: Replica{Config: sim.ConfigFor(plan, timer), FrontEnd: cal.FrontEndFor(plan, workload.EndpointCompletions)},
		StartupS: 106, StartupSource: "test", Version: plan.Settings.Version, USDPerGPUHour: 2}
}

func bounds(t testing.TB, s string) []slo.Bound {
	t.Helper()
	b, err := slo.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// finished is a request sent at 0 with the given TTFT and TPOT over 11
// output tokens.
func finished(ttft, tpot float64) sim.Event {
	return sim.Event{Done: true, Arrival: 0, FirstToken: ttft, Finish: ttft + 10*tpot, Output: 11}
}

// The watch calls a miss only when no request still to come can undo it,
// worked out by hand for each kind of bound.
func TestWatchKnowsAMissEarly(t *testing.T) {
	ctx := context.Background()
	// p99 of at most 200 requests: ⌈0.99 × 200⌉ = 198, so two requests
	// past 1 s may still leave the 198th at or under it; a third may not.
	// 1.005 s is within the histogram's error of 1 s and not counted.
	_, w := watched(ctx, bounds(t, "ttft_p99=1s"), 200, 0)
	for _, ttft := range []float64{1.5, 1.005, 0.2, 2} {
		w.finish(finished(ttft, 0.01))
	}
	if w.missed {
		t.Fatal("missed after two requests past the limit of 200")
	}
	w.finish(finished(3, 0.01))
	if !w.missed {
		t.Fatal("not missed after three requests past the limit of 200")
	}
	// A warm-up request (sent before from) is not judged.
	_, w = watched(ctx, bounds(t, "ttft_max=1s"), 10, 60)
	w.finish(finished(5, 0.01))
	if w.missed {
		t.Fatal("a warm-up request judged")
	}
	ev := finished(5, 0.01)
	ev.Sent = 61
	w.finish(ev)
	if !w.missed {
		t.Fatal("max: one request past the limit is a miss")
	}
	// Mean TPOT of at most 10 requests under 50 ms: a sum past 10 × 50.5
	// ms (plus 10 µs each) is a miss whatever the others are; 9 requests
	// at 56 ms sum to 504 ms, a tenth at 0 would leave the mean 50.4 ms.
	_, w = watched(ctx, bounds(t, "tpot_mean=50ms"), 10, 0)
	for range 9 {
		w.finish(finished(0.1, 0.056))
	}
	if w.missed {
		t.Fatal("mean: missed at 504 ms of 505.1")
	}
	w.finish(finished(0.1, 0.002))
	if !w.missed {
		t.Fatal("mean: not missed at 524 ms of 505.1")
	}
	// error_rate 10% of at most 10: one rejection may stay within it, a
	// second may not; any rejection misses a latency bound.
	_, w = watched(ctx, bounds(t, "error_rate=10%"), 10, 0)
	w.reject()
	if w.missed {
		t.Fatal("error_rate: missed at one of ten")
	}
	w.reject()
	if !w.missed {
		t.Fatal("error_rate: not missed at two of ten")
	}
	_, w = watched(ctx, bounds(t, "e2e_p50=10s"), 1000, 0)
	w.reject()
	if !w.missed {
		t.Fatal("a rejection does not miss a latency bound")
	}
}

// Rounds visit the windows sorted by rate as a bisection does: rates
// 0, 5, 1, 3, 2, 4 sort (without the empty window 0) to windows 2, 4, 3,
// 5, 1; the middle (window 3, rate 3) first, then the middles of
// [2, 4] and [5, 1], then what is left.
func TestRounds(t *testing.T) {
	got := rounds([]float64{0, 5, 1, 3, 2, 4})
	want := [][]int{{3}, {1, 4}, {2, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rounds %v, want %v", got, want)
	}
}

// What replays teach: met on 2 at 10 req/s, on 3 at 20; missed on 1 at
// 6, on 2 at 15.
func TestLearnedBounds(t *testing.T) {
	l := &learned{metMax: map[int]float64{}, missMin: map[int]float64{}}
	l.add(2, 10, true)
	l.add(1, 6, false)
	l.add(3, 20, true)
	l.add(2, 15, false)
	for _, c := range []struct {
		rate   float64
		lo, hi int
	}{
		{9.5, 2, 2}, // 6 <= 9.5 misses on 1; 10 >= 9.5 meets on 2
		{10, 2, 2},  // a rate that met is met
		{12, 2, 3},  // on 2 not known; 20 meets on 3
		{15, 3, 3},  // 15 missed on 2
		{25, 3, 11}, // nothing met this busy: hi is past the most allowed
		{3, 1, 2},
	} {
		lo, hi := l.bounds(c.rate, 10)
		if lo != c.lo || hi != c.hi {
			t.Errorf("%g req/s: [%d, %d], want [%d, %d]", c.rate, lo, hi, c.lo, c.hi)
		}
	}
}

// A replay stopped at its first sure miss gives the verdict the whole
// replay gives: a window of Llama-3.1-8B traffic at 30 req/s on 1 to 3
// H100s (the fewest that meet it is 2 or 3).
func TestEarlyStopAgrees(t *testing.T) {
	opt := option(t, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB")
	spec := workload.Spec{Rate: 20, Duration: 360, Prompt: workload.Uniform{Lo: 200, Hi: 3000}, Output: workload.Uniform{Lo: 20, Hi: 400}, Seed: 3}
	st, _, err := spec.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	var warm, reqs []workload.Request
	for {
		r, err := st.Next()
		if err != nil {
			break
		}
		if r.At < 60 {
			warm = append(warm, r)
		} else {
			reqs = append(reqs, r)
		}
	}
	c := &sizer{req: Request{SLO: bounds(t, "ttft_p99=2s,tpot_p99=100ms"), Router: sim.RoundRobin}, rep: opt.Replica}
	verdicts := map[bool]bool{}
	for n := 1; n <= 3; n++ {
		full, fullMiss, err := c.fleet(context.Background(), warm, reqs, 60, n, false)
		t.Logf("%d replicas: met %t, miss %.3f", n, full, fullMiss)
		if err != nil {
			t.Fatal(err)
		}
		early, miss, err := c.fleet(context.Background(), warm, reqs, 60, n, true)
		if err != nil {
			t.Fatal(err)
		}
		if early != full {
			t.Errorf("%d replicas: early %t, whole %t", n, early, full)
		}
		if !early && !math.IsInf(miss, 1) {
			t.Logf("%d replicas: the early replay ran to the end (miss %.2f)", n, miss)
		}
		verdicts[full] = true
	}
	if !verdicts[true] || !verdicts[false] {
		t.Errorf("1 to 3 replicas should both miss and meet: %v", verdicts)
	}
}

// The rounds give each window the replicas its own search gives, or
// those its search gives a window within 2% of its rate: four hours of
// Llama-3.1-8B traffic rising from 2 to 40 req/s and back, in 5-minute
// windows, with half the replays or fewer, and the same GPU-hours within
// 2%.
func TestRoundsAgreeWithExhaustive(t *testing.T) {
	if testing.Short() {
		t.Skip("two sizings of four simulated hours")
	}
	opt := option(t, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB")
	opt.AtMaxNumSeqs = nil
	spec := workload.Spec{Rate: 2, PeakRate: 40, Period: 4 * 3600, Duration: 4 * 3600, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1}
	req := Request{Traffic: spec, SLO: bounds(t, "ttft_p99=1s,tpot_p99=40ms"), WindowS: 300}
	if err := req.defaults(); err != nil {
		t.Fatal(err)
	}
	tr, err := readTrace(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// One capacity, two sizings of the windows.
	size := func(exhaustive bool, capacity float64) (*Sizing, float64, time.Duration) {
		r := req
		r.exhaustive = exhaustive
		c := &sizer{req: r, opt: opt, tr: tr, rep: opt.Replica, progress: newTracker(nil, "")}
		if capacity == 0 {
			var err error
			if capacity, _, err = c.sloCapacity(context.Background(), c.rep, 0); err != nil || capacity == 0 {
				t.Fatalf("capacity %g: %v", capacity, err)
			}
		}
		c.capacityPerS = capacity
		out := &Sizing{}
		start := time.Now()
		if err := c.windows(context.Background(), out); err != nil {
			t.Fatal(err)
		}
		c.count(out)
		return out, capacity, time.Since(start)
	}
	fast, capacity, tf := size(false, 0)
	slow, _, ts := size(true, capacity)
	t.Logf("%.3f req/s a replica; rounds: %+v in %s; exhaustive: %+v in %s", capacity, fast.Runs, tf, slow.Runs, ts)
	if len(fast.Windows) != 48 {
		t.Fatalf("%d windows", len(fast.Windows))
	}
	// A window sized apart from its own search must have the answer the
	// search gave a window within 2% of its rate: the SLO capacity's own
	// resolution, within which two windows' verdicts are the noise of
	// their arrivals.
	within := func(i, want int) bool {
		r := slow.Windows[i].RatePerS
		for _, w := range slow.Windows {
			if math.Abs(w.RatePerS-r) <= 0.02*r && w.Replicas == want {
				return true
			}
		}
		return false
	}
	differ := 0
	for i, w := range fast.Windows {
		s := slow.Windows[i]
		if w.Replicas == s.Replicas {
			continue
		}
		differ++
		if !within(i, w.Replicas) {
			t.Errorf("window %d (%.3f req/s): %d replicas by rounds, %d by its own search, and no window within 2%% needs %d", i, s.RatePerS, w.Replicas, s.Replicas, w.Replicas)
		}
	}
	if math.Abs(fast.GPUHours-slow.GPUHours) > 0.02*slow.GPUHours {
		t.Errorf("GPU-hours %.3f by rounds, %.3f exhaustive", fast.GPUHours, slow.GPUHours)
	}
	if 2*fast.Runs.WindowReplays > slow.Runs.WindowReplays {
		t.Errorf("rounds replayed %d windows, the exhaustive search %d", fast.Runs.WindowReplays, slow.Runs.WindowReplays)
	}
	t.Logf("%d of 48 windows differ; GPU-hours %.2f and %.2f", differ, fast.GPUHours, slow.GPUHours)
}

// The first guess scales the nearest window that met: met on 4 at 10
// req/s and on 6 at 16, a window at 12 req/s tries ⌈6 × 12/16⌉ = 5, one
// at 20 ⌈6 × 20/16⌉ = 8; with nothing met, the rate over one replica's
// capacity.
func TestLearnedGuess(t *testing.T) {
	l := &learned{metMax: map[int]float64{}, missMin: map[int]float64{}}
	if g := l.guess(12, 2.5); g != 5 {
		t.Errorf("nothing learned: %d, want ⌈12/2.5⌉ = 5", g)
	}
	l.add(4, 10, true)
	l.add(6, 16, true)
	l.add(7, 16, true)
	for _, c := range []struct {
		rate float64
		want int
	}{{12, 5}, {20, 8}, {10, 4}, {9, 4}} {
		if g := l.guess(c.rate, 1); g != c.want {
			t.Errorf("%g req/s: %d, want %d", c.rate, g, c.want)
		}
	}
}

// A window's rate is its requests over the time they came in. The rate
// 2 + 58 (1 − cos(2πt/3600)) / 2 over 35 minutes cuts into three windows
// of 10 minutes and a last of 5 (1,800 to 2,100 s), whose mean rate is
// 2 + 29 (1 − (3600 / (2π · 300)) (sin(2π · 2100/3600) − sin π)) =
// 2 + 29 (1 + 1.9099 × 0.5) = 58.69 req/s: over a whole window its
// 17,600 requests would read 29.3. 1,000 requests at 5 req/s come in
// about 200 s, one window of that span, about 5 req/s (not 1,000 / 600).
func TestWindowRatesOverTheirSpan(t *testing.T) {
	ctx := context.Background()
	tr, err := readTrace(ctx, Request{Traffic: workload.Spec{Rate: 2, PeakRate: 60, Period: 3600, Duration: 2100, Prompt: workload.Fixed(100), Output: workload.Fixed(10), Seed: 1}, WindowS: 600})
	if err != nil {
		t.Fatal(err)
	}
	last := len(tr.counts) - 1
	if last != 3 || tr.span(last) != 300 || tr.span(0) != 600 {
		t.Fatalf("%d windows, spans %g and %g", last+1, tr.span(0), tr.span(last))
	}
	// A Poisson count of mean 17,607 is within 5 × √17607 ≈ 663 of it.
	if got := float64(tr.counts[last]) / tr.span(last); !near(got, 58.69, 663.0/17607) {
		t.Errorf("the last window's rate: %.2f req/s, want about 58.69", got)
	}
	tr, err = readTrace(ctx, Request{Traffic: workload.Spec{Rate: 5, NumRequests: 1000, Prompt: workload.Fixed(100), Output: workload.Fixed(10), Seed: 1}, WindowS: 600})
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 gaps of mean 0.2 s end near 200 s, within 5 × √1000 × 0.2 ≈ 32 s.
	if got := float64(tr.counts[0]) / tr.span(0); len(tr.counts) != 1 || !near(got, 5, 32.0/200) {
		t.Errorf("1000 requests at 5 req/s: %d windows, %.3f req/s", len(tr.counts), got)
	}
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// A flat load gets a flat fleet, and never one dearer than a static fleet
// that meets every window: Llama-3.1-8B on an L4 at 5 req/s for 35
// minutes, where every window needs the same replicas (about 5 ÷ 0.66,
// one replica's SLO capacity). The HPA handed over had been uncapped
// there (its rate target's headroom asks for more than the peak) and,
// replayed, took 10 GPU-hours an hour against a static fleet's 6 or 7,
// flapping on a flat load. The fleet handed over now does not move, meets
// every window, and costs no more than a static fleet of the peak and
// two more; the per-window fleet holds its replicas for each window's
// span, the last one 5 minutes.
func TestFlatLoadGetsAStaticFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("sizes an option")
	}
	opt := option(t, "meta-llama/Llama-3.1-8B-Instruct", "L4")
	req := Request{Traffic: workload.Spec{Rate: 5, Duration: 2100, Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: 1},
		SLO: bounds(t, "ttft_p99=2s,tpot_p99=100ms")}
	sz, err := Size(context.Background(), req, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !sz.Met || sz.Autoscaler == nil {
		t.Fatalf("not met: %+v", sz)
	}
	a := sz.Autoscaler
	hours := func(n int) float64 { return float64(n) * 2100 / 3600 }
	if a.MinReplicas != a.MaxReplicas || a.Policy != PolicyStatic || a.Flaps != 0 || a.Replay.WindowsMet != a.Replay.Windows ||
		a.Replay.GPUHours > hours(sz.PeakReplicas+2)*1.01 {
		t.Errorf("handed over %d-%d (%s), %d flaps, %d of %d windows, %.3f GPU-hours; the peak is %d",
			a.MinReplicas, a.MaxReplicas, a.Policy, a.Flaps, a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours, sz.PeakReplicas)
	}
	held := 0.0
	for i, w := range sz.Windows {
		held += float64(w.Replicas) * w.SpanS
		if i < 3 && w.SpanS != 600 || i == 3 && w.SpanS != 300 {
			t.Errorf("window %d spans %g s", i, w.SpanS)
		}
	}
	if !near(sz.GPUHours, held/3600, 1e-3) {
		t.Errorf("per-window GPU-hours %.3f, want %.3f", sz.GPUHours, held/3600)
	}
}
