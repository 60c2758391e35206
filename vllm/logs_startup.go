package vllm

import (
	"errors"
	"math"
	"regexp"
	"strings"
)

// vLLM's start-up lines: version and settings, weights, the memory profile,
// KV cache size, CUDA graphs, auto-fit, and the StartupReport they fold into.

var (
	versionRes = []func() *regexp.Regexp{
		lazyRE(`vLLM API server version v?(\d+\.\d+[^\s,)]*)`),
		lazyRE(`Initializing an? (?:V1 )?LLM engine \(v(\d+\.\d+[^\s,)]*)\)`),
	}
	weightsRe    = lazyRE(`Model loading took ` + gibPat + `(?: memory)? and ` + numPat + ` s`)
	weightsV0Re  = lazyRE(`Loading model weights took ` + gibPat)
	profileRe    = lazyRE(`Memory profiling takes ` + numPat + ` seconds`)
	nonKVRe      = lazyRE(`Total non KV cache memory: ` + gibPat)
	peakIncRe    = lazyRE(`torch peak memory increase: ` + gibPat)
	nonTorchIncR = lazyRE(`non-torch forward increase memory: ` + gibPat)
	weightsMemRe = lazyRE(`weights memory: ` + gibPat)
	budgetRe     = lazyRE(`total_gpu_memory \(` + gibPat + `\) x gpu_memory_utilization \(` + numPat + `\) = ` + gibPat)
	breakdownRes = map[string]func() *regexp.Regexp{
		"weights":    lazyRE(`model weights take ` + gibPat),
		"non_torch":  lazyRE(`non_torch_memory takes ` + gibPat),
		"activation": lazyRE(`activation peak memory takes ` + gibPat),
		"kv":         lazyRE(`reserved for KV Cache is ` + gibPat),
	}
	v0ProfileRe  = lazyRE(`(\w+)=` + numPat + `\s?(GiB|GB)?`)
	availKVRe    = lazyRE(`Available KV cache memory: ` + gibPat)
	kvTokensRe   = lazyRE(`GPU KV cache size: ` + intPat + ` tokens`)
	concurRe     = lazyRE(`Maximum concurrency for ` + intPat + ` tokens per request: ` + numPat + `x`)
	blocksRe     = lazyRE(`#\s?(?i:GPU|CUDA|XPU|NPU|HPU) blocks: ` + intPat + `(?:, #\s?CPU blocks: ` + intPat + `)?`)
	cfgBlocksRe  = lazyRE(`num_gpu_blocks is: ` + intPat)
	graphEstRe   = lazyRE(`Estimated CUDA graph memory: ` + gibPat)
	graphPoolRe  = lazyRE(`CUDA graph pool memory: ` + gibPat + ` \(actual\)(?:, ` + gibPat + ` \(estimated\))?`)
	captureRe    = lazyRE(`Graph capturing finished in ` + numPat + ` secs?(?:, took ` + sizePat + `)?`)
	summaryFree  = lazyRE(`Free memory on device(?: (\S+))? \(` + numPat + `/` + numPat + ` ?GiB\) on startup`)
	summaryUtil  = lazyRE(`utilization is \(` + numPat + `, ` + gibPat + `\)`)
	summaryParts = lazyRE(gibPat + ` for (weight|peak activation|non-torch memory|CUDAGraph memory)`)
	autoFitRe    = lazyRE(`Auto-fit max_model_len: reduced from ` + intPat + ` to ` + intPat + `(?:.*?\(` + gibPat + ` available for KV cache\))?`)
	autoFullRe   = lazyRE(`Auto-fit max_model_len:.*?full model context length(?:\D*` + intPat + `)?(?:.*?\(` + gibPat + ` available for KV cache\))?`)
	initTimeRe   = lazyRE(`warmup model\) took (\d+(?:\.\d+)?)`)
	versionWord  = lazyRE(`^v?\d+\.\d+`)
)

func parseVersionLine(l string) (LogEvent, bool) {
	for _, re := range versionRes {
		if m := re().FindStringSubmatch(l); m != nil {
			v, err := ParseVersion(strings.TrimRight(m[1], "."))
			if err != nil {
				return LogEvent{}, false
			}
			ev := event(LogVersion, l, m[0])
			ev.Version = v
			if strings.Contains(l, "LLM engine") {
				ev.Args = after(l, configMarker)
			}
			return ev, true
		}
	}
	return LogEvent{}, false
}

// The markers that open the settings lines' Python literals.
const (
	argsMarker      = "non-default args: {"
	namespaceMarker = "args: Namespace("
	configMarker    = " with config: "
)

// after is the text of l after marker, "" when it is not there.
func after(l, marker string) string {
	i := strings.Index(l, marker)
	if i < 0 {
		return ""
	}
	return l[i+len(marker):]
}

func parseArgs(l string) (LogEvent, bool) {
	ev := event(LogArgs, l, "non-default args: ")
	// Keep the dict's opening brace: Args is the whole literal.
	ev.Args = "{" + after(l, argsMarker)
	return ev, true
}

func parseNamespace(l string) (LogEvent, bool) {
	ev := event(LogNamespaceArgs, l, namespaceMarker)
	ev.Args = strings.TrimSuffix(strings.TrimRight(after(l, namespaceMarker), " "), ")")
	return ev, true
}

func parseEngineConfig(l string) (LogEvent, bool) {
	if !strings.Contains(l, "LLM engine") {
		return LogEvent{}, false
	}
	ev := event(LogEngineConfig, l, "LLM engine")
	ev.Args = after(l, configMarker)
	return ev, true
}

func captureStart(anchor string) func(string) (LogEvent, bool) {
	return func(l string) (LogEvent, bool) { return event(LogCaptureStart, l, anchor), true }
}

func parseInitTime(l string) (LogEvent, bool) {
	ev := event(LogInitTime, l, "init engine")
	if m := initTimeRe().FindStringSubmatch(l); m != nil {
		ev.Seconds, _ = seconds(m[1])
	}
	return ev, true
}

func parseLoading(l string) (LogEvent, bool) {
	ev := event(LogLoading, l, "Starting to load model")
	return ev, true
}

func parseWeights(l string) (LogEvent, bool) {
	if m := weightsRe().FindStringSubmatch(l); m != nil {
		b, ok1 := gib(m[1])
		s, ok2 := seconds(m[3])
		if !ok1 || !ok2 {
			return LogEvent{}, false
		}
		ev := event(LogWeights, l, "Model loading took")
		ev.Memory.Weights, ev.Seconds = b, s
		return ev, true
	}
	if m := weightsV0Re().FindStringSubmatch(l); m != nil {
		b, ok := gib(m[1])
		if !ok {
			return LogEvent{}, false
		}
		ev := event(LogWeights, l, "Loading model weights took")
		ev.Memory.Weights = b
		return ev, true
	}
	return LogEvent{}, false
}

func parseProfile(l string) (LogEvent, bool) {
	m := profileRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	s, ok := seconds(m[1])
	if !ok {
		return LogEvent{}, false
	}
	ev := event(LogProfile, l, "Memory profiling takes")
	ev.Seconds = s
	for _, f := range []struct {
		re  func() *regexp.Regexp
		dst *int64
	}{
		{nonKVRe, &ev.Memory.NonKV},
		{peakIncRe, &ev.Memory.Activation},
		{nonTorchIncR, &ev.Memory.NonTorch},
		{weightsMemRe, &ev.Memory.Weights},
	} {
		if sm := f.re().FindStringSubmatch(l); sm != nil {
			if b, ok := gib(sm[1]); ok {
				*f.dst = b
			}
		}
	}
	return ev, true
}

func parseBudget(l string) (LogEvent, bool) {
	m := budgetRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	total, ok1 := gib(m[1])
	util, ok2 := fraction(m[3])
	req, ok3 := gib(m[4])
	if !ok1 || !ok2 || !ok3 {
		return LogEvent{}, false
	}
	ev := event(LogBudget, l, "the current vLLM instance")
	ev.Memory.Total, ev.Utilization, ev.Memory.Requested = total, util, req
	return ev, true
}

func parseBreakdown(l string) (LogEvent, bool) {
	ev := event(LogBreakdown, l, "model weights take")
	found := false
	for key, re := range breakdownRes {
		sm := re().FindStringSubmatch(l)
		if sm == nil {
			continue
		}
		b, ok := gib(sm[1])
		if !ok {
			continue
		}
		found = true
		switch key {
		case "weights":
			ev.Memory.Weights = b
		case "non_torch":
			ev.Memory.NonTorch = b
		case "activation":
			ev.Memory.Activation = b
		case "kv":
			ev.Memory.AvailableKV = b
		}
	}
	return ev, found
}

func parseV0Profile(l string) (LogEvent, bool) {
	ev := event(LogV0Profile, l, "Memory profiling results:")
	found := false
	for _, m := range v0ProfileRe().FindAllStringSubmatch(l, -1) {
		if m[1] == "gpu_memory_utilization" {
			if u, ok := fraction(m[2]); ok {
				ev.Utilization, found = u, true
			}
			continue
		}
		b, ok := gib(m[2])
		if !ok {
			continue
		}
		switch m[1] {
		case "total_gpu_memory":
			ev.Memory.Total = b
		case "peak_torch_memory":
			ev.Memory.PeakTorch = b
		case "non_torch_memory":
			ev.Memory.NonTorch = b
		case "kv_cache_size":
			ev.Memory.AvailableKV = b
		default:
			continue
		}
		found = true
	}
	return ev, found
}

func parseGiBLine(kind LogKind, re func() *regexp.Regexp, set func(*MemoryFigures, int64)) func(string) (LogEvent, bool) {
	return func(l string) (LogEvent, bool) {
		m := re().FindStringSubmatch(l)
		if m == nil {
			return LogEvent{}, false
		}
		b, ok := gib(m[1])
		if !ok {
			return LogEvent{}, false
		}
		ev := event(kind, l, m[0])
		set(&ev.Memory, b)
		return ev, true
	}
}

func parseKVTokens(l string) (LogEvent, bool) {
	m := kvTokensRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	n, ok := count(m[1])
	if !ok {
		return LogEvent{}, false
	}
	ev := event(LogKVTokens, l, "GPU KV cache size:")
	ev.Tokens = n
	return ev, true
}

func parseConcurrency(l string) (LogEvent, bool) {
	m := concurRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	n, ok1 := length(m[1])
	c, ok2 := positive(m[2])
	if !ok1 || !ok2 {
		return LogEvent{}, false
	}
	ev := event(LogConcurrency, l, "Maximum concurrency for")
	ev.MaxModelLen, ev.Concurrency = n, c
	return ev, true
}

func parseBlocks(l string) (LogEvent, bool) {
	if m := blocksRe().FindStringSubmatch(l); m != nil {
		n, ok := count(m[1])
		if !ok {
			return LogEvent{}, false
		}
		ev := event(LogGPUBlocks, l, m[0])
		ev.Blocks = n
		if m[2] != "" {
			if c, ok := count(m[2]); ok {
				ev.CPUBlocks = c
			}
		}
		return ev, true
	}
	if m := cfgBlocksRe().FindStringSubmatch(l); m != nil {
		n, ok := count(m[1])
		if !ok {
			return LogEvent{}, false
		}
		ev := event(LogGPUBlocks, l, m[0])
		ev.Blocks = n
		return ev, true
	}
	return LogEvent{}, false
}

func parseGraphPool(l string) (LogEvent, bool) {
	m := graphPoolRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	a, ok := gib(m[1])
	if !ok {
		return LogEvent{}, false
	}
	ev := event(LogCUDAGraphPool, l, "CUDA graph pool memory:")
	ev.Memory.CUDAGraph = a
	if m[3] != "" {
		if e, ok := gib(m[3]); ok {
			ev.Memory.CUDAGraphEstimate = e
		}
	}
	return ev, true
}

func parseCapture(l string) (LogEvent, bool) {
	m := captureRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	s, ok := seconds(m[1])
	if !ok {
		return LogEvent{}, false
	}
	ev := event(LogGraphCapture, l, "Graph capturing finished")
	ev.Seconds = s
	if m[2] != "" {
		if b, ok := size(m[2], m[3]); ok {
			ev.Memory.CUDAGraph = b
		}
	}
	return ev, true
}

func parseSummary(l string) (LogEvent, bool) {
	m := summaryFree().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	free, ok1 := gib(m[2])
	total, ok2 := gib(m[3])
	if !ok1 || !ok2 {
		return LogEvent{}, false
	}
	ev := event(LogMemorySummary, l, "Free memory on device")
	ev.Device = deviceIndex(m[1])
	ev.Memory.Free, ev.Memory.Total = free, total
	if u := summaryUtil().FindStringSubmatch(l); u != nil {
		if f, ok := fraction(u[1]); ok {
			ev.Utilization = f
		}
		if b, ok := gib(u[2]); ok {
			ev.Memory.Requested = b
		}
	}
	for _, p := range summaryParts().FindAllStringSubmatch(l, -1) {
		b, ok := gib(p[1])
		if !ok {
			continue
		}
		switch p[3] {
		case "weight":
			ev.Memory.Weights = b
		case "peak activation":
			ev.Memory.Activation = b
		case "non-torch memory":
			ev.Memory.NonTorch = b
		case "CUDAGraph memory":
			ev.Memory.CUDAGraph = b
		}
	}
	return ev, true
}

func parseAutoFit(l string) (LogEvent, bool) {
	if m := autoFitRe().FindStringSubmatch(l); m != nil {
		from, ok1 := length(m[1])
		to, ok2 := length(m[2])
		if !ok1 || !ok2 {
			return LogEvent{}, false
		}
		ev := event(LogAutoFit, l, "Auto-fit max_model_len:")
		ev.MaxModelLen, ev.EstimatedMaxLen, ev.HasEstimate = from, to, true
		if m[3] != "" {
			if b, ok := gib(m[3]); ok {
				ev.Memory.AvailableKV = b
			}
		}
		return ev, true
	}
	if m := autoFullRe().FindStringSubmatch(l); m != nil {
		ev := event(LogAutoFit, l, "Auto-fit max_model_len:")
		if m[1] != "" {
			if n, ok := length(m[1]); ok {
				ev.MaxModelLen, ev.EstimatedMaxLen, ev.HasEstimate = n, n, true
			}
		}
		if m[2] != "" {
			if b, ok := gib(m[2]); ok {
				ev.Memory.AvailableKV = b
			}
		}
		return ev, true
	}
	return LogEvent{}, false
}

// VersionFromOutput reads the release from the output of `vllm --version`:
// the last line that is a version ("0.19.0"), since imports may print
// warnings first. Older builds without the flag print usage text instead,
// which is an error here.
func VersionFromOutput(out string) (Version, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		w := strings.TrimSpace(ansiRe().ReplaceAllString(lines[i], ""))
		if f := strings.Fields(w); len(f) > 0 {
			w = f[len(f)-1] // "vllm 0.19.0" or "0.19.0"
		}
		if !versionWord().MatchString(w) {
			continue
		}
		if v, err := ParseVersion(w); err == nil {
			return v, nil
		}
	}
	return Version{}, errors.New("`vllm --version` printed no version number")
}

// AutoFit is what `--max-model-len auto` chose: From the model's maximum
// To the length that fits (equal when the full context fits).
type AutoFit struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// StartupReport gathers what one vLLM start-up logged, per GPU worker.
// Several workers (tensor or pipeline parallel) each log their figures:
// the report keeps the largest weights, activation, non-torch and graph
// figures (the busiest worker) and the smallest available KV memory, KV
// tokens and blocks (vLLM sizes every worker's cache to the minimum,
// vllm-memory.md §2.6). 0 = not logged.
type StartupReport struct {
	Version Version `json:"vllm_version,omitzero"`

	WeightsBytes    int64 `json:"weights_bytes,omitempty"`
	ActivationBytes int64 `json:"activation_bytes,omitempty"`
	NonTorchBytes   int64 `json:"non_torch_bytes,omitempty"`
	NonKVBytes      int64 `json:"non_kv_bytes,omitempty"`
	// PeakTorchBytes is V0's peak_torch_memory (weights + activation).
	PeakTorchBytes int64 `json:"peak_torch_bytes,omitempty"`
	// CUDAGraphBytes is the graph memory after capture (the pool's actual
	// size, else what capture took); CUDAGraphEstimateBytes the profiler's
	// estimate.
	CUDAGraphBytes         int64 `json:"cudagraph_bytes,omitempty"`
	CUDAGraphEstimateBytes int64 `json:"cudagraph_estimate_bytes,omitempty"`
	AvailableKVBytes       int64 `json:"available_kv_cache_bytes,omitempty"`
	// TotalBytes, FreeBytes and RequestedBytes are the device total, the
	// free memory at start-up and total × utilization, when logged.
	TotalBytes     int64   `json:"total_bytes,omitempty"`
	FreeBytes      int64   `json:"free_bytes,omitempty"`
	RequestedBytes int64   `json:"requested_bytes,omitempty"`
	Utilization    float64 `json:"gpu_memory_utilization,omitempty"`

	KVTokens     int64 `json:"kv_cache_tokens,omitempty"`
	NumGPUBlocks int64 `json:"num_gpu_blocks,omitempty"`
	// MaxConcurrency is "Maximum concurrency for ConcurrencyLen tokens per
	// request: MaxConcurrency x".
	MaxConcurrency float64 `json:"max_concurrency,omitempty"`
	ConcurrencyLen int     `json:"concurrency_max_model_len,omitempty"`

	// AutoFit is set when `--max-model-len auto` logged its choice.
	AutoFit *AutoFit `json:"auto_fit,omitempty"`
	// MaxModelLen is the length vLLM said did not fit (the errors'
	// "max seq len (L)").
	MaxModelLen int `json:"failed_max_model_len,omitempty"`
	// EstimatedMaxLen is the longest context vLLM said fits (the error's
	// estimate, or V0's KV capacity); HasEstimate tells 0 from none.
	EstimatedMaxLen int  `json:"estimated_max_model_len,omitempty"`
	HasEstimate     bool `json:"has_estimate,omitempty"`
	// ModelMaxLen is the model's maximum vLLM named when a longer length
	// was asked for.
	ModelMaxLen int `json:"model_max_len,omitempty"`

	// Loading, Profiled and Ready mark the phases reached: weights
	// loading started, the KV cache was sized, the server answers.
	Loading  bool `json:"loading,omitempty"`
	Profiled bool `json:"profiled,omitempty"`
	Ready    bool `json:"ready"`
	// Errors are the distinct error lines, in order (first MaxReportErrors).
	Errors []LogEvent `json:"errors,omitempty"`
	// Lines is the number of lines read.
	Lines int `json:"lines"`
}

// MaxReportErrors caps StartupReport.Errors: a failing multi-GPU start-up
// repeats the same traceback once per worker.
const MaxReportErrors = 16

// HasError reports whether an error of the kind was logged.
func (r StartupReport) HasError(kind LogKind) bool {
	for _, e := range r.Errors {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// Add folds one event into the report.
func (r *StartupReport) Add(ev LogEvent) {
	m := ev.Memory
	maxInto := func(dst *int64, v int64) {
		if v > *dst {
			*dst = v
		}
	}
	minInto := func(dst *int64, v int64) {
		if v > 0 && (*dst == 0 || v < *dst) {
			*dst = v
		}
	}
	if ev.Kind.IsError() {
		r.addError(ev)
	}
	switch ev.Kind {
	case LogVersion:
		if r.Version.IsZero() {
			r.Version = ev.Version
		}
		return
	case LogLoading:
		r.Loading = true
	case LogWeights:
		r.Loading = true
	case LogProfile, LogBreakdown, LogV0Profile, LogAvailableKV, LogKVTokens, LogGPUBlocks, LogAutoFit:
		r.Profiled = true
	case LogConcurrency:
		r.Profiled = true
		r.MaxConcurrency, r.ConcurrencyLen = ev.Concurrency, ev.MaxModelLen
	case LogReady:
		r.Ready = true
	case LogErrMaxLen:
		r.Profiled = true
		r.MaxModelLen = ev.MaxModelLen
		if ev.HasEstimate && (!r.HasEstimate || ev.EstimatedMaxLen < r.EstimatedMaxLen) {
			r.EstimatedMaxLen, r.HasEstimate = ev.EstimatedMaxLen, true
		}
		// The error's "available KV cache memory" is the same figure as
		// the worker's Available KV line.
	case LogErrV0MaxLen:
		r.Profiled = true
		r.MaxModelLen = ev.MaxModelLen
		if !r.HasEstimate || int(min(ev.Tokens, math.MaxInt32)) < r.EstimatedMaxLen {
			r.EstimatedMaxLen, r.HasEstimate = int(min(ev.Tokens, math.MaxInt32)), true
		}
		minInto(&r.KVTokens, ev.Tokens)
	case LogErrMaxLenAboveModel:
		r.ModelMaxLen = ev.EstimatedMaxLen
	}
	if ev.Kind == LogAutoFit && ev.HasEstimate {
		if r.AutoFit == nil || ev.EstimatedMaxLen < r.AutoFit.To {
			r.AutoFit = &AutoFit{From: ev.MaxModelLen, To: ev.EstimatedMaxLen}
		}
	} else if ev.Kind == LogAutoFit && r.AutoFit == nil {
		r.AutoFit = &AutoFit{}
	}
	if ev.Kind == LogKVTokens {
		minInto(&r.KVTokens, ev.Tokens)
	}
	if ev.Kind == LogGPUBlocks {
		minInto(&r.NumGPUBlocks, ev.Blocks)
	}
	maxInto(&r.WeightsBytes, m.Weights)
	maxInto(&r.ActivationBytes, m.Activation)
	maxInto(&r.NonTorchBytes, m.NonTorch)
	maxInto(&r.NonKVBytes, m.NonKV)
	maxInto(&r.PeakTorchBytes, m.PeakTorch)
	maxInto(&r.CUDAGraphEstimateBytes, m.CUDAGraphEstimate)
	if ev.Kind == LogCUDAGraphPool || ev.Kind == LogMemorySummary || r.CUDAGraphBytes == 0 {
		// The pool's actual size is the best figure; what capture "took"
		// only stands in until it comes.
		maxInto(&r.CUDAGraphBytes, m.CUDAGraph)
	}
	minInto(&r.AvailableKVBytes, m.AvailableKV)
	if ev.Kind != LogErrOOM {
		maxInto(&r.TotalBytes, m.Total)
		minInto(&r.FreeBytes, m.Free)
		maxInto(&r.RequestedBytes, m.Requested)
		if ev.Utilization > 0 {
			r.Utilization = ev.Utilization
		}
	}
}

func (r *StartupReport) addError(ev LogEvent) {
	for _, e := range r.Errors {
		if e.Kind == ev.Kind && e.Message == ev.Message {
			return
		}
	}
	if len(r.Errors) < MaxReportErrors {
		r.Errors = append(r.Errors, ev)
	}
}

// FirstError is the first error that names a cause: a line other than
// "Engine core initialization failed", which only points back at one.
// ok is false when no error was logged.
func (r StartupReport) FirstError() (LogEvent, bool) {
	for _, e := range r.Errors {
		if e.Kind != LogErrEngineInit {
			return e, true
		}
	}
	if len(r.Errors) > 0 {
		return r.Errors[0], true
	}
	return LogEvent{}, false
}
