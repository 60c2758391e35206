package memory

import (
	"headroom.dev/headroom/model"
)

// LayerTensors lists, in bytes, the parameter tensors one tensor-parallel
// rank holds of decoder layer i, in the order vLLM's decoder layers
// register them: the attention's fused QKV projection (and its bias) and
// output projection, the dense MLP's fused gate-up and down projections,
// the router, the routed experts' w13 and w2, the shared experts, then
// the norms. A quantized linear layer is its packed weights, its scales
// and, for asymmetric integer schemes, its zero points, three tensors.
//
// --cpu-offload-gb moves a rank's parameters to host memory one tensor at
// a time (maybe_offload_to_cpu in vllm/model_executor/models/utils.py),
// and each pinned host allocation is rounded up on its own, so the host
// plan needs the tensors, not their sum. The sharding is splitWeights':
// the two sum to the same bytes. MLA's projections are taken as one
// tensor per kind (down, up, query-output): vLLM fuses some of them and
// not others by release, which moves a power-of-two rounding, not a sum.
func LayerTensors(s model.Spec, i, tp, dtypeBytes int) []int64 {
	if i < 0 || i >= s.Layers {
		return nil
	}
	tp = max(tp, 1)
	p := s.Layer(i)
	f := quantFormat(s.Quant)
	t := float64(tp)
	d := float64(dtypeBytes)
	var out []int64
	add := func(bytes float64) {
		if b := int64(bytes); b > 0 {
			out = append(out, b)
		}
	}
	// linear adds one linear layer of params parameters on this rank.
	linear := func(params float64, expert bool) {
		if !f.quantized || (f.expertsOnly && !expert) {
			add(params * d)
			return
		}
		add(params * f.packedBytes)
		add(params * f.scaleBytes)
		add(params * f.zeroBytes)
	}
	kvShare := 1 / t
	if s.KVHeads > 0 && tp > s.KVHeads {
		kvShare = 1 / float64(s.KVHeads)
	}
	// gated is the gate-up share of an MLP's parameters (gate and up
	// fused, down apart); a two-matrix MLP splits in halves.
	gated := 1.0 / 2
	if s.GatedMLP {
		gated = 2.0 / 3
	}
	if p.MLADown > 0 || p.MLAUp > 0 {
		linear(float64(p.MLADown), false)
		linear(float64(p.MLAUp)/t, false)
		linear(float64(p.QO)/t, false)
	} else {
		// Query and output projections are the same size; the query
		// is fused with the key and value projections.
		linear(float64(p.QO)/2/t+float64(p.KV)*kvShare, false)
		add(float64(p.Bias) / t * d)
		linear(float64(p.QO)/2/t, false)
	}
	if p.MLP > 0 {
		linear(float64(p.MLP)*gated/t, false)
		linear(float64(p.MLP)*(1-gated)/t, false)
	}
	add(float64(p.Router) * d)
	if p.Experts > 0 {
		linear(float64(p.Experts)*gated/t, true)
		linear(float64(p.Experts)*(1-gated)/t, true)
	}
	if p.Shared > 0 {
		linear(float64(p.Shared)*gated/t, false)
		linear(float64(p.Shared)*(1-gated)/t, false)
	}
	add(float64(p.Norms) * d)
	return out
}

// StageLayers are the decoder layers [first, last) of each of pp pipeline
// stages, first to last, as vLLM splits them (get_pp_indices).
func StageLayers(layers, pp int) [][2]int {
	st := stages(layers, pp)
	out := make([][2]int, len(st))
	for i, s := range st {
		out[i] = [2]int{s.first, s.last}
	}
	return out
}
