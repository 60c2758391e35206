package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"headroom.dev/headroom/capacity"
	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/workload"
)

// CapacityRequest is `headroom capacity` as the user asked for it: the
// deployment (its GPU replaced by each option), the traffic, the SLO and
// the fleet's knobs.
type CapacityRequest struct {
	Engine   EngineRequest
	GPUs     []string
	Workload workload.Spec
	SLO      []slo.Bound
	// WindowS is the sizing window (default 600 s): the replicas are
	// chosen per window and the SLO judged per window.
	WindowS float64
	// Router is sim's (default round-robin, a Kubernetes Service).
	Router string
	// Prices override DefaultPrices, by catalog GPU name, in USD per GPU
	// hour.
	Prices map[string]float64
	// StartupS is the time a new replica takes to serve (0: the estimate
	// of StartupEstimate); CoolDownS the autoscaler's scale-down window
	// (default 300 s); IntervalS its sync period (default 15 s).
	StartupS, CoolDownS, IntervalS float64
	// Storage is where a new replica reads its checkpoint from, for the
	// start-up estimate when StartupS is 0 ("" = the default class).
	Storage startup.Storage
	// MaxReplicas bounds a window's fleet (default 100).
	MaxReplicas int
	// Policy is the utilization policy of the recommended settings an
	// option falls back to when the given ones do not fit.
	Policy string
	// Progress, when not nil, hears what is being simulated, one call at
	// a time.
	Progress func(CapacityProgress)
}

// Capacity defaults (capacity's).
const (
	DefaultCapacityWindowS = capacity.DefaultWindowS
	DefaultCoolDownS       = capacity.DefaultCoolDownS
	DefaultScaleIntervalS  = capacity.DefaultIntervalS
	DefaultMaxReplicas     = capacity.DefaultMaxReplica
	// MaxCapacityWindows bounds the windows of a trace.
	MaxCapacityWindows = capacity.MaxWindows
)

// CapacityProgress is where a capacity run stands: the option being
// sized (Option of Options) and its step, and Done, the share of the
// whole run done, an estimate a face turns into the time left.
type CapacityProgress struct {
	Option, Options int
	capacity.Progress
	Done float64
}

// CapacityReport is `headroom capacity -o json`: the GPU options, the
// cheapest that meets the SLO first.
type CapacityReport struct {
	Model   string   `json:"model"`
	Traffic string   `json:"traffic"`
	SLO     []string `json:"slo"`
	WindowS float64  `json:"window_s"`
	Router  string   `json:"router"`
	// Best is the cheapest option that meets the SLO ("" when none does).
	Best    string           `json:"best,omitempty"`
	Prices  string           `json:"prices"`
	Options []CapacityOption `json:"options"`
	Notes   []string         `json:"notes,omitempty"`
}

// CapacityOption is one GPU option sized for the traffic.
type CapacityOption struct {
	GPU            string      `json:"gpu"`
	GPUsPerReplica int         `json:"gpus_per_replica"`
	Settings       SimSettings `json:"settings"`
	// SLOCapacityPerS is the highest arrival rate of the traffic's shape
	// one replica serves with every SLO met; CapacityProbe the traffic it
	// was measured on at that rate.
	SLOCapacityPerS float64 `json:"slo_capacity_per_s"`
	CapacityProbe   string  `json:"capacity_probe"`
	// Confidence is how sure the simulation behind the capacity is
	// (sim.ConfidenceOfRun of the run at the capacity); absent for a
	// fixed step time.
	Confidence *sim.Confidence `json:"confidence,omitempty"`
	// Met: every window of the trace is served within the SLO by at most
	// MaxReplicas replicas.
	Met          bool             `json:"met"`
	Windows      []CapacityWindow `json:"windows,omitempty"`
	PeakReplicas int              `json:"peak_replicas"`
	MeanReplicas float64          `json:"mean_replicas"`
	PeakGPUs     int              `json:"peak_gpus"`
	MeanGPUs     float64          `json:"mean_gpus"`
	GPUHours     float64          `json:"gpu_hours"`
	// USDPerGPUHour and CostUSD price the replicas per window.
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
	PriceSource   string  `json:"price_source"`
	CostUSD       float64 `json:"cost_usd"`
	// Autoscaler is the HPA that would have held, replayed; Static the
	// fleet sized for the peak, replayed.
	Autoscaler *Autoscaler `json:"autoscaler,omitempty"`
	Static     *FleetRun   `json:"static,omitempty"`
	// Miss is, when not Met, how far the closest run came: the largest
	// SLO value over its limit (1.5: 50% over).
	Miss float64 `json:"miss,omitempty"`
	// NoFit: the model does not start on this GPU (Notes say why). Error:
	// the option could not be simulated. Refused: one replica refuses
	// requests of the traffic (too long for max-model-len or its KV cache),
	// so no fleet of it meets the SLO; it says how many and why.
	NoFit   bool   `json:"no_fit,omitempty"`
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
	// Warnings are the replica's plan's, as `headroom plan` gives them.
	Warnings []memory.Finding `json:"warnings,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
	// behind: when no rate met, the closest run fell behind.
	behind bool
	// runs counts the sizing's simulations (the benchmark's log).
	runs capacity.Runs
}

// CapacityWindow, Autoscaler, FleetRun and MissedWindow are capacity's.
type (
	CapacityWindow = capacity.Window
	Autoscaler     = capacity.Autoscaler
	FleetRun       = capacity.FleetRun
	MissedWindow   = capacity.MissedWindow
)

// UnreachableError is an SLO no option meets; Closest is the option that
// came nearest.
type UnreachableError struct {
	Closest CapacityOption
	Report  *CapacityReport
}

func (e *UnreachableError) Error() string {
	c := e.Closest
	var what string
	switch {
	case c.NoFit:
		var why []string
		for _, o := range e.Report.Options {
			if o.NoFit && len(o.Notes) > 0 {
				why = append(why, o.GPU+": "+o.Notes[len(o.Notes)-1])
			}
		}
		return "no GPU option meets the SLO: vLLM would not start on any of them (" + strings.Join(why, "; ") + ")"
	case c.Error != "":
		return fmt.Sprintf("no GPU option meets the SLO: %s could not be simulated: %s", c.GPU, c.Error)
	case c.Refused != "":
		what = c.Refused
	case c.SLOCapacityPerS > 0:
		what = fmt.Sprintf("one replica meets it up to %.3g req/s, but some window needs more than the %d replicas allowed", c.SLOCapacityPerS, c.PeakReplicas)
	case c.behind:
		what = "one replica falls behind the traffic even at 1/1024 req/s"
	case c.Miss > 0:
		what = fmt.Sprintf("one replica misses it even at 1/1024 req/s; its closest run is %.0f%% over the tightest bound", (c.Miss-1)*100)
	default:
		what = "one replica misses it even at 1/1024 req/s"
	}
	return fmt.Sprintf("no GPU option meets the SLO; the closest is %s (%d GPU(s) a replica): %s", c.GPU, c.GPUsPerReplica, what)
}

// ErrNoRequests is a trace without a request.
var ErrNoRequests = capacity.ErrNoRequests

// ErrTooLight is a traffic one replica serves at every rate tried.
var ErrTooLight = capacity.ErrTooLight

// Capacity sizes a fleet for the traffic on each GPU option (each
// distinct one once): one replica's SLO capacity, the replicas per window,
// and the autoscaler that would have held, replayed, with its GPU-hours
// and cost, the answer; beside it the ideal per-window fleet (the bound)
// and the static fleet sized for the peak. The search is package
// capacity's; this plans each option's replica and assembles the report.
func Capacity(ctx context.Context, env Env, files Files, req CapacityRequest) (*CapacityReport, error) {
	if err := req.Workload.Validate(); err != nil {
		return nil, err
	}
	if err := sizable(req.Workload); err != nil {
		return nil, err
	}
	if len(req.SLO) == 0 {
		return nil, errors.New("capacity needs an --slo, e.g. ttft_p99=2s,tpot_p99=100ms")
	}
	if len(req.GPUs) == 0 {
		return nil, errors.New("give --gpu with one or more options (H100-80GB,L40S) or --all-gpus")
	}
	if req.Router == "" {
		req.Router = sim.RoundRobin
	}
	if req.WindowS <= 0 {
		req.WindowS = DefaultCapacityWindowS
	}
	prices := gpu.Prices()
	for name, p := range req.Prices {
		prices[name] = gpu.Price{USDPerGPUHour: p, Source: "--price"}
	}
	creq := capacity.Request{Traffic: req.Workload, Open: files.within(ctx), SLO: req.SLO, WindowS: req.WindowS, Router: req.Router,
		CoolDownS: req.CoolDownS, IntervalS: req.IntervalS, MaxReplicas: req.MaxReplicas}
	out := &CapacityReport{Traffic: req.Workload.Describe(), WindowS: req.WindowS, Router: req.Router, Prices: gpu.PriceSource, SLO: capacity.SLOStrings(req.SLO)}
	names, err := distinctGPUs(req.GPUs)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for i, name := range names {
		if req.Progress != nil {
			creq.Progress = func(p capacity.Progress) {
				req.Progress(CapacityProgress{Option: i + 1, Options: len(names), Progress: p, Done: (float64(i) + p.Done) / float64(len(names))})
			}
		}
		opt, model, err := sizeOption(ctx, env, files, req, creq, name, prices)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, capacity.ErrNoRequests) || errors.Is(err, capacity.ErrTooLight) {
			return nil, err
		}
		if err != nil {
			// An option that cannot be simulated (a GPU without datasheet
			// throughput) is said, and the others sized; when none can be,
			// the first error is the answer.
			if firstErr == nil {
				firstErr = err
			}
			opt = CapacityOption{GPU: name, Error: err.Error()}
		} else {
			out.Model = model
		}
		out.Options = append(out.Options, opt)
	}
	if out.Model == "" && firstErr != nil {
		return nil, firstErr
	}
	sort.SliceStable(out.Options, func(i, j int) bool { return better(out.Options[i], out.Options[j]) })
	if best := out.Options[0]; best.Met {
		out.Best = best.GPU
	} else {
		return out, &UnreachableError{Closest: best, Report: out}
	}
	return out, nil
}

// better ranks options: those that meet the SLO first, by the cost of
// the fleet handed over (the autoscaler's replay: more windows met, then
// the lower cost, an option without a price after those with one, then
// fewer GPU-hours); then those that do not, the closest first.
func better(a, b CapacityOption) bool {
	if a.Met != b.Met {
		return a.Met
	}
	if (a.Error != "") != (b.Error != "") {
		return b.Error != ""
	}
	if a.NoFit != b.NoFit {
		return b.NoFit
	}
	if !a.Met {
		return a.Miss < b.Miss
	}
	ra, rb := a.Autoscaler.Replay, b.Autoscaler.Replay
	if ra.WindowsMet != rb.WindowsMet {
		return ra.WindowsMet > rb.WindowsMet
	}
	if (a.USDPerGPUHour > 0) != (b.USDPerGPUHour > 0) {
		return a.USDPerGPUHour > 0
	}
	if ra.CostUSD != rb.CostUSD {
		return ra.CostUSD < rb.CostUSD
	}
	return ra.GPUHours < rb.GPUHours
}

// distinctGPUs is the options as given, each distinct GPU (a device and
// a count, however it is spelled) once, in the order first given.
func distinctGPUs(names []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		sel, err := gpu.Resolve(n)
		if err != nil {
			return nil, fmt.Errorf("--gpu %s: %v", n, err)
		}
		key := fmt.Sprintf("%s x%d", sel.Device.Name, sel.Count)
		if !seen[key] {
			seen[key] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// sizable refuses traffic capacity cannot size: a closed loop, whose
// load follows the fleet (N clients in all send as they are answered),
// and synthetic requests of no prompt or no output token (the simulator
// would send one-token requests in their place, and a replica "serves"
// them at any rate).
func sizable(spec workload.Spec) error {
	if spec.Concurrency > 0 {
		// Replayed as arrivals, a closed loop's requests were one burst
		// at t=0: 42 replicas for what one replica serves.
		return fmt.Errorf("a closed loop of %d clients (--concurrency, a bench's --max-concurrency) has no arrival rate to size a fleet for: its clients send when answered, so its load follows the fleet; "+
			"for %d clients in all against K replicas run `headroom simulate --concurrency %d --replicas K --slo ...`, or give capacity the rate they send at (--rate)", spec.Concurrency, spec.Concurrency, spec.Concurrency)
	}
	if spec.Log != "" || spec.Dataset.Name != "" {
		return nil
	}
	if spec.Prompt != nil && spec.Prompt.Mean() < 1 {
		return fmt.Errorf("--prompt-tokens %s: capacity sizes requests of at least one prompt token", spec.Prompt)
	}
	if spec.Output != nil && spec.Output.Mean() < 1 {
		return fmt.Errorf("--output-tokens %s: capacity sizes requests of at least one output token", spec.Output)
	}
	for _, b := range spec.Bursts {
		if b.Tokens < 1 {
			return fmt.Errorf("--burst %dx%d: capacity sizes requests of at least one prompt token", b.Count, b.Tokens)
		}
	}
	return nil
}

// sizeOption plans the option's replica (the recommended settings when
// the given ones do not fit) and sizes it.
func sizeOption(ctx context.Context, env Env, files Files, req CapacityRequest, creq capacity.Request, name string, prices map[string]gpu.Price) (CapacityOption, string, error) {
	er := req.Engine
	er.Plan.GPU = name
	e, err := NewEngine(ctx, env, files, er)
	var nf *NoFitError
	if err != nil && (!errors.As(err, &nf) || e == nil) {
		return CapacityOption{}, "", err
	}
	// The replica is the plan: the GPUs given laid out as plan lays them
	// out, and, where that does not fit, plan's first alternative on this
	// GPU at the settings it recommends.
	if e, err = withPlanLayout(e); err != nil {
		return CapacityOption{}, "", err
	}
	var fitNote string
	if !e.Budget.Fits && e.Budget.Settings.NumGPUBlocksOverride == 0 {
		var msgs []string
		for _, p := range e.Budget.Problems {
			msgs = append(msgs, p.Message)
		}
		noFit := CapacityOption{GPU: e.Evidence.Sel.Device.Name, GPUsPerReplica: e.Budget.Count, NoFit: true, Warnings: e.Budget.Warnings,
			Notes: []string{(&NoFitError{Problems: msgs}).Error()}}
		alt, what, aerr := planAlternative(e, req.Policy)
		if aerr != nil || alt == nil || len(startProblems(alt.Budget)) > 0 {
			return noFit, e.Evidence.Spec.ID, nil
		}
		fitNote = fmt.Sprintf("%s: the given settings do not fit, so plan's first alternative: %s", e.Evidence.Sel.Device.Name, what)
		e = alt
	}
	if probs := startProblems(e.Budget); len(probs) > 0 {
		return CapacityOption{GPU: e.Evidence.Sel.Device.Name, GPUsPerReplica: e.Budget.Count, NoFit: true, Warnings: e.Budget.Warnings,
			Notes: []string{(&NoFitError{Problems: probs}).Error()}}, e.Evidence.Spec.ID, nil
	}
	if e.Config.NumGPUBlocks < 2 {
		return CapacityOption{}, "", ErrNoKV
	}
	dev := e.Evidence.Sel.Device.Name
	o := CapacityOption{GPU: dev, GPUsPerReplica: e.Budget.Count, Settings: e.Settings(), Notes: e.Notes, Warnings: e.Budget.Warnings}
	if fitNote != "" {
		o.Notes = append(append([]string(nil), o.Notes...), fitNote)
	}
	p, priced := prices[dev]
	if priced {
		o.USDPerGPUHour, o.PriceSource = p.USDPerGPUHour, p.Source
	} else {
		o.Notes = append(o.Notes, fmt.Sprintf("no price for %s: give --price %s=USD_PER_HOUR", dev, dev))
	}
	startup, source := req.StartupS, "--startup-time"
	if startup <= 0 {
		startup, source = StartupEstimate(e, req.Storage)
	}
	copt := capacity.Option{GPU: dev, GPUsPerReplica: e.Budget.Count, Replica: e.replica(req.Workload.Endpoint),
		StartupS: startup, StartupSource: source, Version: e.Budget.Settings.Version, USDPerGPUHour: o.USDPerGPUHour}
	engines := map[int]*Engine{e.Config.MaxNumSeqs: e}
	if rec, err := memory.Recommend(e.Input, memory.Options{}); err == nil {
		copt.SeqsCandidates = sim.SeqsCandidates(e.Config.MaxNumSeqs, rec.MaxNumSeqs)
		copt.AtMaxNumSeqs = func(n int) (capacity.Replica, bool, error) {
			set := e.Budget.Settings
			set.MaxNumSeqs = n
			e2, err := e.At(set)
			if err != nil {
				return capacity.Replica{}, false, err
			}
			engines[n] = e2
			return e2.replica(req.Workload.Endpoint), e2.Budget.Fits, nil
		}
	}
	sz, err := capacity.Size(ctx, creq, copt)
	if err != nil {
		return o, "", err
	}
	o.Refused, o.runs = sz.Refused, sz.Runs
	if sz.SLOCapacityPerS == 0 {
		o.Miss, o.behind = sz.Miss, sz.ClosestFellBehind
		return o, e.Evidence.Spec.ID, nil
	}
	if chosen, ok := engines[sz.MaxNumSeqs]; ok && chosen != e {
		e = chosen
		o.Settings = e.Settings()
	}
	if sz.SeqsNote != "" {
		o.Notes = append(o.Notes, sz.SeqsNote)
	}
	o.SLOCapacityPerS = sz.SLOCapacityPerS
	o.CapacityProbe = sz.Probe.Describe()
	if _, ok := e.Timer.(*sim.Roofline); ok && sz.AtCapacity != nil {
		conf := sim.ConfidenceOfRun(e.Budget, sz.AtCapacity)
		o.Confidence = &conf
	}
	o.Met, o.Miss, o.Windows = sz.Met, sz.Miss, sz.Windows
	o.PeakReplicas, o.MeanReplicas, o.PeakGPUs, o.MeanGPUs, o.GPUHours, o.CostUSD = sz.PeakReplicas, sz.MeanReplicas, sz.PeakGPUs, sz.MeanGPUs, sz.GPUHours, sz.CostUSD
	o.Autoscaler, o.Static = sz.Autoscaler, sz.Static
	o.Notes = append(o.Notes, sz.Notes...)
	return o, e.Evidence.Spec.ID, nil
}

// replica is e as capacity sizes it: one server, its data-parallel
// engines behind its API server.
func (e *Engine) replica(endpoint string) capacity.Replica {
	return capacity.Replica{Config: e.Config, FrontEnd: e.FrontEnd(endpoint), Engines: e.Budget.Settings.DataParallelSize}
}

// CapacityProbe is the traffic one replica's SLO capacity is measured on
// at rate (capacity.Probe).
func CapacityProbe(spec workload.Spec, rate float64) workload.Spec { return capacity.Probe(spec, rate) }

// StartupEstimate is the time from the decision to add a replica to its
// first request served, when --startup-time is not given: headroom's one
// start-up model (package startup, docs/startup.md) for the replica's
// plan, its checkpoint read from st. It is an estimate, not a measurement:
// the source says so. This is the one place capacity takes a start-up
// time from.
func StartupEstimate(e *Engine, st startup.Storage) (float64, string) {
	est := memory.StartupOf(e.Budget, st)
	return est.Total.Seconds(), fmt.Sprintf("estimate: %s (docs/startup.md); measure yours (pod start to /health) and give --startup-time, or say where the weights are read from with --storage", est.Summary())
}

// Policies of the replica bound an autoscaler is handed with
// (capacity's).
const (
	PolicyCapped   = capacity.PolicyCapped
	PolicyUncapped = capacity.PolicyUncapped
	PolicyStatic   = capacity.PolicyStatic
)
