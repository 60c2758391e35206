package model

import (
	"errors"
	"fmt"
	"math"
)

// parseAttention decides each decoder layer's attention kind.
func parseAttention(c *conf, fam string, s *Spec) ([]Layer, error) {
	n := s.Layers
	layers := make([]Layer, n)
	all := func(l Layer) []Layer {
		for i := range layers {
			layers[i] = l
		}
		return layers
	}
	if s.MLA != nil {
		return all(Layer{Kind: MLA}), nil
	}
	// window reads sliding_window; ok is false when it is null or ≤ 0.
	window := func() (int, bool, error) {
		w, ok, err := c.int(math.MinInt32, maxPositions, "sliding_window", "sliding_window_size")
		return w, ok && w > 0, err
	}
	needWindow := func(why string) (int, error) {
		w, ok, err := window()
		if err == nil && !ok {
			err = fmt.Errorf("config.json: %s but sliding_window is missing or not positive: check the file", why)
		}
		return w, err
	}

	// layer_types, written by recent transformers for gpt-oss, Gemma 2/3,
	// Qwen 2/3, Qwen3-Next and Qwen3.5, is the authority when present.
	if types, name, ok, err := c.list("layer_types"); err != nil {
		return nil, err
	} else if ok {
		if len(types) != n {
			return nil, fmt.Errorf("config.json: %s lists %d layers but num_hidden_layers is %d: check the file", name, len(types), n)
		}
		for i, t := range types {
			ts, _ := t.(string)
			switch ts {
			case "full_attention", "attention":
				layers[i] = Layer{Kind: Full}
			case "sliding_attention":
				w, err := needWindow(name + " has sliding_attention")
				if err != nil {
					return nil, err
				}
				layers[i] = Layer{Kind: Sliding, Window: w}
			case "chunked_attention":
				w, err := c.need(1, maxPositions, "attention_chunk_size")
				if err != nil {
					return nil, err
				}
				layers[i] = Layer{Kind: Sliding, Window: w, Chunked: true}
			case "linear_attention":
				b, err := gatedDeltaNetState(c, s.Dtype)
				if err != nil {
					return nil, err
				}
				layers[i] = Layer{Kind: Linear, StateBytes: b}
			case "mamba":
				l, err := mambaState(c, fam, s)
				if err != nil {
					return nil, err
				}
				layers[i] = l
			default:
				return nil, fmt.Errorf("config.json: %s[%d] is %s, not an attention kind headroom knows (full_attention, sliding_attention, chunked_attention, linear_attention, mamba)", name, i, describe(t))
			}
		}
		return layers, nil
	}

	switch {
	case fam == "gemma2":
		// transformers Gemma2: even layer indices are sliding, odd are global.
		w, err := needWindow("gemma2 alternates sliding and global layers")
		if err != nil {
			return nil, err
		}
		for i := range layers {
			layers[i] = Layer{Kind: Full}
			if i%2 == 0 {
				layers[i] = Layer{Kind: Sliding, Window: w}
			}
		}
		return layers, nil
	case fam == "gemma3" || fam == "cohere2":
		// transformers Gemma3/Cohere2: layer i is global when
		// (i+1) % sliding_window_pattern == 0 (defaults 6 and 4).
		w, err := needWindow(fam + " interleaves sliding and global layers")
		if err != nil {
			return nil, err
		}
		p, err := c.need(1, maxLayers, "sliding_window_pattern")
		if err != nil {
			return nil, err
		}
		for i := range layers {
			layers[i] = Layer{Kind: Sliding, Window: w}
			if (i+1)%p == 0 {
				layers[i] = Layer{Kind: Full}
			}
		}
		return layers, nil
	case fam == "llama4":
		return llama4Layers(c, layers)
	case fam == "qwen3_next":
		// Qwen3NextConfig: every full_attention_interval-th layer is full
		// attention, the others gated delta-net.
		p, ok, err := c.int(1, maxLayers, "full_attention_interval")
		if err != nil {
			return nil, err
		}
		if !ok {
			p = 4
		}
		b, err := gatedDeltaNetState(c, s.Dtype)
		if err != nil {
			return nil, err
		}
		for i := range layers {
			layers[i] = Layer{Kind: Linear, StateBytes: b}
			if (i+1)%p == 0 {
				layers[i] = Layer{Kind: Full}
			}
		}
		return layers, nil
	case fam == "jamba":
		// JambaConfig.layers_block_type: attention where
		// i % attn_layer_period == attn_layer_offset, Mamba elsewhere.
		period, err := c.need(1, maxLayers, "attn_layer_period")
		if err != nil {
			return nil, err
		}
		offset, err := c.need(0, period-1, "attn_layer_offset")
		if err != nil {
			return nil, err
		}
		mamba, err := mambaState(c, fam, s)
		if err != nil {
			return nil, err
		}
		for i := range layers {
			layers[i] = mamba
			if i%period == offset {
				layers[i] = Layer{Kind: Full}
			}
		}
		return layers, nil
	case fam == "nemotron_h":
		return nemotronHLayers(c, fam, s, layers)
	case qwenFamily(fam):
		// transformers Qwen2Attention: sliding only when use_sliding_window
		// is true, and then only on layers ≥ max_window_layers.
		use, _, err := c.bool("use_sliding_window")
		if err != nil || !use {
			return all(Layer{Kind: Full}), err
		}
		w, ok, err := window()
		if err != nil || !ok {
			return all(Layer{Kind: Full}), err
		}
		from, ok, err := c.int(0, maxLayers, "max_window_layers")
		if err != nil {
			return nil, err
		}
		if !ok {
			from = 0
		}
		for i := range layers {
			layers[i] = Layer{Kind: Full}
			if i >= from {
				layers[i] = Layer{Kind: Sliding, Window: w}
			}
		}
		return layers, nil
	}

	// Everything else follows Mistral v0.1: a non-null sliding_window applies
	// to every layer. vLLM passes the model-level window
	// (ModelConfig.get_sliding_window, which honours use_sliding_window:
	// false) to every Attention layer that sets no window of its own. That
	// includes Phi-3-mini-4k's sliding_window 2047: Phi3ForCausalLM is
	// vLLM's Llama model, whose layers set no per-layer window without
	// layer_types, so the model-level 2047 applies to all of them. This is
	// read from the code paths, not measured.
	if use, ok, err := c.bool("use_sliding_window"); err != nil || (ok && !use) {
		return all(Layer{Kind: Full}), err
	}
	w, ok, err := window()
	if err != nil {
		return nil, err
	}
	if ok {
		return all(Layer{Kind: Sliding, Window: w}), nil
	}
	return all(Layer{Kind: Full}), nil
}

// llama4Layers: transformers Llama4TextConfig.no_rope_layers holds 1 for a
// RoPE layer and 0 for a NoPE (global) layer, by default every fourth layer
// NoPE; vLLM llama4.py gives RoPE layers chunked local attention of
// attention_chunk_size tokens.
func llama4Layers(c *conf, layers []Layer) ([]Layer, error) {
	n := len(layers)
	chunk, ok, err := c.int(0, maxPositions, "attention_chunk_size")
	if err != nil {
		return nil, err
	}
	rope := make([]bool, n)
	l, name, lOK, err := c.list("no_rope_layers")
	if err != nil {
		return nil, err
	}
	if lOK && len(l) > 0 {
		if len(l) != n {
			return nil, fmt.Errorf("config.json: %s lists %d layers but num_hidden_layers is %d: check the file", name, len(l), n)
		}
		for i, v := range l {
			x, err := toInt(v, fmt.Sprintf("%s[%d]", name, i), 0, 1)
			if err != nil {
				return nil, err
			}
			rope[i] = x == 1
		}
	} else {
		interval, iOK, err := c.int(1, maxLayers, "no_rope_layer_interval")
		if err != nil {
			return nil, err
		}
		if !iOK {
			interval = 4
		}
		for i := range rope {
			rope[i] = (i+1)%interval != 0
		}
	}
	for i := range layers {
		layers[i] = Layer{Kind: Full}
		if rope[i] && ok && chunk > 0 {
			layers[i] = Layer{Kind: Sliding, Window: chunk, Chunked: true}
		}
	}
	return layers, nil
}

// nemotronHLayers reads hybrid_override_pattern: one character a layer, M
// for a Mamba-2 mixer, * for attention, - for an MLP and E for an MoE block
// (the last two keep no state).
func nemotronHLayers(c *conf, fam string, s *Spec, layers []Layer) ([]Layer, error) {
	p, ok, err := c.str("hybrid_override_pattern")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("config.json: nemotron_h config has no hybrid_override_pattern: check the file")
	}
	if len(p) != len(layers) {
		return nil, fmt.Errorf("config.json: hybrid_override_pattern has %d layers but num_hidden_layers is %d: check the file", len(p), len(layers))
	}
	var mamba Layer
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case 'M':
			if mamba.Kind == "" {
				if mamba, err = mambaState(c, fam, s); err != nil {
					return nil, err
				}
			}
			layers[i] = mamba
		case '*':
			layers[i] = Layer{Kind: Full}
		case '-', 'E':
			layers[i] = Layer{Kind: NoMixer}
		default:
			return nil, fmt.Errorf("config.json: hybrid_override_pattern[%d] is %q, want M, *, - or E", i, p[i])
		}
	}
	return layers, nil
}

// gatedDeltaNetState is the per-sequence state of one gated delta-net layer
// (Qwen3-Next, Qwen3.5) in bytes, following vLLM's
// MambaStateShapeCalculator.gated_delta_net_state_shape at TP=1:
//
//	conv state     = (2·key_heads·key_dim + value_heads·value_dim) × (conv_kernel − 1)
//	temporal state = value_heads × key_dim × value_dim
//
// both in the model dtype (mamba_cache_dtype "auto"). 0 when the config
// lacks the linear_* keys.
func gatedDeltaNetState(c *conf, dtype string) (int64, error) {
	var v [5]int
	for i, k := range []string{"linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim", "linear_conv_kernel_dim"} {
		x, ok, err := c.int(1, maxWidth, k)
		if err != nil || !ok {
			return 0, err
		}
		v[i] = x
	}
	kh, kd, vh, vd, kernel := int64(v[0]), int64(v[1]), int64(v[2]), int64(v[3]), int64(v[4])
	conv := (2*kh*kd + vh*vd) * (kernel - 1)
	temporal := vh * kd * vd
	return (conv + temporal) * dtypeBytes(dtype), nil
}

// mambaState is one Mamba layer: its per-sequence state in bytes at TP=1,
// in the model dtype, and its SSM (temporal) part, after vLLM's
// MambaStateShapeCalculator:
//
//	Mamba-1 (Jamba):      conv = inner × (d_conv − 1), ssm = inner × d_state,
//	                      inner = mamba_expand × hidden
//	Mamba-2 (Nemotron-H): conv = (inner + 2·n_groups·state) × (conv_kernel − 1),
//	                      ssm = heads × head_dim × state, inner = heads × head_dim
//
// and, for Mamba-2, its groups and one group's conv bytes, which tensor
// parallelism replicates (Layer.StateAt). A layer without state when a key
// is missing.
func mambaState(c *conf, fam string, s *Spec) (Layer, error) {
	read := func(keys ...string) ([]int64, error) {
		out := make([]int64, len(keys))
		for i, k := range keys {
			x, ok, err := c.int(1, maxWidth, k)
			if err != nil || !ok {
				return nil, err
			}
			out[i] = int64(x)
		}
		return out, nil
	}
	b := dtypeBytes(s.Dtype)
	if fam == "jamba" {
		v, err := read("mamba_expand", "mamba_d_state", "mamba_d_conv")
		if err != nil || v == nil {
			return Layer{Kind: Linear}, err
		}
		inner := v[0] * int64(s.Hidden)
		return Layer{Kind: Linear, StateBytes: (inner*(v[2]-1) + inner*v[1]) * b, SSMBytes: inner * v[1] * b}, nil
	}
	v, err := read("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")
	if err != nil || v == nil {
		return Layer{Kind: Linear}, err
	}
	heads, headDim, dState, groups, kernel := v[0], v[1], v[2], v[3], v[4]
	inner := heads * headDim
	conv := (inner + 2*groups*dState) * (kernel - 1)
	return Layer{Kind: Linear, StateBytes: (conv + heads*headDim*dState) * b, SSMBytes: heads * headDim * dState * b,
		Groups: int(groups), GroupConvBytes: 2 * dState * (kernel - 1) * b}, nil
}
