package model

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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
	s.config = data
	return s, nil
}

// WithOverrides is the model as vLLM reads it with --hf-overrides: ov's
// keys set on config.json before it is read, a key holding a nested
// config (an object with a model_type, such as text_config) updated key
// by key, any other replaced whole (vLLM's _apply_dict_overrides). The
// caller's fields (ID, Alias, the checkpoint's size) are kept.
func (s Spec) WithOverrides(ov map[string]any) (Spec, error) {
	if len(ov) == 0 {
		return s, nil
	}
	if s.config == nil {
		return s, errors.New("--hf-overrides: the model's config.json is not at hand to override")
	}
	root, err := decodeConfig(s.config)
	if err != nil {
		return s, err
	}
	applyOverrides(root, ov)
	data, err := json.Marshal(root)
	if err != nil {
		return s, fmt.Errorf("--hf-overrides: %v", err)
	}
	out, err := ParseConfig(data)
	if err != nil {
		return s, fmt.Errorf("--hf-overrides: %v", err)
	}
	out.ID, out.Alias, out.CheckpointBytes, out.CheckpointSource = s.ID, s.Alias, s.CheckpointBytes, s.CheckpointSource
	return out, nil
}

// applyOverrides sets ov's keys on m, recursing into nested configs.
func applyOverrides(m, ov map[string]any) {
	for k, v := range ov {
		cur, isCfg := m[k].(map[string]any)
		sub, isObj := v.(map[string]any)
		if isCfg && isObj && cur["model_type"] != nil {
			applyOverrides(cur, sub)
			continue
		}
		m[k] = v
	}
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
	case "moonvit":
		// Kimi-VL's MoonViTConfig defaults (configuration_kimi_vl.py).
		return map[string]any{"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
			"num_attention_heads": 16, "patch_size": 14, "init_pos_emb_height": 64, "init_pos_emb_width": 64}
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
	// Context length as vLLM's _get_and_verify_max_len derives it: the
	// smallest of the keys it reads, model_max_length in their place when
	// given (Cohere), 2048 when none is (parseRoPE then scales it).
	// A key out of range (a tokenizer's "no limit" sentinel of 1e30)
	// bounds nothing; it is the error only when no key reads.
	mp, found := 0, false
	var bad error
	for _, key := range []string{"max_position_embeddings", "n_positions", "max_seq_len",
		"seq_length", "model_max_length", "max_sequence_length", "max_seq_length", "seq_len"} {
		n, ok, err := c.int(1, maxPositions, key)
		if err != nil {
			bad = cmp.Or(bad, err)
			continue
		}
		if ok && (!found || n < mp) {
			mp, found = n, true
		}
	}
	if n, ok, err := c.int(1, maxPositions, "model_max_length"); err == nil && ok {
		mp, found = n, true
	}
	switch {
	case !found && bad != nil:
		return bad
	case !found:
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
	// Multi-token-prediction layers the checkpoint ships for speculative
	// decoding: DeepSeek-V3/R1, GLM-4.5, MiMo name them
	// num_nextn_predict_layers, Qwen3-Next and Qwen3.5 mtp_num_hidden_layers.
	if s.MTPLayers, _, err = c.int(0, maxLayers, "num_nextn_predict_layers", "mtp_num_hidden_layers"); err != nil {
		return err
	}

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
	raw := s.MaxPositions
	switch typ {
	case "linear", "dynamic":
		s.RopePositions, err = scaled(raw)
	case "yarn", "deepseek_yarn":
		// transformers treats a missing original length as max_position_embeddings.
		base := raw
		if origOK {
			base = orig
		}
		s.RopePositions, err = scaled(base)
	case "longrope", "su":
		if origOK {
			s.RopePositions = raw + orig
		}
	}
	if err != nil {
		return err
	}
	// vLLM's longest context multiplies by a scaling it does not take as
	// already counted in max_position_embeddings (every type but su,
	// longrope and llama3), YaRN's from rope_scaling's original length;
	// Gemma 3's 128K is already scaled (_get_and_verify_max_len).
	if typ != "" && typ != "su" && typ != "longrope" && typ != "llama3" && fam != "gemma3" {
		base := raw
		if typ == "yarn" && origOK {
			base = orig
		}
		if n := float64(base) * factor; n >= 1 && n <= maxPositions {
			s.MaxPositions = int(n)
		} else {
			return fmt.Errorf("config.json: rope_scaling makes the longest context %v tokens, outside 1 to %d: check the file", n, maxPositions)
		}
	}
	return nil
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

// WithoutSlidingWindow is the model as vLLM serves it with
// --disable-sliding-window: the longest context is capped at the smallest
// sliding window (_get_and_verify_max_len, before ModelConfig sets the
// text config's sliding_window to None), and every sliding layer then
// keeps the whole context. Chunked local layers (Llama 4's) are not a
// sliding window and stay.
func (s Spec) WithoutSlidingWindow() Spec {
	w := 0
	for _, l := range s.Attention {
		if l.Kind == Sliding && !l.Chunked && l.Window > 0 && (w == 0 || l.Window < w) {
			w = l.Window
		}
	}
	if w == 0 {
		return s
	}
	layers := make([]Layer, len(s.Attention))
	for i, l := range s.Attention {
		if l.Kind == Sliding && !l.Chunked {
			l = Layer{Kind: Full}
		}
		layers[i] = l
	}
	s.Attention = layers
	s.MaxPositions = min(s.MaxPositions, w)
	return s
}

// WithStateDtypes is the model with its linear-attention states held at
// conv bytes an element for the conv state (and a gated delta-net's whole
// state) and ssm bytes for a Mamba layer's SSM state, as vLLM's
// MambaStateDtypeCalculator holds them (--mamba-cache-dtype,
// --mamba-ssm-cache-dtype); the states were read at the model's dtype.
func (s Spec) WithStateDtypes(conv, ssm int64) Spec {
	b := dtypeBytes(s.Dtype)
	if (conv == b && ssm == b) || conv <= 0 || ssm <= 0 {
		return s
	}
	layers := make([]Layer, len(s.Attention))
	for i, l := range s.Attention {
		if l.Kind == Linear && l.StateBytes > 0 {
			rest := (l.StateBytes - l.SSMBytes) / b * conv
			l.SSMBytes = l.SSMBytes / b * ssm
			l.StateBytes = rest + l.SSMBytes
			l.GroupConvBytes = l.GroupConvBytes / b * conv
		}
		layers[i] = l
	}
	s.Attention = layers
	return s
}

// stateBytes is a sequence's linear-attention state over every layer.
func (s Spec) stateBytes() int64 {
	var n int64
	for _, l := range s.Attention {
		n += l.StateBytes
	}
	return n
}

// OverridesNote says what the flags named (--hf-overrides,
// --rope-scaling) changed of the model as planned: the longest context,
// the shape, the architecture.
func OverridesNote(flags string, before, after Spec) string {
	var changed []string
	num := func(what string, a, b int) {
		if a != b {
			changed = append(changed, fmt.Sprintf("%s %d → %d", what, a, b))
		}
	}
	if before.Architecture != after.Architecture {
		changed = append(changed, fmt.Sprintf("architecture %s → %s", before.Architecture, after.Architecture))
	}
	num("longest context", before.MaxPositions, after.MaxPositions)
	num("rotary positions", before.RopePositions, after.RopePositions)
	num("layers", before.Layers, after.Layers)
	num("sliding-window layers", before.CountKind()[Sliding], after.CountKind()[Sliding])
	if a, b := before.stateBytes(), after.stateBytes(); a != b {
		changed = append(changed, fmt.Sprintf("linear-attention state %d → %d B a sequence", a, b))
	}
	num("hidden size", before.Hidden, after.Hidden)
	num("KV heads", before.KVHeads, after.KVHeads)
	num("vocabulary", before.Vocab, after.Vocab)
	if len(changed) == 0 {
		return "the model's config.json read with " + flags + ": nothing headroom plans with changed"
	}
	return "the model's config.json read with " + flags + ": " + strings.Join(changed, ", ")
}
