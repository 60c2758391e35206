package memory

import (
	"strings"

	"headroom.dev/headroom/model"
)

// stage is the slice of the model one pipeline-parallel worker holds.
type stage struct {
	first, last int // decoder layers [first, last)
	isFirst     bool
	isLast      bool
}

// stages splits the decoder layers over pp workers as vLLM's get_pp_indices
// does (vllm/distributed/utils.py): every stage gets layers // pp, and the
// remainder goes one each to the stages before the last, counting back from
// the second-to-last.
func stages(layers, pp int) []stage {
	if pp < 1 {
		pp = 1
	}
	sizes := make([]int, pp)
	for i := range sizes {
		sizes[i] = layers / pp
	}
	for i := 2; i < layers%pp+2; i++ {
		sizes[pp-i]++
	}
	out := make([]stage, pp)
	start := 0
	for i, n := range sizes {
		out[i] = stage{first: start, last: start + n, isFirst: i == 0, isLast: i == pp-1}
		start += n
	}
	return out
}

// linearFormat says how many bytes one linear-layer weight costs.
type linearFormat struct {
	bytesPerParam float64
	// packedBytes, scaleBytes and zeroBytes split bytesPerParam into the
	// tensors a quantized linear layer is stored as (LayerTensors): the
	// packed weights, one scale per group, one zero point per group.
	packedBytes, scaleBytes, zeroBytes float64
	// expertsOnly is true when only routed experts are quantized (gpt-oss's
	// MXFP4 checkpoints keep attention and embeddings in bf16).
	expertsOnly bool
	// quantized is true when the linear layers are stored narrower than the
	// compute dtype.
	quantized bool
}

// quantFormat returns the storage of quantized linear weights: the packed
// weights plus one scale per group (and zero points for asymmetric integer
// schemes). Scales are fp16 for integer formats (AWQ/GPTQ/compressed int),
// fp32 for fp8 blocks/channels, one byte (E8M0/FP8) for MXFP4/NVFP4.
func quantFormat(q *model.Quantization) linearFormat {
	if q == nil || q.Bits == 0 || q.Bits >= 16 {
		return linearFormat{}
	}
	f := linearFormat{packedBytes: float64(q.Bits) / 8, quantized: true}
	method := strings.ToLower(q.Method)
	scaleBytes := 2.0
	switch {
	case method == "mxfp4":
		scaleBytes = 1
		f.expertsOnly = true
	case q.Float && q.Bits == 4:
		scaleBytes = 1
	case q.Float:
		scaleBytes = 4
	}
	if q.GroupSize > 0 {
		f.scaleBytes = scaleBytes / float64(q.GroupSize)
		if !q.Float && !q.Symmetric {
			f.zeroBytes = float64(q.Bits) / 8 / float64(q.GroupSize)
		}
	}
	f.bytesPerParam = f.packedBytes + f.scaleBytes + f.zeroBytes
	return f
}

// weightParts are one worker's weights split by how they are stored.
type weightParts struct {
	linear      float64 // quantizable linear parameters on this rank
	experts     float64 // routed-expert parameters on this rank (part of linear)
	dense       float64 // embeddings, lm_head, norms, biases, routers, vision on this rank
	totalLinear float64 // the same as linear/experts/dense for the whole model
	totalExpert float64
	totalDense  float64
}

// layerParams counts every decoder layer's parameters once per plan.
func layerParams(s model.Spec) []model.LayerParams {
	out := make([]model.LayerParams, s.Layers)
	for i := range out {
		out[i] = s.Layer(i)
	}
	return out
}

// splitWeights counts the parameters one TP rank of stage st holds;
// layers are the model's per-layer counts (layerParams).
//
// Source: vllm-memory.md §2.2 and §5 — vocab-parallel embeddings and LM head
// (vocabulary padded to a multiple of 64, then split), column/row-parallel
// projections and experts split by TP, KV projections replicated when TP
// exceeds the KV heads, MLA down projections, norms and routers replicated.
// The vision tower is counted as split by TP (vLLM shards most encoders).
func splitWeights(s model.Spec, layers []model.LayerParams, st stage, tp int) weightParts {
	var w weightParts
	t := float64(tp)
	vocabPadded := float64((s.Vocab + 63) / 64 * 64)
	embed := vocabPadded * float64(s.Hidden)
	w.totalDense = float64(s.EmbeddingParams()+s.LMHeadParams()+s.VisionParams()) + float64(s.Hidden)
	if st.isFirst {
		w.dense += embed/t + float64(s.VisionParams())/t
	}
	if st.isLast {
		w.dense += float64(s.Hidden)
		if s.LMHeadParams() > 0 || !st.isFirst {
			// A tied LM head on a later stage than the embedding holds its own copy.
			w.dense += embed / t
		}
	}
	kvShare := 1 / t
	if s.KVHeads > 0 && tp > s.KVHeads {
		kvShare = 1 / float64(s.KVHeads)
	}
	for i, p := range layers {
		sharded := float64(p.QO + p.MLAUp + p.MLP + p.Shared)
		w.totalLinear += float64(p.Linear())
		w.totalExpert += float64(p.Experts)
		w.totalDense += float64(p.Bias + p.Router + p.Norms)
		if i < st.first || i >= st.last {
			continue
		}
		w.linear += sharded/t + float64(p.KV)*kvShare + float64(p.MLADown) + float64(p.Experts)/t
		w.experts += float64(p.Experts) / t
		w.dense += float64(p.Bias)/t + float64(p.Router+p.Norms)
	}
	return w
}

// resizeExperts scales the rank's routed experts (their share among the
// data-parallel ranks, and the shapes their kernel allocates:
// ExpertShape.Pad); the model's totals stay the checkpoint's.
func (w *weightParts) resizeExperts(scale float64) {
	delta := w.experts * (scale - 1)
	w.experts += delta
	w.linear += delta
}

// bytes turns parameter counts into bytes for the given compute dtype and
// linear-layer format; whole selects the model total instead of the rank.
func (w weightParts) bytes(dtypeBytes int, f linearFormat, whole bool) float64 {
	linear, experts, dense := w.linear, w.experts, w.dense
	if whole {
		linear, experts, dense = w.totalLinear, w.totalExpert, w.totalDense
	}
	d := float64(dtypeBytes)
	switch {
	case !f.quantized:
		return (linear + dense) * d
	case f.expertsOnly:
		return experts*f.bytesPerParam + (linear-experts+dense)*d
	default:
		return linear*f.bytesPerParam + dense*d
	}
}

// expertBytes is the whole model's routed experts in bytes, in the
// linear layers' format (experts are linear layers, quantized whenever
// any are).
func (w weightParts) expertBytes(dtypeBytes int, f linearFormat) float64 {
	if f.quantized {
		return w.totalExpert * f.bytesPerParam
	}
	return w.totalExpert * float64(dtypeBytes)
}

// ropeCacheBytes is the rotary cos/sin table vLLM keeps on every GPU:
// positions × rotary_dim elements in the model dtype, per distinct table.
// Measured: Llama-3.1-8B logs 14.99 GiB for 14.96 GiB of parameters
// (131072 × 128 × 2 B = 32 MiB); Gemma-3 (linear scaling ×8, two tables)
// logs ~0.57 GiB above its parameters (1,048,576 × 256 × 2 B + 131072 ×
// 256 × 2 B).
func ropeCacheBytes(s model.Spec, dtypeBytes int) int64 {
	if s.RotaryDim == 0 {
		return 0
	}
	pos := s.RopePositions
	if pos == 0 {
		pos = s.MaxPositions
	}
	tables := s.RopeTables
	if tables == 0 {
		tables = 1
	}
	if tables == 2 && s.MaxPositions > 0 && pos > s.MaxPositions {
		// One scaled (global) table and one unscaled (local) table.
		return (int64(pos) + int64(s.MaxPositions)) * int64(s.RotaryDim) * int64(dtypeBytes)
	}
	return int64(tables) * int64(pos) * int64(s.RotaryDim) * int64(dtypeBytes)
}
