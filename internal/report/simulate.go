package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// SimRequest is a simulation as the user asked for it: the CLI fills it
// from its flags, the web API from its JSON.
type SimRequest struct {
	Engine   EngineRequest
	Workload workload.Spec
	// Window is the time series' window in seconds (default 10).
	Window float64
	SLO    []slo.Bound
	// Compare also runs the recommended settings, the max-num-seqs the
	// traffic favours and each of Pools (a profile's split: the requests
	// each serves, by prompt + output tokens).
	Compare bool
	Policy  string
	Pools   []traffic.Pool
	// OnFinish sees every finished request of the main run (a trace, a
	// progress line).
	OnFinish func(sim.Event)
	// Replicas, when more than 1, serves the traffic with that many
	// replicas behind Router (sim.RunFleet): the report is the fleet's,
	// with each replica's beside it.
	Replicas int
	Router   string
	// Goodput is vllm bench serve's --goodput (none when empty);
	// Percentiles the extra percentiles (0–100) each latency gives.
	Goodput     workload.Goodput
	Percentiles []float64
}

// SimReport is `headroom simulate -o json`: the run's numbers at the top
// level (sim.Report), and what was simulated.
type SimReport struct {
	*sim.Report
	Model string `json:"model"`
	GPU   string `json:"gpu"`
	// GPUCount is one replica's GPUs.
	GPUCount int         `json:"gpu_count"`
	Settings SimSettings `json:"settings"`
	StepTime string      `json:"step_time"`
	Traffic  string      `json:"traffic"`
	// TotalTokensPerS is prompt and output tokens per second, as vllm bench
	// serve's "Total Token throughput".
	TotalTokensPerS float64 `json:"total_tokens_per_s"`
	// Goodput are vllm bench serve's --goodput targets; GoodRequests the
	// finished requests meeting every one, GoodputPerS them per second of
	// the run (bench's "Request goodput").
	Goodput      workload.Goodput `json:"goodput,omitempty"`
	GoodRequests *int64           `json:"good_requests,omitempty"`
	GoodputPerS  *float64         `json:"goodput_per_s,omitempty"`
	SLO          []SLOResult      `json:"slo,omitempty"`
	SLOMet       *bool            `json:"slo_met,omitempty"`
	Compare      []CompareRow     `json:"compare,omitempty"`
	// Router and Replicas are a fleet's (simulate --replicas N): the
	// numbers above are then the whole fleet's. Replicas holds each
	// engine: a replica's, or a data-parallel replica's engines in turn
	// (EnginesPerReplica of them).
	Router            string        `json:"router,omitempty"`
	Replicas          []*sim.Report `json:"replicas,omitempty"`
	EnginesPerReplica int           `json:"engines_per_replica,omitempty"`
	// Confidence is how sure the figures are (sim.ConfidenceOfRun); absent
	// with a fixed step time, which no fit stands behind.
	Confidence *sim.Confidence `json:"confidence,omitempty"`
	// Speculative is how speculative decoding was simulated (with
	// --speculative-config); the run's spec_decode says what vLLM's
	// counters would read.
	Speculative *SpecSim `json:"speculative,omitempty"`
	// Warnings are the plan's, as `headroom plan` gives them (a flag it
	// does not know, what may move memory unmodelled).
	Warnings []memory.Finding `json:"warnings,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
	// FellBehindLine says FellBehind in words, the table's first line.
	FellBehindLine string `json:"fell_behind_line,omitempty"`
	// RefusedLine says, when every request was refused (none finished),
	// that the engine cannot serve this traffic and why.
	RefusedLine string `json:"refused_line,omitempty"`
}

// EngineName is the simulated engine as the overload line names it: "one
// L40S", "2x H100-80GB".
func EngineName(count int, gpu string) string {
	if count <= 1 {
		return "one " + gpu
	}
	return fmt.Sprintf("%dx %s", count, gpu)
}

// NoRequests is a run in which no request was sent: a traffic whose every
// request is due past the simulator's horizon, or a log without requests.
func NoRequests(spec workload.Spec, rep *sim.Report) error {
	if rep.BeyondHorizon > 0 {
		return fmt.Errorf("no request arrives within the simulator's horizon of %.0f years (%.3g s of simulated time; %s): raise the rate", sim.Horizon/(365.25*24*3600), sim.Horizon, spec.Describe())
	}
	return fmt.Errorf("no request to simulate: %s", spec.Describe())
}

// SimSettings are the simulated engine's settings.
type SimSettings struct {
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxModelLen          int     `json:"max_model_len"`
	MaxNumSeqs           int     `json:"max_num_seqs"`
	MaxNumBatchedTokens  int     `json:"max_num_batched_tokens"`
	BlockSize            int     `json:"block_size"`
	NumGPUBlocks         int     `json:"num_gpu_blocks"`
	KVCacheTokens        int64   `json:"kv_cache_tokens"`
	PrefixCaching        bool    `json:"prefix_caching"`
	ChunkedPrefill       bool    `json:"chunked_prefill"`
	AsyncScheduling      bool    `json:"async_scheduling"`
	// CUDAGraphMode and MaxCudagraphCaptureSize are the graphs the clock
	// priced: the serve line's, else the release's (0: no graph).
	CUDAGraphMode           string `json:"cudagraph_mode"`
	MaxCudagraphCaptureSize int    `json:"max_cudagraph_capture_size"`
	VLLMVersion             string `json:"vllm_version"`
}

// Settings are e's settings as the report shows them.
func (e *Engine) Settings() SimSettings {
	s, c := e.Budget.Settings, e.Config
	m, ok := e.Timer.(*sim.Roofline)
	out := SimSettings{GPUMemoryUtilization: s.GPUMemoryUtilization, MaxModelLen: c.MaxModelLen, MaxNumSeqs: c.MaxNumSeqs,
		MaxNumBatchedTokens: c.MaxNumBatchedTokens, BlockSize: c.BlockSize, NumGPUBlocks: c.NumGPUBlocks,
		KVCacheTokens: int64(c.NumGPUBlocks) / int64(max(len(c.Groups), 1)) * int64(c.BlockSize),
		PrefixCaching: !c.NoPrefixCaching, ChunkedPrefill: !c.NoChunkedPrefill, AsyncScheduling: ok && m.Overlap,
		CUDAGraphMode: vllm.CUDAGraphMode(s), VLLMVersion: s.Version.String()}
	if ok {
		out.MaxCudagraphCaptureSize = int(m.GraphTokens)
	}
	return out
}

// SLOResult is one --slo bound judged (sim's: simulate, --compare and
// capacity judge by the same code).
type SLOResult = sim.SLOResult

// CheckSLO judges a run (sim.CheckSLO).
func CheckSLO(bounds []slo.Bound, r *sim.Report) []SLOResult { return sim.CheckSLO(bounds, r) }

func met(results []SLOResult) *bool { return sim.SLOMet(results) }

// CompareRow is one deployment of --compare.
type CompareRow struct {
	Label       string      `json:"label"`
	Settings    SimSettings `json:"settings"`
	Requests    int64       `json:"requests"`
	Rejected    int64       `json:"rejected"`
	Preemptions int64       `json:"preemptions"`
	TTFT        sim.Latency `json:"ttft_ms"`
	TPOT        sim.Latency `json:"tpot_ms"`
	E2E         sim.Latency `json:"e2e_ms"`
	MaxKVUsage  float64     `json:"max_kv_usage"`
	MaxWaiting  int         `json:"max_waiting"`
	SLOMet      *bool       `json:"slo_met,omitempty"`
	// FellBehind is set when the run stopped at the backlog bound.
	FellBehind *sim.Backlog `json:"fell_behind,omitempty"`
	// Pool bounds: the requests (by prompt + output tokens) this pool
	// serves, for a pool of a split.
	MinTokens int64 `json:"min_tokens,omitempty"`
	MaxTokens int64 `json:"max_tokens,omitempty"`
}

func rowOf(label string, e *Engine, r *sim.Report, bounds []slo.Bound) CompareRow {
	return CompareRow{Label: label, Settings: e.Settings(), Requests: r.Requests, Rejected: r.Rejected, Preemptions: r.Preemptions,
		TTFT: r.TTFT, TPOT: r.TPOT, E2E: r.E2E, MaxKVUsage: r.MaxKVUsage, MaxWaiting: r.MaxWaiting, FellBehind: r.FellBehind,
		SLOMet: met(CheckSLO(bounds, r))}
}

// Simulate builds the engine of req, runs its traffic and, with Compare,
// the other settings on the same traffic. A run that falls behind is a
// report (FellBehind), not an error.
func Simulate(ctx context.Context, env Env, files Files, req SimRequest) (*SimReport, error) {
	if err := req.Workload.Validate(); err != nil {
		return nil, err
	}
	e, err := SimEngine(ctx, env, files, req.Engine)
	if err != nil {
		return nil, err
	}
	opt := sim.RunOptions{Window: req.Window, OnFinish: req.OnFinish, Percentiles: req.Percentiles}
	var refusal string
	opt.OnReject = func(r *sim.Rejection) {
		if refusal == "" {
			refusal = r.Detail
		}
	}
	var good int64
	if len(req.Goodput) > 0 {
		opt.OnFinish = func(ev sim.Event) {
			ttft, tpot, e2e := ev.Latencies()
			if req.Goodput.Meets(ttft*1000, tpot*1000, e2e*1000) {
				good++
			}
			if req.OnFinish != nil {
				req.OnFinish(ev)
			}
		}
	}
	if req.Replicas < 0 {
		return nil, sim.ErrNoReplicas
	}
	fleet := req.Replicas > 1
	if fleet && req.Compare {
		return nil, errors.New("--compare compares settings of one replica: drop --replicas or --compare")
	}
	var rep *sim.Report
	var log string
	var fr *sim.FleetReport
	if fleet {
		fr, log, err = e.RunFleet(ctx, files, req.Workload, sim.FleetOptions{RunOptions: opt, Replicas: req.Replicas, Router: req.Router})
		if fr != nil {
			rep = fr.Fleet
			// The engines' mean, as a data-parallel server's: the table
			// says it is each engine's.
			if rep.StepSplit != nil && len(fr.Replicas) > 0 {
				rep.StepSplit.Scale(1 / float64(len(fr.Replicas)))
			}
		}
	} else {
		rep, log, err = e.Run(ctx, files, req.Workload, opt)
	}
	if err != nil {
		return nil, err
	}
	if log != "" {
		e.Notes = append(e.Notes, log)
	}
	if n := e.EndpointNote(req.Workload.Endpoint); n != "" {
		e.Notes = append(e.Notes, n)
	}
	out := &SimReport{Report: rep, Model: e.Evidence.Spec.ID, GPU: e.Evidence.Sel.Device.Name, GPUCount: e.Budget.Count,
		Settings: e.Settings(), StepTime: e.StepTime, Traffic: req.Workload.Describe(), Notes: e.Notes, Speculative: e.Spec,
		Warnings: e.Budget.Warnings}
	if fr != nil {
		out.Router, out.Replicas, out.EnginesPerReplica = fr.Router, fr.Replicas, max(e.Budget.Settings.DataParallelSize, 1)
	}
	if _, ok := e.Timer.(*sim.Roofline); ok {
		// A fleet's regime is its engines': the busiest one's batches
		// (sim.Report.MaxEngineRunning).
		c := sim.ConfidenceOfRun(e.Budget, rep)
		out.Confidence = &c
	}
	if rep.LatenciesPastRange > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("%d requests took past 2^40 µs (12.7 days), the latency histograms' range: percentiles there read 12.7 days; the maxima and means are exact", rep.LatenciesPastRange))
	}
	if rep.DurationS > 0 {
		out.TotalTokensPerS = math.Round(float64(rep.InputTokens+rep.OutputTokens)/rep.DurationS*10) / 10
	}
	if len(req.Goodput) > 0 {
		rate := 0.0
		if rep.DurationS > 0 {
			rate = math.Round(float64(good)/rep.DurationS*1000) / 1000
		}
		out.Goodput, out.GoodRequests, out.GoodputPerS = req.Goodput, &good, &rate
	}
	if len(req.SLO) > 0 {
		out.SLO = CheckSLO(req.SLO, rep)
		out.SLOMet = met(out.SLO)
	}
	if rep.Requests == 0 && rep.Rejected == 0 && rep.FellBehind == nil {
		return nil, NoRequests(req.Workload, rep)
	}
	if rep.Requests == 0 && rep.Rejected > 0 {
		// Nothing was served: the answer is that this engine cannot
		// serve the traffic, not a run without latencies.
		out.RefusedLine = fmt.Sprintf("%s refuses every request of this traffic (%s), as vLLM would: %s", EngineName(out.GPUCount, out.GPU), rejectedWords(rep), refusal)
	}
	if b := rep.FellBehind; b != nil {
		who := EngineName(out.GPUCount, out.GPU)
		if fr != nil {
			who = fmt.Sprintf("a fleet of %d replicas of %s", req.Replicas, who)
		}
		out.FellBehindLine = b.Say(who)
		out.Notes = append(out.Notes, "the latencies grow with the run's length while the queue grows: they describe this run, not the deployment")
	}
	if req.Compare {
		if out.Compare, err = compare(ctx, files, req, e, rep); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rejectedWords is a run's refusals by reason: "20 prompt_too_long".
func rejectedWords(r *sim.Report) string {
	var parts []string
	for _, k := range r.SortedReasons() {
		parts = append(parts, fmt.Sprintf("%d %s", r.RejectedBy[k], k))
	}
	return strings.Join(parts, ", ")
}

// SimEngine is the engine `simulate` runs: the plan of the request at the
// parallel layout `headroom plan` takes for the GPUs given, stopped with
// plan's problems (and what would fit) when vLLM would not start.
func SimEngine(ctx context.Context, env Env, files Files, er EngineRequest) (*Engine, error) {
	e, err := NewEngine(ctx, env, files, er)
	var nf *NoFitError
	if err != nil && (!errors.As(err, &nf) || e == nil) {
		return nil, err
	}
	laid, lerr := withPlanLayout(e)
	if lerr != nil {
		return nil, lerr
	}
	if nf != nil {
		if laid == e || !laid.Budget.Fits {
			nf.Problems = append(nf.Problems, alternativeLines(laid)...)
			return nil, nf
		}
	}
	e = laid
	if probs := startProblems(e.Budget); len(probs) > 0 {
		// A KV pool given answers the plan's memory, not a server that
		// does not start.
		return nil, &NoFitError{Problems: probs}
	}
	if er.MaxKVBlocks > 0 && e.Config.NumGPUBlocks > er.MaxKVBlocks {
		return nil, fmt.Errorf("%w: the KV pool has %d blocks, at most %d here (lower num-gpu-blocks-override, or run `headroom simulate`)", ErrTooManyBlocks, e.Config.NumGPUBlocks, er.MaxKVBlocks)
	}
	return e, nil
}

// compare runs the same traffic on headroom's recommended settings, the
// max-num-seqs the traffic favours and each pool of a split.
func compare(ctx context.Context, files Files, req SimRequest, given *Engine, givenRep *sim.Report) ([]CompareRow, error) {
	rows := []CompareRow{rowOf("given", given, givenRep, req.SLO)}
	recIn := given.Input
	rec, err := memory.Recommend(recIn, memory.Options{Policy: req.Policy})
	if err != nil {
		return nil, err
	}
	s := given.Budget.Settings
	s.GPUMemoryUtilization, s.MaxModelLen, s.MaxNumSeqs = rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs
	s.NumGPUBlocksOverride = 0
	opt := sim.RunOptions{Window: req.Window}
	if rec.MaxModelLen > 0 {
		r, err := given.At(s)
		if err != nil {
			return nil, err
		}
		rep, _, err := r.Run(ctx, files, req.Workload, opt)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rowOf("recommended", r, rep, req.SLO))
	}
	tuned, err := tuneMaxNumSeqs(ctx, files, req, given, givenRep, rec.MaxNumSeqs)
	if err != nil {
		return nil, err
	}
	rows = append(rows, tuned)
	for i, pool := range req.Pools {
		ps := given.Budget.Settings
		ps.GPUMemoryUtilization, ps.MaxModelLen, ps.MaxNumSeqs = pool.GPUMemoryUtilization, pool.MaxModelLen, pool.MaxNumSeqs
		ps.NumGPUBlocksOverride = 0
		p, err := given.At(ps)
		if err != nil {
			return nil, err
		}
		lo, hi := pool.MinTokens, pool.MaxTokens
		// The last pool also takes what is longer than its bound: there
		// it is rejected as too long, and counted, not lost.
		last := i == len(req.Pools)-1
		rep, _, err := p.run(ctx, files, req.Workload, opt, func(r workload.Request) bool {
			t := int64(r.Prompt + r.Output)
			return t >= lo && (last || t <= hi)
		})
		if err != nil {
			return nil, err
		}
		row := rowOf("pool "+pool.Name, p, rep, req.SLO)
		row.MinTokens, row.MaxTokens = lo, hi
		rows = append(rows, row)
	}
	return rows, nil
}

type filtered struct {
	st   workload.Stream
	keep func(workload.Request) bool
}

func (f filtered) Next() (workload.Request, error) {
	for {
		r, err := f.st.Next()
		if err != nil || f.keep(r) {
			return r, err
		}
	}
}

// tuneMaxNumSeqs chooses --max-num-seqs from the traffic itself with
// sim.ChooseMaxNumSeqs: the given settings with max-num-seqs at every
// power of two from 8 below the given value, at the given value and at
// the recommended one, each run on the same traffic (the given run is
// reused).
func tuneMaxNumSeqs(ctx context.Context, files Files, req SimRequest, given *Engine, givenRep *sim.Report, recommended int) (CompareRow, error) {
	top := given.Budget.Settings.MaxNumSeqs
	cands := sim.SeqsCandidates(top, recommended)
	engines := map[int]*Engine{top: given}
	override := given.Budget.Settings.NumGPUBlocksOverride > 0
	search := sim.SeqsSearch{
		Candidates:   cands,
		DataParallel: given.Budget.Settings.DataParallelSize,
		Config: func(n int) (sim.Config, bool, error) {
			e, ok := engines[n]
			if !ok {
				s := given.Budget.Settings
				s.MaxNumSeqs = n
				var err error
				if e, err = given.At(s); err != nil {
					return sim.Config{}, false, err
				}
				engines[n] = e
			}
			if !e.Budget.Fits && !override {
				return sim.Config{}, false, nil
			}
			return e.Config, true, nil
		},
		Open: func() (sim.Source, func(), error) {
			st, closer, err := req.Workload.Open(files.within(ctx))
			if err != nil {
				return nil, nil, err
			}
			return sim.FromWorkload(st), func() { closer.Close() }, nil
		},
		Run:       sim.RunOptions{Window: req.Window, FrontEnd: given.FrontEnd(req.Workload.Endpoint), Concurrency: req.Workload.Concurrency},
		Done:      map[int]*sim.Report{top: givenRep},
		Reference: recommended,
	}
	choice, err := sim.ChooseMaxNumSeqs(ctx, search)
	if err != nil {
		return CompareRow{}, err
	}
	b := choice.Best()
	best := rowOf("", engines[b.MaxNumSeqs], b.Report, req.SLO)
	best.Label = "simulated best max-num-seqs (of " + strconv.Itoa(len(cands)) + " tried)"
	return best, nil
}
