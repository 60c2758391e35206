package vllm

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The logs*.go files are the one place that knows vLLM's log lines and error
// texts, by version: this one holds the vocabulary (LogKind, LogEvent), the
// line recogniser and the number readers; logs_startup.go the start-up
// lines and the StartupReport, logs_runtime.go the lines of a serving
// engine, logs_errors.go the error texts, logscan.go the streaming reader.
// The texts are from docs/vllm-memory.md (§2.2, §2.4, §3.4, §4),
// docs/peers.md §5 and the v0.19.0 logs behind
// memory/testdata/vllm-0.19.0-h100.csv; PyTorch's out-of-memory message is
// from c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.1 and later, and the
// older "(GPU 0; X total capacity; ...)" form). Matching is done on the
// message wherever it sits in the line, so every prefix vLLM has used works:
// "INFO 11-22 10:01:02 [gpu_worker.py:298] ", the older
// "INFO 11-22 10:01:02 gpu_executor.py:122] ", "(EngineCore_DP0 pid=7) ",
// "(VllmWorker TP1 pid=9) ", ANSI colours, and bare traceback lines such as
// "ValueError: ...".

// LogKind names what a recognised log line tells. The values are stable
// snake_case strings, used in JSON output.
type LogKind string

// The kinds of lines ParseLogLine recognises.
const (
	// LogVersion: "vLLM API server version 0.19.0", "Initializing a V1 LLM
	// engine (v0.19.0) with config: ..." (V0: "Initializing an LLM engine
	// (v0.6.3) with config: ...").
	LogVersion LogKind = "version"
	// LogLoading: "Starting to load model meta-llama/Llama-3.1-8B-Instruct...".
	LogLoading LogKind = "loading"
	// LogWeights: "Model loading took 14.99 GiB memory and 5.12 seconds"
	// (V1; 0.8 wrote "Model loading took 14.9889 GiB and 5.12 seconds"),
	// V0 "Loading model weights took 14.9888 GB" (GB meaning GiB).
	LogWeights LogKind = "weights"
	// LogProfile: V1 "Memory profiling takes 5.12 seconds. Total non KV
	// cache memory: 17.12GiB; torch peak memory increase: 1.89GiB; non-torch
	// forward increase memory: 0.25GiB; weights memory: 14.99GiB." (debug
	// level in the newest builds), or its first line alone (0.7-0.8, where
	// the numbers follow on the two LogBudget/LogBreakdown lines).
	LogProfile LogKind = "memory_profile"
	// LogBudget: "the current vLLM instance can use total_gpu_memory
	// (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB" (Dec 2024 to
	// early 2025, V0 and early V1).
	LogBudget LogKind = "budget"
	// LogBreakdown: "model weights take 14.99GiB; non_torch_memory takes
	// 0.25GiB; PyTorch activation peak memory takes 1.89GiB; the rest of the
	// memory reserved for KV Cache is 54.14GiB." (same era as LogBudget).
	LogBreakdown LogKind = "breakdown"
	// LogV0Profile: "Memory profiling results: total_gpu_memory=79.19GiB
	// initial_memory_usage=15.61GiB peak_torch_memory=16.88GiB
	// memory_usage_post_profile=15.98GiB non_torch_memory=0.88GiB
	// kv_cache_size=54.47GiB gpu_memory_utilization=0.90" (V0, v0.6.4).
	LogV0Profile LogKind = "v0_memory_profile"
	// LogAvailableKV: "Available KV cache memory: 58.11 GiB" (V1 worker).
	LogAvailableKV LogKind = "available_kv_cache"
	// LogKVTokens: "GPU KV cache size: 476,016 tokens" (V1 since PR #13596;
	// the number carries thousands separators).
	LogKVTokens LogKind = "kv_cache_tokens"
	// LogConcurrency: "Maximum concurrency for 8,192 tokens per request:
	// 58.11x".
	LogConcurrency LogKind = "max_concurrency"
	// LogGPUBlocks: V0 "# GPU blocks: 29751, # CPU blocks: 2048" (also
	// "# cuda blocks: ..."), early V1 "# GPU blocks: 29751", and the engine
	// metrics line "vllm cache_config_info with initialization after
	// num_gpu_blocks is: 29751".
	LogGPUBlocks LogKind = "gpu_blocks"
	// LogCUDAGraphEstimate: "Estimated CUDA graph memory: 0.84 GiB total".
	LogCUDAGraphEstimate LogKind = "cudagraph_estimate"
	// LogCUDAGraphPool: "CUDA graph pool memory: 0.91 GiB (actual), 0.84 GiB
	// (estimated), difference ...".
	LogCUDAGraphPool LogKind = "cudagraph_pool"
	// LogGraphCapture: "Graph capturing finished in 7 secs, took 0.91 GiB"
	// (V0 before 0.6 wrote only "Graph capturing finished in 7 secs.").
	LogGraphCapture LogKind = "graph_capture"
	// LogMemorySummary: "Free memory on device (78.68/79.19 GiB) on startup.
	// Desired GPU memory utilization is (0.95, 75.23 GiB). Actual usage is
	// 14.99 GiB for weight, 1.89 GiB for peak activation, 0.25 GiB for
	// non-torch memory, and 0.84 GiB for CUDAGraph memory. Replace ...".
	LogMemorySummary LogKind = "memory_summary"
	// LogAutoFit: "Auto-fit max_model_len: reduced from 131072 to 20272 to
	// fit in available GPU memory (2.47 GiB available for KV cache)", or
	// the "full model context length ... fits" form (PR #29431; the exact
	// wording of the second form is not verified, so only its number, when
	// present, is read).
	LogAutoFit LogKind = "auto_fit"
	// LogReady: uvicorn's "Application startup complete." or "Uvicorn
	// running on http://...": the server answers requests.
	LogReady LogKind = "ready"

	// LogErrMaxLen: "ValueError: To serve at least one request with the
	// model's max seq len (131072), (16.00 GiB KV cache is needed, which is
	// larger than the available KV cache memory (2.47 GiB). Based on the
	// available memory, the estimated maximum model length is 20272. Try
	// ..." (older builds: "models's", and no estimate).
	LogErrMaxLen LogKind = "max_model_len_does_not_fit"
	// LogErrV0MaxLen: V0 "The model's max seq len (131072) is larger than the
	// maximum number of tokens that can be stored in KV cache (20272). Try
	// ...": the number in the second parentheses is the KV capacity.
	LogErrV0MaxLen LogKind = "v0_max_seq_len_too_large"
	// LogErrNoCacheMemory: "No available memory for the cache blocks. Try
	// increasing `gpu_memory_utilization` when initializing the engine."
	LogErrNoCacheMemory LogKind = "no_memory_for_cache_blocks"
	// LogErrFreeMemory: "ValueError: Free memory on device cuda:1
	// (60.85/79.19 GiB) on startup is less than desired GPU memory
	// utilization (0.95, 75.23 GiB). Decrease GPU memory utilization or
	// reduce GPU memory used by other processes." (older V1 builds omit the
	// device name).
	LogErrFreeMemory LogKind = "free_memory_below_requested"
	// LogErrOOM: "torch.OutOfMemoryError: CUDA out of memory. Tried to
	// allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which
	// 1.23 GiB is free. Process 4711 has 77.95 GiB memory in use. Of the
	// allocated memory 75.60 GiB is allocated by PyTorch, and 1.12 GiB is
	// reserved by PyTorch but unallocated. ...", its pre-2.1 form "CUDA out
	// of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total
	// capacity; 14.56 GiB already allocated; 3.19 MiB free; 14.65 GiB
	// reserved in total by PyTorch)", and "CUDA error: out of memory".
	LogErrOOM LogKind = "cuda_out_of_memory"
	// LogErrMaxLenAboveModel: "User-specified max_model_len (200000) is
	// greater than the derived max_model_len (max_position_embeddings=131072
	// or model_max_length=None in model's config.json)."
	LogErrMaxLenAboveModel LogKind = "max_model_len_above_model"
	// LogErrArgument: argparse's "vllm serve: error: argument --max-model-len:
	// invalid int value: 'auto'" and "error: unrecognized arguments: ...".
	LogErrArgument LogKind = "argument_error"
	// LogErrEngineInit: "RuntimeError: Engine core initialization failed.
	// See root cause above." (V1): the cause is on an earlier line.
	LogErrEngineInit LogKind = "engine_init_failed"

	// Lines that show the settings, as Python literals in Args:
	//
	// LogArgs: "non-default args: {'model': 'x', 'max_model_len': 8192}"
	// (V1 api_server since 0.9; Args is the dict, from its "{").
	LogArgs LogKind = "non_default_args"
	// LogNamespaceArgs: "args: Namespace(host=None, model='x', ...)" (V0
	// and early V1 servers log every argument; Args is the keyword list
	// inside the parentheses).
	LogNamespaceArgs LogKind = "namespace_args"
	// LogEngineConfig: "Initializing an LLM engine with config: model='x',
	// ..., max_seq_len=8192, ..." when the line names no version (a line
	// that does is a LogVersion event with the same Args). Args is the
	// keyword list after "with config: ".
	LogEngineConfig LogKind = "engine_config"

	// Run-time lines:
	//
	// LogPreemption: V0's "Sequence group X is preempted by
	// PreemptionMode.RECOMPUTE mode because there is not enough KV cache
	// space" and later builds' "Preempted request ..." warnings.
	LogPreemption LogKind = "preemption"
	// LogStats: the engine's periodic statistics, V1 "Engine 000: Avg
	// prompt throughput: 8210.1 tokens/s, ..., Running: 24 reqs, Waiting: 0
	// reqs, GPU KV cache usage: 31.4%, ..." (V0: "..., Running: 61 reqs,
	// Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 88.4%, ...").
	// KVUsage, Running and Waiting carry its numbers.
	LogStats LogKind = "engine_stats"
	// LogCaptureStart: CUDA graph capture begins ("Capturing CUDA graphs
	// (mixed prefill-decode, PIECEWISE): 61%|..." progress bars, V0's
	// "Capturing cudagraphs for decoding" and "Capturing the model for CUDA
	// graphs").
	LogCaptureStart LogKind = "cudagraph_capture_start"
	// LogEngineDead: the engine died while serving ("EngineDeadError",
	// "EngineCore encountered a fatal error", V0's "Engine loop has
	// died"). Not a start-up error: IsError is false.
	LogEngineDead LogKind = "engine_dead"
	// LogInitTime: "init engine (profile, create kv cache, warmup model)
	// took 26.14 seconds" (V1 core.py); Seconds is the time, 0 when it
	// does not parse.
	LogInitTime LogKind = "engine_init_time"
)

// IsError reports whether the kind is an error that stops start-up.
func (k LogKind) IsError() bool {
	switch k {
	case LogErrMaxLen, LogErrV0MaxLen, LogErrNoCacheMemory, LogErrFreeMemory,
		LogErrOOM, LogErrMaxLenAboveModel, LogErrArgument, LogErrEngineInit:
		return true
	}
	return false
}

// LogEvent is what one recognised line says. Only the fields its Kind
// carries are set (see the LogKind constants); a number a line does not
// give stays 0. Bytes are int64; vLLM's "GiB" (and its old "GB") is 2^30.
type LogEvent struct {
	Kind LogKind `json:"kind"`
	// Version is the engine's release (LogVersion).
	Version Version `json:"version,omitzero"`
	// Seconds: loading time (LogWeights), profiling time (LogProfile),
	// capture time (LogGraphCapture).
	Seconds float64 `json:"seconds,omitempty"`
	// Memory holds every byte figure the line gives.
	Memory MemoryFigures `json:"memory,omitzero"`
	// Tokens is the KV cache size in tokens (LogKVTokens; LogErrV0MaxLen:
	// the KV capacity vLLM names).
	Tokens int64 `json:"tokens,omitempty"`
	// Blocks is the number of GPU KV blocks (LogGPUBlocks); CPUBlocks the
	// V0 swap space blocks.
	Blocks    int64 `json:"blocks,omitempty"`
	CPUBlocks int64 `json:"cpu_blocks,omitempty"`
	// MaxModelLen is the length the line speaks of: the request length of
	// LogConcurrency, the max seq len that did not fit (LogErrMaxLen,
	// LogErrV0MaxLen), the user's length (LogErrMaxLenAboveModel), the
	// length auto-fit started from or kept (LogAutoFit).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// EstimatedMaxLen is the length vLLM computed to fit: LogErrMaxLen's
	// "estimated maximum model length is M", LogAutoFit's "reduced ... to
	// M" (and the kept length when the full context fits),
	// LogErrMaxLenAboveModel's model maximum. HasEstimate tells a real 0
	// ("even one token does not fit") from no estimate at all.
	EstimatedMaxLen int  `json:"estimated_max_model_len,omitempty"`
	HasEstimate     bool `json:"has_estimate,omitempty"`
	// Concurrency is LogConcurrency's "C.CCx".
	Concurrency float64 `json:"concurrency,omitempty"`
	// Utilization is the gpu_memory_utilization a line names.
	Utilization float64 `json:"gpu_memory_utilization,omitempty"`
	// Device is the GPU index the line names (cuda:N, "GPU N"), -1 when
	// it names none.
	Device int `json:"device"`
	// OOM holds the numbers of a CUDA out-of-memory message (LogErrOOM).
	OOM *OOM `json:"oom,omitempty"`
	// Args is the Python-literal text of a settings line (LogArgs: a
	// dict; LogNamespaceArgs, LogEngineConfig and a LogVersion config
	// line: a keyword list), unclipped, for the reader to parse.
	Args string `json:"args,omitempty"`
	// KVUsage is LogStats' "GPU KV cache usage" as a fraction; Running
	// and Waiting its request counts (V0's "Pending" is Waiting). A figure
	// the line lacks stays 0.
	KVUsage float64 `json:"kv_cache_usage,omitempty"`
	Running int     `json:"running,omitempty"`
	Waiting int     `json:"waiting,omitempty"`
	// Preemptions is the cumulative count a preemption warning names
	// (LogPreemption; V0's total_num_cumulative_preemption), 0 when it
	// names none.
	Preemptions int64 `json:"preemptions,omitempty"`
	// Message is the message itself, from its start (for errors, from the
	// exception name when there is one), clipped to MaxMessageLen bytes.
	Message string `json:"message"`
}

// MemoryFigures are the byte figures vLLM's memory lines give, per GPU
// worker; 0 = not given.
type MemoryFigures struct {
	// Total is the device memory as CUDA reports it; Free what was free at
	// start-up; Requested is total × gpu_memory_utilization.
	Total     int64 `json:"total_bytes,omitempty"`
	Free      int64 `json:"free_bytes,omitempty"`
	Requested int64 `json:"requested_bytes,omitempty"`
	// Weights, Activation (torch peak increase of the profile run) and
	// NonTorch (non-torch increase) are the parts vLLM measures; NonKV is
	// their sum as vLLM logs it.
	Weights    int64 `json:"weights_bytes,omitempty"`
	Activation int64 `json:"activation_bytes,omitempty"`
	NonTorch   int64 `json:"non_torch_bytes,omitempty"`
	NonKV      int64 `json:"non_kv_bytes,omitempty"`
	// PeakTorch is V0's peak_torch_memory (weights and activation together).
	PeakTorch int64 `json:"peak_torch_bytes,omitempty"`
	// CUDAGraph is the graph memory actually used; CUDAGraphEstimate the
	// profiler's estimate.
	CUDAGraph         int64 `json:"cudagraph_bytes,omitempty"`
	CUDAGraphEstimate int64 `json:"cudagraph_estimate_bytes,omitempty"`
	// AvailableKV is the memory left for the KV cache; KVNeeded what one
	// max-length request needs (LogErrMaxLen).
	AvailableKV int64 `json:"available_kv_bytes,omitempty"`
	KVNeeded    int64 `json:"kv_needed_bytes,omitempty"`
}

// MaxMessageLen caps LogEvent.Message; MaxLineLen caps the part of a line
// that is read (longer lines are cut: vLLM's "with config:" line can be
// kilobytes long, and a stream without newlines must not grow without end).
const (
	MaxMessageLen = 1024
	MaxLineLen    = 64 << 10
)

// Number patterns. Integers may carry thousands separators (vLLM formats
// token counts with "{:,}"); sizes carry a unit with or without a space.
const (
	intPat  = `(\d{1,3}(?:,\d{3})+|\d+)`
	numPat  = `(\d+(?:\.\d+)?)`
	sizePat = `(\d+(?:\.\d+)?)\s?(bytes|B|KiB|KB|MiB|MB|GiB|GB|TiB|TB)\b`
	gibPat  = `(\d+(?:\.\d+)?)\s?(GiB|GB)`
)

// lazyRE compiles a pattern on first use. The log patterns are many, and
// compiling them when the program started took 2 ms of the start of every
// headroom command, most of which never read a log.
func lazyRE(expr string) func() *regexp.Regexp {
	re := sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
	lazyPatterns = append(lazyPatterns, re)
	return re
}

// lazyPatterns are the patterns made by lazyRE, so that a test compiles
// them all.
var lazyPatterns []func() *regexp.Regexp
var (
	ansiRe      = lazyRE(`\x1b\[[0-9;?]*[A-Za-z]`)
	exceptionRe = lazyRE(`(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): `)
	deviceRe    = lazyRE(`^(?:cuda:)?(\d+)$`)
)

// recognizer matches one kind of line. needle is a cheap substring test
// run before the parse (most lines match nothing).
type recognizer struct {
	needle string
	parse  func(line string) (LogEvent, bool)
}

// recognizers are tried in order; the first that parses wins. Errors come
// before the informational lines that share words with them ("Free memory
// on device" opens both the free-memory error and the start-up summary).
// Read-only.
var recognizers = []recognizer{
	{"To serve at least one request", parseMaxLenErr},
	{"that can be stored in KV cache", parseV0MaxLenErr},
	{"No available memory for the cache blocks", func(l string) (LogEvent, bool) {
		return event(LogErrNoCacheMemory, l, "No available memory"), true
	}},
	{"is less than desired GPU memory utilization", parseFreeMemoryErr},
	{"out of memory", parseOOM},
	{"OutOfMemoryError", parseOOM},
	{"User-specified max_model_len", parseAboveModel},
	{"error: ", parseArgErr},
	{"Engine core initialization failed", func(l string) (LogEvent, bool) {
		return event(LogErrEngineInit, l, "Engine core initialization failed"), true
	}},
	{"vLLM API server version", parseVersionLine},
	{"LLM engine (v", parseVersionLine},
	{"Starting to load model", parseLoading},
	{"Model loading took", parseWeights},
	{"Loading model weights took", parseWeights},
	{"Memory profiling takes", parseProfile},
	{"total_gpu_memory (", parseBudget},
	{"model weights take", parseBreakdown},
	{"Memory profiling results:", parseV0Profile},
	{"Available KV cache memory:", parseGiBLine(LogAvailableKV, availKVRe, func(m *MemoryFigures, b int64) { m.AvailableKV = b })},
	{"GPU KV cache size:", parseKVTokens},
	{"Maximum concurrency for", parseConcurrency},
	{" blocks: ", parseBlocks},
	{"num_gpu_blocks is:", parseBlocks},
	{"Estimated CUDA graph memory:", parseGiBLine(LogCUDAGraphEstimate, graphEstRe, func(m *MemoryFigures, b int64) { m.CUDAGraphEstimate = b })},
	{"CUDA graph pool memory:", parseGraphPool},
	{"Graph capturing finished", parseCapture},
	{"Free memory on device", parseSummary},
	{"Auto-fit max_model_len:", parseAutoFit},
	{"Application startup complete", func(l string) (LogEvent, bool) {
		return event(LogReady, l, "Application startup complete"), true
	}},
	{"Uvicorn running on", func(l string) (LogEvent, bool) { return event(LogReady, l, "Uvicorn running on"), true }},
	{argsMarker, parseArgs},
	{namespaceMarker, parseNamespace},
	{configMarker, parseEngineConfig},
	{"reempt", parsePreemption},
	{"KV cache usage: ", parseStats},
	{"Capturing CUDA graph", captureStart("Capturing CUDA graph")},
	{"Capturing cudagraphs", captureStart("Capturing cudagraphs")},
	{"Capturing the model for CUDA graphs", captureStart("Capturing the model for CUDA graphs")},
	{"EngineDeadError", engineDead("EngineDeadError")},
	{"EngineCore encountered a fatal error", engineDead("EngineCore encountered a fatal error")},
	{"Engine loop has died", engineDead("Engine loop has died")},
	{"init engine (profile, create kv cache, warmup model) took ", parseInitTime},
}

// ParseLogLine recognises one line of vLLM's output (any version's
// start-up lines and error texts, see the LogKind constants). It reports
// false for a line that carries nothing headroom reads. The line may hold
// the usual prefixes (level, time, file, process tag) and ANSI colours.
func ParseLogLine(line string) (LogEvent, bool) {
	if len(line) > MaxLineLen {
		line = line[:MaxLineLen]
	}
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = ansiRe().ReplaceAllString(line, "")
	}
	line = strings.TrimRight(line, "\r\n")
	for _, r := range recognizers {
		if !strings.Contains(line, r.needle) {
			continue
		}
		if ev, ok := r.parse(line); ok {
			return ev, true
		}
	}
	return LogEvent{}, false
}

// event builds an event whose message starts at anchor (or at the exception
// name before it, "ValueError: ...").
func event(kind LogKind, line, anchor string) LogEvent {
	return LogEvent{Kind: kind, Device: -1, Message: messageFrom(line, anchor)}
}

func messageFrom(line, anchor string) string {
	i := strings.Index(line, anchor)
	if i < 0 {
		i = 0
	}
	// Step back over "ValueError: " or "torch.OutOfMemoryError: " when the
	// anchor follows an exception name.
	if loc := exceptionRe().FindAllStringIndex(line[:i], -1); len(loc) > 0 {
		if last := loc[len(loc)-1]; strings.TrimSpace(line[last[1]:i]) == "" {
			i = last[0]
		}
	}
	msg := strings.TrimSpace(line[i:])
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	return msg
}

// deviceIndex reads "cuda:1" or "1"; -1 when there is none.
func deviceIndex(s string) int {
	m := deviceRe().FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > 1<<16 {
		return -1
	}
	return n
}

// maxLogBytes bounds a byte figure read from a log: 1 PiB per GPU is far
// beyond any device, and keeps sums of figures from overflowing int64.
const maxLogBytes = int64(1) << 50

// gib reads a GiB figure as bytes.
func gib(s string) (int64, bool) { return size(s, "GiB") }

// size reads a figure with its unit. vLLM and PyTorch print binary units;
// vLLM's old "GB" means GiB too (vllm-memory.md: "vLLM logs GiB even when an
// old log line says GB"), and so are MB and KB read.
func size(num, unit string) (int64, bool) {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	mult := 1.0
	switch unit {
	case "KiB", "KB":
		mult = 1 << 10
	case "MiB", "MB":
		mult = 1 << 20
	case "GiB", "GB":
		mult = 1 << 30
	case "TiB", "TB":
		mult = 1 << 40
	}
	b := f * mult
	if b > float64(maxLogBytes) {
		return 0, false
	}
	return int64(math.Round(b)), true
}

func addBytes(a, b int64) int64 { return min(a+b, maxLogBytes) }

// Thousands writes n as vLLM's logs write a count, with Python's "{:,}"
// (kv_cache_utils.py: "GPU KV cache size: 476,016 tokens"); count reads it
// back. headroom prints every count of tokens, blocks or requests so, that
// the numbers a user reads match the ones in vLLM's logs.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.WriteString(s[:len(s)-len(digits)])
	for i := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}

// count reads an integer that may carry thousands separators.
func count(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil || n < 0 || n > 1<<53 {
		return 0, false
	}
	return n, true
}

// length reads a token length; no context reaches 2^31 tokens.
func length(s string) (int, bool) {
	n, ok := count(s)
	if !ok || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

func seconds(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, false
	}
	return f, true
}

func fraction(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1 {
		return 0, false
	}
	return f, true
}

func positive(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil || f < 0 || f > 1e12 {
		return 0, false
	}
	return f, true
}
