package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
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
	// MaxReplicas bounds a window's fleet (default 100).
	MaxReplicas int
	// Policy is the utilization policy of the recommended settings an
	// option falls back to when the given ones do not fit.
	Policy string
	// Progress, when not nil, hears what is being simulated.
	Progress func(string)
}

// Capacity defaults.
const (
	DefaultCapacityWindowS = 600
	DefaultCoolDownS       = 300
	DefaultScaleIntervalS  = 15
	DefaultMaxReplicas     = 100
	// MaxCapacityWindows bounds the windows of a trace.
	MaxCapacityWindows = 5000
	// maxWindowRequests bounds the requests of one window held for its
	// replays.
	maxWindowRequests = 2_000_000
	// warmUpS of the window before is replayed ahead of each window, so a
	// window starts with the load its replicas carry, not empty.
	warmUpS = 60
)

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
	// the option could not be simulated.
	NoFit bool     `json:"no_fit,omitempty"`
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// CapacityWindow is one window of the trace and the fewest replicas that
// served it within the SLO.
type CapacityWindow struct {
	StartS   float64 `json:"start_s"`
	Requests int     `json:"requests"`
	RatePerS float64 `json:"rate_per_s"`
	Replicas int     `json:"replicas"`
	// Met is false where even MaxReplicas missed the SLO; Miss is then
	// how far (the largest value over its limit).
	Met  bool    `json:"met"`
	Miss float64 `json:"miss,omitempty"`
}

// Autoscaler is the thresholds derived from one replica's SLO knee and
// their replay over the trace.
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
	// carries, the rate metric's target and the rate the KV target was
	// measured at: the SLO capacity less the headroom for the rise of the
	// rate over a start-up and the HPA's tolerance.
	TargetRatePerS float64  `json:"target_rate_per_s"`
	StartupS       float64  `json:"startup_s"`
	StartupSource  string   `json:"startup_source"`
	CoolDownS      float64  `json:"cool_down_s"`
	IntervalS      float64  `json:"interval_s"`
	MinReplicas    int      `json:"min_replicas"`
	MaxReplicas    int      `json:"max_replicas"`
	Replay         FleetRun `json:"replay"`
}

// FleetRun is a fleet replayed over the whole trace.
type FleetRun struct {
	Replicas      string       `json:"replicas"`
	Windows       int          `json:"windows"`
	WindowsMet    int          `json:"windows_met"`
	SLOAttainment float64      `json:"slo_attainment"`
	PeakReplicas  int          `json:"peak_replicas"`
	GPUHours      float64      `json:"gpu_hours"`
	CostUSD       float64      `json:"cost_usd"`
	Requests      int64        `json:"requests"`
	Preemptions   int64        `json:"preemptions"`
	TTFT          sim.Latency  `json:"ttft_ms"`
	TPOT          sim.Latency  `json:"tpot_ms"`
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

// UnreachableError is an SLO no option meets; Closest is the option that
// came nearest.
type UnreachableError struct {
	Closest CapacityOption
	Report  *CapacityReport
}

func (e *UnreachableError) Error() string {
	c := e.Closest
	what := fmt.Sprintf("its best run is %.0f%% over the tightest bound", (c.Miss-1)*100)
	if c.SLOCapacityPerS > 0 {
		what = fmt.Sprintf("one replica meets it up to %.3g req/s, but some window needs more than the %d replicas allowed", c.SLOCapacityPerS, c.PeakReplicas)
	}
	return fmt.Sprintf("no GPU option meets the SLO; the closest is %s (%d GPU(s) a replica): %s", c.GPU, c.GPUsPerReplica, what)
}

// ErrNoRequests is a trace without a request.
var ErrNoRequests = errors.New("the traffic has no requests: give --rate with --duration, or a --requests log with lines")

// Capacity sizes a fleet for the traffic on each GPU option: one replica's
// SLO capacity, the replicas per window (each checked by replaying the
// window through that fleet), their cost, and the autoscaler that would
// have held, replayed beside the static fleet sized for the peak.
func Capacity(ctx context.Context, env Env, files Files, req CapacityRequest) (*CapacityReport, error) {
	if err := req.Workload.Validate(); err != nil {
		return nil, err
	}
	if len(req.SLO) == 0 {
		return nil, errors.New("capacity needs an --slo, e.g. ttft_p99=2s,tpot_p99=100ms")
	}
	if len(req.GPUs) == 0 {
		return nil, errors.New("give --gpu with one or more options (H100-80GB,L40S) or --all-gpus")
	}
	if req.WindowS <= 0 {
		req.WindowS = DefaultCapacityWindowS
	}
	if req.CoolDownS <= 0 {
		req.CoolDownS = DefaultCoolDownS
	}
	if req.IntervalS <= 0 {
		req.IntervalS = DefaultScaleIntervalS
	}
	if req.MaxReplicas <= 0 {
		req.MaxReplicas = DefaultMaxReplicas
	}
	if req.Router == "" {
		req.Router = sim.RoundRobin
	}
	prices := DefaultPrices()
	for name, p := range req.Prices {
		prices[name] = Price{USDPerGPUHour: p, Source: "--price"}
	}
	tr, err := readTrace(ctx, files, req.Workload, req.WindowS)
	if err != nil {
		return nil, err
	}
	out := &CapacityReport{Traffic: req.Workload.Describe(), WindowS: req.WindowS, Router: req.Router, Prices: PriceTableSource}
	for _, b := range req.SLO {
		out.SLO = append(out.SLO, sloString(b))
	}
	var firstErr error
	for _, name := range req.GPUs {
		opt, model, err := sizeOption(ctx, env, files, req, tr, name, prices)
		if ctx.Err() != nil {
			return nil, ctx.Err()
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
	sort.SliceStable(out.Options, func(i, j int) bool {
		a, b := out.Options[i], out.Options[j]
		if a.Met != b.Met {
			return a.Met
		}
		if (a.Error != "") != (b.Error != "") {
			return b.Error != ""
		}
		if a.NoFit != b.NoFit {
			return b.NoFit
		}
		if a.Met {
			return a.CostUSD < b.CostUSD
		}
		return a.Miss < b.Miss
	})
	if best := out.Options[0]; best.Met {
		out.Best = best.GPU
	} else {
		return out, &UnreachableError{Closest: best, Report: out}
	}
	return out, nil
}

func sloString(b slo.Bound) string {
	if b.Metric == "error_rate" {
		return fmt.Sprintf("%s=%g", b.Name(), b.Rate)
	}
	return fmt.Sprintf("%s=%s", b.Name(), b.Limit)
}

// trace is the traffic cut into windows: each window's request count, and
// a way to read it again window by window.
type trace struct {
	spec    workload.Spec
	windowS float64
	counts  []int
}

func readTrace(ctx context.Context, files Files, spec workload.Spec, windowS float64) (*trace, error) {
	tr := &trace{spec: spec, windowS: windowS}
	err := tr.each(ctx, files, func(i int, _ []workload.Request, reqs []workload.Request) error {
		tr.counts = append(tr.counts, len(reqs))
		return nil
	})
	if err != nil {
		return nil, err
	}
	total := 0
	for _, c := range tr.counts {
		total += c
	}
	if total == 0 {
		return nil, ErrNoRequests
	}
	return tr, nil
}

// each reads the trace once and calls fn per window with the last warmUpS
// of the window before (warm) and the window's own requests. The slices
// are reused after fn returns.
func (tr *trace) each(ctx context.Context, files Files, fn func(i int, warm, reqs []workload.Request) error) error {
	st, closer, err := tr.spec.Open(files.open)
	if err != nil {
		return err
	}
	defer closer.Close()
	var prev, cur, warm []workload.Request
	i := 0
	flush := func() error {
		if i >= MaxCapacityWindows {
			return fmt.Errorf("the trace spans more than %d windows of %gs: give a longer --window", MaxCapacityWindows, tr.windowS)
		}
		warm = warm[:0]
		from := float64(i)*tr.windowS - warmUpS
		for _, r := range prev {
			if r.At >= from {
				warm = append(warm, r)
			}
		}
		if err := fn(i, warm, cur); err != nil {
			return err
		}
		prev, cur = cur, prev[:0]
		i++
		return ctx.Err()
	}
	for {
		r, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for r.At >= float64(i+1)*tr.windowS {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(cur) >= maxWindowRequests {
			return fmt.Errorf("more than %d requests in one window of %gs: give a shorter --window", maxWindowRequests, tr.windowS)
		}
		cur = append(cur, r)
	}
	if len(cur) > 0 {
		return flush()
	}
	return nil
}

// sliceSource replays requests shifted by -origin.
type sliceSource struct {
	reqs   [][]workload.Request
	origin float64
	i, j   int
}

func (s *sliceSource) Next() (sim.Request, error) {
	for s.i < len(s.reqs) && s.j >= len(s.reqs[s.i]) {
		s.i, s.j = s.i+1, 0
	}
	if s.i >= len(s.reqs) {
		return sim.Request{}, io.EOF
	}
	r := s.reqs[s.i][s.j]
	s.j++
	return sim.Request{ID: r.ID, Arrival: r.At - s.origin, PromptTokens: r.Prompt, OutputTokens: r.Output, PrefixID: r.PrefixID, PrefixTokens: r.PrefixTokens}, nil
}

// CapacityProbe is the traffic one replica's SLO capacity is measured on
// at rate: the workload's lengths (a log's sizes), its arrival process at
// a steady rate, enough requests for three minutes of it (at least 1,000,
// at most 20,000).
func CapacityProbe(spec workload.Spec, rate float64) workload.Spec {
	p := spec
	p.Rate, p.PeakRate, p.Period, p.Bursts, p.Duration, p.Concurrency = rate, 0, 0, nil, 0, 0
	p.NumRequests = int(min(max(math.Ceil(rate*180), 1000), 20000))
	return p
}
