package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"headroom.dev/headroom/traffic"
)

// Routers: how a fleet's front door picks the replica of a request.
const (
	// RoundRobin sends each request to the next ready replica in turn
	// (a Kubernetes Service's kube-proxy in IPVS round-robin mode).
	RoundRobin = "round-robin"
	// LeastOutstanding sends it to the ready replica with the fewest
	// requests sent and not yet answered (Envoy's least_request, the
	// Gateway API Inference Extension's queue scorer).
	LeastOutstanding = "least-outstanding"
	// LeastKV sends it to the ready replica with the lowest KV-cache usage
	// as its last step left it (the Gateway API Inference Extension's and
	// llm-d's kv-cache-utilization scorer on vllm:kv_cache_usage_perc),
	// ties to the fewest outstanding requests.
	LeastKV = "least-kv"
)

// Routers lists the routers RunFleet knows.
var Routers = []string{RoundRobin, LeastOutstanding, LeastKV}

// FleetOptions steer RunFleet.
type FleetOptions struct {
	// RunOptions are the clients', the API server's and the series'
	// options, as for Run. MaxBacklog bounds the requests waiting in the
	// whole fleet (0: DefaultMaxBacklog of every replica's max-num-seqs
	// together).
	RunOptions
	// Replicas is how many replicas serve from the start (at least 1).
	Replicas int
	// Engines is how many data-parallel engines each replica runs (vLLM's
	// --data-parallel-size; 0 is 1): one API server, whose CPU they share,
	// sends each request to the engine of the lowest waiting × 4 +
	// running (vLLM's DP load balancer; pick). The router, the autoscaler and the replica
	// counts see replicas; a MoE model's engines of one replica step in
	// lockstep (stepGroup) when the clock prices their experts as a group
	// (Roofline.DataParallel).
	Engines int
	// Router is one of Routers ("" is RoundRobin).
	Router string
	// JudgeFrom, when > 0, leaves the requests sent before it out of the
	// fleet's latencies and counts (a warm-up: they are served, and load
	// the replicas, but are not judged).
	JudgeFrom float64
	// SLOWindow, with OnWindow, groups the judged requests by the window
	// of their send time, SLOWindow seconds each, and hands each window's
	// report to OnWindow when its last request is answered (windows may
	// close out of order). The window reports hold requests, rejections
	// and the TTFT, TPOT and E2E distributions.
	SLOWindow float64
	OnWindow  func(startS float64, r *Report)
	// Scaler, when not nil, is asked for the replica count every
	// ScaleInterval seconds (default 15: the HorizontalPodAutoscaler's
	// sync period). A replica added becomes ready StartupS seconds later
	// and holds its GPUs from the decision; one removed takes no new
	// requests and stops when its last one is answered.
	Scaler        Scaler
	ScaleInterval float64
	StartupS      float64
	// MaxReplicas bounds what a Scaler can ask for (default 1000).
	MaxReplicas int
	// FleetOnly leaves out each engine's own report (FleetReport.Replicas
	// is nil) and the per-step statistics kept for it: a caller that
	// judges the fleet alone (capacity's replays) saves a tenth of a step.
	FleetOnly bool
}

// Scaler is an autoscaler: at each scrape it sees the fleet's metrics and
// returns the replica count it wants.
type Scaler interface {
	Desired(m FleetMetrics) int
}

// FleetMetrics is what an autoscaler scrapes from the ready replicas'
// /metrics, as vLLM exports them.
type FleetMetrics struct {
	Now float64
	// Replicas counts the replicas that hold GPUs (ready or starting);
	// Ready those that serve.
	Replicas, Ready int
	// Waiting and Running are vllm:num_requests_waiting and
	// vllm:num_requests_running summed over the ready replicas' engines;
	// KVUsage is vllm:kv_cache_usage_perc averaged over those engines
	// (0..1).
	Waiting, Running int
	KVUsage          float64
	// RequestsPerS is the fleet's answered requests per second over the
	// last minute: rate(vllm:e2e_request_latency_seconds_count[1m]) summed
	// over the replicas (0 before a minute has passed).
	RequestsPerS float64
}

// FleetReport is a fleet's run: the whole fleet as the clients see it, and
// each engine (a replica's, or each of a data-parallel replica's in turn).
// Fleet.Series holds, per window, the fleet's peaks of requests running and
// waiting (summed over its engines), the busiest engine's KV usage, the arrivals
// and the most replicas that held GPUs.
type FleetReport struct {
	Router   string    `json:"router"`
	Fleet    *Report   `json:"fleet"`
	Replicas []*Report `json:"replicas"`
	// ReplicaSeconds is the time replicas held their GPUs, summed over
	// replicas (from the decision to start one to its stop, or to the end
	// of the run); PeakReplicas the most at once.
	ReplicaSeconds float64 `json:"replica_seconds"`
	PeakReplicas   int     `json:"peak_replicas"`
}

// RunDataParallel simulates one vLLM server of dp data-parallel engines:
// vLLM runs an engine a rank, each with its own scheduler and KV cache,
// behind one API server that sends each request to the engine whose
// queues are shortest (its DP load balancing): a fleet of one replica of
// dp engines (FleetOptions.Engines). The report's engine time
// (StepSplit) is the engines' mean; its steps are all engines'.
func RunDataParallel(ctx context.Context, cfg Config, src Source, opt RunOptions, dp int) (*Report, error) {
	fr, err := RunFleet(ctx, cfg, src, FleetOptions{RunOptions: opt, Replicas: 1, Engines: dp, FleetOnly: true})
	if err != nil {
		return nil, err
	}
	rep := fr.Fleet
	if rep.StepSplit != nil {
		rep.StepSplit.Scale(1 / float64(max(dp, 1)))
	}
	return rep, nil
}

// ErrNoReplicas is a fleet of fewer than one replica.
var ErrNoReplicas = errors.New("a fleet needs at least 1 replica")

const (
	repStopped = iota
	repStarting
	repReady
	repDraining
)

// replica is one engine with its API server's share, as one vLLM pod or
// one data-parallel engine of a pod (fleet.engines of them, in adjacent
// slots, make a replica).
type replica struct {
	e     *Engine
	fe    *frontEnd
	st    *stats
	res   StepResult
	busy  bool // a step is under way: its results land at res.End
	state int
	// readyAt is when a starting replica serves; since when it took its
	// GPUs.
	readyAt, since float64
	// outstanding counts requests routed here and not yet answered; kv is
	// the KV usage the last step left.
	outstanding int
	kv          float64
	// kept sums the counters of the engines this slot has run.
	kept Gauges
	// running and waiting are the engine's as its last step left them,
	// its share of the fleet's totals.
	running, waiting int
	// took is what the replica's own part of a group step takes
	// (stepGroup).
	took float64
	// next is the time and kind of the replica's next event.
	next     float64
	nextKind int
	// slot is the engine's place in fleet.reps, at its place in the
	// fleet's event queue.
	slot, at int
}

// Event kinds of a replica, in the order they run at the same time: the
// API server first (as Run finishes its sends and completions up to a
// step's end before the step's output), a step's end, a step's start. A
// replica that becomes ready goes before all of them, so a request held at
// the door for it is sent to it.
const (
	evNone = iota
	evReady
	evFE
	evStepEnd
	evStepStart
)

func (p *replica) plan() {
	p.next, p.nextKind = math.Inf(1), evNone
	if p.state == repStopped {
		return
	}
	if p.state == repStarting {
		p.next, p.nextKind = p.readyAt, evReady
		return
	}
	if t, ok := p.fe.next(); ok {
		p.next, p.nextKind = t, evFE
	}
	if p.busy {
		if p.res.End < p.next {
			p.next, p.nextKind = p.res.End, evStepEnd
		}
		return
	}
	if t, ok := p.e.NextEventTime(); ok && t < p.next {
		p.next, p.nextKind = t, evStepStart
	}
}

// fleet is one RunFleet.
type fleet struct {
	cfg  Config
	src  Source
	opt  FleetOptions
	reps []*replica
	// engines is each replica's engine count: replica k is reps[k*engines
	// : (k+1)*engines]; inner is each replica's turn among its engines.
	// lockstep steps a replica's engines together, as the ranks of a MoE
	// model's data-parallel group (stepGroup).
	engines  int
	inner    []int
	lockstep bool
	// queue orders the replicas by their next event (events, below).
	queue events
	st    *stats
	win   *sloWindows
	// the client, as Run's
	next     Request
	have     bool
	lastDue  float64
	inFlight int
	sent     int64
	rr       int
	// scaling
	nextScrape float64
	heldS      float64
	held, peak int
	lastT      float64
	// completed counts answered requests; marks holds (time, completed)
	// at the scrapes of the last minute.
	completed int64
	marks     []scrapeMark
	// rejected counts requests the engines refused; flow samples the
	// sends, as Run's, to judge a fleet that falls behind; sentWork is
	// the tokens sent (flowSample).
	rejected int64
	sentWork int64
	flow     flow
	beyond   bool
	// running and waiting are the engines' last gauges summed: the
	// fleet's own, which its report's peaks and series are.
	running, waiting int
	engineRunning    int
}

type scrapeMark struct {
	at   float64
	done int64
}

// RunFleet serves src's requests with opt.Replicas replicas of cfg behind
// opt.Router, in one discrete-event run: each replica is an Engine with
// its own API server (FrontEnd), as one vLLM pod, or opt.Engines of them
// sharing one, and the clients are
// Run's (open or closed loop). It stops as Run does, with the bound on
// requests in flight over the whole fleet, and judges a fleet that falls
// behind as Run judges one engine (the requests in flight grow while the
// queues never empty). Memory is bounded: requests are forgotten
// when answered, and every replica keeps Run's bounded statistics.
func RunFleet(ctx context.Context, cfg Config, src Source, opt FleetOptions) (*FleetReport, error) {
	if opt.Replicas < 1 {
		return nil, ErrNoReplicas
	}
	switch opt.Router {
	case "":
		opt.Router = RoundRobin
	case RoundRobin, LeastOutstanding, LeastKV:
	default:
		return nil, fmt.Errorf("unknown router %q: use %s", opt.Router, strings.Join(Routers, ", "))
	}
	if err := opt.FrontEnd.check(); err != nil {
		return nil, err
	}
	if opt.MaxReplicas <= 0 {
		opt.MaxReplicas = 1000
	}
	if opt.Replicas > opt.MaxReplicas {
		return nil, fmt.Errorf("%d replicas: at most %d in one fleet", opt.Replicas, opt.MaxReplicas)
	}
	if opt.ScaleInterval <= 0 {
		opt.ScaleInterval = 15
	}
	if opt.StartupS < 0 || math.IsNaN(opt.StartupS) {
		return nil, errors.New("the start-up time must not be negative")
	}
	cfg.FirstEvents = true
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	engines := max(opt.Engines, 1)
	r, ok := cfg.Timer.(*Roofline)
	lockstep := engines > 1 && ok && r.DataParallel > 1 && r.RoutedParams > 0
	if lockstep && cfg.PipelineStages > 1 {
		return nil, errors.New("a data-parallel MoE server with pipeline parallelism is not simulated: its ranks step in lockstep, a stage at a time; drop one of --data-parallel-size and --pipeline-parallel-size")
	}
	// One CPU shared by the engines' even streams: each engine's share of
	// the API server at engines times its cost.
	opt.FrontEnd = opt.FrontEnd.cpuTimes(float64(engines))
	if opt.MaxBacklog <= 0 {
		opt.MaxBacklog = DefaultMaxBacklog(cfg.MaxNumSeqs * opt.Replicas * engines)
	}
	f := &fleet{cfg: cfg, src: src, opt: opt, st: newStats(opt.RunOptions), nextScrape: math.Inf(1), engines: engines, lockstep: lockstep}
	if opt.OnWindow != nil && opt.SLOWindow > 0 {
		f.win = &sloWindows{w: opt.SLOWindow, on: opt.OnWindow, open: map[int]*windowAcc{}}
	}
	for range opt.Replicas {
		if err := f.add(0, repReady); err != nil {
			return nil, err
		}
	}
	if opt.Scaler != nil {
		f.nextScrape = opt.ScaleInterval
	}
	if err := f.read(); err != nil {
		return nil, err
	}
	if err := f.loop(ctx); err != nil {
		return nil, err
	}
	if f.st.rep.FellBehind == nil && opt.Concurrency <= 0 {
		f.st.rep.FellBehind = f.flow.behind()
	}
	for f.beyond {
		// What is left is due past the horizon too: counted, not held.
		if _, err := f.src.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		f.st.rep.BeyondHorizon++
		if f.st.rep.BeyondHorizon%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return f.report(), nil
}

// add starts a replica at time t (in state), its engines in a stopped
// replica's slots or in new ones.
func (f *fleet) add(t float64, state int) error {
	f.account(t)
	k := -1
	for j := range len(f.reps) / f.engines {
		if f.stopped(j) {
			k = j
			break
		}
	}
	if k < 0 {
		k = len(f.reps) / f.engines
		for range f.engines {
			p := &replica{st: newStats(f.opt.RunOptions), slot: len(f.reps)}
			f.reps = append(f.reps, p)
			f.queue.push(p)
		}
		f.inner = append(f.inner, 0)
	}
	f.inner[k] = 0
	for _, p := range f.group(k) {
		e, err := New(f.cfg)
		if err != nil {
			return err
		}
		p.e, p.fe, p.busy, p.outstanding, p.kv = e, &frontEnd{cost: f.opt.FrontEnd}, false, 0, 0
		// A restarted slot's engine starts at t: its clock and the
		// engine's order of arrivals begin there.
		e.now, e.last = t, t
		p.state, p.since, p.readyAt = state, t, t
		if state == repStarting {
			p.readyAt = t + f.opt.StartupS
		}
		p.fe.now = t
		f.plan(p)
	}
	f.held++
	f.peak = max(f.peak, f.held)
	f.mark(t)
	return nil
}

// group is replica k's engines.
func (f *fleet) group(k int) []*replica { return f.reps[k*f.engines : (k+1)*f.engines] }

// stopped says whether every engine of replica k has stopped.
func (f *fleet) stopped(k int) bool {
	for _, p := range f.group(k) {
		if p.state != repStopped {
			return false
		}
	}
	return true
}

// mark records the replicas held at t in t's window.
func (f *fleet) mark(t float64) {
	if w := f.st.window(t); f.held > w.Replicas {
		w.Replicas = f.held
	}
}

// account adds the replica-seconds held up to t.
func (f *fleet) account(t float64) {
	if t > f.lastT {
		f.heldS += float64(f.held) * (t - f.lastT)
		f.lastT = t
	}
}

// stop stops engine p; its replica gives its GPUs back with its last.
func (f *fleet) stop(p *replica, t float64) {
	f.account(t)
	p.state = repStopped
	if f.stopped(p.slot / f.engines) {
		f.held--
	}
	// Its engine's counters stay in its report.
	p.keep()
	f.running -= p.running
	f.waiting -= p.waiting
	p.running, p.waiting = 0, 0
	p.e, p.fe = nil, nil
	f.plan(p)
}

func (f *fleet) read() error {
	var err error
	f.next, err = f.src.Next()
	f.have = err == nil
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if f.have && !(f.next.Arrival <= Horizon) {
		// Due past the horizon (or never): counted with the rest, as Run.
		f.have, f.beyond = false, true
		f.st.rep.BeyondHorizon++
		return nil
	}
	if f.have {
		if f.next.Arrival < f.lastDue {
			return fmt.Errorf("%w: request %s arrives at %.6fs, before the previous one (%.6fs)", ErrUnsorted, f.next.ID, f.next.Arrival, f.lastDue)
		}
		f.lastDue = f.next.Arrival
	}
	return nil
}

// sendTime is when the client sends its next request (+Inf: none).
func (f *fleet) sendTime(now float64) float64 {
	if !f.have || (f.opt.Concurrency > 0 && f.inFlight >= f.opt.Concurrency) {
		return math.Inf(1)
	}
	t := max(f.next.Arrival, now)
	if f.opt.SendUntil > 0 && t > f.opt.SendUntil {
		f.have = false
		return math.Inf(1)
	}
	return t
}

func (f *fleet) loop(ctx context.Context) error {
	now := 0.0
	var steps int64
	for {
		// The earliest event; at the same time, sends before the API
		// servers (Run's order), the API servers before the engines, the
		// autoscaler's scrape after the steps that end then.
		p := f.queue.first()
		tSend := f.sendTime(now)
		tRep := math.Inf(1)
		if p != nil {
			tRep = p.next
		}
		anyWork := f.have || f.inFlight > 0
		if math.IsInf(tSend, 1) && math.IsInf(tRep, 1) {
			return nil
		}
		if f.nextScrape <= min(tSend, tRep) && anyWork && (p == nil || f.nextScrape < tRep || p.nextKind >= evStepStart) {
			now = f.nextScrape
			if err := f.scale(now); err != nil {
				return err
			}
			f.nextScrape += f.opt.ScaleInterval
			continue
		}
		if tSend < tRep || (tSend == tRep && p.nextKind >= evFE) {
			now = tSend
			if err := f.send(now); err != nil {
				return err
			}
			// A traffic the engines refuse whole takes no step, so the
			// steps' check of ctx would never come: the sends check too.
			if f.sent%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if f.st.rep.FellBehind != nil {
				return nil
			}
			continue
		}
		now = tRep
		switch p.nextKind {
		case evFE:
			if err := f.complete(p); err != nil {
				return err
			}
		case evReady:
			p.state = repReady
		case evStepEnd:
			p.busy = false
			p.fe.advance(p.res.End)
			p.fe.push(&p.res, p.res.Sampled, p.res.First)
			g := p.e.Gauges()
			p.kv = g.KVUsage
			f.running += g.Running - p.running
			f.waiting += g.Waiting - p.waiting
			p.running, p.waiting = g.Running, g.Waiting
			// A group's dummy step (no batch) is no step of the run.
			if p.res.Batch.Tokens > 0 || !f.lockstep {
				if !f.opt.FleetOnly {
					p.st.step(&p.res, g)
				}
				// The fleet counts its requests running and waiting over
				// every engine, and the busiest engine's KV usage and batch.
				f.engineRunning = max(f.engineRunning, g.Running)
				g.Running, g.Waiting = f.running, f.waiting
				f.st.step(&p.res, g)
			}
			f.mark(now)
			if p.state == repDraining && p.outstanding == 0 && !p.e.Busy() {
				f.stop(p, now)
			}
		case evStepStart:
			if f.lockstep {
				f.stepGroup(p.slot/f.engines, now)
				if steps++; steps%1024 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				break
			}
			p.fe.advance(now)
			p.res = p.e.Step()
			if p.res.Idle {
				// Nothing arrived after all (cannot happen: NextEventTime
				// said a request was queued).
				p.plan()
				p.next, p.nextKind = math.Inf(1), evNone
				f.queue.fix(p)
				continue
			}
			p.busy = true
			steps++
			if steps%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		if p.state != repStopped {
			f.plan(p)
		}
	}
}

// stepGroup starts a step of every engine of replica k, a data-parallel
// group, at now, as vLLM steps a MoE model's ranks (its DP coordinator's waves): an
// engine with nothing to run takes a dummy batch of one token, every rank
// computes the experts of all the ranks' tokens (Batch.GroupTokens), and
// the collectives hold each rank until the slowest is done, so the step
// lasts as long as the slowest rank's; the others' wait is in their
// all-reduce time, the collectives they wait in.
func (f *fleet) stepGroup(k int, now float64) {
	reps := f.group(k)
	var group int64
	for _, q := range reps {
		if q.state == repReady || q.state == repDraining {
			q.fe.advance(now)
			group += max(q.e.beginAt(now).Tokens, 1)
		}
	}
	longest := 0.0
	for _, q := range reps {
		if q.state == repReady || q.state == repDraining {
			b := q.e.res.Batch
			b.GroupTokens, b.Tokens = group, max(b.Tokens, 1)
			q.took = q.e.price(b)
			longest = max(longest, q.took)
		}
	}
	for _, q := range reps {
		if q.state == repReady || q.state == repDraining {
			if q.e.res.HasParts {
				q.e.res.Parts.AllReduce += longest - q.took
			}
			q.res = q.e.end(longest)
			q.busy = true
			f.plan(q)
		}
	}
}

// plan sets p's next event and its place in the queue.
func (f *fleet) plan(p *replica) {
	p.plan()
	f.queue.fix(p)
}

// events is a binary heap of the replicas by their next event: the
// earliest first; at the same time the kind that runs first (the order
// of the ev constants), then the lower slot. That is the order a scan of
// fleet.reps in slot order finds, so a fleet runs the same events in the
// same order as it did by scanning, in O(log replicas) a step instead of
// O(replicas) (a scan was a tenth of a 36-replica fleet's time).
type events []*replica

func (h events) less(i, j int) bool {
	a, b := h[i], h[j]
	if (a.nextKind == evNone) != (b.nextKind == evNone) {
		return b.nextKind == evNone
	}
	if a.next != b.next {
		return a.next < b.next
	}
	if a.nextKind != b.nextKind {
		return a.nextKind < b.nextKind
	}
	return a.slot < b.slot
}

func (h events) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

// first is the replica of the earliest event, nil when none has one.
func (h events) first() *replica {
	if len(h) == 0 || h[0].nextKind == evNone {
		return nil
	}
	return h[0]
}

func (h *events) push(p *replica) {
	p.at = len(*h)
	*h = append(*h, p)
	h.up(p.at)
}

// fix restores the order after p's next event changed.
func (h events) fix(p *replica) {
	if !h.down(p.at) {
		h.up(p.at)
	}
}

func (h events) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h events) down(i0 int) bool {
	i := i0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		j := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// route picks the engine of the next request: the ready replica by the
// router, then its engine by vLLM's DP load-balancing score (pick).
func (f *fleet) route() *replica {
	n := len(f.reps) / f.engines
	best, bestOut, bestKV := -1, 0, 0.0
	for j := range n {
		k := (f.rr + j) % n
		out, kv, ready := 0, 0.0, true
		for _, q := range f.group(k) {
			ready = ready && q.state == repReady
			out += q.outstanding
			kv += q.kv
		}
		if !ready {
			continue
		}
		kv /= float64(f.engines)
		switch {
		case best < 0:
		case f.opt.Router == LeastOutstanding && out < bestOut:
		case f.opt.Router == LeastKV && (kv < bestKV || (kv == bestKV && out < bestOut)):
		default:
			continue
		}
		best, bestOut, bestKV = k, out, kv
		if f.opt.Router == RoundRobin {
			break
		}
	}
	if best < 0 {
		return nil
	}
	// The next search starts past this one: round-robin's turn, and the
	// others' ties spread in turn; the same inside the replica.
	f.rr = (best + 1) % n
	return pick(f.group(best), &f.inner[best])
}

// pick is the engine of a data-parallel replica its API server sends the
// next request to, as vLLM's DP load balancer scores them
// (DPLBAsyncMPClient: waiting × 4 + running, the lowest first): a request
// routed here and not running counts as waiting, as the client adds the
// requests it sends to an engine's waiting count between the
// coordinator's reports. Ties go in turn from *turn, which moves past it.
func pick(reps []*replica, turn *int) *replica {
	n := len(reps)
	score := func(p *replica) int {
		running := len(p.e.running)
		return 4*max(p.outstanding-running, 0) + running
	}
	bi := *turn % n
	best := score(reps[bi])
	for j := 1; j < n; j++ {
		i := (*turn + j) % n
		if sc := score(reps[i]); sc < best {
			bi, best = i, sc
		}
	}
	*turn = (bi + 1) % n
	return reps[bi]
}

func (f *fleet) send(at float64) error {
	p := f.route()
	if p == nil {
		// No replica ready (all starting): the request waits at the door,
		// as behind a gateway with no endpoint, until one is.
		t := math.Inf(1)
		for _, q := range f.reps {
			if q.state == repStarting {
				t = min(t, q.readyAt)
			}
		}
		if math.IsInf(t, 1) {
			return errors.New("no replica to send to")
		}
		// Sent when the first replica is ready.
		f.next.Arrival = max(f.next.Arrival, t)
		return nil
	}
	p.fe.advance(at)
	q := f.next
	q.Sent = at
	p.fe.submit(q)
	p.outstanding++
	f.inFlight++
	f.sent++
	f.st.window(at).Arrivals++
	f.mark(at)
	if f.win != nil {
		f.win.sent(at)
	}
	waiting := 0
	f.sentWork += int64(q.PromptTokens + q.OutputTokens)
	done := int64(0)
	for _, q := range f.reps {
		done += q.kept.PromptTokens + q.kept.GenerationTokens
		if q.state != repStopped {
			waiting += len(q.fe.jobs) + q.e.waiting.len()
			done += q.e.gauges.PromptTokens + q.e.gauges.GenerationTokens
		}
	}
	f.flow.add(flowSample{t: at, sent: f.sent, left: f.completed + f.rejected, answered: f.completed, sentWork: f.sentWork, doneWork: done, waiting: waiting, queued: waiting - 1,
		steps: f.st.rep.Steps, replicas: f.held, engines: f.held * f.engines})
	if err := f.read(); err != nil {
		return err
	}
	f.plan(p)
	if f.inFlight > f.opt.MaxBacklog {
		b := f.flow.behind()
		if b == nil {
			b = f.flow.backlog(f.flow.samples[0], f.flow.last)
		}
		b.InFlightBound = f.opt.MaxBacklog
		f.st.rep.FellBehind = b
	}
	return nil
}

// complete runs p's API server's next completion: a step's output reaches
// the clients, or a request's input processing ends and the engine gets
// it.
func (f *fleet) complete(p *replica) error {
	in, out := p.fe.complete()
	if out != nil {
		p.st.deliver(out, p.fe.now, func(ev Event) { f.done(p, ev) })
		return nil
	}
	if in == nil {
		// A request past the API server's fixed latency entered its
		// shared CPU.
		return nil
	}
	q := *in
	q.Arrival = p.fe.now
	if _, err := p.e.Add(q); err != nil {
		var rej *Rejection
		if !errors.As(err, &rej) {
			return err
		}
		p.st.rep.RejectedBy[rej.Reason]++
		f.rejected++
		f.inFlight--
		p.outstanding--
		if q.Sent >= f.opt.JudgeFrom {
			f.st.rep.RejectedBy[rej.Reason]++
			f.st.rep.Rejected++
		}
		if f.win != nil {
			f.win.rejected(q.Sent)
		}
		if f.opt.OnReject != nil {
			f.opt.OnReject(rej)
		}
	}
	return nil
}

func (f *fleet) done(p *replica, ev Event) {
	f.completed++
	f.inFlight--
	p.outstanding--
	if ev.Sent >= f.opt.JudgeFrom {
		f.st.finish(ev)
	}
	if f.win != nil {
		f.win.finished(ev)
	}
	if f.opt.OnFinish != nil {
		f.opt.OnFinish(ev)
	}
	if p.state == repDraining && p.outstanding == 0 && !p.e.Busy() && !p.busy {
		f.stop(p, p.fe.now)
	}
}

// scale scrapes the ready replicas and moves the fleet toward the
// scaler's count: new replicas start (ready after the start-up time),
// surplus ones are cancelled while starting or drained, newest first.
func (f *fleet) scale(now float64) error {
	m := FleetMetrics{Now: now}
	var engines int
	for k := range len(f.reps) / f.engines {
		switch f.reps[k*f.engines].state {
		case repStarting:
			m.Replicas++
		case repReady:
			m.Replicas++
			m.Ready++
			for _, p := range f.group(k) {
				g := p.e.Gauges()
				m.Waiting += g.Waiting
				m.Running += g.Running
				m.KVUsage += p.kv
				engines++
			}
		}
	}
	if engines > 0 {
		m.KVUsage /= float64(engines)
	}
	// The answered requests over the last minute, as Prometheus's rate()
	// over the scrapes it holds.
	f.marks = append(f.marks, scrapeMark{now, f.completed})
	for len(f.marks) > 1 && f.marks[1].at <= now-60 {
		f.marks = f.marks[1:]
	}
	if first := f.marks[0]; now-first.at >= 60-1e-9 {
		m.RequestsPerS = float64(f.completed-first.done) / (now - first.at)
	}
	want := min(max(f.opt.Scaler.Desired(m), 1), f.opt.MaxReplicas)
	for n := m.Replicas; n < want; n++ {
		if err := f.add(now, repStarting); err != nil {
			return err
		}
	}
	for n := m.Replicas; n > want; n-- {
		// The newest replica starting, else the newest ready: its engines
		// stop, or drain and stop each when it is empty.
		victim := f.newest(repStarting)
		if victim < 0 {
			victim = f.newest(repReady)
		}
		for _, p := range f.group(victim) {
			if p.state == repStarting || (p.outstanding == 0 && !p.e.Busy() && !p.busy) {
				f.stop(p, now)
				continue
			}
			p.state = repDraining
			f.plan(p)
		}
	}
	return nil
}

// newest is the replica in state that started last (ties: the last in
// slot order), -1 when none is.
func (f *fleet) newest(state int) int {
	best := -1
	for k := range len(f.reps) / f.engines {
		p := f.reps[k*f.engines]
		if p.state == state && (best < 0 || p.since >= f.reps[best*f.engines].since) {
			best = k
		}
	}
	return best
}

// keep folds the engine's counters into the replica's before the engine
// goes (a stopped replica's slot takes a new engine).
func (p *replica) keep() {
	g := p.e.Gauges()
	p.kept.Preemptions += g.Preemptions
	p.kept.Rejected += g.Rejected
	p.kept.PrefixHits += g.PrefixHits
	p.kept.PrefixQueries += g.PrefixQueries
	p.kept.SpecDrafts += g.SpecDrafts
	p.kept.SpecDraftTokens += g.SpecDraftTokens
	p.kept.SpecAccepted += g.SpecAccepted
	p.kept.PromptTokens += g.PromptTokens
	p.kept.GenerationTokens += g.GenerationTokens
	p.kept.Now = max(p.kept.Now, g.Now)
}

func (f *fleet) report() *FleetReport {
	end := f.lastT
	var itl traffic.Histogram
	var g Gauges
	out := &FleetReport{Router: f.opt.Router}
	for _, p := range f.reps {
		if p.e != nil {
			p.keep()
			end = max(end, p.e.Now())
		}
		end = max(end, p.st.lastOut)
		if !f.opt.FleetOnly {
			out.Replicas = append(out.Replicas, p.st.reportOf(p.kept))
		}
		itl.Merge(&p.st.itl)
		g.Preemptions += p.kept.Preemptions
		g.PrefixHits += p.kept.PrefixHits
		g.PrefixQueries += p.kept.PrefixQueries
		g.SpecDrafts += p.kept.SpecDrafts
		g.SpecDraftTokens += p.kept.SpecDraftTokens
		g.SpecAccepted += p.kept.SpecAccepted
		g.Now = max(g.Now, p.kept.Now, p.st.lastOut)
	}
	f.account(end)
	f.st.itl = itl
	f.st.lastOut = g.Now
	fl := f.st.reportOf(g)
	// Rejections were counted as they happened (judged ones only).
	fl.Rejected = f.st.rep.Rejected
	if len(fl.RejectedBy) == 0 {
		fl.RejectedBy = nil
	}
	fl.FellBehind = f.st.rep.FellBehind
	fl.MaxEngineRunning = f.engineRunning
	// A window without a send or a step kept the replicas of the one
	// before.
	for i := 1; i < len(fl.Series); i++ {
		if fl.Series[i].Replicas == 0 {
			fl.Series[i].Replicas = fl.Series[i-1].Replicas
		}
	}
	out.Fleet = fl
	out.ReplicaSeconds = math.Round(f.heldS*1000) / 1000
	out.PeakReplicas = f.peak
	if f.win != nil {
		f.win.flush()
	}
	return out
}

// sloWindows groups judged requests by the window of their send time.
type sloWindows struct {
	w    float64
	on   func(float64, *Report)
	open map[int]*windowAcc
	// cur is the window of the latest send: windows before it take no new
	// requests.
	cur int
}

type windowAcc struct {
	ttft, tpot, e2e    traffic.Histogram
	pending            int
	requests, rejected int64
}

func (s *sloWindows) index(t float64) int { return int(t / s.w) }

func (s *sloWindows) sent(t float64) {
	i := s.index(t)
	a := s.open[i]
	if a == nil {
		a = &windowAcc{}
		s.open[i] = a
	}
	a.pending++
	if i > s.cur {
		old := s.cur
		s.cur = i
		for j, b := range s.open {
			if j >= old && j < i && b.pending == 0 {
				s.close(j)
			}
		}
	}
}

func (s *sloWindows) settle(i int) {
	a := s.open[i]
	if a == nil {
		return
	}
	a.pending--
	if a.pending == 0 && i < s.cur {
		s.close(i)
	}
}

func (s *sloWindows) finished(ev Event) {
	i := s.index(ev.Sent)
	if a := s.open[i]; a != nil {
		a.requests++
		a.ttft.Add(micros(ev.FirstToken - ev.Arrival))
		a.e2e.Add(micros(ev.Finish - ev.Arrival))
		if ev.Output > 1 {
			a.tpot.Add(micros((ev.Finish - ev.FirstToken) / float64(ev.Output-1)))
		}
	}
	s.settle(i)
}

func (s *sloWindows) rejected(sent float64) {
	i := s.index(sent)
	if a := s.open[i]; a != nil {
		a.rejected++
	}
	s.settle(i)
}

func (s *sloWindows) close(i int) {
	a := s.open[i]
	delete(s.open, i)
	s.on(float64(i)*s.w, &Report{Requests: a.requests, Rejected: a.rejected,
		TTFT: latency(&a.ttft, nil), TPOT: latency(&a.tpot, nil), E2E: latency(&a.e2e, nil)})
}

// flush closes the windows left at the end (a run stopped at the backlog
// bound leaves requests unanswered: they count as neither).
func (s *sloWindows) flush() {
	for len(s.open) > 0 {
		first := math.MaxInt
		for i := range s.open {
			first = min(first, i)
		}
		s.close(first)
	}
}
