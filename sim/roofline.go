package sim

import (
	"fmt"
	"math"
	"sync"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Roofline prices a step the way its kernels spend it, per GPU worker (a
// tensor-parallel rank holds 1/TP of the weights and of the work):
//
//	linear    = max(GEMM FLOPs / (peak × e_gemm), weight bytes / (bandwidth × e_bw))
//	attention = prefill pairs × FLOPs per pair / (peak × e_attn)
//	          + decode KV bytes / (bandwidth × e_kv), the pairs and bytes of
//	            sliding-window layers within their window
//	all-reduce (TP > 1) = 2 per layer: latency + tokens × hidden bytes × 2(TP−1)/TP / link
//	GEMM floors = GEMM kernels per step × the time a GEMM takes beyond its
//	            math or its read (launch, prologue, epilogue, last wave)
//	small kernels = their count per step × the least time a kernel takes
//	GPU       = linear + attention + all-reduce + GEMM floors + small
//	            kernels, at least the launches of an eager step (no CUDA
//	            graph: --enforce-eager, or more tokens than the largest
//	            captured graph) or of a piecewise one (attention launched
//	            between the graph's pieces: a step with a prefill chunk,
//	            or any step before 0.11.0)
//	CPU       = step overhead + per-sequence overhead × requests
//	step      = GPU + CPU, or max(GPU, CPU) with async scheduling
//
// The GEMMs of a batch read the weights once whatever its size, so they
// are compute-bound for a prefill and memory-bound for a small decode
// batch; attention is a kernel of its own that a long prompt makes
// quadratic (compute) and a decode makes a read of the cache (memory). A
// MoE step reads the routed experts its tokens reach: E × (1 − (1 −
// k/E)^tokens) of them per layer. Beside these a layer runs kernels of
// almost no work (norms, rotary embedding, the cache write, the MLP's
// activation, a MoE layer's routing), and each still holds the GPU for a
// few microseconds: on a small decode batch of a deep or MoE model they add
// up to as much as the weights' read.
type Roofline struct {
	// LinearParams are the dense GEMM parameters every token passes
	// through (attention projections, dense MLPs, shared experts; no
	// embedding, no LM head), per GPU. RoutedParams are the routed
	// experts' parameters one token passes through (TopK experts in every
	// MoE layer), per GPU: they run as grouped GEMMs (groupedShare).
	LinearParams, RoutedParams float64
	// HeadParams is the LM head, applied to one row per scheduled request
	// (vLLM computes logits only at each request's last position), per GPU.
	HeadParams float64
	// WeightBytes are the weights a step reads whatever its tokens (all but
	// the routed experts); ExpertBytes the routed experts of all layers,
	// per GPU; Experts and TopK their count and the experts one token uses.
	WeightBytes, ExpertBytes float64
	Experts, TopK            int
	// MoELayers, MoEHidden and MoEInter (per GPU) size the activations
	// the experts' permute, grouped GEMMs and top-k sum move: ActBytes per
	// value.
	MoELayers           int
	MoEHidden, MoEInter float64
	ActBytes            float64
	// GroupedPlateau is the share of the tensor peak the grouped GEMMs
	// reach on full tiles (0: GEMMEfficiency), ExpertKernel the kernel
	// whose tiles they pad to (moeKernel); ExpertPeak is the tensor peak
	// their quantization path runs at.
	GroupedPlateau float64
	ExpertKernel   moeKernel
	// ExpertKHalf is the reduction length at which an expert GEMM's main
	// loop runs at half its share (0: no such loss): see expertTime.
	ExpertKHalf float64
	ExpertPeak  float64
	// DenseDequant and ExpertDequant are the shares of the GEMM share
	// their quantization path reaches: weight-only dequantizing kernels
	// DequantShare, native FP8 GEMMs FP8GEMMShare, 1 otherwise (0 reads as
	// 1). DenseRead and ExpertRead are the shares of the weights' bandwidth
	// share the path's read reaches (FP8ReadShare for native FP8).
	DenseDequant, ExpertDequant float64
	DenseRead, ExpertRead       float64
	// KVBytesPerToken is the KV one token of context costs, per GPU.
	KVBytesPerToken float64
	// MLADecodeFLOPsPerToken is what a decode's attention computes per
	// token of context in MLA layers (weights absorbed: the query meets
	// the latent, kv_lora_rank + rope wide, and the latent is the value),
	// per GPU: 2 × layers × heads × (2 × kv_lora_rank + rope dims) / TP.
	MLADecodeFLOPsPerToken float64
	// AttentionFLOPsPerPair is the attention FLOPs of one query × key pair
	// over the full-attention and MLA layers, per GPU: 2 × layers × query
	// heads × (qk + v head dims) / TP (QKᵀ and PV, a multiply-add each).
	AttentionFLOPsPerPair float64
	// Windows are the sliding-window (or chunked local) layers, by window:
	// a query there meets at most a window of keys.
	Windows []WindowAttention
	// PeakFLOPs and Bandwidth are the datasheet figures (gpu.Perf).
	PeakFLOPs, Bandwidth float64
	// Layers is the decoder depth; TP the tensor-parallel size;
	// AllReduceBytesPerToken a token's activation (hidden × dtype bytes);
	// Link the GPU-to-GPU bandwidth each way, NVLink whether it is a
	// GPU fabric (allReduceTime) and AMD whether RCCL runs it.
	Layers                 int
	TP                     int
	AllReduceBytesPerToken float64
	Link                   float64
	NVLink, AMD            bool
	// NodeGPUs is a node's GPUs (0: every rank on one node) and Stages
	// the pipeline's: a group whose ranks span more GPUs than a node
	// meets over the network (fabricOf).
	NodeGPUs, Stages int
	// GraphTokens is the largest batch (in tokens) that replays a CUDA
	// graph; 0 when the engine runs eager (--enforce-eager). An eager step
	// lasts at least Layers × LaunchPerLayer, the CPU launching it.
	GraphTokens    int64
	LaunchPerLayer float64
	// FullDecodeGraphs is set when a batch of one-token queries replays
	// one graph of the whole pass (vllm.FullDecodeGraphs); every other
	// step within GraphTokens replays the layers' pieces between attention
	// calls that the CPU launches itself, and lasts at least Layers ×
	// PiecewisePerLayer.
	FullDecodeGraphs  bool
	PiecewisePerLayer float64
	// NoPiecewise is set when the steps that are not all decodes run eager
	// (cudagraph_mode FULL_DECODE_ONLY; vllm.PiecewiseGraphs).
	NoPiecewise bool
	// SmallKernels is how many kernels of negligible work one step runs
	// (smallKernels), each at least KernelFloor seconds on the GPU.
	SmallKernels, KernelFloor float64
	// GEMMKernels is how many GEMM kernels one step runs (gemmKernels),
	// each GEMMFloor seconds longer than its math or its read: a
	// memory-bound GEMM of B bytes takes GEMMFloor + B / (bandwidth ×
	// BandwidthEfficiency) (Calibration.GEMMFloor).
	GEMMKernels, GEMMFloor float64
	// The shares of the peaks real kernels reach, and the engine's CPU
	// costs (Calibration).
	GEMMEfficiency, AttentionEfficiency        float64
	BandwidthEfficiency, KVBandwidthEfficiency float64
	StepOverhead, SeqOverhead                  float64
	// Overlap is async scheduling: the CPU work of a step runs while the
	// GPU computes the previous one.
	Overlap bool
	// DataParallel is the size of the data-parallel group a MoE model's
	// engines form (--data-parallel-size; 0 or 1: none). vLLM steps them in
	// lockstep; each MoE layer gathers every rank's tokens (Batch.
	// GroupTokens), computes them on this rank's 1/(TP × DP) of each
	// expert (RoutedParams and ExpertBytes are that share) and hands each
	// rank back its own: an all-gather and a reduce-scatter across the
	// group (dispatchCombineTime), in AllReduce.
	DataParallel int
	// ExpertParallel is the ranks that hold whole experts, 1/ExpertParallel
	// of them each (--enable-expert-parallel over TP × DP ranks; 0 or 1:
	// every rank holds a slice of every expert). RoutedParams and
	// ExpertBytes are then a rank's mean share, and a step waits for the
	// busiest rank (busiestRank).
	ExpertParallel int
}

// StepTime is the model's estimate.
func (m *Roofline) StepTime(b Batch) float64 { return m.Parts(b).Total() }

// GPUTime is the forward pass alone.
func (m *Roofline) GPUTime(b Batch) float64 { return m.Parts(b).GPU() }

// Parts is where step b's time goes, by the mechanisms above.
func (m *Roofline) Parts(b Batch) StepParts {
	p := StepParts{CPU: m.StepOverhead + m.SeqOverhead*float64(b.Requests), overlap: m.Overlap}
	if b.Tokens == 0 {
		return p
	}
	tokens := float64(b.Tokens)
	flops := 2 * (m.LinearParams*tokens + m.HeadParams*float64(int64(b.Requests)+b.Drafts))
	p.Dense = max(flops/(m.PeakFLOPs*m.GEMMEfficiency*m.denseDequant()), m.WeightBytes/(m.Bandwidth*m.BandwidthEfficiency*orOne(m.DenseRead)))
	experts := tokens
	if dp := m.DataParallel; dp > 1 && m.RoutedParams > 0 {
		// A rank priced alone (no group given) has peers as busy as it.
		experts = float64(b.GroupTokens)
		if b.GroupTokens == 0 {
			experts = tokens * float64(dp)
		}
		p.AllReduce = float64(m.MoELayers) * dispatchCombineTime(experts*m.AllReduceBytesPerToken, dp, m.fabricOf(m.TP*max(m.Stages, 1)*dp))
	}
	p.Experts = m.expertTime(experts)
	pairFLOPs, cacheBytes := m.attention(b)
	p.Attention = pairFLOPs/(m.PeakFLOPs*m.AttentionEfficiency) + cacheBytes/(m.Bandwidth*m.KVBandwidthEfficiency)
	if m.MLADecodeFLOPsPerToken > 0 {
		p.Attention += m.MLADecodeFLOPsPerToken * float64(m.decodeContext(b)) / (m.PeakFLOPs * m.AttentionEfficiency)
	}
	if m.TP > 1 {
		p.AllReduce += 2 * float64(m.Layers) * allReduceTime(tokens*m.AllReduceBytesPerToken, m.TP, m.fabricOf(m.TP))
	}
	p.GEMMFloors, p.SmallKernels = m.kernelFloors()
	decodes := m.FullDecodeGraphs && b.PrefillPairs == 0 && b.Drafts == 0
	switch {
	case m.GraphTokens == 0 || b.Tokens > m.GraphTokens || (m.NoPiecewise && !decodes):
		p.Launch = max(0, float64(m.Layers)*m.LaunchPerLayer-p.GPU())
	case !decodes:
		p.Launch = max(0, float64(m.Layers)*m.PiecewisePerLayer-p.GPU())
	}
	return p
}

// StepParts is where a step's time goes, in seconds, or the sum of a
// run's steps (Add): the GPU's parts, the engine's CPU, and the part of
// the two that ran at once (async scheduling overlaps them: a step is the
// longer of the two), so that GPU + CPU − Overlapped is the steps' time.
type StepParts struct {
	// Dense is the dense GEMMs (the longer of their math and their read
	// of the weights); Experts the routed experts' grouped GEMMs and the
	// activations they move; Attention prefill's pairs and decode's cache
	// read; AllReduce tensor parallelism's, and a MoE model's exchange
	// across data-parallel ranks with the wait for the slowest of them
	// (fleet.stepGroup); GEMMFloors and SmallKernels
	// what every GEMM and every kernel of negligible work takes whatever
	// its work; Launch what an eager step's launches take beyond all that.
	Dense        float64 `json:"dense_gemms_s"`
	Experts      float64 `json:"expert_gemms_s"`
	Attention    float64 `json:"attention_s"`
	AllReduce    float64 `json:"all_reduce_s"`
	GEMMFloors   float64 `json:"gemm_floors_s"`
	SmallKernels float64 `json:"small_kernels_s"`
	Launch       float64 `json:"eager_launch_s"`
	// Draft is the drafter's forward passes under speculative decoding
	// (Engine.draftTime), on the GPU after the target's.
	Draft float64 `json:"draft_s"`
	// CPU is the engine core's time (per step and per sequence);
	// Overlapped the time it ran beside the GPU.
	CPU        float64 `json:"engine_cpu_s"`
	Overlapped float64 `json:"overlapped_s"`
	overlap    bool
}

// GPU is the forward pass.
func (p StepParts) GPU() float64 {
	return p.Dense + p.Experts + p.Attention + p.AllReduce + p.GEMMFloors + p.SmallKernels + p.Launch + p.Draft
}

// Total is the step's time (of a sum: the steps' time).
func (p StepParts) Total() float64 {
	if p.overlap {
		return max(p.GPU(), p.CPU)
	}
	return p.GPU() + p.CPU - p.Overlapped
}

// Scale multiplies every part of a run's split by f (a mean over engines).
func (p *StepParts) Scale(f float64) {
	for _, v := range []*float64{&p.Dense, &p.Experts, &p.Attention, &p.AllReduce, &p.GEMMFloors, &p.SmallKernels, &p.Launch, &p.Draft, &p.CPU, &p.Overlapped} {
		*v *= f
	}
}

// Add sums q into p, a run's split, keeping what overlapped.
func (p *StepParts) Add(q StepParts) {
	if q.overlap {
		q.Overlapped = min(q.GPU(), q.CPU)
	}
	p.Dense += q.Dense
	p.Experts += q.Experts
	p.Attention += q.Attention
	p.AllReduce += q.AllReduce
	p.GEMMFloors += q.GEMMFloors
	p.SmallKernels += q.SmallKernels
	p.Launch += q.Launch
	p.Draft += q.Draft
	p.CPU += q.CPU
	p.Overlapped += q.Overlapped
}

func (m *Roofline) denseDequant() float64 { return orOne(m.DenseDequant) }

// orOne reads an unset share (0) as 1.
func orOne(v float64) float64 {
	if v > 0 {
		return v
	}
	return 1
}

// expertTime is the routed experts' part of a step of tokens: their
// grouped GEMMs, each the longer of its math (at the grouped share for the
// tokens each touched expert gets) and its read of the experts touched,
// plus the activations the permute, the two GEMMs, the activation function
// and the top-k sum move (fused_moe: the permuted input read, the gate-up
// output written and read, the activation written and read, the down
// output written and read back by the sum; about 3 × hidden + 5 ×
// intermediate values a token-expert pair).
func (m *Roofline) expertTime(tokens float64) float64 {
	if m.RoutedParams == 0 || tokens == 0 {
		return 0
	}
	touched := m.expertsTouched(tokens)
	// The activations a token-expert pair moves (the permuted input, the
	// gate-up output, the activation, the down output written and summed).
	readShare, work, perPair := touched, 1.0, 3*m.MoEHidden+5*m.MoEInter
	if n := m.ExpertParallel; n > 1 {
		readShare, work = m.busiestRank(tokens, touched)
		// A rank reads the input of its own experts' pairs only; but
		// fused_moe's kernel writes zeros for the blocks of the experts
		// an expert map marks as another rank's (write_zeros_to_output),
		// in the gate-up output and the down output, the activation runs
		// over the whole gate-up output, and the top-k sum reads every
		// pair's: every pair moves the whole expert width's intermediates
		// and two hidden-wide rows.
		perPair = 2*m.MoEHidden + 5*m.MoEInter + m.MoEHidden*work/float64(n)
	}
	// Each touched expert's tokens are computed in tiles of rows: an
	// expert with few tokens computes a whole tile, its weights' loads
	// amortised over the few rows it has.
	perExpert := tokens * float64(m.TopK) / (float64(m.Experts) * max(touched, 1e-9))
	pad := paddedRows(perExpert, m.ExpertKernel.tileRows(perExpert)) / perExpert
	peak := m.ExpertPeak
	if peak == 0 {
		peak = m.PeakFLOPs
	}
	deq := orOne(m.ExpertDequant)
	plateau := m.GroupedPlateau
	if plateau == 0 {
		plateau = m.GEMMEfficiency
	}
	share := plateau * deq
	flops := 2 * m.RoutedParams * tokens * pad * work
	if k := m.ExpertKHalf; k > 0 && m.MoEInter > 0 && m.MoEHidden > 0 {
		// A tile's main loop walks the reduction dimension K a block at a
		// time behind a pipeline a few blocks deep, whose filling and
		// draining do no math: a GEMM of reduction K runs at K / (K +
		// k) of its share. The gated experts' gate-up GEMM (two thirds
		// of their FLOPs) reduces over the hidden size, the down GEMM
		// (one third) over the expert's width on this rank, which tensor
		// parallelism narrows (Qwen3-235B's 1,536 is 192 at TP 8).
		flops *= 2.0/3*(m.MoEHidden+k)/m.MoEHidden + 1.0/3*(m.MoEInter+k)/m.MoEInter
	}
	read := m.ExpertBytes * readShare
	act := float64(m.MoELayers) * tokens * float64(m.TopK) * perPair * m.ActBytes
	return max(flops/(peak*share), read/(m.Bandwidth*m.BandwidthEfficiency*orOne(m.ExpertRead))) + act/(m.Bandwidth*m.BandwidthEfficiency)
}

// PipelineSend is what a pipeline stage takes to hand batch b's
// activations (a token's hidden state, and its residual with it) to the
// next stage: one NCCL send over the node's link, or over the network
// when the stages span nodes, where the slowest stage's send crosses it.
func (m *Roofline) PipelineSend(b Batch) float64 {
	return sendTime(2*float64(b.Tokens)*m.AllReduceBytesPerToken, m.fabricOf(m.TP*max(m.Stages, 1)))
}

// fabricOf is what a group of ranks spanning gpus GPUs meets over: vLLM
// places the tensor-parallel ranks innermost, then the pipeline's stages,
// then the data-parallel engines, so a tensor-parallel group spans TP
// GPUs, a pipeline TP × PP and a data-parallel group all of them.
func (m *Roofline) fabricOf(gpus int) fabric {
	return fabric{link: m.Link, nvlink: m.NVLink, amd: m.AMD, nodes: m.NodeGPUs > 0 && gpus > m.NodeGPUs}
}

// CrossesNodes reports whether any group of m's ranks meets over the
// network between nodes.
func (m *Roofline) CrossesNodes() bool {
	return m.fabricOf(m.TP * max(m.Stages, 1) * max(m.DataParallel, 1)).nodes
}

// PipelineShare is the share of a pass the slowest of stages pipeline
// stages runs: vLLM splits the layers as get_pp_indices does (layers /
// stages each, the remainder one a stage from the second-to-last back,
// since the last holds the LM head), and the last stage also runs the LM
// head, weighed here by its parameters against the layers' (a pass is
// mostly its weights' read or its GEMMs' math, both in proportion).
// Llama-3.1-70B at 2 stages: 40 layers each, the head 1.5% of the
// parameters, the last stage 0.5075 of a pass; Qwen3-14B at 3: 13, 14 and
// 13 layers and a 5.6% head, the last stage 0.3625 against an even 0.333
// (TestPipelineShare).
func (m *Roofline) PipelineShare(stages int) float64 {
	if stages <= 1 || m.Layers <= 0 {
		return 1
	}
	layers := m.Layers
	if stages > layers {
		stages = layers
	}
	total := m.LinearParams + m.RoutedParams + m.HeadParams
	h := 0.0
	if total > 0 {
		h = m.HeadParams / total
	}
	per := layers / stages
	rest := layers % stages
	most := 0.0
	for i := range stages {
		n := per
		// The remainder's layers go to the stages before the last:
		// stages-2, stages-3, ... (vllm/distributed/utils.py).
		if i < stages-1 && i >= stages-1-rest {
			n++
		}
		share := float64(n) / float64(layers) * (1 - h)
		if i == stages-1 {
			share += h
		}
		most = max(most, share)
	}
	return most
}

// busiestRank is what the busiest of ExpertParallel ranks holding whole
// experts does in a step of tokens whose mean share of experts touched
// is touched: the share of its own experts it reads, and its token-expert
// pairs against a rank's mean. With routing spread at random, a rank's
// count of its E/n experts touched is binomial (E/n, touched) and its
// pairs binomial (tokens × TopK, 1/n); the busiest of n lies about the
// expected maximum of n standard normals (expectedMaxNormal) standard
// deviations above the mean. Tensor-parallel ranks, which each hold a
// slice of every expert, do equal work; whole experts spread over ranks
// leave a decode of a few tokens with a rank reading far more than the
// mean (DeepSeek-V3 at TP 8 with expert parallelism, 4 tokens: 6.4 of a
// rank's 32 experts against 3.8 on average), a large prefill with all
// ranks alike.
func (m *Roofline) busiestRank(tokens, touched float64) (readShare, work float64) {
	n := float64(m.ExpertParallel)
	z := expectedMaxNormal(m.ExpertParallel)
	local := float64(m.Experts) / n
	readShare = min(1, touched+z*math.Sqrt(local*touched*(1-touched))/local)
	pairs := tokens * float64(m.TopK) / n
	if pairs <= 0 {
		return readShare, 1
	}
	return readShare, min(n, 1+z*math.Sqrt(pairs*(1-1/n))/pairs)
}

// expectedMaxNormal is the expected largest of n independent standard
// normal variables: 0 for one, 0.564 for two, 1.424 for eight (the
// integral of x · n φ(x) Φ(x)^(n−1), by the trapezoid rule over ±8
// standard deviations; tabulated up to maxNormalTable, Blom's
// Φ⁻¹((n − 0.375)/(n + 0.25)) past it, scaled to meet the table).
func expectedMaxNormal(n int) float64 {
	switch {
	case n <= 1:
		return 0
	case n <= maxNormalTable:
		return normalMaxTable()[n]
	}
	// Blom's, scaled to meet the table where it ends.
	return blom(n) * normalMaxTable()[maxNormalTable] / blom(maxNormalTable)
}

// blom is Blom's approximation of the expected largest of n standard
// normals.
func blom(n int) float64 {
	return math.Sqrt2 * math.Erfinv(2*(float64(n)-0.375)/(float64(n)+0.25)-1)
}

const maxNormalTable = 256

var normalMaxTable = sync.OnceValue(func() []float64 {
	t := make([]float64, maxNormalTable+1)
	const lo, hi, steps = -8.0, 8.0, 1600
	h := (hi - lo) / steps
	for n := 2; n <= maxNormalTable; n++ {
		sum := 0.0
		for i := 0; i <= steps; i++ {
			x := lo + float64(i)*h
			phi := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
			cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
			f := x * float64(n) * phi * math.Pow(cdf, float64(n-1))
			if i == 0 || i == steps {
				f /= 2
			}
			sum += f
		}
		t[n] = sum * h
	}
	return t
})

// attention is b's attention work: the FLOPs of its prefill chunks' query
// × key pairs and the cache bytes its decodes read, the full and the
// windowed layers together.
func (m *Roofline) attention(b Batch) (pairFLOPs, cacheBytes float64) {
	full := m.prefillPairs(b)
	pairFLOPs = m.AttentionFLOPsPerPair * float64(full)
	cacheBytes = m.KVBytesPerToken * float64(m.decodeContext(b))
	for _, w := range m.Windows {
		pairs, context := w.within(b, full)
		pairFLOPs += w.FLOPsPerPair * float64(pairs)
		cacheBytes += w.KVBytesPerToken * float64(context)
	}
	return pairFLOPs, cacheBytes
}

// WindowAttention is the layers of one sliding window (or one chunk of
// chunked local attention), per GPU.
type WindowAttention struct {
	Window  int64
	Chunked bool
	// FLOPsPerPair and KVBytesPerToken are those of AttentionFLOPsPerPair
	// and KVBytesPerToken over these layers.
	FLOPsPerPair, KVBytesPerToken float64
}

// within is the query × key pairs of b's prefill chunks and the keys its
// decodes read in these layers: a query at position i meets min(i, W)
// keys in a sliding window, the ((i − 1) mod W) + 1 of its own chunk in
// chunked local attention. A batch without its chunks (a measured step)
// is priced as full attention, fullPairs and no cache read, as before the
// windows were told apart.
func (w WindowAttention) within(b Batch, fullPairs int64) (pairs, context int64) {
	if b.Chunks == nil {
		return fullPairs, 0
	}
	for _, c := range b.Chunks {
		if c.New == 1+c.Drafts {
			// A decode reads the window before its last query once, and
			// each draft one key more.
			context += w.keys(c.Computed+c.New, c.Computed+c.New) + c.Drafts
		} else {
			pairs += w.keys(c.Computed+1, c.Computed+c.New)
		}
	}
	return pairs, context
}

// keys sums the keys the queries at positions lo..hi (1-based) meet.
func (w WindowAttention) keys(lo, hi int64) int64 {
	W := max(w.Window, 1)
	var n int64
	if w.Chunked {
		for i := lo; i <= hi; {
			off := (i-1)%W + 1 // the query's place in its chunk
			end := min(hi, i+W-off)
			k := end - i + 1
			n += (2*off + k - 1) * k / 2
			i = end + 1
		}
		return n
	}
	if lo <= W {
		top := min(hi, W)
		n += (lo + top) * (top - lo + 1) / 2
		lo = top + 1
	}
	if lo <= hi {
		n += (hi - lo + 1) * W
	}
	return n
}

// kernelFloors is what a step's GEMMs and its kernels of negligible work
// take whatever their work; fixedKernelTime the two together.
func (m *Roofline) kernelFloors() (gemms, small float64) {
	return m.GEMMKernels * m.GEMMFloor, m.SmallKernels * m.KernelFloor
}

func (m *Roofline) fixedKernelTime() float64 {
	g, k := m.kernelFloors()
	return g + k
}

// prefillPairs and decodeContext read a batch that only gives the totals
// (a measured step written before the split existed) as all prefill when
// it has more tokens than requests, else all decode.
func (m *Roofline) prefillPairs(b Batch) int64 {
	if b.Decodes == 0 && b.PrefillPairs == 0 && b.Tokens > int64(b.Requests) {
		return b.AttentionPairs
	}
	return b.PrefillPairs
}

func (m *Roofline) decodeContext(b Batch) int64 {
	if b.Decodes == 0 && b.PrefillPairs == 0 && b.Tokens <= int64(b.Requests) {
		return b.ContextTokens
	}
	return b.DecodeContext
}

// expertsTouched is the expected share of a layer's routed experts that
// tokens, each choosing TopK of Experts at random, reach.
func (m *Roofline) expertsTouched(tokens float64) float64 {
	if m.Experts <= 0 || m.ExpertBytes == 0 {
		return 0
	}
	return 1 - math.Pow(1-float64(m.TopK)/float64(m.Experts), tokens)
}

const (
	// eagerLaunchPerLayer is the CPU time PyTorch takes to launch one
	// decoder layer's kernels without a CUDA graph, about 15 kernels at 5–10
	// µs each. Not fitted (the training runs use CUDA graphs).
	eagerLaunchPerLayer = 100e-6
	// piecewiseLaunchPerLayer is the CPU time of one layer of a piecewise
	// CUDA graph: the replay of the piece before its attention
	// (cudaGraphLaunch, a few µs) and the attention op run eagerly through
	// PyTorch's dispatcher (about 10 µs), which launches the cache write
	// and the attention kernel (5 µs each). Not fitted: every training row
	// that runs piecewise steps runs them at 100 tokens or more, where the
	// GPU's part of a layer is ten times longer and the launches hide.
	piecewiseLaunchPerLayer = 25e-6
	// graphKernelFloor is the least time a kernel of negligible work holds
	// the GPU inside a CUDA graph: the gap before it and its blocks'
	// launch, a memory round trip and teardown, about 2–4 µs on Ampere and
	// Hopper in profiles of vLLM's decode steps (an RMSNorm of one row, the
	// rotary embedding, the cache write). Not fitted: the training runs are
	// all one model, where this is a constant the engine's CPU time per step
	// absorbs.
	graphKernelFloor = 3e-6
)

// smallKernels counts the kernels of negligible work in one step of s, on
// every rank (tensor parallelism splits their work, not their number),
// read from vLLM's layer code:
//   - every decoder layer 6: the fused residual add and RMSNorm before
//     attention and before the MLP, the rotary embedding, the write of the
//     new keys and values into the paged cache, the attention kernel (its
//     cache read is priced apart) and the MLP's activation (silu_and_mul);
//   - a MoE layer 4 more (fused_moe/layer.py): the router's GEMM (hidden ×
//     experts), the top-k softmax, moe_align_block_size and the sum of
//     the top-k outputs;
//   - an MLA layer 3 more (mla/common.py): the latent's RMSNorm and the
//     batched matmuls with W_UK and W_UV around the attention kernel;
//   - weights on a path with quantized activations (native FP8, NVFP4 on
//     Blackwell) one more before every GEMM input (Fp8LinearMethod's
//     scaled_fp8_quant or per_token_group_quant_fp8 for block scales,
//     scaled_fp4_quant): the attention's 2 (qkv, o; MLA's 3: the fused
//     q_a/kv_a down-projection, q_b, o), the dense MLP's or the shared
//     experts' 2 (gate_up, down), and fused_moe's 2 for FP8 experts (the
//     input before w13, the activation before w2). Weight-only paths
//     (Marlin, matmul_ogs) keep BF16 activations and add none.
func smallKernels(s model.Spec, dense, experts quantPath) float64 {
	n := 0
	for i := range s.Layers {
		n += 6
		moe := s.IsMoELayer(i)
		if moe {
			n += 4
		}
		mla := s.LayerKind(i).Kind == model.MLA
		if mla {
			n += 3
		}
		if dense.quantizesActivations() {
			if mla {
				n += 3
			} else {
				n += 2
			}
			if !moe || (s.MoE != nil && s.MoE.Shared > 0) {
				n += 2
			}
		}
		if moe && experts.quantizesActivations() {
			n += 2
		}
	}
	return float64(n)
}

// gemmKernels counts the GEMM kernels in one step of s, on every rank,
// read from vLLM's layer code: in every decoder layer the attention's
// input and output projections (qkv_proj and o_proj; MLA's three: the
// fused q_a/kv_a down-projection, or q_proj and kv_a_proj without a query
// LoRA, then q_b_proj and o_proj; a linear-attention or state-space
// layer's in and out projections likewise), then the dense MLP's gate-up
// and down projections, or in a MoE layer fused_moe's two grouped GEMMs
// and the shared experts' two; and the LM head once. The router's GEMM is
// a kernel of negligible work (smallKernels).
func gemmKernels(s model.Spec) float64 {
	n := 1
	for i := range s.Layers {
		n += 2
		if s.LayerKind(i).Kind == model.MLA {
			n++
		}
		n += 2
		if s.IsMoELayer(i) && s.MoE != nil && s.MoE.Shared > 0 {
			n += 2
		}
	}
	return float64(n)
}

// noPerf says why a device has no datasheet figures, and what to do: a
// step time of one's own (a decode step is what loadtest's ITL p50 reads
// on a real server), or a catalog GPU whose figures are known.
func noPerf(d gpu.Device) error {
	fixed := "give --step-time fixed:DURATION, a step's time (loadtest against a real server measures one: its ITL p50 is a decode step)"
	major, _ := gpu.ParseCapability(d.ComputeCapability)
	switch {
	case d.MIG != "":
		return fmt.Errorf("no datasheet throughput for a MIG slice (%s of %s): its share of the GPU's bandwidth is not published; %s, or simulate the whole %s", d.MIG, d.Parent, fixed, d.Parent)
	case d.NominalBytes == 0 && d.Vendor == "":
		return fmt.Errorf("no datasheet throughput for %s, a GPU given by its memory alone: name it with --gpu for a catalog GPU's figures (`headroom gpus`), or %s", d.Name, fixed)
	case major > 0 && major < 7:
		return fmt.Errorf("no datasheet throughput for %s (compute capability %s): vLLM runs on 7.0 and up, so there is no engine to simulate; pick a newer GPU", d.Name, d.ComputeCapability)
	}
	return fmt.Errorf("no datasheet throughput for %s: %s", d.Name, fixed)
}

// RooflineFor builds the step-time model of a plan: the model's
// parameters, weights and KV per token split over the tensor-parallel
// ranks, on the device's datasheet figures, corrected by c. A step is
// the whole pass through every pipeline stage; the engine splits it over
// the stages and keeps batches in flight (pipeline.go).
func RooflineFor(b memory.Budget, c Calibration) (*Roofline, error) {
	p, ok := gpu.PerfOf(b.Device)
	if !ok {
		return nil, noPerf(b.Device)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("calibration for %s: %v", b.Device.Name, err)
	}
	s := b.Model
	set := b.Settings
	tp := float64(max(set.TensorParallelSize, 1))
	// The windows and their cache per token are memory's (one entry per
	// window); their layers' attention FLOPs are summed below.
	// A rank keeps max(1, KV heads / TP) heads of the model's KV (vLLM
	// replicates KV heads when TP exceeds them), and MLA's whole latent.
	kvShare := 1 / tp
	switch {
	case s.MLA != nil && s.MLA.KVLoraRank > 0:
		// MLA's latent is one per token for all heads: vLLM keeps it whole
		// on every tensor-parallel rank, and each rank's decode reads all
		// of it.
		kvShare = 1
	case s.KVHeads > 0:
		kvShare = float64(max(s.KVHeads/int(tp), 1)) / float64(s.KVHeads)
	}
	// Decode context parallelism keeps 1/dcp of each request's tokens on
	// a rank, which its attention reads; merging the ranks' partial
	// results is not priced.
	kvShare /= float64(max(set.DecodeContextParallelSize, 1))
	var windows []WindowAttention
	for _, kv := range b.ModelSlidingKV() {
		windows = append(windows, WindowAttention{Window: int64(kv.Window), Chunked: kv.Chunked, KVBytesPerToken: float64(kv.BytesPerToken) * kvShare})
	}
	var linear, routed, pairFLOPs, mlaDecode float64
	moeLayers := 0
	for i := range s.Layers {
		lp := s.Layer(i)
		linear += float64(lp.Linear())
		if e := float64(lp.Experts); e > 0 {
			// the routed experts leave the dense GEMMs; a token passes
			// through TopK of them (shared experts stay: a dense MLP)
			linear -= e
			routed += e / float64(s.MoE.Experts) * float64(s.MoE.TopK)
			moeLayers++
		}
		switch k := s.LayerKind(i); k.Kind {
		case model.Full, model.MLA:
			pairFLOPs += 2 * float64(s.Heads) * float64(attnDims(s))
			if k.Kind == model.MLA && s.MLA != nil && s.MLA.KVLoraRank > 0 {
				mlaDecode += 2 * float64(s.Heads) * float64(2*s.MLA.KVLoraRank+s.MLA.QKRopeHeadDim)
			}
		case model.Sliding:
			for j := range windows {
				if w := &windows[j]; w.Window == int64(k.Window) && w.Chunked == k.Chunked {
					w.FLOPsPerPair += 2 * float64(s.Heads) * float64(attnDims(s)) / tp
				}
			}
		}
	}
	head := float64(s.LMHeadParams())
	if head == 0 {
		head = float64(s.EmbeddingParams())
	}
	// Weights in bytes as loaded, the routed experts apart in their own
	// format (memory's count).
	weights := float64(b.WeightsTotal)
	expertBytes := float64(b.ExpertWeightsTotal)
	// A step does not read a vision tower, which runs on images only (in
	// the model's dtype, as memory counts it). The input embedding, which
	// vLLM only gathers the step's rows of, is still counted as read: left
	// out, the fit moved its time into the engine's CPU per step and the
	// cross-validation got worse (sim/README.md, "tried and not adopted").
	unread := float64(s.VisionParams()) * float64(max(b.DtypeBytes, 1))
	kvPerToken := float64(b.ModelKVBytesPerToken) * kvShare
	dense, experts := quantPathOf(denseQuant(s, set.Quantization), b.Device), expertPathOf(s, set, b.Device)
	peakOf := func(q quantPath) float64 {
		if q.FP8 && p.FP8 > 0 {
			return p.FP8
		}
		return p.BF16
	}
	native8 := func(q quantPath) bool { return q.FP8 && p.FP8 > 0 }
	deq := func(q quantPath) float64 {
		switch {
		case q.Dequant && c.DequantShare > 0:
			return c.DequantShare
		case native8(q):
			return c.fp8GEMM()
		}
		return 1
	}
	read := func(q quantPath) float64 {
		if native8(q) {
			return c.fp8Read()
		}
		return 1
	}
	// The experts on this rank at the shapes their kernel allocates
	// (memory.ExpertShapeFor: MXFP4's Marlin and FlashInfer paths pad
	// gpt-oss's 2,880): the weights plan counts them so, and the kernel
	// computes and reads every padded row and column.
	// A MoE model's data-parallel engines split its experts over TP × DP
	// ranks and compute the group's tokens together (DataParallel); a
	// dense model's are independent engines, each priced alone.
	dp := 1
	if s.MoE != nil && s.MoE.Experts > 0 {
		dp = max(set.DataParallelSize, 1)
	}
	one := set
	one.DataParallelSize = dp
	shape := memory.ExpertShapeFor(s, one, b.Device)
	ranks := tp * float64(dp)
	m := &Roofline{
		LinearParams:           linear / tp,
		RoutedParams:           routed / ranks * shape.Pad,
		HeadParams:             head / tp,
		WeightBytes:            (weights - expertBytes - unread) / tp,
		ExpertBytes:            expertBytes / ranks * shape.Pad,
		MoELayers:              moeLayers,
		ActBytes:               float64(max(b.DtypeBytes, 1)),
		GroupedPlateau:         c.groupedPlateau(),
		ExpertKernel:           experts.MoE,
		ExpertKHalf:            c.GroupedKHalf,
		ExpertPeak:             peakOf(experts),
		DenseDequant:           deq(dense),
		ExpertDequant:          deq(experts),
		DenseRead:              read(dense),
		ExpertRead:             read(experts),
		KVBytesPerToken:        kvPerToken,
		MLADecodeFLOPsPerToken: mlaDecode / tp,
		AttentionFLOPsPerPair:  pairFLOPs / tp,
		PeakFLOPs:              peakOf(dense),
		Bandwidth:              p.Bandwidth,
		Layers:                 s.Layers,
		TP:                     int(tp),
		AllReduceBytesPerToken: float64(s.Hidden) * float64(max(b.DtypeBytes, 1)),
		Link:                   p.Link,
		NVLink:                 p.NVLink,
		AMD:                    b.Device.Vendor == "amd",
		NodeGPUs:               b.GPUsPerNode,
		Stages:                 max(set.PipelineParallelSize, 1),
		LaunchPerLayer:         eagerLaunchPerLayer,
		FullDecodeGraphs:       vllm.FullDecodeGraphs(set),
		NoPiecewise:            !vllm.PiecewiseGraphs(set),
		PiecewisePerLayer:      piecewiseLaunchPerLayer,
		SmallKernels:           smallKernels(s, dense, experts),
		KernelFloor:            graphKernelFloor,
		GEMMKernels:            gemmKernels(s),
		GEMMFloor:              c.GEMMFloor,
		GEMMEfficiency:         c.FLOPsEfficiency,
		AttentionEfficiency:    c.attention(),
		BandwidthEfficiency:    c.BandwidthEfficiency,
		KVBandwidthEfficiency:  c.kvBandwidth(),
		StepOverhead:           c.Overhead,
		SeqOverhead:            c.SeqOverhead,
		Overlap:                vllm.AsyncScheduling(set),
		DataParallel:           dp,
	}
	if shape.ExpertParallel {
		m.ExpertParallel = int(ranks)
	}
	if s.MoE != nil {
		m.Experts, m.TopK = s.MoE.Experts, s.MoE.TopK
		m.MoEHidden, m.MoEInter = float64(shape.Hidden), float64(shape.Intermediate)
	}
	m.Windows = windows
	if m.Link <= 0 {
		m.Link = 1
	}
	if vllm.CUDAGraphMode(set) != vllm.GraphModeNone {
		m.GraphTokens = int64(set.MaxCudagraphCaptureSize)
	}
	return m, nil
}

// attnDims is the query-key plus value head width of one attention head.
func attnDims(s model.Spec) int {
	if s.MLA != nil && s.MLA.KVLoraRank > 0 {
		return s.MLA.QKNopeHeadDim + s.MLA.QKRopeHeadDim + s.MLA.VHeadDim
	}
	v := s.VHeadDim
	if v == 0 {
		v = s.HeadDim
	}
	return s.HeadDim + v
}
