package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Limits on config values. Real models sit far inside them (the deepest
// decoder has ~130 layers, the widest vocabulary ~262k entries, the longest
// context 10M positions); a value beyond them is a broken or hostile file.
// Refusing it keeps every product the planner forms inside int64.
const (
	maxLayers        = 10_000
	maxWidth         = 1 << 20 // hidden, intermediate, head and LoRA widths
	maxHeads         = 1 << 16
	maxVocab         = 1 << 24
	maxPositions     = 1 << 30
	maxExperts       = 1 << 16
	maxRopePositions = 1 << 34
	maxRopeFactor    = 1 << 16
)

// DefaultMaxPositions is the context length assumed for configs that name no
// maximum (no max_position_embeddings, n_positions, max_seq_len, seq_length,
// ...). vLLM does the same: vllm/config/model.py _get_and_verify_max_len falls
// back to 2048 with a warning when none of those keys is present.
const DefaultMaxPositions = 2048

// ParseConfig reads a Hugging Face config.json into a Spec. Multimodal
// configs contribute their text_config (the decoder) and their vision_config
// (Spec.Vision). Keys missing from the file take the transformers config
// class default where headroom knows it (see classDefaults); ID,
// CheckpointBytes and CheckpointSource are left for the caller.
func ParseConfig(data []byte) (Spec, error) {
	root, err := decodeConfig(data)
	if err != nil {
		return Spec{}, err
	}
	s, err := parseConfig(root)
	if err != nil {
		return Spec{}, err
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// decodeConfig decodes one JSON object, keeping numbers exact.
func decodeConfig(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("config.json is not valid JSON (%v): pass the model's config.json", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("config.json holds more than one JSON value: pass the model's config.json")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("config.json is not a JSON object: pass the model's config.json")
	}
	return m, nil
}

// conf looks keys up the way transformers fills a config class from a
// config.json. A key present in the file wins, and an explicit null means
// None (it does not fall back to a default). For a nested text_config the
// outer config's keys come next (older Llava files keep vocab_size there),
// then the defaults of the text model's config class: transformers saves a
// nested config as its difference from those defaults, so the real
// gemma-3-4b-it text_config has no num_attention_heads at all.
type conf struct {
	m        map[string]any
	outer    map[string]any // nil unless m is a nested text_config
	defaults map[string]any
	prefix   string // how keys of m are named in errors ("text_config.")
	// structuralDefaults lets the layer count, width and heads come from
	// defaults. Only nested configs omit them: a top-level file always
	// carries them, and one that lacks them is not a decoder config.
	structuralDefaults bool
}

// isStructural keys take no class default in a top-level config: a file
// transformers wrote carries them all (they are not PretrainedConfig keys),
// so one that lacks them is hand-made or not a decoder config, and guessing
// a default width would silently describe another model.
func isStructural(key string) bool {
	switch key {
	case "num_hidden_layers", "n_layer", "num_layers", "n_layers",
		"hidden_size", "n_embd", "d_model",
		"num_attention_heads", "n_head", "n_heads", "num_heads",
		"num_key_value_heads", "intermediate_size", "vocab_size":
		return true
	}
	return false
}

// lookup finds key; ok is true when the key is present (its value may be
// nil for an explicit null).
func (c *conf) lookup(key string) (v any, name string, ok bool) {
	if v, ok := c.m[key]; ok {
		return v, c.prefix + key, true
	}
	if c.outer != nil {
		if v, ok := c.outer[key]; ok {
			return v, key, true
		}
	}
	if c.defaults != nil && (c.structuralDefaults || !isStructural(key)) {
		if v, ok := c.defaults[key]; ok {
			return v, c.prefix + key + " (default)", true
		}
	}
	return nil, "", false
}

// first returns the value of the first key that is present and not null.
func (c *conf) first(keys ...string) (v any, name string, ok bool) {
	for _, k := range keys {
		if v, name, ok := c.lookup(k); ok && v != nil {
			return v, name, true
		}
	}
	return nil, "", false
}

// has reports whether key is present and not null.
func (c *conf) has(key string) bool {
	_, _, ok := c.first(key)
	return ok
}

// int reads the first present key as an integer within [lo, hi].
func (c *conf) int(lo, hi int, keys ...string) (int, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return 0, false, nil
	}
	n, err := toInt(v, name, lo, hi)
	return n, true, err
}

// need is int for a key the decoder cannot do without.
func (c *conf) need(lo, hi int, keys ...string) (int, error) {
	n, ok, err := c.int(lo, hi, keys...)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("config.json has no %s%s: is this a transformer LM config?", c.prefix, keys[0])
	}
	return n, nil
}

// float reads the first present key as a number.
func (c *conf) float(keys ...string) (float64, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return 0, false, nil
	}
	f, err := toFloat(v, name)
	return f, true, err
}

// bool reads the first present key as a boolean.
func (c *conf) bool(keys ...string) (bool, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return false, false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, true, fmt.Errorf("config.json: %s is %s, want true or false", name, describe(v))
	}
	return b, true, nil
}

// str reads the first present key as a string.
func (c *conf) str(keys ...string) (string, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, fmt.Errorf("config.json: %s is %s, want a string", name, describe(v))
	}
	return s, true, nil
}

// obj reads the first present key as a JSON object.
func (c *conf) obj(keys ...string) (map[string]any, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return nil, false, nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return nil, true, fmt.Errorf("config.json: %s is %s, want an object", name, describe(v))
	}
	return m, true, nil
}

// list reads the first present key as a JSON array.
func (c *conf) list(keys ...string) ([]any, string, bool, error) {
	v, name, ok := c.first(keys...)
	if !ok {
		return nil, "", false, nil
	}
	l, isList := v.([]any)
	if !isList {
		return nil, name, true, fmt.Errorf("config.json: %s is %s, want a list", name, describe(v))
	}
	return l, name, true, nil
}

// sub makes a conf for a nested object with no fallbacks of its own.
func sub(m map[string]any, prefix string) *conf {
	return &conf{m: m, prefix: prefix}
}

// toInt converts a JSON number (or a Go int/float64 from classDefaults) to
// an int in [lo, hi]. Integral floats such as 4096.0 are accepted: some
// exporters write every number as a float.
func toInt(v any, name string, lo, hi int) (int, error) {
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case float64:
		f = x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			if i < int64(lo) || i > int64(hi) {
				return 0, outOfRange(name, x.String(), lo, hi)
			}
			return int(i), nil
		}
		g, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("config.json: %s is %s, want an integer", name, x.String())
		}
		f = g
	default:
		return 0, fmt.Errorf("config.json: %s is %s, want an integer", name, describe(v))
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("config.json: %s is %v, want an integer", name, f)
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, outOfRange(name, fmt.Sprint(f), lo, hi)
	}
	return int(f), nil
}

func outOfRange(name, val string, lo, hi int) error {
	return fmt.Errorf("config.json: %s = %s is out of range (%d to %d): check the file", name, val, lo, hi)
}

// toFloat converts a JSON number to a finite float64.
func toFloat(v any, name string) (float64, error) {
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case float64:
		f = x
	case json.Number:
		g, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("config.json: %s is %s, want a number", name, x.String())
		}
		f = g
	default:
		return 0, fmt.Errorf("config.json: %s is %s, want a number", name, describe(v))
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("config.json: %s is not a finite number", name)
	}
	return f, nil
}

// describe names a JSON value's kind for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(x)
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("%q", x)
	case json.Number:
		return x.String()
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// family maps a model_type to the name headroom keys its rules on:
// lower-cased, "_text" dropped (gemma3_text is gemma3), and Falcon's old
// RefinedWeb names folded into falcon.
func family(modelType string) string {
	t := strings.ToLower(modelType)
	switch t {
	case "refinedweb", "refinedwebmodel":
		return "falcon"
	}
	return strings.TrimSuffix(t, "_text")
}

// defaultTextType is the text model type a multimodal config class assumes
// when its text_config names none (transformers: LlavaConfig defaults to
// llama, Mistral3Config to mistral, Gemma3Config to gemma3_text ...).
func defaultTextType(outer string) string {
	switch strings.ToLower(outer) {
	case "llava", "llava_next", "vipllava":
		return "llama"
	case "llava_onevision", "llava_next_video":
		return "qwen2"
	case "mistral3":
		return "mistral"
	case "gemma3":
		return "gemma3_text"
	case "paligemma":
		return "gemma"
	case "llama4":
		return "llama4_text"
	case "kimi_vl":
		return "deepseek_v3"
	}
	return ""
}

// classDefaults holds the transformers config-class defaults headroom needs
// for keys that real config.json files omit (transformers
// src/transformers/models/<type>/configuration_<type>.py, v4.5x). The
// tie_word_embeddings entries matter most: PretrainedConfig defaults it to
// true, many decoder classes to false.
func classDefaults(modelType string) map[string]any {
	switch strings.ToLower(modelType) {
	case "llama":
		return map[string]any{"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
			"num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048,
			"tie_word_embeddings": false}
	case "mistral":
		return map[string]any{"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
			"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
			"max_position_embeddings": 4096 * 32, "sliding_window": 4096, "tie_word_embeddings": false}
	case "mixtral":
		return map[string]any{"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
			"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
			"max_position_embeddings": 4096 * 32, "sliding_window": nil, "num_local_experts": 8,
			"num_experts_per_tok": 2, "tie_word_embeddings": false}
	case "qwen2":
		return map[string]any{"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
			"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
			"max_position_embeddings": 32768, "use_sliding_window": false, "sliding_window": 4096,
			"max_window_layers": 28, "tie_word_embeddings": false}
	case "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next":
		return map[string]any{"use_sliding_window": false, "tie_word_embeddings": false}
	case "gemma":
		return map[string]any{"head_dim": 256, "tie_word_embeddings": true}
	case "gemma2":
		return map[string]any{"head_dim": 256, "sliding_window": 4096, "tie_word_embeddings": true}
	case "gemma3_text":
		return map[string]any{"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
			"num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
			"head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
			"sliding_window_pattern": 6, "tie_word_embeddings": true}
	case "cohere", "cohere2":
		return map[string]any{"sliding_window": 4096, "sliding_window_pattern": 4, "tie_word_embeddings": true}
	case "falcon", "refinedweb", "refinedwebmodel":
		// FalconConfig: multi_query=True, max_position_embeddings=2048; no
		// tie_word_embeddings argument, so PretrainedConfig's true applies.
		return map[string]any{"multi_query": true, "new_decoder_architecture": false, "alibi": false,
			"bias": false, "max_position_embeddings": 2048, "tie_word_embeddings": true}
	case "starcoder2":
		return map[string]any{"use_bias": true, "sliding_window": nil, "tie_word_embeddings": true}
	case "stablelm":
		return map[string]any{"partial_rotary_factor": 0.25, "tie_word_embeddings": false}
	case "jamba":
		return map[string]any{"attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2,
			"expert_layer_offset": 1, "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16,
			"mamba_d_conv": 4, "mamba_expand": 2, "tie_word_embeddings": false}
	case "nemotron_h":
		return map[string]any{"mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128,
			"n_groups": 8, "conv_kernel": 4, "tie_word_embeddings": false}
	case "phi", "phi3", "phimoe", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "granite",
		"granitemoe", "granitemoeshared", "gpt_neox", "olmo", "olmo2", "olmoe", "internlm2",
		"llama4_text", "exaone", "chatglm", "glm", "glm4", "glm4_moe":
		return map[string]any{"tie_word_embeddings": false}
	case "siglip_vision_model":
		return map[string]any{"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
			"num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16}
	case "clip_vision_model":
		return map[string]any{"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
			"num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32}
	case "pixtral":
		return map[string]any{"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
			"num_attention_heads": 16, "num_channels": 3, "image_size": 1024, "patch_size": 16}
	}
	return nil
}

// unsupported explains model types whose structure Spec cannot describe.
func unsupported(fam string) string {
	switch fam {
	case "mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm":
		return fmt.Sprintf("model_type %s has no attention layers at all; headroom models transformer decoders and cannot plan it yet", fam)
	}
	return ""
}

// nonGated families have a two-matrix MLP (up, down) instead of a gated
// one (gate, up, down). Nemotron and Nemotron-H use squared-ReLU MLPs
// without a gate.
func nonGated(fam string) bool {
	switch fam {
	case "gpt2", "gpt_bigcode", "gpt_neox", "gpt_neo", "gptj", "codegen", "falcon", "phi",
		"starcoder2", "bloom", "opt", "mpt", "nemotron", "nemotron_h", "persimmon", "biogpt":
		return true
	}
	return false
}

// noRoPE families use learned or ALiBi positions, or none (Jamba and
// Nemotron-H attention layers have no positional encoding).
func noRoPE(fam string) bool {
	switch fam {
	case "gpt2", "gpt_bigcode", "gpt_neo", "bloom", "opt", "mpt", "jamba", "nemotron_h", "biogpt":
		return true
	}
	return false
}

// qwenFamily models read use_sliding_window and max_window_layers.
func qwenFamily(fam string) bool {
	switch fam {
	case "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl":
		return true
	}
	return false
}

// parseConfig builds a Spec from a decoded config object.
func parseConfig(root map[string]any) (Spec, error) {
	top := sub(root, "")
	outerType, _, err := top.str("model_type")
	if err != nil {
		return Spec{}, err
	}
	if encDec, _, err := top.bool("is_encoder_decoder"); err != nil {
		return Spec{}, err
	} else if encDec {
		return Spec{}, fmt.Errorf("config.json describes an encoder-decoder model (%s); headroom plans decoder-only LMs", outerType)
	}
	var s Spec
	s.ModelType = outerType
	if archs, _, ok, err := top.list("architectures"); err != nil {
		return Spec{}, err
	} else if ok && len(archs) > 0 {
		a, isStr := archs[0].(string)
		if !isStr {
			return Spec{}, fmt.Errorf("config.json: architectures[0] is %s, want a string", describe(archs[0]))
		}
		s.Architecture = a
	}

	c := &conf{m: root, defaults: classDefaults(outerType)}
	for _, key := range []string{"text_config", "llm_config"} {
		tc, ok, err := top.obj(key)
		if err != nil {
			return Spec{}, err
		}
		if ok {
			c = &conf{m: tc, outer: root, prefix: key + ".", structuralDefaults: true}
			break
		}
	}
	textType := outerType
	if c.outer != nil {
		t, _, err := sub(c.m, c.prefix).str("model_type")
		if err != nil {
			return Spec{}, err
		}
		if t == "" {
			t = defaultTextType(outerType)
		}
		if t != "" {
			textType = t
		}
		c.defaults = classDefaults(textType)
	}
	s.TextModelType = textType
	fam := family(textType)
	if msg := unsupported(fam); msg != "" {
		return Spec{}, errors.New(msg)
	}

	if err := parseShape(c, fam, &s); err != nil {
		return Spec{}, err
	}
	if err := parseRoPE(c, fam, &s); err != nil {
		return Spec{}, err
	}
	if err := parseMoE(c, fam, &s); err != nil {
		return Spec{}, err
	}
	if s.Attention, err = parseAttention(c, fam, &s); err != nil {
		return Spec{}, err
	}
	if q, ok, err := c.obj("quantization_config"); err != nil {
		return Spec{}, err
	} else if ok {
		if s.Quant, err = parseQuant(q); err != nil {
			return Spec{}, err
		}
	}
	if v, ok, err := top.obj("vision_config"); err != nil {
		return Spec{}, err
	} else if ok {
		if s.Vision, err = parseVision(root, v, outerType, s.Hidden); err != nil {
			return Spec{}, err
		}
	}
	return s, nil
}

// parseShape fills the decoder's widths, heads, vocabulary, context, dtype,
// MLP kind, biases, tying and MLA widths.
func parseShape(c *conf, fam string, s *Spec) error {
	var err error
	if s.Layers, err = c.need(1, maxLayers, "num_hidden_layers", "n_layer", "num_layers", "n_layers"); err != nil {
		return err
	}
	if s.Hidden, err = c.need(1, maxWidth, "hidden_size", "n_embd", "d_model"); err != nil {
		return err
	}
	if s.Heads, err = c.need(1, maxHeads, "num_attention_heads", "n_head", "n_heads", "num_heads"); err != nil {
		return err
	}

	// KV heads. Falcon's attention ignores num_kv_heads unless
	// new_decoder_architecture is set, and is multi-query when multi_query is
	// (transformers FalconAttention.__init__). ChatGLM names its groups
	// multi_query_group_num.
	kv, kvOK, err := c.int(1, maxHeads, "num_key_value_heads", "n_head_kv", "num_kv_heads")
	if err != nil {
		return err
	}
	mq, _, err := c.bool("multi_query")
	if err != nil {
		return err
	}
	switch {
	case fam == "falcon":
		newArch, _, err := c.bool("new_decoder_architecture")
		if err != nil {
			return err
		}
		// Falcon-40B's original "RefinedWeb" config predates the flag but
		// uses n_head_kv groups (vLLM's RWConfig sets
		// new_decoder_architecture for it).
		newArch = newArch || strings.EqualFold(s.TextModelType, "RefinedWeb")
		switch {
		case newArch && kvOK:
		case !newArch && mq:
			kv, kvOK = 1, true
		case !newArch:
			kv, kvOK = 0, false
		}
	case kvOK:
	case mq:
		kv, kvOK = 1, true
	default:
		if mqa, _, err := c.bool("multi_query_attention"); err != nil {
			return err
		} else if mqa {
			if kv, kvOK, err = c.int(1, maxHeads, "multi_query_group_num"); err != nil {
				return err
			}
		}
	}
	if !kvOK {
		kv = s.Heads
	}
	s.KVHeads = kv

	if s.HeadDim, _, err = c.int(1, maxWidth, "head_dim", "kv_channels"); err != nil {
		return err
	}
	if s.HeadDim == 0 {
		if s.Hidden%s.Heads != 0 {
			return fmt.Errorf("config.json: hidden_size %d is not a multiple of num_attention_heads %d and there is no head_dim: check the file", s.Hidden, s.Heads)
		}
		s.HeadDim = s.Hidden / s.Heads
	}
	if v, ok, err := c.int(1, maxWidth, "v_head_dim"); err != nil {
		return err
	} else if ok && v != s.HeadDim {
		s.VHeadDim = v
	}

	// MLA (DeepSeek-V2/V3, Kimi): the q/k head is nope+rope wide, the v head
	// v_head_dim. transformers' DeepseekV3Config also writes head_dim =
	// qk_rope_head_dim, which is not the attention head size, so MLA
	// overrides it.
	if kvr, ok, err := c.int(0, maxWidth, "kv_lora_rank"); err != nil {
		return err
	} else if ok && kvr > 0 {
		m := &MLAConfig{KVLoraRank: kvr}
		if m.QLoraRank, _, err = c.int(0, maxWidth, "q_lora_rank"); err != nil {
			return err
		}
		if m.QKRopeHeadDim, err = c.need(1, maxWidth, "qk_rope_head_dim"); err != nil {
			return err
		}
		if m.QKNopeHeadDim, err = c.need(0, maxWidth, "qk_nope_head_dim"); err != nil {
			return err
		}
		if m.VHeadDim, err = c.need(1, maxWidth, "v_head_dim"); err != nil {
			return err
		}
		s.MLA = m
		s.HeadDim = m.QKNopeHeadDim + m.QKRopeHeadDim
		s.VHeadDim = m.VHeadDim
	}

	// Dense MLP width. Llama 4 keeps its dense width in
	// intermediate_size_mlp (intermediate_size is the expert's); MPT
	// multiplies d_model by expansion_ratio; GPT-2 style models leave n_inner
	// null and use 4 × hidden.
	inter, ok, err := c.int(1, maxWidth, "intermediate_size_mlp", "intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
	if err != nil {
		return err
	}
	if !ok && fam == "mpt" {
		r, rOK, err := c.int(1, 64, "expansion_ratio")
		if err != nil {
			return err
		}
		if !rOK {
			r = 4
		}
		inter, ok = r*s.Hidden, true
	}
	if !ok && nonGated(fam) {
		inter, ok = 4*s.Hidden, true
	}
	if !ok && !c.has("moe_intermediate_size") {
		return fmt.Errorf("config.json has no %sintermediate_size: is this a transformer LM config?", c.prefix)
	}
	s.Intermediate = inter
	s.GatedMLP = !nonGated(fam)

	// ChatGLM's padded_vocab_size is the embedding's row count.
	if s.Vocab, err = c.need(1, maxVocab, "padded_vocab_size", "vocab_size", "n_vocab"); err != nil {
		return err
	}
	// Context length: the keys vLLM's _get_and_verify_max_len reads.
	mp, ok, err := c.int(1, maxPositions, "max_position_embeddings", "n_positions", "max_seq_len",
		"seq_length", "model_max_length", "max_sequence_length", "max_seq_length", "seq_len")
	if err != nil {
		return err
	}
	if !ok {
		mp = DefaultMaxPositions
	}
	s.MaxPositions = mp

	if s.QKVBias, err = qkvBias(c, fam); err != nil {
		return err
	}
	tie, ok, err := c.bool("tie_word_embeddings")
	if err != nil {
		return err
	}
	if !ok {
		tie = true // PretrainedConfig's default, for classes headroom has no entry for
	}
	s.TieEmbeddings = tie

	d, ok, err := c.str("torch_dtype", "dtype")
	if err != nil {
		return err
	}
	if !ok {
		d = "bfloat16" // gpt-oss and other recent files name no dtype; vLLM then runs bf16
	}
	if s.Dtype, err = normalizeDtype(d); err != nil {
		return err
	}
	return nil
}

// qkvBias reads whether q, k and v projections carry biases: attention_bias
// and its older spellings when present, else the family's fixed choice
// (Qwen2 always has them; GPT-2, NeoX, BLOOM, OPT and Phi-2 have biases on
// every linear layer).
func qkvBias(c *conf, fam string) (bool, error) {
	if b, ok, err := c.bool("attention_bias", "qkv_bias", "add_qkv_bias"); ok || err != nil {
		return b, err
	}
	switch fam {
	case "falcon", "internlm2":
		b, _, err := c.bool("bias")
		return b, err
	case "starcoder2":
		b, _, err := c.bool("use_bias")
		return b, err
	case "mpt":
		noBias, ok, err := c.bool("no_bias")
		return ok && !noBias, err
	case "qwen", "qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "gpt2", "gpt_bigcode", "gpt_neox",
		"bloom", "opt", "phi", "persimmon", "codegen":
		return fam != "codegen", nil
	}
	return false, nil
}

// normalizeDtype maps the spellings found in config files to torch names.
func normalizeDtype(d string) (string, error) {
	switch strings.TrimPrefix(strings.ToLower(d), "torch.") {
	case "bfloat16", "bf16":
		return "bfloat16", nil
	case "float16", "fp16", "half":
		return "float16", nil
	case "float32", "fp32", "float":
		return "float32", nil
	}
	return "", fmt.Errorf("config.json: torch_dtype %q is not one of bfloat16, float16, float32: fix the file or pass the dtype explicitly", d)
}

// dtypeBytes is the size of one element of a model dtype.
func dtypeBytes(d string) int64 {
	if d == "float32" {
		return 4
	}
	return 2
}

// parseRoPE fills RotaryDim, RopePositions and RopeTables.
func parseRoPE(c *conf, fam string, s *Spec) error {
	alibi, _, err := c.bool("alibi")
	if err != nil {
		return err
	}
	if noRoPE(fam) || alibi {
		return nil
	}
	switch {
	case s.MLA != nil:
		s.RotaryDim = s.MLA.QKRopeHeadDim
	case fam == "chatglm" || fam == "glm":
		// vLLM chatglm.py: get_rope(head_dim, rotary_dim=head_dim // 2, ...).
		s.RotaryDim = s.HeadDim / 2
	default:
		rd, ok, err := c.int(1, maxWidth, "rotary_dim")
		if err != nil {
			return err
		}
		if !ok {
			frac, fOK, err := c.float("partial_rotary_factor", "rotary_pct")
			if err != nil {
				return err
			}
			if !fOK {
				frac = 1
			}
			if frac <= 0 || frac > 1 {
				return fmt.Errorf("config.json: partial_rotary_factor %v is not in (0, 1]: check the file", frac)
			}
			rd = int(float64(s.HeadDim) * frac)
		}
		s.RotaryDim = rd
	}
	if s.RotaryDim <= 0 {
		s.RotaryDim = 0
		return nil
	}
	s.RopeTables = 1
	if fam == "gemma3" {
		// vLLM gemma3.py builds one rotary embedding for local layers
		// (rope_local_base_freq, unscaled) and one for global layers.
		s.RopeTables = 2
	}

	// The table length vLLM's get_rope precomputes
	// (vllm/model_executor/layers/rotary_embedding): linear and dynamic NTK
	// scaling cache max_position × factor; YaRN caches
	// original_max_position × factor; Phi-3 LongRoPE concatenates a short
	// (original) and a long (max) table; llama3 and plain RoPE cache
	// max_position.
	s.RopePositions = s.MaxPositions
	rs, ok, err := c.obj("rope_scaling", "rope_parameters")
	if err != nil || !ok {
		return err
	}
	// transformers v5 keys Gemma 3's rope_parameters by layer type; the
	// global (full attention) entry is the scaled one.
	if full, isObj := rs["full_attention"].(map[string]any); isObj {
		rs = full
	}
	rc := sub(rs, "rope_scaling.")
	typ, _, err := rc.str("rope_type", "type")
	if err != nil {
		return err
	}
	typ = strings.ToLower(typ)
	factor := 1.0
	if f, ok, err := rc.float("factor"); err != nil {
		return err
	} else if ok {
		factor = f
	}
	scaled := func(base int) (int, error) {
		if factor <= 0 || factor > maxRopeFactor {
			return 0, fmt.Errorf("config.json: rope_scaling.factor %v is out of range (0 to %d]: check the file", factor, maxRopeFactor)
		}
		n := math.Ceil(float64(base) * factor)
		if n > maxRopePositions {
			return 0, fmt.Errorf("config.json: rope_scaling gives %v rotary positions, more than %d: check the file", n, int64(maxRopePositions))
		}
		return int(n), nil
	}
	orig, origOK, err := rc.int(1, maxPositions, "original_max_position_embeddings")
	if err != nil {
		return err
	}
	if !origOK {
		if orig, origOK, err = c.int(1, maxPositions, "original_max_position_embeddings"); err != nil {
			return err
		}
	}
	switch typ {
	case "linear", "dynamic":
		s.RopePositions, err = scaled(s.MaxPositions)
	case "yarn", "deepseek_yarn":
		// transformers treats a missing original length as max_position_embeddings.
		base := s.MaxPositions
		if origOK {
			base = orig
		}
		s.RopePositions, err = scaled(base)
	case "longrope", "su":
		if origOK {
			s.RopePositions = s.MaxPositions + orig
		}
	}
	return err
}

// parseMoE fills Spec.MoE for mixture-of-experts models.
func parseMoE(c *conf, fam string, s *Spec) error {
	experts, ok, err := c.int(0, maxExperts, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
	if err != nil || !ok || experts < 2 {
		return err
	}
	m := &MoE{Experts: experts, LayerFreq: 1}
	if m.TopK, ok, err = c.int(1, experts, "num_experts_per_tok", "moe_topk", "experts_per_token", "moe_k"); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("config.json has %d experts but no num_experts_per_tok: check the file", experts)
	}
	// Expert width: moe_intermediate_size where the family has one; Mixtral,
	// gpt-oss, Jamba, PhiMoE and Llama 4 size experts by intermediate_size.
	if m.Intermediate, ok, err = c.int(1, maxWidth, "moe_intermediate_size"); err != nil {
		return err
	} else if !ok {
		if m.Intermediate, err = c.need(1, maxWidth, "intermediate_size"); err != nil {
			return err
		}
	}
	if s.Intermediate == 0 {
		s.Intermediate = m.Intermediate
	}
	switch {
	case fam == "llama4":
		// Llama 4: one shared expert as wide as a routed one.
		m.Shared, m.SharedInter = 1, m.Intermediate
	case c.has("n_shared_experts"):
		n, _, err := c.int(0, maxExperts, "n_shared_experts")
		if err != nil {
			return err
		}
		m.Shared, m.SharedInter = n, n*m.Intermediate
	default:
		w, ok, err := c.int(0, maxWidth, "shared_expert_intermediate_size", "shared_intermediate_size")
		if err != nil {
			return err
		}
		if ok && w > 0 {
			m.Shared, m.SharedInter = 1, w
		}
	}
	if m.DenseLayers, ok, err = c.int(0, s.Layers, "first_k_dense_replace"); err != nil {
		return err
	} else if !ok {
		l, _, _, err := c.list("mlp_only_layers")
		if err != nil {
			return err
		}
		m.DenseLayers = min(len(l), s.Layers)
	}
	// Jamba puts experts on layers i with i % expert_layer_period ==
	// expert_layer_offset; its released offset is period-1, which is the
	// "(i+1) % LayerFreq == 0" rule Spec.IsMoELayer applies.
	if f, ok, err := c.int(1, s.Layers, "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", "expert_layer_period"); err != nil {
		return err
	} else if ok {
		m.LayerFreq = f
	}
	s.MoE = m
	return nil
}

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
				b, err := mambaState(c, fam, s)
				if err != nil {
					return nil, err
				}
				layers[i] = Layer{Kind: Linear, StateBytes: b}
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
		b, err := mambaState(c, fam, s)
		if err != nil {
			return nil, err
		}
		for i := range layers {
			layers[i] = Layer{Kind: Linear, StateBytes: b}
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
	var state int64
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case 'M':
			if state == 0 {
				if state, err = mambaState(c, fam, s); err != nil {
					return nil, err
				}
			}
			layers[i] = Layer{Kind: Linear, StateBytes: state}
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

// mambaState is the per-sequence state of one Mamba layer in bytes at TP=1,
// in the model dtype, after vLLM's MambaStateShapeCalculator:
//
//	Mamba-1 (Jamba):      conv = inner × (d_conv − 1), ssm = inner × d_state,
//	                      inner = mamba_expand × hidden
//	Mamba-2 (Nemotron-H): conv = (inner + 2·n_groups·state) × (conv_kernel − 1),
//	                      ssm = heads × head_dim × state, inner = heads × head_dim
//
// 0 when a key is missing.
func mambaState(c *conf, fam string, s *Spec) (int64, error) {
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
			return 0, err
		}
		inner := v[0] * int64(s.Hidden)
		return (inner*(v[2]-1) + inner*v[1]) * b, nil
	}
	v, err := read("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")
	if err != nil || v == nil {
		return 0, err
	}
	heads, headDim, state, groups, kernel := v[0], v[1], v[2], v[3], v[4]
	inner := heads * headDim
	conv := (inner + 2*groups*state) * (kernel - 1)
	return (conv + heads*headDim*state) * b, nil
}

// parseQuant reads quantization_config. Unknown methods keep their name
// with Bits 0 so the planner can say it does not know their size.
func parseQuant(m map[string]any) (*Quantization, error) {
	q := sub(m, "quantization_config.")
	method, _, err := q.str("quant_method")
	if err != nil {
		return nil, err
	}
	method = strings.ToLower(method)
	if method == "" {
		if q.has("load_in_4bit") || q.has("load_in_8bit") {
			method = "bitsandbytes"
		} else {
			method = "unknown"
		}
	}
	out := &Quantization{Method: method}
	bits := func(def int, keys ...string) error {
		b, ok, err := q.int(1, 16, keys...)
		if err != nil {
			return err
		}
		if !ok {
			b = def
		}
		out.Bits = b
		return nil
	}
	// group reads a group size; -1 (per channel) becomes 0.
	group := func(keys ...string) error {
		g, _, err := q.int(-1, maxWidth, keys...)
		if g < 0 {
			g = 0
		}
		out.GroupSize = g
		return err
	}
	switch method {
	case "fp8", "fbgemm_fp8":
		// Block-wise FP8 (DeepSeek-V3: weight_block_size [128, 128]) keeps one
		// scale per block: GroupSize is the block's element count, 16384.
		out.Bits, out.Float, out.Symmetric = 8, true, true
		l, name, ok, err := q.list("weight_block_size")
		if err != nil {
			return nil, err
		}
		if ok {
			if out.GroupSize, err = blockElems(l, name); err != nil {
				return nil, err
			}
		}
	case "awq":
		if err := bits(4, "bits", "w_bit"); err != nil {
			return nil, err
		}
		if err := group("group_size", "q_group_size"); err != nil {
			return nil, err
		}
		zp, ok, err := q.bool("zero_point")
		if err != nil {
			return nil, err
		}
		out.Symmetric = ok && !zp // AutoAWQ's default is zero_point true
	case "gptq", "auto-round", "autoround":
		if err := bits(4, "bits"); err != nil {
			return nil, err
		}
		if err := group("group_size"); err != nil {
			return nil, err
		}
		act, _, err := q.bool("desc_act")
		if err != nil {
			return nil, err
		}
		sym, ok, err := q.bool("sym")
		if err != nil {
			return nil, err
		}
		out.ActOrder, out.Symmetric = act, sym || !ok
	case "compressed-tensors":
		if err := compressedTensors(q, out); err != nil {
			return nil, err
		}
	case "mxfp4":
		// OCP MX: 4-bit e2m1 values, one e8m0 scale per 32.
		out.Bits, out.Float, out.GroupSize, out.Symmetric = 4, true, 32, true
	case "bitsandbytes":
		b4, _, err := q.bool("load_in_4bit")
		if err != nil {
			return nil, err
		}
		b8, _, err := q.bool("load_in_8bit")
		if err != nil {
			return nil, err
		}
		switch {
		case b4:
			// bitsandbytes 4-bit quantizes in blocks of 64 (its default
			// blocksize, not stored in the config).
			t, _, err := q.str("bnb_4bit_quant_type")
			if err != nil {
				return nil, err
			}
			out.Bits, out.GroupSize, out.Symmetric, out.Float = 4, 64, true, t == "fp4"
		case b8:
			out.Bits, out.Symmetric = 8, true
		}
	case "modelopt":
		// NVIDIA ModelOpt exports quant_algo at the top or under "quantization".
		algo, _, err := q.str("quant_algo")
		if err != nil {
			return nil, err
		}
		if algo == "" {
			if inner, ok, err := q.obj("quantization"); err != nil {
				return nil, err
			} else if ok {
				if algo, _, err = sub(inner, "quantization_config.quantization.").str("quant_algo"); err != nil {
					return nil, err
				}
			}
		}
		switch strings.ToUpper(algo) {
		case "FP8":
			out.Bits, out.Float, out.Symmetric = 8, true, true
		case "NVFP4":
			// vLLM names this method modelopt_fp4; NVFP4 scales every 16 values.
			out.Method, out.Bits, out.Float, out.Symmetric, out.GroupSize = "modelopt_fp4", 4, true, true, 16
			if g, ok, err := q.int(1, maxWidth, "group_size"); err != nil {
				return nil, err
			} else if ok {
				out.GroupSize = g
			}
		}
	}
	return out, nil
}

// blockElems multiplies a block shape such as [128, 128].
func blockElems(l []any, name string) (int, error) {
	if len(l) == 0 || len(l) > 4 {
		return 0, fmt.Errorf("config.json: %s has %d entries, want a block shape like [128, 128]", name, len(l))
	}
	n := 1
	for i, v := range l {
		x, err := toInt(v, fmt.Sprintf("%s[%d]", name, i), 1, 1<<16)
		if err != nil {
			return 0, err
		}
		n *= x
	}
	if n > maxWidth {
		return 0, fmt.Errorf("config.json: %s blocks hold %d weights, more than %d: check the file", name, n, maxWidth)
	}
	return n, nil
}

// compressedTensors reads the weight scheme of a compressed-tensors config
// (llm-compressor). With several config_groups the first by name that
// quantizes weights is taken; mixed-precision checkpoints are rare and the
// planner's weight bytes come from safetensors when it has them.
func compressedTensors(q *conf, out *Quantization) error {
	f, _, err := q.str("format")
	if err != nil {
		return err
	}
	out.Format = f
	groups, ok, err := q.obj("config_groups")
	if err != nil || !ok {
		return err
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		g, isObj := groups[name].(map[string]any)
		if !isObj {
			return fmt.Errorf("config.json: quantization_config.config_groups.%s is %s, want an object", name, describe(groups[name]))
		}
		w, ok, err := sub(g, "").obj("weights")
		if err != nil {
			return fmt.Errorf("config.json: quantization_config.config_groups.%s.weights is not an object", name)
		}
		if !ok {
			continue
		}
		wc := sub(w, "quantization_config.config_groups."+name+".weights.")
		if out.Bits, _, err = wc.int(1, 16, "num_bits"); err != nil {
			return err
		}
		typ, _, err := wc.str("type")
		if err != nil {
			return err
		}
		out.Float = typ == "float"
		sym, ok, err := wc.bool("symmetric")
		if err != nil {
			return err
		}
		out.Symmetric = sym || !ok
		strategy, _, err := wc.str("strategy")
		if err != nil {
			return err
		}
		switch strategy {
		case "group", "tensor_group":
			if out.GroupSize, _, err = wc.int(1, maxWidth, "group_size"); err != nil {
				return err
			}
		case "block":
			l, name, ok, err := wc.list("block_structure")
			if err != nil {
				return err
			}
			if ok {
				if out.GroupSize, err = blockElems(l, name); err != nil {
					return err
				}
			}
		}
		// vLLM CompressedTensorsWNA16 stores g_idx only for actorder
		// "group"; early llm-compressor releases wrote a boolean.
		switch a := w["actorder"].(type) {
		case string:
			out.ActOrder = a == "group"
		case bool:
			out.ActOrder = a
		}
		return nil
	}
	return nil
}

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
		params += h + 64*64*h + norm // patch bias, 64×64 learned 2-D positions, final norm
	}

	vis := &Vision{Hidden: hidden, Layers: layers, Intermediate: inter, PatchTokens: int(patches)}
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
	inRange := func(field string, v, lo, hi int64) error {
		if v < lo || v > hi {
			return bad("%s = %d is out of range (%d to %d)", field, v, lo, hi)
		}
		return nil
	}
	for _, r := range []struct {
		field     string
		v, lo, hi int64
	}{
		{"layers", int64(s.Layers), 1, maxLayers},
		{"hidden", int64(s.Hidden), 1, maxWidth},
		{"intermediate", int64(s.Intermediate), 1, maxWidth},
		{"heads", int64(s.Heads), 1, maxHeads},
		{"kv_heads", int64(s.KVHeads), 1, int64(max(s.Heads, 1))},
		{"head_dim", int64(s.HeadDim), 1, maxWidth},
		{"v_head_dim", int64(s.VHeadDim), 0, maxWidth},
		{"vocab", int64(s.Vocab), 1, maxVocab},
		{"max_position_embeddings", int64(s.MaxPositions), 1, maxPositions},
		{"rotary_dim", int64(s.RotaryDim), 0, int64(max(s.HeadDim, 0))},
		{"rope_positions", int64(s.RopePositions), 0, maxRopePositions},
		{"rope_tables", int64(s.RopeTables), 0, 2},
		{"checkpoint_bytes", s.CheckpointBytes, 0, math.MaxInt64},
	} {
		if err := inRange(r.field, r.v, r.lo, r.hi); err != nil {
			return err
		}
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
			ok = l.Window == 0 && l.StateBytes >= 0 && !l.Chunked
		}
		if !ok {
			return bad("layer %d has an invalid attention entry %+v", i, l)
		}
	}
	if m := s.MoE; m != nil {
		for _, r := range []struct {
			field     string
			v, lo, hi int64
		}{
			{"moe.experts", int64(m.Experts), 2, maxExperts},
			{"moe.top_k", int64(m.TopK), 1, int64(max(m.Experts, 1))},
			{"moe.intermediate", int64(m.Intermediate), 1, maxWidth},
			{"moe.shared", int64(m.Shared), 0, maxExperts},
			{"moe.shared_inter", int64(m.SharedInter), 0, maxExperts * maxWidth},
			{"moe.dense_layers", int64(m.DenseLayers), 0, int64(s.Layers)},
			{"moe.layer_freq", int64(m.LayerFreq), 0, int64(s.Layers)},
		} {
			if err := inRange(r.field, r.v, r.lo, r.hi); err != nil {
				return err
			}
		}
		if (m.Shared > 0) != (m.SharedInter > 0) {
			return bad("%d shared experts with a total width of %d", m.Shared, m.SharedInter)
		}
	}
	if m := s.MLA; m != nil {
		for _, r := range []struct {
			field     string
			v, lo, hi int64
		}{
			{"mla.kv_lora_rank", int64(m.KVLoraRank), 1, maxWidth},
			{"mla.q_lora_rank", int64(m.QLoraRank), 0, maxWidth},
			{"mla.qk_rope_head_dim", int64(m.QKRopeHeadDim), 1, maxWidth},
			{"mla.qk_nope_head_dim", int64(m.QKNopeHeadDim), 0, maxWidth},
			{"mla.v_head_dim", int64(m.VHeadDim), 1, maxWidth},
		} {
			if err := inRange(r.field, r.v, r.lo, r.hi); err != nil {
				return err
			}
		}
	}
	if q := s.Quant; q != nil {
		if q.Method == "" {
			return bad("quantization has no method")
		}
		if err := inRange("quantization.bits", int64(q.Bits), 0, 16); err != nil {
			return err
		}
		if err := inRange("quantization.group_size", int64(q.GroupSize), 0, maxWidth); err != nil {
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
