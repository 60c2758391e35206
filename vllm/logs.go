package vllm

import (
	"bufio"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// This file is the one place that knows vLLM's start-up log lines and error
// texts, by version. The texts are from docs/vllm-memory.md (§2.2, §2.4,
// §3.4, §4), docs/peers.md §5 and the v0.19.0 logs behind
// data/calibration/vllm-0.19.0-h100.csv; PyTorch's out-of-memory message is
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

// OOM holds the numbers of PyTorch's CUDA out-of-memory message.
type OOM struct {
	// Tried is the allocation that failed ("Tried to allocate 2.00 GiB").
	Tried int64 `json:"tried_to_allocate_bytes,omitempty"`
	// Total and Free: "GPU 0 has a total capacity of T of which F is free".
	Total int64 `json:"total_capacity_bytes,omitempty"`
	Free  int64 `json:"free_bytes,omitempty"`
	// ProcessInUse is "this process has X memory in use" ("Including
	// non-PyTorch memory, ..."), or the sum of the "Process N has X memory
	// in use" entries; Processes lists those entries.
	ProcessInUse int64           `json:"process_in_use_bytes,omitempty"`
	Processes    []ProcessMemory `json:"processes,omitempty"`
	// Allocated is "X is allocated by PyTorch" (pre-2.1: "X already
	// allocated"; some builds: "current allocated: X").
	Allocated int64 `json:"allocated_by_pytorch_bytes,omitempty"`
	// PrivatePools is "with X allocated in private pools (e.g., CUDA Graphs)".
	PrivatePools int64 `json:"private_pools_bytes,omitempty"`
	// ReservedUnallocated is "X is reserved by PyTorch but unallocated".
	ReservedUnallocated int64 `json:"reserved_unallocated_bytes,omitempty"`
	// Reserved is the pre-2.1 "X reserved in total by PyTorch".
	Reserved int64 `json:"reserved_bytes,omitempty"`
}

// ProcessMemory is one "Process N has X memory in use" entry.
type ProcessMemory struct {
	PID   int   `json:"pid"`
	Bytes int64 `json:"bytes"`
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
	ansiRe = lazyRE(`\x1b\[[0-9;?]*[A-Za-z]`)

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
	freeErrUtil  = lazyRE(`less than desired GPU memory utilization \(` + numPat + `, ` + gibPat + `\)`)
	autoFitRe    = lazyRE(`Auto-fit max_model_len: reduced from ` + intPat + ` to ` + intPat + `(?:.*?\(` + gibPat + ` available for KV cache\))?`)
	autoFullRe   = lazyRE(`Auto-fit max_model_len:.*?full model context length(?:\D*` + intPat + `)?(?:.*?\(` + gibPat + ` available for KV cache\))?`)
	maxLenLRe    = lazyRE(`max seq len \(` + intPat + `\)`)
	maxLenNeedRe = lazyRE(gibPat + ` KV cache is needed`)
	maxLenAvail  = lazyRE(`available KV cache memory \(` + gibPat + `\)`)
	maxLenEstRe  = lazyRE(`estimated maximum model length is (-?\d[\d,]*)`)
	v0MaxLenRe   = lazyRE(`max seq len \(` + intPat + `\) is larger than the maximum number of tokens that can be stored in KV cache \(` + intPat + `\)`)
	aboveModelRe = lazyRE(`User-specified max_model_len \(` + intPat + `\) is greater than the derived max_model_len \(\w+=` + intPat)
	argErrRe     = lazyRE(`error: (?:argument \S+|unrecognized arguments)`)
	kvUsageRe    = lazyRE(`KV cache usage: (\d+(?:\.\d+)?)`)
	runningRe    = lazyRE(`Running: (\d{1,9})`)
	waitingRe    = lazyRE(`(?:Waiting|Pending): (\d{1,9})`)
	initTimeRe   = lazyRE(`warmup model\) took (\d+(?:\.\d+)?)`)
	exceptionRe  = lazyRE(`(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): `)
	deviceRe     = lazyRE(`^(?:cuda:)?(\d+)$`)
	versionWord  = lazyRE(`^v?\d+\.\d+`)

	oomTriedRe   = lazyRE(`Tried to allocate ` + sizePat)
	oomTotalRe   = lazyRE(`GPU (\d+) has a total capacity of ` + sizePat + ` of which ` + sizePat + ` is free`)
	oomProcRe    = lazyRE(`Process (\d+) has ` + sizePat + ` memory in use`)
	oomThisRe    = lazyRE(`this process has ` + sizePat + ` memory in use`)
	oomAllocRe   = lazyRE(`Of the allocated memory ` + sizePat + ` is allocated by PyTorch`)
	oomPoolsRe   = lazyRE(`with ` + sizePat + ` allocated in private pools`)
	oomUnallocRe = lazyRE(`and ` + sizePat + ` is reserved by PyTorch but unallocated`)
	oomCurrentRe = lazyRE(`current allocated: ` + sizePat)
	oomOldRe     = lazyRE(`\(GPU (\d+); ` + sizePat + ` total capacity; ` + sizePat + ` already allocated; ` + sizePat + ` free;(?: ` + sizePat + ` (?:allowed;|reserved in total))?`)
	oomOldResRe  = lazyRE(sizePat + ` reserved in total by PyTorch`)
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

func parsePreemption(l string) (LogEvent, bool) {
	if !strings.Contains(l, "KV cache space") && !strings.Contains(l, "is preempted by") &&
		!strings.Contains(l, "Preempted request") && !strings.Contains(l, "preempted request") {
		return LogEvent{}, false
	}
	anchor := "reempt"
	for _, a := range []string{"Sequence group", "Preempted request", "preempted request"} {
		if strings.Contains(l, a) {
			anchor = a
			break
		}
	}
	return event(LogPreemption, l, anchor), true
}

// parseStats reads the statistics line; one whose numbers do not parse
// still says the engine was serving.
func parseStats(l string) (LogEvent, bool) {
	ev := event(LogStats, l, statsAnchor(l))
	if m := kvUsageRe().FindStringSubmatch(l); m != nil {
		if f, err := strconv.ParseFloat(m[1], 64); err == nil && f <= 100 {
			ev.KVUsage = f / 100
		}
	}
	if m := runningRe().FindStringSubmatch(l); m != nil {
		ev.Running, _ = strconv.Atoi(m[1])
	}
	for _, m := range waitingRe().FindAllStringSubmatch(l, 4) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			ev.Waiting = max(ev.Waiting, n)
		}
	}
	return ev, true
}

// statsAnchor starts the message at "Avg prompt throughput" when the line
// has it, else at the usage figure.
func statsAnchor(l string) string {
	if strings.Contains(l, "Avg prompt throughput") {
		return "Avg prompt throughput"
	}
	return "KV cache usage: "
}

func captureStart(anchor string) func(string) (LogEvent, bool) {
	return func(l string) (LogEvent, bool) { return event(LogCaptureStart, l, anchor), true }
}

func engineDead(anchor string) func(string) (LogEvent, bool) {
	return func(l string) (LogEvent, bool) { return event(LogEngineDead, l, anchor), true }
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

func parseFreeMemoryErr(l string) (LogEvent, bool) {
	ev := event(LogErrFreeMemory, l, "Free memory on device")
	if m := summaryFree().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		if b, ok := gib(m[2]); ok {
			ev.Memory.Free = b
		}
		if b, ok := gib(m[3]); ok {
			ev.Memory.Total = b
		}
	}
	if m := freeErrUtil().FindStringSubmatch(l); m != nil {
		if f, ok := fraction(m[1]); ok {
			ev.Utilization = f
		}
		if b, ok := gib(m[2]); ok {
			ev.Memory.Requested = b
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

func parseMaxLenErr(l string) (LogEvent, bool) {
	ev := event(LogErrMaxLen, l, "To serve at least one request")
	if m := maxLenLRe().FindStringSubmatch(l); m != nil {
		if n, ok := length(m[1]); ok {
			ev.MaxModelLen = n
		}
	}
	if m := maxLenNeedRe().FindStringSubmatch(l); m != nil {
		if b, ok := gib(m[1]); ok {
			ev.Memory.KVNeeded = b
		}
	}
	if m := maxLenAvail().FindStringSubmatch(l); m != nil {
		if b, ok := gib(m[1]); ok {
			ev.Memory.AvailableKV = b
		}
	}
	if m := maxLenEstRe().FindStringSubmatch(l); m != nil {
		raw := m[1]
		if strings.HasPrefix(raw, "-") {
			// estimate_max_model_len returns 0 when nothing fits; a
			// negative number is read as that.
			ev.HasEstimate = true
		} else if n, ok := length(strings.TrimRight(raw, ",")); ok {
			ev.EstimatedMaxLen, ev.HasEstimate = n, true
		}
	}
	return ev, true
}

func parseV0MaxLenErr(l string) (LogEvent, bool) {
	m := v0MaxLenRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	ev := event(LogErrV0MaxLen, l, "The model's max seq len")
	if n, ok := length(m[1]); ok {
		ev.MaxModelLen = n
	}
	if n, ok := count(m[2]); ok {
		ev.Tokens = n
	}
	return ev, true
}

func parseAboveModel(l string) (LogEvent, bool) {
	m := aboveModelRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	ev := event(LogErrMaxLenAboveModel, l, "User-specified max_model_len")
	if n, ok := length(m[1]); ok {
		ev.MaxModelLen = n
	}
	if n, ok := length(m[2]); ok {
		ev.EstimatedMaxLen, ev.HasEstimate = n, true
	}
	return ev, true
}

func parseArgErr(l string) (LogEvent, bool) {
	m := argErrRe().FindStringIndex(l)
	if m == nil {
		return LogEvent{}, false
	}
	return event(LogErrArgument, l, l[m[0]:m[1]]), true
}

func parseOOM(l string) (LogEvent, bool) {
	anchor := "CUDA out of memory"
	switch {
	case strings.Contains(l, anchor):
	case strings.Contains(l, "CUDA error: out of memory"):
		anchor = "CUDA error: out of memory"
	case strings.Contains(l, "OutOfMemoryError"):
		anchor = "OutOfMemoryError"
	default:
		return LogEvent{}, false
	}
	ev := event(LogErrOOM, l, anchor)
	o := &OOM{}
	if m := oomTriedRe().FindStringSubmatch(l); m != nil {
		o.Tried, _ = size(m[1], m[2])
	}
	if m := oomTotalRe().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		o.Total, _ = size(m[2], m[3])
		o.Free, _ = size(m[4], m[5])
	}
	for _, m := range oomProcRe().FindAllStringSubmatch(l, 64) {
		pid, err := strconv.Atoi(m[1])
		b, ok := size(m[2], m[3])
		if err != nil || !ok {
			continue
		}
		o.Processes = append(o.Processes, ProcessMemory{PID: pid, Bytes: b})
		o.ProcessInUse = addBytes(o.ProcessInUse, b)
	}
	if m := oomThisRe().FindStringSubmatch(l); m != nil {
		o.ProcessInUse, _ = size(m[1], m[2])
	}
	if m := oomAllocRe().FindStringSubmatch(l); m != nil {
		o.Allocated, _ = size(m[1], m[2])
	} else if m := oomCurrentRe().FindStringSubmatch(l); m != nil {
		o.Allocated, _ = size(m[1], m[2])
	}
	if m := oomPoolsRe().FindStringSubmatch(l); m != nil {
		o.PrivatePools, _ = size(m[1], m[2])
	}
	if m := oomUnallocRe().FindStringSubmatch(l); m != nil {
		o.ReservedUnallocated, _ = size(m[1], m[2])
	}
	if m := oomOldRe().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		o.Total, _ = size(m[2], m[3])
		o.Allocated, _ = size(m[4], m[5])
		o.Free, _ = size(m[6], m[7])
		if m := oomOldResRe().FindStringSubmatch(l); m != nil {
			o.Reserved, _ = size(m[1], m[2])
		}
	}
	ev.OOM = o
	ev.Memory.Total, ev.Memory.Free = o.Total, o.Free
	return ev, true
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

// LogScanner reads vLLM's output as it streams and keeps a StartupReport.
// Write (one stream) and ReadFrom (any number of streams, one goroutine
// each) may be used at the same time; a line split across writes or reads
// is put back together, and "\r" (progress bars) ends a line as "\n" does.
// The zero value is ready to use.
type LogScanner struct {
	// OnEvent, when set, is called with each recognised line, in order,
	// one call at a time (under the scanner's lock: it must not call back
	// into the scanner).
	OnEvent func(LogEvent)
	// OnLine, when set, is called with every line, recognised or not
	// (under the same lock).
	OnLine func(string)

	mu      sync.Mutex
	report  StartupReport
	partial []byte // Write's unfinished line
}

// Line feeds one complete line.
func (s *LogScanner) Line(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line(line)
}

func (s *LogScanner) line(line string) {
	s.report.Lines++
	if s.OnLine != nil {
		s.OnLine(line)
	}
	ev, ok := ParseLogLine(line)
	if !ok {
		return
	}
	s.report.Add(ev)
	if s.OnEvent != nil {
		s.OnEvent(ev)
	}
}

// Write feeds raw output of one stream; it never fails.
func (s *LogScanner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := indexEOL(p)
		if i < 0 {
			room := MaxLineLen - len(s.partial)
			s.partial = append(s.partial, p[:max(0, min(room, len(p)))]...)
			break
		}
		if len(s.partial) > 0 {
			room := MaxLineLen - len(s.partial)
			s.partial = append(s.partial, p[:max(0, min(room, i))]...)
			s.line(string(s.partial))
			s.partial = s.partial[:0]
		} else {
			s.line(string(p[:min(i, MaxLineLen)]))
		}
		p = p[i+1:]
	}
	return n, nil
}

// Flush ends Write's stream: an unfinished last line is read as a line.
func (s *LogScanner) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
}

// ReadFrom reads r to its end, line by line, and returns the bytes read.
// Each call keeps its own unfinished line, so several streams (stdout and
// stderr) can be read at once. Reaching the end is not an error; a read
// error is returned after the last line is fed.
func (s *LogScanner) ReadFrom(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	var total int64
	var cur []byte
	for {
		chunk, err := br.ReadSlice('\n')
		total += int64(len(chunk))
		for len(chunk) > 0 {
			i := indexEOL(chunk)
			if i < 0 {
				cur = appendCapped(cur, chunk)
				break
			}
			cur = appendCapped(cur, chunk[:i])
			s.Line(string(cur))
			cur = cur[:0]
			chunk = chunk[i+1:]
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			err = nil
		}
		if len(cur) > 0 {
			s.Line(string(cur))
		}
		return total, err
	}
}

func appendCapped(dst, p []byte) []byte {
	room := MaxLineLen - len(dst)
	if room <= 0 {
		return dst
	}
	return append(dst, p[:min(room, len(p))]...)
}

func indexEOL(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

// Report returns what has been read so far.
func (s *LogScanner) Report() StartupReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Errors = append([]LogEvent(nil), r.Errors...)
	if r.AutoFit != nil {
		a := *r.AutoFit
		r.AutoFit = &a
	}
	return r
}
