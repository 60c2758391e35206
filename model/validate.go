package model

import (
	"fmt"
	"math"
)

// Validate checks the invariants the planner relies on. Every loader calls
// it; a Spec built by hand should pass it too.
func (s Spec) Validate() error {
	name := s.ID
	if name == "" {
		name = s.Architecture
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model %q: %s: check its config.json", name, fmt.Sprintf(format, a...))
	}
	type bound struct {
		field     string
		v, lo, hi int64
	}
	inRange := func(bs ...bound) error {
		for _, b := range bs {
			if b.v < b.lo || b.v > b.hi {
				return bad("%s = %d is out of range (%d to %d)", b.field, b.v, b.lo, b.hi)
			}
		}
		return nil
	}
	if err := inRange(
		bound{"layers", int64(s.Layers), 1, maxLayers},
		bound{"hidden", int64(s.Hidden), 1, maxWidth},
		bound{"intermediate", int64(s.Intermediate), 1, maxWidth},
		bound{"heads", int64(s.Heads), 1, maxHeads},
		bound{"kv_heads", int64(s.KVHeads), 1, int64(max(s.Heads, 1))},
		bound{"head_dim", int64(s.HeadDim), 1, maxWidth},
		bound{"v_head_dim", int64(s.VHeadDim), 0, maxWidth},
		bound{"vocab", int64(s.Vocab), 1, maxVocab},
		bound{"max_position_embeddings", int64(s.MaxPositions), 1, maxPositions},
		bound{"rotary_dim", int64(s.RotaryDim), 0, int64(max(s.HeadDim, 0))},
		bound{"rope_positions", int64(s.RopePositions), 0, maxRopePositions},
		bound{"rope_tables", int64(s.RopeTables), 0, 2},
		bound{"checkpoint_bytes", s.CheckpointBytes, 0, math.MaxInt64},
	); err != nil {
		return err
	}
	if s.Heads%s.KVHeads != 0 {
		return bad("%d heads cannot be grouped over %d KV heads", s.Heads, s.KVHeads)
	}
	if (s.RotaryDim > 0) != (s.RopeTables > 0) || (s.RopeTables > 0 && s.RopePositions == 0) {
		return bad("rotary_dim %d, rope_tables %d and rope_positions %d disagree", s.RotaryDim, s.RopeTables, s.RopePositions)
	}
	switch s.Dtype {
	case "bfloat16", "float16", "float32":
	default:
		return bad("dtype %q is not bfloat16, float16 or float32", s.Dtype)
	}
	if len(s.Attention) != s.Layers {
		return bad("%d attention entries for %d layers", len(s.Attention), s.Layers)
	}
	for i, l := range s.Attention {
		ok := false
		switch l.Kind {
		case Full, NoMixer:
			ok = l.Window == 0 && l.StateBytes == 0 && !l.Chunked
		case Sliding:
			ok = l.Window > 0 && l.Window <= maxPositions && l.StateBytes == 0
		case MLA:
			ok = s.MLA != nil && l.Window == 0 && l.StateBytes == 0 && !l.Chunked
		case Linear:
			ok = l.Window == 0 && l.StateBytes >= 0 && l.SSMBytes >= 0 && l.SSMBytes <= l.StateBytes && !l.Chunked &&
				l.Groups >= 0 && l.GroupConvBytes >= 0 && l.GroupConvBytes*int64(max(l.Groups, 1)) <= l.StateBytes
		}
		if !ok {
			return bad("layer %d has an invalid attention entry %+v", i, l)
		}
	}
	if m := s.MoE; m != nil {
		if err := inRange(
			bound{"moe.experts", int64(m.Experts), 2, maxExperts},
			bound{"moe.top_k", int64(m.TopK), 1, int64(max(m.Experts, 1))},
			bound{"moe.intermediate", int64(m.Intermediate), 1, maxWidth},
			bound{"moe.shared", int64(m.Shared), 0, maxExperts},
			bound{"moe.shared_inter", int64(m.SharedInter), 0, maxExperts * maxWidth},
			bound{"moe.dense_layers", int64(m.DenseLayers), 0, int64(s.Layers)},
			bound{"moe.layer_freq", int64(m.LayerFreq), 0, int64(s.Layers)},
		); err != nil {
			return err
		}
		if (m.Shared > 0) != (m.SharedInter > 0) {
			return bad("%d shared experts with a total width of %d", m.Shared, m.SharedInter)
		}
	}
	if m := s.MLA; m != nil {
		if err := inRange(
			bound{"mla.kv_lora_rank", int64(m.KVLoraRank), 1, maxWidth},
			bound{"mla.q_lora_rank", int64(m.QLoraRank), 0, maxWidth},
			bound{"mla.qk_rope_head_dim", int64(m.QKRopeHeadDim), 1, maxWidth},
			bound{"mla.qk_nope_head_dim", int64(m.QKNopeHeadDim), 0, maxWidth},
			bound{"mla.v_head_dim", int64(m.VHeadDim), 1, maxWidth},
		); err != nil {
			return err
		}
	}
	if q := s.Quant; q != nil {
		if q.Method == "" {
			return bad("quantization has no method")
		}
		if err := inRange(
			bound{"quantization.bits", int64(q.Bits), 0, 16},
			bound{"quantization.group_size", int64(q.GroupSize), 0, maxWidth},
		); err != nil {
			return err
		}
	}
	if v := s.Vision; v != nil {
		if v.Params < 0 || v.Hidden < 0 || v.Layers < 0 || v.Intermediate < 0 || v.ImageTokens < 0 || v.PatchTokens < 0 {
			return bad("vision encoder has a negative size %+v", *v)
		}
	}
	return nil
}
