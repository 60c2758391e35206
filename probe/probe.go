// Package probe finds the largest --max-model-len a real vLLM engine starts
// with, in one or two launches: with `--max-model-len auto` where the
// release has it, else by launching at the planner's prediction and jumping
// to the number the engine logs (the estimate in its error, or its KV
// cache size). It launches the engine as a process group on a free
// loopback port, reads its log, decides from the log or /health whether it
// started, stops it, waits until the GPU memory is released, and keeps a
// calibration record of every launch that started.
//
// KAITO's binary search (docs/kaito.md §5) is here too, as StrategyBisect,
// for comparison.
package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
)

// Strategy is how the search picks the lengths to launch with.
type Strategy string

// The strategies.
const (
	// StrategyAuto uses `--max-model-len auto` where the release has it,
	// else the planner's prediction and the engine's own numbers; it
	// bisects only when the log gives no number.
	StrategyAuto Strategy = "auto"
	// StrategyBisect is KAITO's search: range [0, U], first probe U, a
	// fixed number of steps, no block alignment.
	StrategyBisect Strategy = "bisect"
)

// Defaults.
const (
	// DefaultBisectSteps is KAITO's max_probe_steps (docs/kaito.md §5: "The
	// config file default is 6").
	DefaultBisectSteps = 6
	// DefaultMaxLaunches caps StrategyAuto; it needs two in the normal case,
	// and bisecting a log that gives no number needs about log2(range/block).
	DefaultMaxLaunches = 8
)

// unknownSizeTimeout bounds a launch when the planner cannot size the
// weights: the default for a model of about 40 GiB.
const unknownSizeTimeout = 15 * time.Minute

// Config is one probe.
type Config struct {
	Engine Engine
	// Settings are the user's engine flags and model. MaxModelLen > 0
	// caps the search (the answer is the largest length up to it).
	Settings vllm.Settings
	// Model, Device and Count feed the planner's prediction.
	Model  model.Spec
	Device gpu.Device
	Count  int
	// Version is the engine's release; zero asks the engine.
	Version  vllm.Version
	Strategy Strategy
	// Steps is the number of launches of StrategyBisect (default 6).
	Steps int
	// MaxLaunches caps StrategyAuto (default DefaultMaxLaunches).
	MaxLaunches int
	// LaunchTimeout bounds each start-up; 0 = the start-up estimate's
	// probe window (package startup: twice the expected start-up of the
	// planned weights read from Storage).
	LaunchTimeout time.Duration
	// Storage is where the checkpoint is read from ("" = the default
	// class), for the launch timeout.
	Storage startup.Storage
	// Calibration, when set, receives a record of each launch that started.
	Calibration func(Record) error
	// Progress, when set, is told of each phase of each launch.
	Progress func(Progress)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Progress is a report on the launch under way.
type Progress struct {
	// Launch counts from 1.
	Launch      int
	MaxModelLen int
	Phase       Phase
	// Report is what the log said so far.
	Report vllm.StartupReport
	// Done is set, once, when the launch has ended.
	Done *Attempt
}

// Result is what a probe found.
type Result struct {
	// MaxModelLen is the largest length that started (0 when none did).
	MaxModelLen int `json:"max_model_len"`
	// Launches is the number of engine starts.
	Launches int `json:"launches"`
	// KVCacheTokens and AvailableKVBytes are what the engine logged on
	// the launch that started at MaxModelLen.
	KVCacheTokens    int64        `json:"kv_cache_tokens"`
	AvailableKVBytes int64        `json:"available_kv_cache_bytes"`
	Version          vllm.Version `json:"vllm_version"`
	Strategy         Strategy     `json:"strategy"`
	// Predicted is the planner's largest fitting length, 0 when it had none.
	Predicted int `json:"predicted_max_model_len"`
	// ModelMaxLen is the upper end of the search.
	ModelMaxLen int           `json:"model_max_len"`
	Duration    time.Duration `json:"-"`
	Seconds     float64       `json:"seconds"`
	History     []Attempt     `json:"history"`
	Notes       []string      `json:"notes,omitempty"`
}

// ErrNothingStarts is wrapped by Run's error when no launch started.
var ErrNothingStarts = errors.New("no launch started")

// Run probes. The error is one line; when no length starts it wraps
// ErrNothingStarts and the Result still holds the history.
func Run(ctx context.Context, c Config) (Result, error) {
	if c.Engine == nil {
		return Result{}, errors.New("no engine to launch")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch c.Strategy {
	case "":
		c.Strategy = StrategyAuto
	case StrategyAuto, StrategyBisect:
	default:
		return Result{}, fmt.Errorf("unknown strategy %q: use auto or bisect", c.Strategy)
	}
	if c.Steps <= 0 {
		c.Steps = DefaultBisectSteps
	}
	if c.MaxLaunches <= 0 {
		c.MaxLaunches = DefaultMaxLaunches
	}
	p := &prober{c: c, start: c.Now()}
	p.res.Strategy = c.Strategy
	err := p.run(ctx)
	p.res.Duration = c.Now().Sub(p.start)
	p.res.Seconds = roundSeconds(p.res.Duration)
	p.res.Launches = len(p.res.History)
	return p.res, err
}

// prober is one run of the search.
type prober struct {
	c     Config
	start time.Time
	res   Result

	version      vllm.Version
	versionKnown bool
	v1           bool
	// upper is the longest length searched: the user's cap or the model's maximum.
	upper     int
	blockSize int
	timeout   time.Duration
	settings  vllm.Settings

	// lo is the longest length that started; hi the shortest that failed
	// for want of KV cache (0: none yet).
	lo, hi int
	best   *Attempt
	// estimated is the length last taken from vLLM's own estimate: it
	// is the longest that fits by vLLM's rule, so once it starts the
	// search is over.
	estimated int
}

func (p *prober) note(format string, a ...any) {
	p.res.Notes = append(p.res.Notes, fmt.Sprintf(format, a...))
}

func (p *prober) run(ctx context.Context) error {
	if err := p.setup(ctx); err != nil {
		return err
	}
	var err error
	if p.c.Strategy == StrategyBisect {
		err = p.kaito(ctx)
	} else {
		err = p.auto(ctx)
	}
	if err != nil {
		return err
	}
	if p.best == nil {
		return p.nothingStarts()
	}
	p.res.MaxModelLen = p.lo
	p.res.KVCacheTokens = p.best.Report.KVTokens
	p.res.AvailableKVBytes = p.best.Report.AvailableKVBytes
	return nil
}

// setup learns the version, the range and the planner's prediction.
func (p *prober) setup(ctx context.Context) error {
	c := p.c
	p.version = c.Version
	p.versionKnown = !c.Version.IsZero()
	if !p.versionKnown {
		v, err := c.Engine.Version(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			p.note("vLLM version unknown (%v): --max-model-len auto is not tried, and the rules of %s are assumed for the prediction", err, vllm.Newest())
		} else {
			p.version, p.versionKnown = v, true
		}
	}
	if p.versionKnown && p.version.Compare(vllm.Newest()) > 0 {
		p.note("vLLM %s is newer than the newest release these rules know (%s); they are assumed to hold", p.version, vllm.Newest())
	}
	p.res.Version = p.version
	p.v1 = vllm.UsesV1(p.version, c.Settings.Env)

	s := c.Settings
	s.Version = p.version
	p.upper = c.Model.MaxPositions
	switch user := s.MaxModelLen; {
	case user > 0 && (p.upper <= 0 || user <= p.upper):
		p.upper = user
		p.note("the search stops at your --max-model-len %d", user)
	case user > 0:
		p.note("your --max-model-len %d is longer than the model's maximum %d, which vLLM refuses; searching up to %d", user, p.upper, p.upper)
	}
	if p.upper <= 0 {
		return fmt.Errorf("the model's maximum context length is unknown: give --max-model-len as the upper end of the search")
	}
	p.res.ModelMaxLen = p.upper
	s.MaxModelLen = 0
	p.settings = s

	in := memory.Input{Model: c.Model, Device: c.Device, Count: c.Count, Settings: s, Env: s.Env}
	p.blockSize = vllm.DefaultBlockSize(p.version)
	if s.BlockSize > 0 {
		p.blockSize = s.BlockSize
	}
	var est *startup.Estimate
	if b, err := memory.Plan(in); err != nil {
		p.note("no prediction from the planner (%v)", err)
	} else {
		p.res.Predicted = min(b.MaxFitLen, p.upper)
		p.blockSize = b.Settings.BlockSize
		if b.WeightsTotal > 0 {
			e := memory.StartupOf(b, c.Storage)
			est = &e
		}
	}
	p.timeout = c.LaunchTimeout
	switch {
	case p.timeout > 0:
	case est != nil:
		p.timeout = est.ProbeWindow()
		p.note("each launch may take up to %s, %g times the expected start-up of %s (--storage %s; --launch-timeout sets another)", p.timeout, startup.ProbeMargin, est.Summary(), est.Storage)
	default:
		p.timeout = unknownSizeTimeout
		p.note("the weights' size is unknown: each launch may take up to %s (set --launch-timeout)", p.timeout)
	}
	return nil
}

// align floors n to a whole number of blocks, except the upper end itself.
func (p *prober) align(n int) int {
	if n >= p.upper {
		return p.upper
	}
	if p.blockSize <= 0 {
		return n
	}
	return n / p.blockSize * p.blockSize
}

// launch starts the engine once at length n and books the attempt.
func (p *prober) launch(ctx context.Context, n int) (Attempt, error) {
	s := p.settings
	s.MaxModelLen = n
	num := len(p.res.History) + 1
	obs := func(ph Phase, r vllm.StartupReport) {
		if p.c.Progress != nil {
			p.c.Progress(Progress{Launch: num, MaxModelLen: n, Phase: ph, Report: r})
		}
	}
	obs(PhaseLaunching, vllm.StartupReport{})
	a, err := p.c.Engine.Launch(ctx, Launch{Settings: s, Timeout: p.timeout, Observe: obs})
	a.MaxModelLen = n
	a.Seconds = roundSeconds(a.Duration)
	switch {
	case err != nil && ctx.Err() != nil:
		a.Outcome, a.Reason = Interrupted, clip(err.Error(), 300)
	case err != nil:
		a.Outcome, a.Reason = Failed, clip(err.Error(), 300)
	case a.Outcome != Started:
		a.Reason = p.reason(a)
	}
	if err == nil && a.Outcome == Started && p.c.Calibration != nil {
		if cerr := p.c.Calibration(p.record(a, s)); cerr != nil {
			a.Notes = append(a.Notes, fmt.Sprintf("calibration record not written: %v", cerr))
		}
	}
	p.res.History = append(p.res.History, a)
	if p.c.Progress != nil {
		done := a
		p.c.Progress(Progress{Launch: num, MaxModelLen: n, Phase: PhaseReleasing, Report: a.Report, Done: &done})
	}
	if err != nil {
		return a, err
	}
	if a.Outcome == Started {
		length := n
		if n == vllm.AutoMaxModelLen {
			length = p.autoChose(a)
		}
		if length > p.lo || p.best == nil {
			p.lo = max(p.lo, length)
			h := p.res.History[len(p.res.History)-1]
			p.best = &h
		}
	}
	return a, nil
}

// autoChose is the length `--max-model-len auto` started with: the
// auto-fit line's, else the length of the concurrency line (which vLLM
// prints for the max_model_len in force), else the model's maximum when
// the full context fitted. 0 when the log does not say.
func (p *prober) autoChose(a Attempt) int {
	r := a.Report
	switch {
	case r.AutoFit != nil && r.AutoFit.To > 0:
		return r.AutoFit.To
	case r.ConcurrencyLen > 0:
		return r.ConcurrencyLen
	case r.AutoFit != nil:
		return p.c.Model.MaxPositions
	}
	return 0
}

// auto is StrategyAuto.
func (p *prober) auto(ctx context.Context) error {
	if p.versionKnown && vllm.SupportsAutoMaxModelLen(p.version) {
		a, err := p.launch(ctx, vllm.AutoMaxModelLen)
		if err != nil {
			return err
		}
		switch {
		case a.Outcome == Started:
			chose := p.autoChose(a)
			switch {
			case chose > 0 && chose <= p.upper:
				return nil
			case chose > p.upper:
				// auto fitted more than the user's cap: the cap fits.
				p.lo, p.best = 0, nil
				return p.guided(ctx, p.upper)
			}
			p.lo, p.best = 0, nil
			p.note("the engine started with --max-model-len auto but did not log the length it chose; searching with numbers instead")
		case a.Report.HasError(vllm.LogErrArgument):
			p.note("vLLM %s refused --max-model-len auto; searching with numbers instead", p.version)
		default:
			return p.nothingStarts()
		}
	}
	first := p.res.Predicted
	if first <= 0 {
		first = p.blockSize
	}
	first = p.align(first)
	if !p.fullAttention() && p.v1 {
		// vLLM's "GPU KV cache size: N tokens" is not a length limit when
		// some layers keep less than every token (sliding window, linear
		// state): launch at the top and take the engine's own estimate.
		first = p.upper
	}
	return p.guided(ctx, max(first, 1))
}

// fullAttention reports whether every layer keeps every token of a
// request up to the longest length searched: full or MLA attention, or a
// sliding window no shorter than that length (Phi-3-mini-128k declares a
// 262144-token window over a 131072-token context). Then a request of L
// tokens fits exactly when L is at most the KV cache size in tokens
// (vllm-memory.md §4).
func (p *prober) fullAttention() bool {
	s := p.c.Model
	for i := 0; i < s.Layers; i++ {
		switch l := s.LayerKind(i); l.Kind {
		case model.Full, model.MLA, model.NoMixer:
		case model.Sliding:
			if l.Chunked || l.Window < p.upper {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// failure classes of a launch that did not start.
type failure int

const (
	// independent: the length does not matter (OOM in V1's profile run,
	// free memory, bad flags, a crash); a shorter length fails the same way.
	independent failure = iota
	// tooLongEstimate: the KV cache is too small for the length, and vLLM
	// named the longest that fits.
	tooLongEstimate
	// tooLong: the KV cache is too small, no estimate given.
	tooLong
	// aboveModel: longer than the model allows.
	aboveModel
)

func (p *prober) classify(a Attempt) failure {
	r := a.Report
	switch {
	case a.Outcome == TimedOut:
		return independent
	case r.HasError(vllm.LogErrMaxLenAboveModel) && r.ModelMaxLen > 0:
		return aboveModel
	case (r.HasError(vllm.LogErrMaxLen) || r.HasError(vllm.LogErrV0MaxLen)) && r.HasEstimate:
		return tooLongEstimate
	case r.HasError(vllm.LogErrMaxLen):
		return tooLong
	case r.HasError(vllm.LogErrOOM) && !p.v1:
		// V0 profiles max(max_model_len, 2048) tokens at once
		// (vllm-memory.md §2.3): a shorter length needs less activation.
		return tooLong
	}
	return independent
}

// guided is the search led by the prediction and the engine's numbers.
func (p *prober) guided(ctx context.Context, next int) error {
	for len(p.res.History) < p.c.MaxLaunches {
		a, err := p.launch(ctx, next)
		if err != nil {
			return err
		}
		n := next
		if a.Outcome == Started {
			if n >= p.upper || n == p.estimated {
				return nil
			}
			cand := p.fromStarted(a)
			switch {
			case cand > 0:
				cand = p.align(min(cand, p.upper))
				if cand <= p.lo {
					return nil
				}
				if p.hi > 0 && cand >= p.hi {
					// The engine's numbers moved between launches (profiling
					// varies by a few blocks): settle between the two.
					next = p.mid()
				} else {
					next = cand
				}
			case p.hi == 0:
				next = p.upper // ask the engine for its estimate
			default:
				next = p.mid()
			}
		} else {
			switch p.classify(a) {
			case tooLongEstimate:
				p.hi = n
				est := a.Report.EstimatedMaxLen
				if est <= 0 {
					if p.lo > 0 {
						return nil
					}
					return p.nothingStarts()
				}
				cand := p.align(min(est, p.upper))
				if cand >= n {
					// An estimate at or above the length that just failed
					// says nothing new.
					cand = p.mid()
				} else {
					p.estimated = cand
				}
				next = cand
			case tooLong:
				p.hi = n
				next = p.mid()
			case aboveModel:
				m := a.Report.ModelMaxLen
				p.note("vLLM says the model allows at most %d tokens; searching up to that", m)
				p.upper = min(p.upper, m)
				p.res.ModelMaxLen = p.upper
				next = min(n, p.upper)
			default:
				if p.lo > 0 {
					p.note("the search stopped at launch %d (%s); %d started, and a longer context may fit", len(p.res.History), a.Reason, p.lo)
					return nil
				}
				return p.nothingStarts()
			}
		}
		if next <= p.lo {
			return nil
		}
	}
	if p.lo > 0 {
		p.note("the search stopped after %d launches (--max-launches); %d started, and up to %d may", len(p.res.History), p.lo, max(p.hi-1, p.lo))
	}
	return nil
}

// mid is the aligned middle of the open range (lo, hi); it is ≤ lo when
// no aligned length lies between them.
func (p *prober) mid() int {
	hi := p.hi
	if hi <= 0 {
		hi = p.upper + 1
	}
	m := p.align((p.lo + hi) / 2)
	if m >= hi {
		m = p.lo
	}
	return m
}

// fromStarted reads the longest length a started launch says fits: the
// KV cache size in tokens (V1), or V0's blocks × block size (V0's own
// check, vllm-memory.md §4: "the maximum number of tokens that can be
// stored in KV cache (num_gpu_blocks × block_size)"). Only for models whose
// every layer keeps every token; 0 otherwise or when the log has neither.
func (p *prober) fromStarted(a Attempt) int {
	if !p.fullAttention() {
		return 0
	}
	r := a.Report
	switch {
	case r.KVTokens > 0:
		return int(min(r.KVTokens, int64(p.upper)))
	case !p.v1 && r.NumGPUBlocks > 0:
		return int(min(r.NumGPUBlocks*int64(p.blockSize), int64(p.upper)))
	}
	return 0
}

// kaito is StrategyBisect.
func (p *prober) kaito(ctx context.Context) error {
	_, err := KAITOSearch(p.upper, p.c.Steps, func(n int) (bool, error) {
		a, err := p.launch(ctx, n)
		return err == nil && a.Outcome == Started, err
	})
	return err
}

// KAITOSearch is KAITO's binary_search_with_limited_steps (docs/kaito.md
// §5): the range [0, upper], low = 0, high = 2 × upper, probe
// (low + high + 1) / 2 (so the first probe is upper); stop when the probe
// would exceed upper, after steps probes, or when low ≥ high. It returns
// low: the longest length found valid, 0 if none.
func KAITOSearch(upper, steps int, valid func(int) (bool, error)) (int, error) {
	low, high := 0, 2*upper
	for i := 0; i < steps && low < high; i++ {
		mid := (low + high + 1) / 2
		if mid > upper {
			break
		}
		ok, err := valid(mid)
		if err != nil {
			return low, err
		}
		if ok {
			low = mid
		} else {
			high = mid - 1
		}
	}
	return low, nil
}

// nothingStarts ends a probe in which no length started.
func (p *prober) nothingStarts() error {
	if n := len(p.res.History); n > 0 {
		last := p.res.History[n-1]
		if p.c.Strategy == StrategyBisect {
			return fmt.Errorf("%w: nothing started in %d steps down to %d tokens (last: %s)", ErrNothingStarts, n, last.MaxModelLen, last.Reason)
		}
		return fmt.Errorf("%w: %s", ErrNothingStarts, last.Reason)
	}
	return ErrNothingStarts
}

// reason says in one line why a launch did not start.
func (p *prober) reason(a Attempt) string {
	if a.Outcome == TimedOut {
		phase := "before loading"
		switch {
		case a.Report.Profiled:
			phase = "after profiling"
		case a.Report.Loading:
			phase = "while loading"
		}
		return fmt.Sprintf("not ready after %s (%s); raise --launch-timeout if the engine is just slow", p.timeout.Round(time.Second), phase)
	}
	if e, ok := p.cause(a.Report); ok {
		return clip(e.Message, 300)
	}
	if a.Report.Lines == 0 {
		return fmt.Sprintf("the engine exited with status %d before logging anything: run %s by hand to see why", a.ExitCode, clip(strings.Join(a.Args, " "), 200))
	}
	last := ""
	if len(a.Tail) > 0 {
		last = ": last line: " + clip(a.Tail[len(a.Tail)-1], 200)
	}
	return fmt.Sprintf("the engine exited with status %d without an error vLLM is known to print%s", a.ExitCode, last)
}

// cause picks the error that explains a failure: a length error first
// (vLLM may print the engine's generic failure and others after it).
func (p *prober) cause(r vllm.StartupReport) (vllm.LogEvent, bool) {
	for _, k := range []vllm.LogKind{vllm.LogErrMaxLen, vllm.LogErrV0MaxLen, vllm.LogErrMaxLenAboveModel} {
		for _, e := range r.Errors {
			if e.Kind == k {
				return e, true
			}
		}
	}
	return r.FirstError()
}

// record is the calibration record of a launch that started.
func (p *prober) record(a Attempt, s vllm.Settings) Record {
	c := p.c
	eff := s.WithDefaults(p.version, c.Device.Name, c.Device.TotalBytes, c.Model.MaxPositions)
	r := a.Report
	n := s.MaxModelLen
	if n == vllm.AutoMaxModelLen {
		n = p.autoChose(a)
	}
	return Record{
		Time:                 c.Now().UTC(),
		Model:                c.Model.ID,
		GPU:                  c.Device.Name,
		GPUTotalBytes:        c.Device.TotalBytes,
		VLLMVersion:          p.version,
		TensorParallelSize:   eff.TensorParallelSize,
		PipelineParallelSize: eff.PipelineParallelSize,
		MaxNumBatchedTokens:  eff.MaxNumBatchedTokens,
		MaxNumSeqs:           eff.MaxNumSeqs,
		Dtype:                eff.Dtype,
		KVCacheDtype:         eff.KVCacheDtype,
		Quantization:         eff.Quantization,
		GPUMemoryUtilization: eff.GPUMemoryUtilization,
		MaxModelLen:          n,
		WeightsBytes:         r.WeightsBytes,
		ActivationBytes:      r.ActivationBytes,
		NonTorchBytes:        r.NonTorchBytes,
		CUDAGraphBytes:       r.CUDAGraphBytes,
		AvailableKVBytes:     r.AvailableKVBytes,
		KVTokens:             r.KVTokens,
		NumGPUBlocks:         r.NumGPUBlocks,
	}
}

func roundSeconds(d time.Duration) float64 {
	return float64(d.Round(10*time.Millisecond)) / float64(time.Second)
}

// clip shortens s to one line of at most n bytes.
func clip(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
