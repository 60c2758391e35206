// Package memory is headroom's one budget calculator: given a model, a GPU
// and vLLM settings it predicts, per GPU, what vLLM will measure and
// allocate (weights, activation peak, non-torch memory, CUDA graphs, KV
// cache), says whether vLLM will start and serve one max-length request, and
// recommends settings. It is pure: no I/O, no clocks, no globals.
package memory

import (
	"fmt"
	"math"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Measured holds per-GPU numbers a real launch logged; a non-zero field
// replaces the prediction (measure over guess).
type Measured struct {
	Weights    int64 `json:"weights_bytes,omitempty"`
	Activation int64 `json:"activation_bytes,omitempty"`
	NonTorch   int64 `json:"non_torch_bytes,omitempty"`
	CUDAGraph  int64 `json:"cudagraph_bytes,omitempty"`
	// AvailableKV is the KV cache the engine sized ("Available KV cache
	// memory: X GiB"), measured at Utilization (0: at the plan's own).
	// What it leaves of that budget is the engine's non-KV memory, which
	// does not depend on the utilization: a plan at any utilization takes
	// its KV cache as its budget less that, and the parts the launch did
	// not log absorb the difference from their predictions (first the
	// activation peak, the least certain prediction, then non-torch).
	AvailableKV int64 `json:"available_kv_cache_bytes,omitempty"`
	// KVTokens is the same launch's "GPU KV cache size: N tokens", which
	// pins AvailableKV (logged to two decimals of a GiB) to whole blocks;
	// alone (V0 logs "# GPU blocks: N", no GiB) it gives the KV cache.
	KVTokens    int64   `json:"kv_cache_tokens,omitempty"`
	Utilization float64 `json:"gpu_memory_utilization,omitempty"`
	Source      string  `json:"source,omitempty"`
}

// Where a number of a budget comes from.
const (
	// OriginPlan is the planner's prediction.
	OriginPlan = "plan"
	// OriginMeasured is a number a real launch logged (Measured).
	OriginMeasured = "measured"
	// OriginDerived is computed from measured numbers: a part the launch
	// did not log, as what its measured non-KV memory leaves; KV tokens
	// and the longest context from a measured KV cache and the page size.
	OriginDerived = "derived"
)

// Origins say, per number of a budget's per-GPU worker, where it comes
// from (the Origin constants). Keys match Parts' and Budget's.
type Origins struct {
	Weights    string `json:"weights_bytes"`
	Activation string `json:"activation_bytes"`
	NonTorch   string `json:"non_torch_bytes"`
	CUDAGraph  string `json:"cudagraph_bytes"`
	KVCache    string `json:"kv_cache_bytes"`
	KVTokens   string `json:"kv_cache_tokens"`
	MaxFitLen  string `json:"max_fit_len"`
}

// Input is everything a plan depends on.
type Input struct {
	Model  model.Spec
	Device gpu.Device
	// Count is the number of GPUs available; 0 means exactly what the
	// parallelism needs.
	Count int
	// Settings are the user's vLLM flags; zero fields take the version's
	// defaults for this GPU.
	Settings vllm.Settings
	// Env holds the engine's environment variables that change its
	// accounting (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
	Env map[string]string
	// Measured, when set, replaces predicted parts.
	Measured *Measured
	// Draft is the checkpoint --speculative-config names as its draft
	// (a draft model, an EAGLE or DFlash head); nil when the method needs
	// none or the caller could not read it (the plan then says so).
	Draft *model.Spec
	// GPUsPerNode is how many GPUs one node (or one pod of a multi-node
	// group) holds: alternatives that need more shard across nodes with
	// pipeline parallelism (Layout). 0 means DefaultGPUsPerNode. The plan
	// itself does not depend on it.
	GPUsPerNode int
}

// Parts is the memory of one GPU worker, in bytes.
type Parts struct {
	Total      int64 `json:"total_bytes"`
	Requested  int64 `json:"requested_bytes"`
	Weights    int64 `json:"weights_bytes"`
	Activation int64 `json:"activation_bytes"`
	NonTorch   int64 `json:"non_torch_bytes"`
	CUDAGraph  int64 `json:"cudagraph_bytes"`
	KVCache    int64 `json:"kv_cache_bytes"`
	// Context is what the process holds before vLLM's baseline snapshot
	// (CUDA context, NCCL): outside the budget, but on the card.
	Context int64 `json:"context_bytes"`
}

// Sum is what the parts hold on the card together: the CUDA context,
// weights, activation, non-torch, CUDA graphs and KV cache.
func (p Parts) Sum() int64 {
	return p.Context + p.Weights + p.Activation + p.NonTorch + p.CUDAGraph + p.KVCache
}

// Finding is a problem or a warning, with a stable code.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Budget is the plan for one model on one kind of GPU with one set of settings.
type Budget struct {
	Model    model.Spec    `json:"-"`
	Device   gpu.Device    `json:"-"`
	Count    int           `json:"-"`
	Settings vllm.Settings `json:"-"`
	// GPUsPerNode is the node size planned for (Input.GPUsPerNode, or
	// DefaultGPUsPerNode): a group of ranks past it crosses the network.
	GPUsPerNode int `json:"-"`

	// PerGPU is the worker with the fewest KV blocks (vLLM sizes every
	// worker's cache to that minimum).
	PerGPU Parts `json:"per_gpu"`
	// Stages holds one worker per pipeline stage, first to last (what
	// each stage's worker measures and logs).
	Stages []Parts `json:"stages"`
	// CUDAGraphInBudget is true when vLLM subtracts its CUDA-graph estimate
	// from the KV budget (v0.21.0 on by default).
	CUDAGraphInBudget bool `json:"cudagraph_in_budget"`

	DtypeBytes   int `json:"dtype_bytes"`
	KVDtypeBytes int `json:"kv_dtype_bytes"`
	// KVBytesPerToken is the KV memory one token of context costs on one
	// GPU worker, over its full-attention and MLA layers.
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
	// ModelKVBytesPerToken is the same cost for the whole model: every
	// layer, no head split among tensor-parallel ranks.
	ModelKVBytesPerToken int64 `json:"model_kv_bytes_per_token"`
	// WeightsTotal is the whole model's weight bytes as loaded;
	// ExpertWeightsTotal the routed experts' part of it (stored in their
	// own format: gpt-oss keeps them in MXFP4 and the rest in bf16).
	WeightsTotal       int64 `json:"weights_total_bytes"`
	ExpertWeightsTotal int64 `json:"expert_weights_total_bytes,omitempty"`

	NumBlocks      int64   `json:"num_gpu_blocks"`
	KVTokens       int64   `json:"kv_cache_tokens"`
	MaxConcurrency float64 `json:"max_concurrency"`
	// MaxModelLen is the context length vLLM will use (the setting, or the
	// model's maximum).
	MaxModelLen int `json:"max_model_len"`
	// AutoFit is true for --max-model-len auto: MaxModelLen is then the
	// length vLLM will choose.
	AutoFit bool `json:"auto_fit"`
	// MaxFitLen is the largest context whose KV fits (vLLM's
	// estimate_max_model_len), capped at the model's maximum.
	MaxFitLen int `json:"max_fit_len"`
	// Footprint is what the card will hold per GPU once serving: context,
	// the requested budget and CUDA graphs outside it, or the parts' Sum
	// where they outgrow that or a pinned pool replaces the budget.
	Footprint int64 `json:"footprint_bytes"`

	Fits     bool      `json:"fits"`
	Problems []Finding `json:"problems"`
	Warnings []Finding `json:"warnings"`

	// Origins say which numbers were measured, derived or predicted.
	Origins Origins `json:"origins"`

	// SamplerPath is the top-k/top-p path the profile run's dummy sampler
	// takes in this release and install (vllm.DummySampler); Install the
	// install it assumed; ModelRunnerV2 whether Model Runner V2 runs the
	// model.
	SamplerPath   vllm.SamplerPath `json:"sampler_path"`
	Install       vllm.Install     `json:"vllm_install"`
	ModelRunnerV2 bool             `json:"model_runner_v2"`
	// CUDAGraphEstimateZero is true when the release would take graphs
	// into the budget but Model Runner V2's estimate is zero (before
	// 0.29): nothing is reserved, and the graphs land outside.
	CUDAGraphEstimateZero bool `json:"cudagraph_estimate_zero,omitempty"`
	// Evidence says, per planned part of the per-GPU worker, how sure it
	// is; KVTokensBand is the KV tokens those uncertainties allow.
	Evidence     []Term `json:"evidence"`
	KVTokensBand Band   `json:"kv_cache_tokens_band"`

	layout kvLayout
	run    profileRun
	feat   features
	// activationForwardBound: the forward pass, not the sampler, sets the
	// last stage's profile peak.
	activationForwardBound bool
	// loadPeak is the most weights a GPU holds while loading where
	// --quantization quantizes an unquantized checkpoint on load: its
	// 16-bit weights, read before they are quantized; 0 otherwise.
	loadPeak int64
}

// Plan computes the budget.
func Plan(in Input) (Budget, error) { return planWith(in, nil) }

// Unused is what one GPU keeps free once vLLM serves: its total less the
// footprint (negative when the plan does not fit). The card's margin.
func (b Budget) Unused() int64 { return b.PerGPU.Total - b.Footprint }

// planWith is Plan for a search that plans one model many times: layers,
// when not nil, holds the model's per-layer counts, filled by the first
// plan and reused by the next ones, as they depend on the model alone.
func planWith(in Input, layers *[]model.LayerParams) (Budget, error) {
	s := in.Model
	if s.Layers <= 0 || s.Hidden <= 0 || s.Heads <= 0 {
		return Budget{}, fmt.Errorf("model %q has no usable architecture (layers %d, hidden %d, heads %d)", s.ID, s.Layers, s.Hidden, s.Heads)
	}
	if in.Device.TotalBytes <= 0 {
		return Budget{}, fmt.Errorf("GPU %q has no memory size: give --gpu-memory", in.Device.Name)
	}
	set := in.Settings.WithDefaults(in.Settings.Version, in.Device.Name, in.Device.TotalBytes, s.MaxPositions)
	b := Budget{Model: s, Device: in.Device, Settings: set, Count: in.Count, GPUsPerNode: in.gpusPerNode()}
	tp, pp := set.TensorParallelSize, set.PipelineParallelSize
	dp := max(set.DataParallelSize, 1)
	if b.Count == 0 {
		b.Count = tp * pp * dp
	}

	var err error
	if b.DtypeBytes, err = vllm.DtypeBytes(set.Dtype, s.Dtype); err != nil {
		return Budget{}, err
	}
	if b.KVDtypeBytes, err = vllm.KVCacheDtypeBytes(set.KVCacheDtype, b.DtypeBytes); err != nil {
		return Budget{}, err
	}
	if hb := hybridBlockSize(s, tp, b.KVDtypeBytes, set.BlockSize); hb != set.BlockSize {
		set.BlockSize, b.Settings.BlockSize = hb, hb
	}
	format, err := linearFormatFor(s, set)
	if err != nil {
		return Budget{}, err
	}
	feat, err := featuresFor(in, set, b.DtypeBytes, b.KVDtypeBytes)
	if err != nil {
		return Budget{}, err
	}
	b.feat = feat
	run := feat.runner(profileRunFor(s, set, in.Device, in.Env), set).withSampling(set)
	b.run, b.SamplerPath, b.ModelRunnerV2, b.Install = run, run.sampler, run.runnerV2, set.Install.OrDefault()
	// --enforce-eager, or a cudagraph_mode of NONE, captures no graph.
	noGraphs := vllm.CUDAGraphMode(set) == vllm.GraphModeNone
	b.CUDAGraphInBudget = vllm.CUDAGraphsInBudget(set.Version, in.Env) && !noGraphs
	if b.CUDAGraphInBudget && vllm.CUDAGraphEstimateIsZero(set.Version, run.runnerV2) {
		b.CUDAGraphInBudget, b.CUDAGraphEstimateZero = false, true
	}
	nt := nonTorchFor(s, set, in.Device, in.GPUsPerNode)
	moe := moeScratchFor(s, set, in.Device, in.Env, set.MaxNumBatchedTokens, b.DtypeBytes)

	b.MaxModelLen = set.MaxModelLen
	if b.MaxModelLen <= 0 {
		b.MaxModelLen = s.MaxPositions
	}

	requested := int64(math.Ceil(float64(in.Device.TotalBytes) * set.GPUMemoryUtilization))
	var perLayer []model.LayerParams
	if layers != nil && *layers != nil {
		perLayer = *layers
	} else {
		perLayer = layerParams(s)
		if layers != nil {
			*layers = perLayer
		}
	}
	whole := splitWeights(s, perLayer, stage{first: 0, last: s.Layers, isFirst: true, isLast: true}, 1)
	b.WeightsTotal = int64(whole.bytes(b.DtypeBytes, format, true)) + ropeCacheBytes(s, b.DtypeBytes)
	b.ExpertWeightsTotal = int64(whole.expertBytes(b.DtypeBytes, format))
	scale := checkpointScale(s, b.DtypeBytes, format, whole)

	// A rank's routed experts: vLLM splits them over every rank of
	// tensor × data parallel (fused_moe's FusedMoEParallelConfig flattens
	// TP across DP: a slice of each expert, or with expert parallel whole
	// experts, per rank), where attention is split over TP alone; and at
	// the shapes their kernel allocates.
	shape := ExpertShapeFor(s, set, in.Device)
	expertScale := shape.Pad / float64(dp)
	if r := set.RedundantExperts(); r > 0 && set.EPLB() && shape.ExpertParallel && s.MoE != nil && s.MoE.Experts > 0 {
		// EPLB's physical experts, the model's and r replicas, split
		// over the expert-parallel ranks (vLLM's EplbState:
		// num_physical_experts = logical + redundant, each rank
		// physical / ep_size).
		expertScale *= float64(s.MoE.Experts+r) / float64(s.MoE.Experts)
	}

	first := true
	for _, st := range stages(s.Layers, pp) {
		p := Parts{Total: in.Device.TotalBytes, Requested: requested, Context: contextBytes(tp)}
		rank := splitWeights(s, perLayer, st, tp)
		rank.resizeExperts(expertScale)
		p.Weights = int64(rank.bytes(b.DtypeBytes, format, false)*scale) + ropeCacheBytes(s, b.DtypeBytes)
		p.Weights -= int64(set.CPUOffloadGiB * gib)
		p.Weights = max(p.Weights, 0) + feat.weights(s, st, b.DtypeBytes)
		if format.quantized && s.Quant == nil {
			unq := int64(rank.bytes(b.DtypeBytes, linearFormat{}, false)) + ropeCacheBytes(s, b.DtypeBytes) - int64(set.CPUOffloadGiB*gib)
			b.loadPeak = max(b.loadPeak, max(unq, 0)+feat.weights(s, st, b.DtypeBytes))
		}
		as := feat.activationSpec(s)
		p.Activation = activationBytes(as, st, tp, set.MaxNumBatchedTokens, set.MaxNumSeqs, b.DtypeBytes, run, moe)
		if st.isLast {
			fwd, _ := forwardPeakBytes(as, st, tp, set.MaxNumBatchedTokens, b.DtypeBytes, moe)
			b.activationForwardBound = fwd >= samplerPeakBytes(as, set.MaxNumBatchedTokens, set.MaxNumSeqs, b.DtypeBytes, run)
		}
		p.Activation = feat.activation(s, st, tp, b.DtypeBytes, p.Activation)
		p.NonTorch = nt.bytes
		p.CUDAGraph = cudaGraphBytes(s, st, tp, set.MaxCudagraphCaptureSize, noGraphs)
		b.Origins = measure(&p, in.Measured)
		avail := requested - p.Weights - p.Activation - p.NonTorch
		if b.CUDAGraphInBudget {
			avail -= p.CUDAGraph
		}
		layout := feat.layout(s, st, tp, b.KVDtypeBytes, set.BlockSize)
		if m := in.Measured; m != nil && (m.AvailableKV > 0 || m.KVTokens > 0) && set.KVCacheMemoryBytes <= 0 {
			at := m.Utilization
			if at <= 0 {
				at = set.GPUMemoryUtilization
			}
			kv := m.AvailableKV
			b.Origins.KVTokens = OriginDerived
			if m.KVTokens > 0 {
				// The GiB are logged to two decimals, the tokens to the
				// block: keep the bytes inside the blocks the tokens name.
				// V0 logs only its blocks ("# GPU blocks: N"): their
				// tokens alone give the bytes.
				lo, hi := layout.bytesForTokens(m.KVTokens)
				if kv <= 0 {
					kv = lo
				}
				kv = min(max(kv, lo), hi)
				b.Origins.KVTokens = OriginMeasured
			}
			nonKV := int64(math.Ceil(float64(in.Device.TotalBytes)*at)) - kv
			absorb(&p, &b.Origins, m, nonKV-(requested-avail))
			avail = requested - nonKV
			b.Origins.KVCache, b.Origins.MaxFitLen = OriginMeasured, OriginDerived
			if at != set.GPUMemoryUtilization {
				b.Origins.KVCache, b.Origins.KVTokens = OriginDerived, OriginDerived
			}
		}
		if set.KVCacheMemoryBytes > 0 {
			avail = set.KVCacheMemoryBytes
		}
		p.KVCache = max(avail, 0)
		b.Stages = append(b.Stages, p)
		blocks := layout.blocks(avail)
		fitLen := layout.maxLen(avail, set.MaxNumBatchedTokens, max(s.MaxPositions, b.MaxModelLen))
		if first || blocks < b.NumBlocks {
			b.PerGPU, b.NumBlocks, b.layout = p, blocks, layout
			b.KVBytesPerToken = layout.perTokenBytes()
		}
		if first || fitLen < b.MaxFitLen {
			b.MaxFitLen = fitLen
		}
		first = false
	}
	b.KVTokens = b.layout.tokens(b.NumBlocks)
	b.ModelKVBytesPerToken = feat.modelLayout(s, b.KVDtypeBytes, set.BlockSize).perTokenBytes()
	if set.MaxModelLen == vllm.AutoMaxModelLen {
		// --max-model-len auto: vLLM runs the same search after profiling
		// and serves the largest length that fits, at most the model's
		// maximum ("Auto-fit max_model_len: reduced from A to B").
		b.AutoFit = true
		if b.MaxFitLen > 0 {
			b.MaxModelLen = min(b.MaxFitLen, s.MaxPositions)
		}
	}
	b.MaxConcurrency = b.ConcurrencyAt(b.MaxModelLen)
	b.Footprint = b.PerGPU.Context + b.PerGPU.Requested
	if !b.CUDAGraphInBudget {
		b.Footprint += b.PerGPU.CUDAGraph
	}
	// Where the parts themselves outgrow the budget (weights or overhead
	// past it, so no KV cache) the card holds the parts, not the budget;
	// a pinned pool (--kv-cache-memory-bytes) ignores the budget, so the
	// card holds exactly the parts, less or more than it.
	if p := b.PerGPU; set.KVCacheMemoryBytes > 0 {
		b.Footprint = p.Sum()
	} else {
		b.Footprint = max(b.Footprint, p.Sum())
	}
	b.evidence(run, nt, in.GPUsPerNode)
	feat.findings(&b)
	b.check(dp, vllm.AllowLongMaxModelLen(in.Env) || vllm.AllowLongMaxModelLen(set.Env))
	return b, nil
}

// ConcurrencyAt is how many requests of the given length the KV cache
// holds at once, as vLLM counts them in its "Maximum concurrency for L
// tokens per request: C.CCx" line: the pool's blocks over the blocks one
// request needs in every KV-cache group (requestBlocks). For a dense model
// that is KV tokens / L; a sliding-window, chunked-local or hybrid model's
// long request needs full-length blocks only in its full-attention groups,
// so it holds more than KV tokens / L (gemma-3-12b at 8,192 tokens on
// vLLM 0.19.0: 48,867 blocks / (512 + 5 × 513) = 15.88, logged 15.88x,
// where 130,304 tokens / 8,192 = 15.91). V0 logs KV tokens / L.
func (b Budget) ConcurrencyAt(tokens int) float64 {
	if tokens <= 0 {
		return 0
	}
	if vllm.UsesV1(b.Settings.Version, b.Settings.Env) {
		if need := b.layout.requestBlocks(tokens, b.Settings.MaxNumBatchedTokens); need > 0 {
			return float64(b.NumBlocks) / float64(need)
		}
	}
	return float64(b.KVTokens) / float64(tokens)
}

// TokensIn is the "GPU KV cache size" vLLM reports for a KV cache of kv
// bytes per GPU on this budget's layout: whole blocks of the page size,
// times the block size (for a log that gives the GiB but not the tokens).
func (b Budget) TokensIn(kv int64) int64 {
	return b.layout.tokens(b.layout.blocks(kv))
}

// measure replaces predicted parts by measured ones and says which are.
func measure(p *Parts, m *Measured) Origins {
	o := Origins{Weights: OriginPlan, Activation: OriginPlan, NonTorch: OriginPlan, CUDAGraph: OriginPlan,
		KVCache: OriginPlan, KVTokens: OriginPlan, MaxFitLen: OriginPlan}
	if m == nil {
		return o
	}
	pick := func(dst *int64, origin *string, measured int64) {
		if measured > 0 {
			*dst, *origin = measured, OriginMeasured
		}
	}
	pick(&p.Weights, &o.Weights, m.Weights)
	pick(&p.Activation, &o.Activation, m.Activation)
	pick(&p.NonTorch, &o.NonTorch, m.NonTorch)
	pick(&p.CUDAGraph, &o.CUDAGraph, m.CUDAGraph)
	return o
}

// absorb moves diff bytes (measured non-KV memory less the non-KV parts
// as planned) into the first part the launch did not log, activation then
// non-torch, keeping it at zero or more; with both logged the parts stay as
// logged and only the KV cache follows the measurement.
func absorb(p *Parts, o *Origins, m *Measured, diff int64) {
	switch {
	case m.Activation <= 0:
		p.Activation = max(p.Activation+diff, 0)
		o.Activation = OriginDerived
	case m.NonTorch <= 0:
		p.NonTorch = max(p.NonTorch+diff, 0)
		o.NonTorch = OriginDerived
	}
}

// checkpointScale lets exact checkpoint bytes (safetensors) override the
// architecture count when vLLM loads the tensors as stored: the per-rank
// estimate is scaled by checkpoint / computed total.
func checkpointScale(s model.Spec, dtypeBytes int, f linearFormat, whole weightParts) float64 {
	if s.CheckpointBytes <= 0 {
		return 1
	}
	stored, err := vllm.DtypeBytes("auto", s.Dtype)
	if err != nil || stored != dtypeBytes {
		return 1
	}
	if (s.Quant != nil) != f.quantized {
		return 1 // quantized on the fly: the checkpoint is not what is loaded
	}
	computed := whole.bytes(dtypeBytes, f, true)
	if computed <= 0 {
		return 1
	}
	r := float64(s.CheckpointBytes) / computed
	if r < 0.5 || r > 2 {
		// The checkpoint holds something else too (extra copies, other
		// modalities): trust the architecture.
		return 1
	}
	return r
}

// linearFormatFor decides how the linear layers are stored on the GPU: the
// checkpoint's quantization, or --quantization applied on the fly to an
// unquantized checkpoint (fp8: one byte per weight, vllm-memory.md §2.2).
func linearFormatFor(s model.Spec, set vllm.Settings) (linearFormat, error) {
	if s.Quant != nil && s.Quant.Bits > 0 {
		return quantFormat(s.Quant), nil
	}
	switch q := strings.ToLower(set.Quantization); q {
	case "", "none":
		return linearFormat{}, nil
	case "fp8", "ptpc_fp8", "fbgemm_fp8", "experts_int8":
		return linearFormat{bytesPerParam: 1, quantized: true}, nil
	case "bitsandbytes":
		// In-flight 4-bit NF4 with one fp32 absmax per 64 weights.
		return linearFormat{bytesPerParam: 0.5 + 4.0/64, quantized: true}, nil
	default:
		if s.Quant != nil {
			return quantFormat(s.Quant), nil
		}
		return linearFormat{}, fmt.Errorf("--quantization %s needs a checkpoint quantized with %s; %s has no quantization_config (use a quantized checkpoint, or --quantization fp8 to quantize on the fly)", q, q, s.ID)
	}
}
