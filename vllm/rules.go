package vllm

import (
	"strconv"
	"strings"
)

// This file holds the rules that differ between vLLM releases, each once,
// with its source in docs/vllm-memory.md and its version boundary. A zero
// Version stands for Newest(): the user names a version or we assume the
// newest we know. Releases are compared by major.minor.patch only, so a
// pre-release such as 0.21.0rc1 follows the 0.21.0 rules.

// Version boundaries of the rules below (never written; Go has no constant
// structs); each is explained at its rule.
var (
	perInstanceBudgetSince    = Version{0, 6, 5, ""}
	v1OptInSince              = Version{0, 7, 0, ""}
	v1DefaultSince            = Version{0, 8, 0, ""}
	captureTwiceSeqsSince     = Version{0, 10, 0, ""}
	v0RemovedIn               = Version{0, 11, 0, ""}
	kvCacheMemoryFlagSince    = Version{0, 10, 2, ""}
	cudagraphEstimateSince    = Version{0, 13, 0, ""}
	autoMaxModelLenSince      = Version{0, 14, 0, ""}
	asyncSchedulingSince      = Version{0, 14, 0, ""}
	fullDecodeGraphsSince     = Version{0, 11, 0, ""}
	moeWorkspaceSince         = Version{0, 19, 0, ""}
	cudagraphInBudgetSince    = Version{0, 21, 0, ""}
	utilizationDefault92Since = Version{0, 21, 0, ""}
	newestKnown               = Version{0, 33, 0, ""}
)

// Sizes the rules below use; each is explained at its rule.
const (
	largeDeviceBatchMinBytes  = int64(70) << 30
	defaultCaptureSizeCeiling = 512
	v0CaptureSizeCeiling      = 256
)

// Environment variables that switch memory rules.
const (
	// EnvEstimateCUDAGraphs turns the CUDA-graph memory estimate inside the
	// utilization budget on or off (see CUDAGraphsInBudget).
	EnvEstimateCUDAGraphs = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
	// EnvUseV1 selects the V1 (1) or V0 (0) engine in releases that have both.
	EnvUseV1 = "VLLM_USE_V1"
	// EnvFusedMoEChunkSize caps the tokens one fused-MoE kernel call
	// takes (see FusedMoEChunkTokens).
	EnvFusedMoEChunkSize = "VLLM_FUSED_MOE_CHUNK_SIZE"
)

// Newest is the newest vLLM release these rules know: v0.33.0, which moved
// KV-cache planning into vllm/v1/core/kv_cache_planning.py
// (KVCacheConfigBuilder, PR #42309) and tagged draft KV specs (PR #53558)
// without changing a size (docs/vllm-profile.md). Newer releases are
// assumed to follow the same rules.
func Newest() Version { return newestKnown }

func orNewest(v Version) Version {
	if v.IsZero() {
		return newestKnown
	}
	return v
}

// DefaultGPUMemoryUtilization is --gpu-memory-utilization when not given:
// 0.9 for most of vLLM's history, 0.92 from 0.21.0, where PR #38284 put the
// CUDA-graph estimate inside the budget by default and raised the default
// utilization to compensate (the docs of 0.25.0 and 0.27.1 show 0.92).
func DefaultGPUMemoryUtilization(v Version) float64 {
	if orNewest(v).AtLeast(utilizationDefault92Since) {
		return 0.92
	}
	return 0.9
}

// PerInstanceBudget reports whether gpu_memory_utilization limits this vLLM
// instance alone (memory of other processes on the GPU does not shrink its
// KV cache, it only has to leave room for total × util), rather than the
// whole GPU.
//
// vllm-memory.md §1: "before the Dec-2024 profiling overhaul (PR #10511,
// v0.6.5 era) the limit was global … PR #10511 switched to a baseline
// snapshot taken before the instance was created, making it per-instance."
// The v0.6.4 docs still call it global, hence 0.6.5.
func PerInstanceBudget(v Version) bool {
	return orNewest(v).AtLeast(perInstanceBudgetSince)
}

// V1ByDefault reports whether the V1 engine is the default: from v0.8.0
// (vLLM v0.8.0's release notes: the V1 engine became the default). Between 0.8 and 0.10 vLLM could still fall back to V0 by
// itself for features V1 lacked; that fallback is not modelled.
func V1ByDefault(v Version) bool { return orNewest(v).AtLeast(v1DefaultSince) }

// V0Removed reports whether the release has no V0 engine at all: v0.11.0
// removed it (release notes of v0.11.0; KAITO's V0-only probe went with
// its vLLM 0.12 bump, kaito-project/kaito@056b8280).
func V0Removed(v Version) bool { return orNewest(v).AtLeast(v0RemovedIn) }

// UsesV1 reports whether the engine that runs is V1, given the release and
// the environment (VLLM_USE_V1=1 opted in from v0.7.0, where V1 arrived as
// an alpha; VLLM_USE_V1=0 opted out until V0 was removed).
func UsesV1(v Version, env map[string]string) bool {
	v = orNewest(v)
	switch {
	case V0Removed(v):
		return true
	case !v.AtLeast(v1OptInSince):
		return false
	}
	if on, ok := envBool(env, EnvUseV1); ok {
		return on
	}
	return V1ByDefault(v)
}

// AsyncScheduling reports whether the engine core overlaps its CPU work
// for the next step (scheduling, preparing inputs, processing outputs) with
// the GPU's forward pass of the current one, instead of running the two
// in turn. --async-scheduling came as an opt-in in the 0.10 releases; the
// release notes of v0.14.0 name it on by default (unverified against the
// source, so the boundary is the release we read it in). The simulator's
// step time reads it: with it, a step lasts the longer of the two, not
// their sum. --no-async-scheduling turns it off, --async-scheduling on.
func AsyncScheduling(s Settings) bool {
	switch {
	case s.Set[FlagNoAsyncScheduling]:
		return false
	case s.Set[FlagAsyncScheduling]:
		return true
	}
	return orNewest(s.Version).AtLeast(asyncSchedulingSince)
}

// FullDecodeGraphs reports whether a step whose every query is one token
// (a batch of decodes) replays one CUDA graph of the whole forward pass,
// attention included: cudagraph_mode FULL_AND_PIECEWISE, the default from
// 0.11.0 (PR #25444). Before it the default was PIECEWISE, which captures
// the layers between the attention calls and runs attention itself
// eagerly, as every release still does for a step with a longer query (a
// prefill chunk, drafts to verify). The simulator's step time reads it;
// --enforce-eager captures nothing.
// A line's cudagraph_mode (CUDAGraphMode) overrides the release's default:
// FULL, FULL_DECODE_ONLY and FULL_AND_PIECEWISE capture decodes whole.
func FullDecodeGraphs(s Settings) bool {
	switch CUDAGraphMode(s) {
	case GraphModeFull, GraphModeFullDecodeOnly, GraphModeFullAndPiecewise:
		return true
	}
	return false
}

// CUDAGraphEstimate reports whether the release estimates CUDA-graph memory
// while profiling (profile_cudagraph_memory), whether or not the estimate
// is then taken out of the budget.
//
// vllm-memory.md §2.4: "Controlled by env
// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: opt-in/False in v0.19.0 (value
// printed in v0.19.0 logs)". The estimate came with PR #30515; its first
// release is not verified. PR #29431 was merged on 2025-11-25, so #30515
// came some weeks later, in time for 0.13.0 or 0.14.0: we assume 0.13.0
// (unverified). The v0.19.0 logs certainly print the estimate.
func CUDAGraphEstimate(v Version) bool {
	return orNewest(v).AtLeast(cudagraphEstimateSince)
}

// CUDAGraphsInBudget reports whether vLLM subtracts its CUDA-graph memory
// estimate from the utilization budget before sizing the KV cache, so that
// graphs fit inside total × util instead of on top of it.
//
// vllm-memory.md §2.4: "opt-in/False in v0.19.0 …, default on since v0.21.0
// (text of the log message in gpu_worker.py). When on, the estimate is
// subtracted: available_kv = requested − non_kv − cudagraph_estimate".
// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS in env overrides the default in
// releases that have the estimate (1/true/yes/on or 0/false/no/off; any
// other value is ignored and the default holds). Before the estimate
// existed graphs were always outside the budget. With --enforce-eager there
// are no graphs at all; that is for the caller to check.
func CUDAGraphsInBudget(v Version, env map[string]string) bool {
	v = orNewest(v)
	if !CUDAGraphEstimate(v) {
		return false
	}
	if on, ok := envBool(env, EnvEstimateCUDAGraphs); ok {
		return on
	}
	return v.AtLeast(cudagraphInBudgetSince)
}

// PersistentMoEWorkspace reports whether the fused-MoE kernels take their
// scratch (the expert intermediates, the output) from vLLM's process-wide
// workspace manager (vllm/v1/worker/workspace.py), which grows to the
// largest request of the profile run, is locked after warm-up and never
// shrinks, instead of allocating and freeing it inside each call. The
// workspace is then held while the dummy sampler runs: the profile-run peak
// is the workspace plus the larger of the other forward activations and
// the sampler, not the larger of the two (vllm-workspace.md).
//
// vllm-workspace.md names no release for the manager. The boundary is the
// one the calibration start-ups support: every MoE model among the vLLM
// 0.19.0 start-ups on H100 (DeepSeek-V2-Lite, Kimi-VL-A3B at TP 1 and 2,
// Mixtral-8x7B at TP 2) logs a torch peak of the workspace plus its sampler
// run, so 0.19.0 is the oldest release known to have it. The manager came
// with pull requests of late 2025 and may be in earlier releases too
// (unverified); those are planned with per-call scratch.
func PersistentMoEWorkspace(v Version) bool {
	return orNewest(v).AtLeast(moeWorkspaceSince)
}

// defaultFusedMoEChunkTokens is VLLM_FUSED_MOE_CHUNK_SIZE's default in
// vllm/envs.py (32768; the variable's type hint there says 64 × 1024, the
// value read when it is unset is 32768). Newer releases may have lowered
// it (unverified); a smaller chunk only makes the workspace smaller, so the
// planner keeps the larger value until a start-up shows otherwise.
const defaultFusedMoEChunkTokens = 32768

// FusedMoEChunkTokens is how many tokens one fused-MoE kernel call takes:
// a forward of more tokens runs the experts in chunks of this many, and the
// kernel's scratch is sized for one chunk (VLLM_FUSED_MOE_CHUNK_SIZE in env
// overrides the default; a value that is not a positive integer is ignored,
// as the default then holds for the planner).
func FusedMoEChunkTokens(env map[string]string) int {
	if raw, ok := env[EnvFusedMoEChunkSize]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(raw)); err == nil && n > 0 {
			return n
		}
	}
	return defaultFusedMoEChunkTokens
}

// SupportsAutoMaxModelLen reports whether `--max-model-len auto` (or -1)
// works. vllm-memory.md §4: "max_model_len = -1 / --max-model-len auto (PR
// #29431, merged Nov 2025; present by v0.14.0 per vllm-ascend)". It may
// well be in 0.12 or 0.13 already (the merge date allows it); 0.14.0 is the
// oldest release it is confirmed in, so older ones are told to give a number.
func SupportsAutoMaxModelLen(v Version) bool {
	return orNewest(v).AtLeast(autoMaxModelLenSince)
}

// AutoMaxModelLenSince is the first version known to accept
// `--max-model-len auto`, for messages that name it.
func AutoMaxModelLenSince() Version { return autoMaxModelLenSince }

// SupportsKVCacheMemory reports whether --kv-cache-memory-bytes exists:
// PR #21489 ("Allow users to specify kv cache memory size", merged 2025-07).
// The memory notes place it in "releases after v0.10.1", the versions notes
// "from 0.10.x": 0.10.2 is the first release both allow (0.10.1.1 is a
// patch of 0.10.1, and these rules compare three numbers). If it came
// earlier, a user of 0.10.1 is offered --gpu-memory-utilization instead.
func SupportsKVCacheMemory(v Version) bool {
	return orNewest(v).AtLeast(kvCacheMemoryFlagSince)
}

// LogsKVCacheTokens reports whether start-up logs "GPU KV cache size: N
// tokens" (true) or "# GPU blocks: N" (false). vllm-memory.md §3.4: "V1
// (since Feb 2025, PR #13596): GPU KV cache size: N tokens … Earlier V1: #
// GPU blocks: N"; V0 logs "# GPU blocks: N, # CPU blocks: M". PR #13596 is
// in v0.8.0, the first release with V1 by default.
func LogsKVCacheTokens(v Version, env map[string]string) bool {
	return UsesV1(v, env) && orNewest(v).AtLeast(v1DefaultSince)
}

// DefaultBlockSize is the KV block size in tokens on CUDA when --block-size
// is not given. vllm-memory.md §3.2: "on CUDA the platform sets 16
// (DEFAULT_BLOCK_SIZE = 16 in later cache.py)"; no release changed it for
// CUDA. Some attention backends and hybrid models force larger blocks; that
// is a property of the model, not of the release.
func DefaultBlockSize(v Version) int { return 16 }

// defaultBatch is what vLLM's OpenAI server uses for --max-num-batched-tokens
// and --max-num-seqs when they are not given (v1: the V1 engine runs).
//
// V1 (from 0.8.0), vllm-memory.md §2.3: "if device memory ≥ 70 GiB and the
// name does not contain "a100" (H100/H200/MI300 …): max_num_batched_tokens
// = … 8192 for the OpenAI server; max_num_seqs = 1024 … Otherwise (A100, L4,
// A10G, T4, consumer cards): … 2048 (server) and max_num_seqs = 256." vLLM
// tests the lowercased device name as torch reports it ("NVIDIA A100-SXM4-
// 80GB"); our catalog names ("A100-80GB") contain "a100" just the same. An
// unknown device (name "", 0 bytes) gets the small defaults, as vLLM does
// when it cannot query the device. The v0.19.0 log on an H100 confirms
// 8192/1024. The A100 exception came with PR #17885 (spring 2025), so 0.8.x
// may have treated an A100-80GB like an H100 (unverified; not modelled).
//
// V0 (before 0.8.0), vllm-memory.md §2.3: "V0 without chunked prefill used
// max_num_batched_tokens = max(max_model_len, 2048)", and max_num_seqs 256.
// V0 turned chunked prefill on by itself for contexts over 32K in the
// OpenAI server; that case is not modelled.
func defaultBatch(v1 bool, deviceName string, deviceTotalBytes int64, maxModelLen int) (int, int) {
	if !v1 {
		return max(maxModelLen, 2048), 256
	}
	if deviceTotalBytes >= largeDeviceBatchMinBytes && !strings.Contains(strings.ToLower(deviceName), "a100") {
		return 8192, 1024
	}
	return 2048, 256
}

// defaultCaptureSize is the largest batch (in tokens) vLLM captures a CUDA
// graph for when --max-cudagraph-capture-size is not given (v1: the V1
// engine runs; twiceSeqs: the release is captureTwiceSeqsSince or later).
//
//   - V1 from 0.10.0: min(2 × max_num_seqs, 512), and never more than
//     max_num_batched_tokens. From vLLM's CompilationConfig docstring: "If
//     not specified, max_cudagraph_capture_size is set to min(max_num_seqs*2,
//     512) by default" (in 0.10 it read "[min(max_num_seqs * 2, 512)]" for
//     cuda_graph_sizes). The 0.10.0 boundary is unverified. The v0.19.0
//     calibration rows (max_num_seqs 1024) all show 512. With speculative
//     decoding a decode step verifies 1 + k tokens a request, and vLLM
//     takes min(2 × max_num_seqs × (1 + k), 512) (vllm/config/vllm.py,
//     decode_query_len; Settings.DecodeQueryLen).
//   - V1 0.8–0.9: a fixed list up to 512, cut at max_num_batched_tokens.
//   - V0: the batch sizes up to 256, cut at max_num_seqs rounded up to a
//     multiple of 8 (V0 model runner, _BATCH_SIZES_TO_CAPTURE).
//
// maxNumSeqs or maxNumBatchedTokens ≤ 0 mean unknown and put no limit.
func defaultCaptureSize(v1, twiceSeqs bool, maxNumSeqs, maxNumBatchedTokens int) int {
	if !v1 {
		if maxNumSeqs <= 0 {
			return v0CaptureSizeCeiling
		}
		return min(padBatch(maxNumSeqs), v0CaptureSizeCeiling)
	}
	size := defaultCaptureSizeCeiling
	if twiceSeqs && maxNumSeqs > 0 {
		size = min(2*maxNumSeqs, size)
	}
	if maxNumBatchedTokens > 0 {
		size = min(size, maxNumBatchedTokens)
	}
	return size
}

// padBatch rounds a batch size up to a size vLLM captures (1, 2, 4, then a
// multiple of 8).
func padBatch(n int) int {
	switch {
	case n <= 2:
		return n
	case n <= 4:
		return 4
	}
	return (n + 7) / 8 * 8
}

// WithDefaults fills every field that is not given with what the vLLM
// release uses by default on the given device, so the memory planner works
// from complete settings. The release is v, else s.Version, else Newest();
// it is recorded in Version. MaxModelLen 0 becomes the model's maximum
// (modelMaxLen); AutoMaxModelLen stays (the planner resolves it). Env is
// honoured where vLLM honours it (VLLM_USE_V1 for the batch defaults).
//
// Chunked prefill: V1 always chunks long prompts, so max_num_batched_tokens
// does not depend on max_model_len (a 128K context still runs 8192-token
// steps). When V1's chunked prefill is turned off (--no-enable-chunked-
// prefill in Extra) every prompt must fit one step, and vLLM requires
// max_num_batched_tokens ≥ max_model_len; the default is then raised to the
// context length, as V0 did (vLLM's SchedulerConfig; unverified for V1).
// KVCacheMemoryBytes, CPUOffloadGiB, Quantization and Model have no default
// and stay as they are; Set and Extra are not changed.
func (s Settings) WithDefaults(v Version, deviceName string, deviceTotalBytes int64, modelMaxLen int) Settings {
	if v.IsZero() {
		v = s.Version
	}
	v = orNewest(v)
	s.Version = v
	if s.TensorParallelSize == 0 {
		s.TensorParallelSize = 1
	}
	if s.PipelineParallelSize == 0 {
		s.PipelineParallelSize = 1
	}
	if s.DataParallelSize == 0 {
		s.DataParallelSize = 1
	}
	if s.GPUMemoryUtilization == 0 {
		s.GPUMemoryUtilization = DefaultGPUMemoryUtilization(v)
	}
	if s.MaxModelLen == 0 {
		s.MaxModelLen = modelMaxLen
	}
	ctx := s.MaxModelLen
	if ctx == AutoMaxModelLen {
		ctx = modelMaxLen
	}
	v1 := UsesV1(v, s.Env)
	tokens, seqs := defaultBatch(v1, deviceName, deviceTotalBytes, ctx)
	if v1 && s.hasExtraFlag("no-enable-chunked-prefill") {
		tokens = max(tokens, ctx)
	}
	if s.MaxNumBatchedTokens == 0 {
		s.MaxNumBatchedTokens = tokens
	}
	if s.MaxNumSeqs == 0 {
		s.MaxNumSeqs = seqs
	}
	if s.Dtype == "" {
		s.Dtype = "auto"
	}
	if s.KVCacheDtype == "" {
		s.KVCacheDtype = "auto"
	}
	if s.BlockSize == 0 {
		s.BlockSize = DefaultBlockSize(v)
	}
	if s.MaxCudagraphCaptureSize == 0 {
		// --compilation-config's sizes, or --cuda-graph-sizes' largest.
		if _, largest, err := s.graphConfig(); err == nil && largest > 0 {
			s.MaxCudagraphCaptureSize = largest
		}
	}
	if s.MaxCudagraphCaptureSize == 0 {
		s.MaxCudagraphCaptureSize = defaultCaptureSize(v1, v.AtLeast(captureTwiceSeqsSince), s.MaxNumSeqs*s.DecodeQueryLen(), s.MaxNumBatchedTokens)
	}
	return s
}

// ExpertParallel reports whether --enable-expert-parallel is given: vLLM
// then places whole experts on each rank of the TP × DP group instead of
// splitting every expert's width among them.
func (s Settings) ExpertParallel() bool { return s.hasExtraFlag("enable-expert-parallel") }

// LoadFormat is --load-format's value as given ("auto", "safetensors",
// "dummy", "runai_streamer", ...), "" when the flag is not given (vLLM's
// default is "auto"). The start-up estimate reads it.
func (s Settings) LoadFormat() string { return s.extraValue("load-format") }

// extraValue is the value of a flag kept in Extra, the first given; ""
// when it is not there or has no value.
func (s Settings) extraValue(name string) string {
	for i, tok := range s.Extra {
		if !isFlag(tok) {
			continue
		}
		o := splitOption(tok)
		if o.name != name {
			continue
		}
		if o.hasValue {
			return o.value
		}
		if i+1 < len(s.Extra) && !isFlag(s.Extra[i+1]) {
			return s.Extra[i+1]
		}
	}
	return ""
}

// hasExtraFlag reports whether Extra holds the flag (canonical name, any
// spelling, with or without a value).
func (s Settings) hasExtraFlag(name string) bool {
	for _, tok := range s.Extra {
		if isFlag(tok) && splitOption(tok).name == name {
			return true
		}
	}
	return false
}

// EnvAllowLongMaxModelLen lets vLLM start with a --max-model-len past the
// model's derived maximum, with a warning (vllm/config/model.py
// _get_and_verify_max_len).
const EnvAllowLongMaxModelLen = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"

// AllowLongMaxModelLen reads EnvAllowLongMaxModelLen as vllm/envs.py
// does: "1" or "true" in any case.
func AllowLongMaxModelLen(env map[string]string) bool {
	v := strings.ToLower(strings.TrimSpace(env[EnvAllowLongMaxModelLen]))
	return v == "1" || v == "true"
}

// envBool reads a boolean environment variable: 1/true/yes/on or
// 0/false/no/off in any case. ok is false when it is unset or unreadable.
func envBool(env map[string]string, name string) (on, ok bool) {
	raw, set := env[name]
	if !set {
		return false, false
	}
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}
