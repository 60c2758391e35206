package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync/atomic"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// Defaults of a Request's knobs.
const (
	DefaultWindowS    = 600
	DefaultCoolDownS  = 300
	DefaultIntervalS  = 15
	DefaultMaxReplica = 100
	// MaxWindows bounds the windows of a traffic.
	MaxWindows = 5000
	// maxWindowRequests bounds the requests of one window held for its
	// replays.
	maxWindowRequests = 2_000_000
	// warmUpS of the window before is replayed ahead of each window, so a
	// window starts with the load its replicas carry, not empty.
	warmUpS = 60
)

// Replica is one vLLM replica as the simulator runs it: its engine's
// configuration, its API server's CPU time and its data-parallel engines
// (--data-parallel-size; 0 is 1), which share that API server.
type Replica struct {
	Config   sim.Config
	FrontEnd sim.FrontEnd
	Engines  int
}

// Option is one GPU option to size.
type Option struct {
	GPU            string
	GPUsPerReplica int
	Replica        Replica
	// AtMaxNumSeqs is the replica at another --max-num-seqs (the KV cache
	// depends on it: vLLM's profile run grows with it), ok false when that
	// does not fit; nil keeps the replica's. SeqsCandidates are the values
	// the search tries (sim.SeqsCandidates).
	AtMaxNumSeqs   func(n int) (r Replica, ok bool, err error)
	SeqsCandidates []int
	// StartupS is the time from the decision to add a replica to its
	// first request served, and StartupSource where it comes from: the
	// caller's start-up model (or the user's measurement) gives them, for
	// the autoscaler's headroom and its replay's delay.
	StartupS      float64
	StartupSource string
	// Version is the vLLM release planned: the autoscaler's metric names
	// are its.
	Version vllm.Version
	// USDPerGPUHour prices the option (0: no price known).
	USDPerGPUHour float64
}

// Request is a sizing: the traffic, the SLO and the fleet's knobs. Zero
// knobs take the defaults above.
type Request struct {
	Traffic workload.Spec
	// Open opens a file the traffic names (a request log); nil opens
	// none. Every pass over the traffic opens it anew.
	Open func(name string) (io.ReadCloser, error)
	SLO  []slo.Bound
	// WindowS is the sizing window: the replicas are chosen, and the SLO
	// judged, per window.
	WindowS float64
	// Router is sim's (default round-robin, a Kubernetes Service).
	Router string
	// CoolDownS is the autoscaler's scale-down stabilization window,
	// IntervalS its sync period.
	CoolDownS, IntervalS float64
	// MaxReplicas bounds a window's fleet.
	MaxReplicas int
	// Progress, when not nil, hears what is being simulated. It is called
	// from the goroutines that simulate, one call at a time.
	Progress func(Progress)
	// exhaustive sizes every window on its own, without what other
	// windows taught (the test of the rounds' inference).
	exhaustive bool
}

func (r *Request) defaults() error {
	if err := r.Traffic.Validate(); err != nil {
		return err
	}
	if len(r.SLO) == 0 {
		return errors.New("capacity needs an --slo, e.g. ttft_p99=2s,tpot_p99=100ms")
	}
	if r.WindowS <= 0 {
		r.WindowS = DefaultWindowS
	}
	if r.CoolDownS <= 0 {
		r.CoolDownS = DefaultCoolDownS
	}
	if r.IntervalS <= 0 {
		r.IntervalS = DefaultIntervalS
	}
	if r.MaxReplicas <= 0 {
		r.MaxReplicas = DefaultMaxReplica
	}
	if r.Router == "" {
		r.Router = sim.RoundRobin
	}
	return nil
}

// Sizing is one option sized.
type Sizing struct {
	// SLOCapacityPerS is the highest arrival rate of the traffic's shape
	// one replica serves with every SLO met, measured on Probe at that
	// rate; 0 when even the lowest rate tried misses (Miss says by how
	// much, Refused why when the replica refuses the traffic's requests).
	SLOCapacityPerS float64
	Probe           workload.Spec
	// AtCapacity is the one-replica run at the capacity.
	AtCapacity *sim.Report
	// Replica is the replica sized: the option's, or the one at the
	// max-num-seqs the search chose (MaxNumSeqs; SeqsNote says why).
	Replica    Replica
	MaxNumSeqs int
	SeqsNote   string
	// ClosestFellBehind: when no rate met, the closest run fell behind
	// (its Miss is then a rank, not a measurement).
	ClosestFellBehind bool
	// Refused says, when the replica refuses requests of the traffic
	// (too long for max-model-len or the KV cache, an empty prompt), how
	// many and why: no fleet of it serves them.
	Refused string
	// Met: every window is served within the SLO by at most MaxReplicas
	// replicas; Miss is otherwise how far the closest run came.
	Met     bool
	Miss    float64
	Windows []Window
	// The per-window fleet: each window's fewest replicas, held for its
	// span, summed. Not a lower bound: a fleet that changes within a
	// window can meet its SLO on fewer replica-seconds.
	PeakReplicas int
	MeanReplicas float64
	PeakGPUs     int
	MeanGPUs     float64
	GPUHours     float64
	CostUSD      float64
	// Autoscaler is the HPA handed over, replayed; Static the fleet of
	// PeakReplicas all along.
	Autoscaler *Autoscaler
	Static     *FleetRun
	Notes      []string
	// Runs counts the simulations the sizing made.
	Runs Runs
}

// Runs counts a sizing's simulations: one-replica runs (the capacity
// search, the max-num-seqs candidates, the knees), window replays and the
// windows answered without one, and replays of the whole traffic.
type Runs struct {
	OneReplica, WindowReplays, WindowsInferred, Replays int
}

// Window is one window of the traffic and the fewest replicas that
// served it within the SLO.
type Window struct {
	StartS float64 `json:"start_s"`
	// SpanS is the window's length: the sizing window's, the last one's up
	// to the traffic's end; RatePerS its requests over it.
	SpanS    float64 `json:"span_s"`
	Requests int     `json:"requests"`
	RatePerS float64 `json:"rate_per_s"`
	Replicas int     `json:"replicas"`
	// Met is false where even MaxReplicas missed the SLO; Miss is then
	// how far (the largest value over its limit) when that replay was
	// made to the end.
	Met  bool    `json:"met"`
	Miss float64 `json:"miss,omitempty"`
	// Replayed is false for a window whose answer the replays of busier
	// and lighter windows gave (see docs/capacity.md).
	Replayed bool `json:"replayed"`
}

// ErrNoRequests is a traffic without a request.
var ErrNoRequests = errors.New("the traffic has no requests: give --rate with --duration, or a --requests log with lines")

// Size sizes one option for the request's traffic: one replica's SLO
// capacity (and the max-num-seqs the traffic favours), the replicas each
// window needs, and the autoscaler that would have held, replayed. An
// option that cannot meet the SLO is returned with Met false, not as an
// error; errors are the simulator's and the traffic's.
func Size(ctx context.Context, req Request, opt Option) (*Sizing, error) {
	if err := req.defaults(); err != nil {
		return nil, err
	}
	tr, err := readTrace(ctx, req)
	if err != nil {
		return nil, err
	}
	s := &sizer{req: req, opt: opt, tr: tr, rep: opt.Replica, progress: newTracker(req.Progress, opt.GPU)}
	out, err := s.size(ctx)
	if out != nil {
		s.count(out)
	}
	return out, err
}

// sizer sizes one option.
type sizer struct {
	req      Request
	opt      Option
	tr       *trace
	rep      Replica
	progress *tracker
	// met is the last one-replica run that met the SLO: the bisection
	// only raises the met rate, so after sloCapacity it is the run at
	// the capacity.
	met *sim.Report
	// refused counts the requests one replica refused, by reason, with
	// one example's detail; refusedWhy says them when they end the search.
	refused        map[string]int64
	refusedExample string
	refusedWhy     string
	// closestBehind: when no rate met, the closest run fell behind.
	closestBehind bool
	// capacityPerS is one replica's SLO capacity, a window's first guess's
	// divisor.
	capacityPerS float64
	// runs counts the simulations (windows are replayed in parallel).
	runs struct{ oneReplica, windowReplays, windowsInferred, replays atomic.Int64 }
}

func (c *sizer) size(ctx context.Context) (*Sizing, error) {
	out := &Sizing{Replica: c.rep, MaxNumSeqs: c.rep.Config.MaxNumSeqs}
	c.progress.setPhase(phaseCapacity, "one replica's SLO capacity")
	capacity, miss, err := c.sloCapacity(ctx, c.rep, 0)
	if err != nil {
		return nil, err
	}
	if capacity == 0 {
		out.Refused, out.ClosestFellBehind = c.refusedWhy, c.closestBehind
		if !math.IsInf(miss, 1) {
			out.Miss = round3(miss)
		}
		return out, nil
	}
	if err := c.chooseSeqs(ctx, out, capacity); err != nil {
		return nil, err
	}
	capacity = out.SLOCapacityPerS
	c.capacityPerS = capacity
	out.Probe = Probe(c.req.Traffic, capacity)
	out.AtCapacity = c.met
	c.progress.setPhase(phaseWindows, "windows")
	if err := c.windows(ctx, out); err != nil {
		return nil, err
	}
	if !out.Met {
		return out, nil
	}
	c.progress.setPhase(phaseReplay, "the autoscaler")
	if err := c.autoscale(ctx, out); err != nil {
		return nil, err
	}
	c.progress.setPhase(phaseDone, "")
	return out, nil
}

// count fills out's Runs.
func (c *sizer) count(out *Sizing) {
	out.Runs = Runs{OneReplica: int(c.runs.oneReplica.Load()), WindowReplays: int(c.runs.windowReplays.Load()),
		WindowsInferred: int(c.runs.windowsInferred.Load()), Replays: int(c.runs.replays.Load())}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// workers is how many simulations run at once.
func workers() int { return max(runtime.GOMAXPROCS(0), 1) }

// Probe is the traffic one replica's SLO capacity is measured on at rate:
// the workload's lengths (a log's sizes; for a traffic of bursts alone,
// the prompts of its largest burst), its arrival process at a steady
// rate, enough requests for three minutes of it (at least 1,000, at most
// 20,000).
func Probe(spec workload.Spec, rate float64) workload.Spec {
	p := spec
	if spec.Log == "" && spec.Dataset.Name == "" && spec.Rate == 0 && spec.Concurrency == 0 && len(spec.Bursts) > 0 {
		big := spec.Bursts[0]
		for _, b := range spec.Bursts {
			if b.Count > big.Count {
				big = b
			}
		}
		p.Prompt = workload.Fixed(big.Tokens)
	}
	p.Rate, p.PeakRate, p.Period, p.Bursts, p.Duration, p.Concurrency = rate, 0, 0, nil, 0, 0
	p.NumRequests = int(min(max(math.Ceil(rate*180), 1000), 20000))
	return p
}

// sloString is a bound as the user writes it.
func sloString(b slo.Bound) string {
	if b.Metric == "error_rate" {
		return fmt.Sprintf("%s=%g", b.Name(), b.Rate)
	}
	return fmt.Sprintf("%s=%s", b.Name(), b.Limit)
}

// SLOStrings are the bounds as the user writes them.
func SLOStrings(bounds []slo.Bound) []string {
	out := make([]string, 0, len(bounds))
	for _, b := range bounds {
		out = append(out, sloString(b))
	}
	return out
}
