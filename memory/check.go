package memory

import (
	"fmt"
	"math"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Problem and warning codes: stable strings other tools match on.
const (
	CodeNotEnoughGPUs     = "not_enough_gpus"
	CodeHeadsNotDivisible = "tp_does_not_divide_heads"
	CodeFreeMemory        = "free_memory_below_requested"
	CodeWeightsDontFit    = "weights_do_not_fit"
	CodeNoCacheMemory     = "no_memory_for_kv_cache"
	CodeMaxLenTooLong     = "max_model_len_exceeds_model"
	// CodeHybridUnifyRefused: --disable-hybrid-kv-cache-manager on a
	// model whose KV specs vLLM cannot unify.
	CodeHybridUnifyRefused = "hybrid_kv_cache_manager_required"
	// CodeContextParallel: a decode context parallel size that does not
	// divide the tensor-parallel size.
	CodeContextParallel = "context_parallel_size_invalid"
	// CodeContextParallelGQA: decode context parallelism over ranks that
	// hold different KV heads.
	CodeContextParallelGQA = "context_parallel_kv_heads"
	// CodeEPLBRefused: EPLB flags vLLM's ParallelConfig refuses.
	CodeEPLBRefused = "eplb_refused"
	// CodeMaxLenPastModel: a --max-model-len past the model's maximum
	// that VLLM_ALLOW_LONG_MAX_MODEL_LEN lets vLLM start with.
	CodeMaxLenPastModel   = "max_model_len_past_model"
	CodeRequestDoesntFit  = "max_model_len_does_not_fit"
	CodeGraphsOverflow    = "cudagraphs_exceed_card"
	CodeThinMargin        = "thin_margin"
	CodeLowConcurrency    = "low_concurrency"
	CodeFixedKVMemory     = "fixed_kv_cache_memory"
	CodeAutoUnsupported   = "max_model_len_auto_unsupported"
	CodeRunnerV2NoGraphs  = "runner_v2_reserves_no_cudagraphs"
	CodeGDNGraphTransient = "hybrid_gdn_graph_transient"
	// CodeColdStart: the max-length request fits this plan's KV cache
	// but not what a first start with a cold compile cache may leave.
	CodeColdStart = "cold_start_may_not_fit"
	// CodeShardedSampling: --enable-batch-sharded-sampling where vLLM's
	// validation refuses it.
	CodeShardedSampling = "batch_sharded_sampling_refused"
	// CodeComputeCapability: a GPU, a dtype or a quantization method
	// below the compute capability vLLM's kernels need.
	CodeComputeCapability = "compute_capability_refused"
	// CodeOnlineQuantLoad: --quantization on an unquantized checkpoint
	// whose 16-bit weights do not fit the GPU while they load.
	CodeOnlineQuantLoad = "online_quantization_load_peak"
	// CodeSchedulerRefused: --max-num-batched-tokens below what vLLM's
	// SchedulerConfig accepts beside --max-num-seqs or, without chunked
	// prefill, --max-model-len.
	CodeSchedulerRefused = "scheduler_limits_refused"
	// CodePinnedPoolDoesntFit: a pinned KV pool (--kv-cache-memory-bytes)
	// with the rest of the worker needs more than the free memory.
	CodePinnedPoolDoesntFit = "pinned_kv_pool_does_not_fit"
)

// GiB renders bytes as GiB (2^30) with two decimals, as vLLM logs them.
func GiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/gib) }

// check says what vLLM would say about this budget, in the order vLLM
// would fail: parallel layout, start-up free-memory check, weight loading,
// KV budget, one max-length request; then what can OOM later. allowLong is
// VLLM_ALLOW_LONG_MAX_MODEL_LEN: a context past the model's maximum then
// starts, with vLLM's warning.
func (b *Budget) check(dp int, allowLong bool) {
	s, set, p := b.Model, b.Settings, b.PerGPU
	tp, pp := set.TensorParallelSize, set.PipelineParallelSize
	problem := func(code, format string, a ...any) {
		b.Problems = append(b.Problems, Finding{Code: code, Message: fmt.Sprintf(format, a...)})
	}
	warn := func(code, format string, a ...any) {
		b.Warnings = append(b.Warnings, Finding{Code: code, Message: fmt.Sprintf(format, a...)})
	}
	if need := tp * pp * dp; need > b.Count {
		problem(CodeNotEnoughGPUs, "tensor × pipeline × data parallel = %d × %d × %d needs %d GPUs, but only %d are given", tp, pp, dp, need, b.Count)
	}
	if set.HybridKVCacheManagerDisabled() {
		if why := hybridUnified(s); why != "" {
			problem(CodeHybridUnifyRefused, "vLLM refuses --%s for %s: %s; drop the flag", vllm.FlagDisableHybridKVCacheManager, s.ID, why)
		}
	}
	if dcp := set.DecodeContextParallelSize; dcp > 1 && (tp%dcp != 0) {
		problem(CodeContextParallel, "--%s %d shards the KV cache over ranks of the tensor-parallel group, so it must divide --tensor-parallel-size %d", vllm.FlagDecodeContextParallelSize, dcp, tp)
	} else if dcp > 1 && s.MLA == nil && s.KVHeads > 0 && tp/s.KVHeads < dcp {
		// MLA keeps one latent a token on every rank, which DCP was made
		// to shard; with KV heads split over the ranks there is no copy
		// of a rank's heads to shard tokens over.
		copies := "no head is on more than one rank"
		if n := tp / s.KVHeads; n > 1 {
			copies = fmt.Sprintf("each head is on only %d ranks", n)
		}
		warn(CodeContextParallelGQA, "--%s %d with %d KV heads at tensor parallel %d: %s, where the token sharding is made for ranks that keep copies of one cache (MLA's latent); the plan counts %d times the tokens, and how vLLM shards this cache is not encoded, so it may hold fewer", vllm.FlagDecodeContextParallelSize, dcp, s.KVHeads, tp, copies, dcp)
	}
	if why := eplbRefused(set); why != "" {
		problem(CodeEPLBRefused, "vLLM refuses the expert-parallel load balancer's flags: %s", why)
	}
	if why := capabilityRefused(b.Device, s, set); why != "" {
		problem(CodeComputeCapability, "%s", why)
	}
	// vLLM's SchedulerConfig refuses these at start-up, before any memory
	// is touched (vllm/config/scheduler.py, _verify_args).
	if mnbt := set.MaxNumBatchedTokens; mnbt > 0 && mnbt < set.MaxNumSeqs {
		problem(CodeSchedulerRefused, "--max-num-batched-tokens %d is below --max-num-seqs %d: vLLM refuses it (\"max_num_batched_tokens must be greater than or equal to max_num_seqs\"); raise --max-num-batched-tokens to at least %d or lower --max-num-seqs to %d", mnbt, set.MaxNumSeqs, set.MaxNumSeqs, mnbt)
	}
	if mnbt := set.MaxNumBatchedTokens; mnbt > 0 && set.Set[vllm.FlagNoChunkedPrefill] && !b.AutoFit && mnbt < b.MaxModelLen {
		problem(CodeSchedulerRefused, "without chunked prefill --max-num-batched-tokens %d must hold a whole prompt of --max-model-len %d: vLLM refuses it; raise --max-num-batched-tokens to %d, lower --max-model-len to %d, or drop --no-enable-chunked-prefill", mnbt, b.MaxModelLen, b.MaxModelLen, mnbt)
	}
	if set.BatchShardedSampling() {
		if why := vllm.BatchShardedSamplingRefused(set, b.ModelRunnerV2); why != "" {
			problem(CodeShardedSampling, "vLLM refuses --%s: %s (drop the flag)", vllm.FlagEnableBatchShardedSampling, why)
		}
	}
	switch {
	case TPShards(s, tp):
	case s.Heads%tp != 0:
		problem(CodeHeadsNotDivisible, "--tensor-parallel-size %d does not divide the model's %d attention heads; vLLM refuses to start (use a TP size that divides %d)", tp, s.Heads, s.Heads)
	default:
		problem(CodeHeadsNotDivisible, "--tensor-parallel-size %d neither divides the model's %d key/value heads nor is a multiple of them; vLLM fails loading the weights (use a TP size that divides both %d and %d, or a multiple of %d that divides %d)", tp, s.KVHeads, s.Heads, s.KVHeads, s.KVHeads, s.Heads)
	}
	free := p.Total - p.Context
	switch {
	case p.Weights > free:
		problem(CodeWeightsDontFit, "weights take %s per GPU but only %s is free after the CUDA context: loading runs out of memory (use more GPUs, a quantized checkpoint, or a bigger GPU)", GiB(p.Weights), GiB(free))
	case p.Requested > free && set.KVCacheMemoryBytes == 0:
		problem(CodeFreeMemory, "--gpu-memory-utilization %.2f requests %s, but only %s is free once the process starts: vLLM stops with \"Free memory on device ... is less than desired GPU memory utilization\"", set.GPUMemoryUtilization, GiB(p.Requested), GiB(free))
	}
	if b.loadPeak > free && p.Weights <= free {
		warn(CodeOnlineQuantLoad, "--quantization %s quantizes this unquantized checkpoint on load: vLLM's online path reads its %s of 16-bit weights a GPU before quantizing them (Fp8LinearMethod's process_weights_after_loading), more than the %s free, so loading may run out of memory; serve a checkpoint quantized ahead (FP8, AWQ, GPTQ) or use more GPUs", set.Quantization, GiB(b.loadPeak), GiB(free))
	}
	nonKV := p.Weights + p.Activation + p.NonTorch
	if b.CUDAGraphInBudget {
		nonKV += p.CUDAGraph
	}
	if pinned := p.Weights + p.Activation + p.NonTorch + p.CUDAGraph + set.KVCacheMemoryBytes; set.KVCacheMemoryBytes > 0 && pinned > free && p.Weights <= free {
		problem(CodePinnedPoolDoesntFit, "--%s %s beside weights %s, activation %s, non-torch %s and CUDA graphs %s needs %s per GPU, but only %s is free once the process starts: allocating the pool runs out of memory (pin a smaller pool)",
			vllm.FlagKVCacheMemory, GiB(set.KVCacheMemoryBytes), GiB(p.Weights), GiB(p.Activation), GiB(p.NonTorch), GiB(p.CUDAGraph), GiB(pinned), GiB(free))
	}
	if set.KVCacheMemoryBytes > 0 {
		warn(CodeFixedKVMemory, "--%s fixes the KV cache at %s per GPU and ignores --gpu-memory-utilization; the card must hold %s of weights, activation and overhead beside it", vllm.FlagKVCacheMemory, GiB(set.KVCacheMemoryBytes), GiB(nonKV))
	}
	switch {
	case b.NumBlocks <= 0 && nonKV >= p.Requested:
		if p.Weights <= free {
			problem(CodeNoCacheMemory, "weights %s + activation %s + non-torch %s%s = %s per GPU leave nothing of the %s budget for the KV cache: vLLM stops with \"No available memory for the cache blocks\"", GiB(p.Weights), GiB(p.Activation), GiB(p.NonTorch), graphTerm(b), GiB(nonKV), GiB(p.Requested))
		}
	case b.AutoFit && !vllm.SupportsAutoMaxModelLen(set.Version):
		problem(CodeAutoUnsupported, "--max-model-len auto needs vLLM %s or newer; %s refuses it (give a number: %d fits)", vllm.AutoMaxModelLenSince(), set.Version, b.fitHere())
	case b.MaxModelLen > s.MaxPositions && s.MaxPositions > 0 && !allowLong:
		// The value to set must itself pass: the model's maximum, or
		// the longest context whose KV fits when that is shorter.
		most := s.MaxPositions
		if fit := b.fitHere(); fit < most {
			most = fit
		}
		why := ""
		if set.DisableSlidingWindow() {
			why = fmt.Sprintf(" (--%s caps it at the sliding window; drop the flag for the model's whole context)", vllm.FlagDisableSlidingWindow)
		}
		if most > 0 {
			problem(CodeMaxLenTooLong, "--max-model-len %d is longer than the model's maximum of %d tokens%s; vLLM refuses it (set --max-model-len %d or less)", b.MaxModelLen, s.MaxPositions, why, most)
		} else {
			problem(CodeMaxLenTooLong, "--max-model-len %d is longer than the model's maximum of %d tokens%s; vLLM refuses it, and no context fits the KV cache here", b.MaxModelLen, s.MaxPositions, why)
		}
	case b.MaxFitLen < b.MaxModelLen:
		need := b.layout.requestBytes(b.MaxModelLen, set.MaxNumBatchedTokens)
		fit, at := b.LargestFit()
		where := ""
		if at > 0 {
			where = fmt.Sprintf(" at --gpu-memory-utilization %.2f (at %.2f the CUDA graphs captured outside the budget do not fit the card either)", at, set.GPUMemoryUtilization)
		}
		if b.ColdStartAllowance() > 0 && fit < b.FitLen() {
			where += fmt.Sprintf(" on a first start with a cold torch.compile cache (%d on a warm one)", b.FitLen())
		}
		problem(CodeRequestDoesntFit, "one request of %d tokens needs %s of KV cache, more than the %s available per GPU; vLLM stops with \"To serve at least one request ...\": the largest context that fits is %d tokens%s", b.MaxModelLen, GiB(need), GiB(p.KVCache), fit, where)
	}
	if allowLong && b.MaxModelLen > s.MaxPositions && s.MaxPositions > 0 {
		how := "positions past it give NaN with rotary embeddings"
		if s.RotaryDim == 0 {
			how = "positions past it index past the model's position table, a CUDA out-of-bounds error"
		}
		warn(CodeMaxLenPastModel, "--max-model-len %d is longer than the model's maximum of %d tokens; %s=1 lets vLLM start, and a request past %d tokens may fail: %s (vLLM's warning); serve --max-model-len %d, or a long-context variant (rope_scaling with --hf-overrides)",
			b.MaxModelLen, s.MaxPositions, vllm.EnvAllowLongMaxModelLen, s.MaxPositions, how, s.MaxPositions)
	}
	if !b.CUDAGraphInBudget && p.CUDAGraph > 0 && b.Footprint > p.Total && len(b.Problems) == 0 {
		problem(CodeGraphsOverflow, "CUDA graphs (~%s) are captured outside the %s budget (vLLM %s) and the CUDA context holds %s: %s does not fit in %s, so capture runs out of memory (lower --gpu-memory-utilization or use --enforce-eager)", GiB(p.CUDAGraph), GiB(p.Requested), set.Version, GiB(p.Context), GiB(b.Footprint), GiB(p.Total))
	}
	if b.CUDAGraphEstimateZero && p.CUDAGraph > 0 {
		warn(CodeRunnerV2NoGraphs, "Model Runner V2 runs this model and reserves no CUDA-graph memory inside the budget before vLLM 0.29 (issues #49224, #50159): the ~%s of graphs are captured on top of it, and the KV cache leaves no runtime headroom; lower --gpu-memory-utilization by %.2f or use vLLM 0.29+", GiB(p.CUDAGraph), math.Ceil(float64(p.CUDAGraph)/float64(p.Total)*100)/100)
	}
	if b.CUDAGraphInBudget && vllm.HybridGDNGraphTransient(set.Version) && s.CountKind()[model.Linear] > 0 {
		warn(CodeGDNGraphTransient, "vLLM %s counts a transient that grows with --max-num-batched-tokens as CUDA-graph memory for hybrid linear-attention models (issue #50780): such models logged an 18–24%% smaller KV cache than this plan's; the size is not modelled", set.Version)
	}
	if len(b.Problems) == 0 {
		margin := b.Unused()
		if margin < ReserveBytes(p.Total) || UtilizationEdge(*b) {
			safe, _ := Utilization(*b, PolicyHeadroom)
			warn(CodeThinMargin, "only %s of the card stays free beyond the budget%s; fragmentation or the sampler warm-up can still run out of memory (--gpu-memory-utilization %.2f is the most that leaves them room)", GiB(margin), outsideTerm(b), safe)
		}
		if cold := b.ColdStartAllowance(); cold > 0 && b.MaxModelLen > 0 {
			if fit := b.layout.maxLen(p.KVCache-cold, set.MaxNumBatchedTokens, b.MaxModelLen); fit < b.MaxModelLen {
				holds := fmt.Sprintf("which holds one request of %d tokens, not %d; mount the compile cache on a volume, or lower --max-model-len to %d", fit, b.MaxModelLen, alignDown(fit, set.BlockSize, s.MaxPositions))
				if fit <= 0 {
					holds = "which holds no request at all; mount the compile cache on a volume, or plan for less weight per GPU"
				}
				warn(CodeColdStart, "a first start with a cold torch.compile cache (a new pod, unless ~/.cache/vllm is on a volume) has left one-GPU workers up to %s less KV cache than a warm one: %s here, %s",
					GiB(cold), GiB(max(p.KVCache-cold, 0)), holds)
			}
		}
		if b.MaxConcurrency < 2 && b.MaxModelLen > 0 {
			warn(CodeLowConcurrency, "the KV cache holds %.2f requests of %s tokens at once (as vLLM counts them, %s tokens); longer queues and preemption under load", b.MaxConcurrency, vllm.Thousands(int64(b.MaxModelLen)), vllm.Thousands(b.KVTokens))
		}
	}
	b.Fits = len(b.Problems) == 0
}

// UtilizationEdge reports a --gpu-memory-utilization above the one
// Utilization computes (headroom policy): the one edge the planner's
// thin-margin warning, the webhook and doctor's utilization_edge share.
func UtilizationEdge(b Budget) bool {
	if b.PerGPU.Total <= 0 {
		return false
	}
	safe, _ := Utilization(b, PolicyHeadroom)
	return b.Settings.GPUMemoryUtilization > safe+0.005
}

// LargestFit is the longest context a request may have (aligned to the
// block, at most the model's maximum) and the --gpu-memory-utilization it
// holds at: the plan's own (0 returned) when the card holds the plan's
// footprint; where it does not (CUDA graphs captured outside the budget,
// before vLLM 0.21), the utilization that leaves room for them and the
// context (Utilization), whose KV cache is smaller. Where a first start
// with a cold torch.compile cache may leave less KV cache
// (ColdStartAllowance), it is the length that start holds too, so that a
// new pod starts; the warm one when the cold one holds none. One answer
// for the plan's problem, its shorter-context alternative and
// recommendation, the webhook's denial and doctor's remedy.
func (b Budget) LargestFit() (tokens int, utilization float64) {
	p, set := b.PerGPU, b.Settings
	kv, fit := p.KVCache, b.MaxFitLen
	if !b.CUDAGraphInBudget && p.CUDAGraph > 0 && b.Footprint > p.Total && p.Total > 0 {
		if u, _ := Utilization(b, PolicyHeadroom); u < set.GPUMemoryUtilization {
			kv += int64(math.Ceil(float64(p.Total)*u)) - int64(math.Ceil(float64(p.Total)*set.GPUMemoryUtilization))
			fit, utilization = b.maxLenAt(kv), u
		}
	}
	if cold := b.ColdStartAllowance(); cold > 0 {
		if c := b.maxLenAt(kv - cold); c > 0 {
			fit = min(fit, c)
		}
	}
	return alignDown(fit, set.BlockSize, b.Model.MaxPositions), utilization
}

// fitHere is the longest context to name at the plan's own utilization:
// LargestFit's where it holds there, else the warm fit (LargestFit then
// needs another utilization, which the message naming it says).
func (b Budget) fitHere() int {
	if fit, at := b.LargestFit(); at == 0 {
		return fit
	}
	return alignDown(b.MaxFitLen, b.Settings.BlockSize, b.Model.MaxPositions)
}

// maxLenAt is the longest request whose KV cache fits in kv bytes a GPU.
func (b Budget) maxLenAt(kv int64) int {
	return b.layout.maxLen(kv, b.Settings.MaxNumBatchedTokens, max(b.Model.MaxPositions, b.MaxModelLen))
}

func graphTerm(b *Budget) string {
	if b.CUDAGraphInBudget {
		return " + CUDA graphs " + GiB(b.PerGPU.CUDAGraph)
	}
	return ""
}

func outsideTerm(b *Budget) string {
	if b.CUDAGraphInBudget {
		return ""
	}
	return " and CUDA graphs (" + GiB(b.PerGPU.CUDAGraph) + ")"
}

// eplbRefused says why vLLM's ParallelConfig refuses set's EPLB flags
// (vllm/config/parallel.py), "" when it does not: EPLB needs
// --enable-expert-parallel and more than one rank of tensor × data
// parallel, and redundant experts need EPLB.
func eplbRefused(set vllm.Settings) string {
	r := set.RedundantExperts()
	switch {
	case !set.EPLB() && r > 0:
		return fmt.Sprintf("num_redundant_experts is %d but --%s is not given (add it, or drop the redundant experts)", r, vllm.FlagEnableEPLB)
	case set.EPLB() && !set.ExpertParallel():
		return fmt.Sprintf("--%s needs --enable-expert-parallel", vllm.FlagEnableEPLB)
	case set.EPLB() && max(set.TensorParallelSize, 1)*max(set.DataParallelSize, 1) <= 1:
		return fmt.Sprintf("--%s needs tensor × data parallel above 1", vllm.FlagEnableEPLB)
	}
	return ""
}

// quantMinCapability is the compute capability (major × 10 + minor) each
// quantization method's kernels need, as vLLM's
// QuantizationConfig.get_min_capability gives it: FP8 (native from 8.9,
// the FP8 Marlin kernel on Ampere) and MXFP4 from 8.0, AWQ's own kernel
// from 7.5. Methods not listed run wherever vLLM does.
var quantMinCapability = map[string]int{"fp8": 80, "mxfp4": 80, "awq": 75, "awq_marlin": 80, "gptq_marlin": 80}

// capabilityRefused says why vLLM refuses to run on d, "" when it does
// not: its kernels are built for compute capability 7.0 and newer (vLLM's
// installation guide: "compute capability 7.0 or higher"), bfloat16 needs
// 8.0 (vLLM: "Bfloat16 is only supported on GPUs with compute capability
// of at least 8.0 ... use float16 instead ... --dtype=half"; under auto it
// loads a bfloat16 checkpoint in float16 there, the same bytes), and a
// quantization method its kernels' minimum (quantMinCapability: "The
// quantization method fp8 is not supported for the current GPU. Minimum
// capability: 80").
func capabilityRefused(d gpu.Device, s model.Spec, set vllm.Settings) string {
	major, minor := d.Capability()
	if major == 0 || d.Vendor != "nvidia" {
		return ""
	}
	cc := major*10 + minor
	at := fmt.Sprintf("%s is compute capability %d.%d", d.Name, major, minor)
	if cc < 70 {
		return fmt.Sprintf("vLLM runs on NVIDIA GPUs of compute capability 7.0 or newer and %s: its kernels are not built for it (use a V100, T4 or newer GPU)", at)
	}
	if dt, err := vllm.ResolveDtypeOn(set.Dtype, s.Dtype, cc); err == nil && dt == "bfloat16" && cc < vllm.BF16MinCapability {
		return fmt.Sprintf("--dtype bfloat16 needs compute capability 8.0 and %s: vLLM refuses it (use --dtype half)", at)
	}
	method := strings.ToLower(set.Quantization)
	if method == "" && s.Quant != nil {
		method = strings.ToLower(s.Quant.Method)
	}
	if need, ok := quantMinCapability[method]; ok && cc < need {
		return fmt.Sprintf("the %s quantization needs compute capability %d.%d and %s: vLLM refuses it (\"Minimum capability: %d\"; serve an unquantized or GPTQ checkpoint, or use a newer GPU)", method, need/10, need%10, at, need)
	}
	return ""
}
