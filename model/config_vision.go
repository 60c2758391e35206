package model

import (
	"errors"
	"strings"
)

// parseVision estimates the vision tower and projector of a multimodal
// config. Params is an estimate from the widths (the checkpoint's
// safetensors sizes, when loaded, are exact):
//
//	encoder   = layers × (4·h² + 2·h·inter (3· for gated MLPs) + biases + norms)
//	          + patch embedding (channels·[temporal·]patch²·h [+ h bias])
//	          + learned position embeddings (patches [+1 class] × h)
//	          + the encoder's pre/post norms
//	projector = by family: Gemma 3 one matrix (h × text) + norm; Llava an MLP
//	          (h_in × text + text × text + biases); Mistral 3 patch merger +
//	          MLP; Qwen2-VL merger MLP on 4 merged patches; Kimi-VL the
//	          same on 2×2 patches; others one matrix h × text.
//
// Checked against released parameter counts: gemma-3-4b-it's 419,816,304
// (4,300,079,472 in all less the text model's 3,880,263,168),
// Qwen2.5-VL-7B's 676,550,144 and Mistral-Small-3.1's Pixtral plus
// projector, 438,958,080, come out exact. Llava, Kimi-VL and Llama 4 use the
// same arithmetic but are unchecked. vLLM loads only the encoder layers up
// to vision_feature_layer, so a Llava model may hold a layer less in memory.
func parseVision(root, v map[string]any, outerType string, textHidden int) (*Vision, error) {
	vt, _, err := sub(v, "vision_config.").str("model_type")
	if err != nil {
		return nil, err
	}
	outer := strings.ToLower(outerType)
	if vt == "" {
		switch outer {
		case "gemma3", "paligemma":
			vt = "siglip_vision_model"
		case "llava", "llava_next", "vipllava":
			vt = "clip_vision_model"
		case "mistral3":
			vt = "pixtral"
		default:
			vt = outer
		}
	}
	vt = strings.ToLower(vt)
	vc := &conf{m: v, defaults: classDefaults(vt), prefix: "vision_config.", structuralDefaults: true}

	// Qwen2-VL names the encoder width embed_dim and uses hidden_size for
	// the text width it projects to, so embed_dim comes first.
	hidden, err := vc.need(1, maxWidth, "embed_dim", "hidden_size", "width")
	if err != nil {
		return nil, err
	}
	layers, err := vc.need(1, maxLayers, "num_hidden_layers", "depth", "num_layers")
	if err != nil {
		return nil, err
	}
	inter, ok, err := vc.int(1, maxWidth, "intermediate_size")
	if err != nil {
		return nil, err
	}
	if !ok {
		ratio, rOK, err := vc.float("mlp_ratio")
		if err != nil {
			return nil, err
		}
		if !rOK || ratio <= 0 || ratio > 64 {
			return nil, errors.New("config.json: vision_config has no intermediate_size or mlp_ratio: check the file")
		}
		inter = int(ratio * float64(hidden))
	}
	channels, ok, err := vc.int(1, 16, "num_channels", "in_chans", "in_channels")
	if err != nil {
		return nil, err
	}
	if !ok {
		channels = 3
	}
	patch, err := vc.need(1, 1024, "patch_size", "spatial_patch_size")
	if err != nil {
		return nil, err
	}
	image, _, err := vc.int(1, 1<<16, "image_size")
	if err != nil {
		return nil, err
	}
	temporal, ok, err := vc.int(1, 16, "temporal_patch_size")
	if err != nil {
		return nil, err
	}
	if !ok {
		temporal = 1
	}

	h, in, text := int64(hidden), int64(inter), int64(textHidden)
	ch, p := int64(channels), int64(patch)
	patches := int64(0)
	if image > 0 {
		side := int64(image / patch)
		patches = side * side
	}
	gated := vt == "pixtral" || vt == "qwen2_5_vl"
	bias := vt != "pixtral"
	rms := vt == "pixtral" || vt == "qwen2_5_vl"

	norm := 2 * h // LayerNorm weight and bias
	if rms {
		norm = h
	}
	layer := 4 * h * h
	if gated {
		layer += 3 * h * in
	} else {
		layer += 2 * h * in
	}
	if bias {
		layer += 4*h + in + h
		if gated {
			layer += in
		}
	}
	layer += 2 * norm
	params := int64(layers) * layer
	params += ch * int64(temporal) * p * p * h // patch embedding
	switch vt {
	case "siglip_vision_model":
		params += h + patches*h + norm // patch bias, positions, post_layernorm
	case "clip_vision_model":
		params += h + (patches+1)*h + 2*norm // class embedding, positions (+class), pre and post norms
	case "llama4_vision_model":
		params += h + (patches+1)*h + 2*norm
	case "pixtral":
		params += norm // ln_pre
	case "moonvit":
		// Patch bias, the learned 2-D positions (init_pos_emb_height ×
		// init_pos_emb_width, 64 × 64), the final norm.
		ph, err := vc.need(1, 1<<12, "init_pos_emb_height")
		if err != nil {
			return nil, err
		}
		pw, err := vc.need(1, 1<<12, "init_pos_emb_width")
		if err != nil {
			return nil, err
		}
		params += h + int64(ph)*int64(pw)*h + norm
	}

	vis := &Vision{Hidden: hidden, Layers: layers, Intermediate: inter, PatchTokens: int(patches)}
	if vt == "moonvit" {
		// MoonVitEncoder builds Rope2DPosEmb(hidden/heads, 512, 512): its
		// precomputed_freqs_cis is (512, 512, head_dim/2) complex64, made on
		// the encoder's first call (the profile run's dummy image) and
		// cached, so it stays allocated next to everything after it.
		heads, err := vc.need(1, maxWidth, "num_attention_heads", "num_heads")
		if err != nil {
			return nil, err
		}
		const side, complex64Bytes = 512, 8
		vis.RopeTableBytes = side * side * int64(hidden/heads/2) * complex64Bytes
	}
	top := sub(root, "")
	switch outer {
	case "gemma3":
		// mm_input_projection (h × text) and mm_soft_emb_norm (RMS, h);
		// every image becomes mm_tokens_per_image tokens (default 256).
		params += h*text + h
		n, ok, err := top.int(1, 1<<20, "mm_tokens_per_image")
		if err != nil {
			return nil, err
		}
		if !ok {
			n = 256
		}
		vis.ImageTokens = n
	case "llava", "llava_next", "vipllava":
		// Two-layer MLP with biases; a list vision_feature_layer concatenates
		// that many encoder layers (granite-vision).
		inDim := h
		if l, isList := root["vision_feature_layer"].([]any); isList && len(l) > 0 {
			inDim = int64(len(l)) * h
		}
		params += inDim*text + text + text*text + text
		if outer == "llava_next" {
			params += text // image_newline
		} else {
			vis.ImageTokens = int(patches) // the CLS token is dropped
		}
	case "mistral3":
		// RMS norm, patch merger (h·s² × h), then linear_1 (h × text) and
		// linear_2 (text × text) without biases.
		s, ok, err := top.int(1, 16, "spatial_merge_size")
		if err != nil {
			return nil, err
		}
		if !ok {
			s = 2
		}
		m := int64(s * s)
		params += h + h*m*h + h*text + text*text
		// Merged patches; Pixtral adds one [IMG_BREAK] a row and an
		// [IMG_END] on top, which this count leaves out.
		vis.ImageTokens = int(patches / m)
	case "qwen2_vl", "qwen2_5_vl":
		// Merger: norm on h, then MLP (4h × 4h + 4h) and (4h × text + text).
		m := int64(4)
		if s, ok, err := vc.int(1, 16, "spatial_merge_size"); err != nil {
			return nil, err
		} else if ok {
			m = int64(s * s)
		}
		if out, ok, err := vc.int(1, maxWidth, "out_hidden_size"); err != nil {
			return nil, err
		} else if ok {
			text = int64(out)
		}
		params += norm + (m*h)*(m*h) + m*h + (m*h)*text + text
	case "kimi_vl":
		params += 2*h + (4*h)*(4*h) + 4*h + (4*h)*text + text
	case "llama4":
		// Pixel-shuffle MLP (inter × proj_in, proj_out × proj_out) and the
		// projector (vision_output_dim × text), none with biases.
		pin, _, err := vc.int(1, maxWidth, "projector_input_dim")
		if err != nil {
			return nil, err
		}
		pout, _, err := vc.int(1, maxWidth, "projector_output_dim")
		if err != nil {
			return nil, err
		}
		vout, ok, err := vc.int(1, maxWidth, "vision_output_dim")
		if err != nil {
			return nil, err
		}
		if !ok {
			vout = pout
		}
		params += in*int64(pin) + int64(pout)*int64(pout) + int64(vout)*text
		if r, ok, err := vc.float("pixel_shuffle_ratio"); err != nil {
			return nil, err
		} else if ok && r > 0 && r <= 1 {
			vis.ImageTokens = int(float64(patches) * r * r) // per 336×336 tile
		}
	default:
		params += h * text
	}
	vis.Params = params
	return vis, nil
}
