package vllm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This file reads --speculative-config as vLLM takes it: a JSON object
// (vllm/config/speculative.py, SpeculativeConfig), or the same keys given
// one by one as --speculative-config.KEY VALUE, which vLLM's argument
// parser folds into the object. The method is inferred and renamed as vLLM
// does (docs/features.md §2): what the memory planner and the
// simulator need is the method, the draft checkpoint, the number of
// proposed tokens and the draft's parallelism and storage.

// SpecMethod is a speculative-decoding method as vLLM names it after its
// own renaming (the per-model MTP names become SpecMTP).
type SpecMethod string

// The methods of vLLM's SpeculativeMethod (vllm/config/speculative.py,
// 2026 main; earlier releases have a subset).
const (
	SpecNgram         SpecMethod = "ngram"
	SpecNgramGPU      SpecMethod = "ngram_gpu"
	SpecSuffix        SpecMethod = "suffix"
	SpecMedusa        SpecMethod = "medusa"
	SpecMLPSpeculator SpecMethod = "mlp_speculator"
	SpecDraftModel    SpecMethod = "draft_model"
	SpecCustomClass   SpecMethod = "custom_class"
	SpecEagle         SpecMethod = "eagle"
	SpecEagle3        SpecMethod = "eagle3"
	SpecExtractHidden SpecMethod = "extract_hidden_states"
	SpecDFlash        SpecMethod = "dflash"
	SpecDSpark        SpecMethod = "dspark"
	SpecMTP           SpecMethod = "mtp"
)

// specMethods lists the methods vLLM accepts, for the error that names them.
var specMethods = []SpecMethod{SpecNgram, SpecNgramGPU, SpecSuffix, SpecMedusa, SpecMLPSpeculator, SpecDraftModel,
	SpecCustomClass, SpecEagle, SpecEagle3, SpecExtractHidden, SpecDFlash, SpecDSpark, SpecMTP}

// DefaultSuffixTreeDepth is what suffix decoding proposes when
// num_speculative_tokens is not given: suffix_decoding_max_tree_depth's
// default, 24 (vllm/config/speculative.py).
const DefaultSuffixTreeDepth = 24

// DefaultPromptLookup is the n-gram proposer's prompt_lookup_min and
// prompt_lookup_max when neither is given (vllm/config/speculative.py).
const DefaultPromptLookup = 5

// MaxSpeculativeTokens bounds num_speculative_tokens: vLLM sets no limit,
// but every proposed token is a slot in each decode step and a multiple of
// the CUDA-graph batch, and the longest drafts published propose 24
// (suffix decoding's default tree depth); past this the value is a typo.
const MaxSpeculativeTokens = 256

// maxConfigJSON bounds the text of a JSON-valued flag: vLLM's configs are
// a few hundred bytes; a megabyte is not a flag.
const maxConfigJSON = 64 << 10

// SpeculativeConfig is --speculative-config, read as vLLM reads it.
type SpeculativeConfig struct {
	// Method is the method after vLLM's inference and renaming: given,
	// or inferred from the draft (SpecDraftModel until the draft's
	// config says otherwise, see WithDraftType).
	Method SpecMethod `json:"method"`
	// MethodGiven is "method" as written ("deepseek_mtp", "[ngram]"); ""
	// when it was inferred.
	MethodGiven string `json:"method_given,omitempty"`
	// Model is the draft checkpoint; "" for n-gram and suffix decoding,
	// and for MTP and DSpark drafting from the target's own checkpoint.
	Model string `json:"model,omitempty"`
	// NumSpeculativeTokens is k, the tokens proposed per step; 0 when not
	// given (vLLM then takes the draft config's n_predict, MTP its
	// num_nextn_predict_layers, suffix decoding DefaultSuffixTreeDepth).
	NumSpeculativeTokens int `json:"num_speculative_tokens,omitempty"`
	// DraftTensorParallelSize is the draft's TP size: 1 or the target's
	// (vLLM refuses others); 0 when not given (the target's).
	DraftTensorParallelSize int `json:"draft_tensor_parallel_size,omitempty"`
	// Quantization and KVCacheDtype are the draft's (#48787 added the
	// latter); "" inherits the target's for MTP, else the draft
	// checkpoint's.
	Quantization string `json:"quantization,omitempty"`
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`
	// MaxModelLen caps the draft's context; 0 when not given.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// PromptLookupMin and PromptLookupMax are the n-gram proposer's match
	// lengths; 0 when not given.
	PromptLookupMin int `json:"prompt_lookup_min,omitempty"`
	PromptLookupMax int `json:"prompt_lookup_max,omitempty"`
	// DraftSampleMethod "probabilistic" keeps the draft's logits for
	// rejection sampling: GPU memory vLLM's docs name and do not size.
	DraftSampleMethod string `json:"draft_sample_method,omitempty"`
	// ParallelDrafting proposes all k tokens in one draft pass (forced on
	// for dflash and dspark).
	ParallelDrafting bool `json:"parallel_drafting,omitempty"`
	// Ignored lists the keys headroom does not read, sorted: vLLM may
	// take them (revision, enforce_eager, use_heterogeneous_vocab ...);
	// none of them is known to move memory.
	Ignored []string `json:"ignored_keys,omitempty"`

	// raw is the JSON as given (or, for keys given one by one, as
	// merged), rendered back verbatim so a command line loses nothing.
	raw string
}

// NeedsDraftModel reports whether the method loads a draft checkpoint of
// its own (Model): a draft model, an EAGLE or DFlash head, Medusa or an
// MLP speculator. MTP and DSpark draft from the target's checkpoint unless
// a model is named; n-gram and suffix decoding load nothing.
func (c SpeculativeConfig) NeedsDraftModel() bool {
	switch c.Method {
	case SpecNgram, SpecNgramGPU, SpecSuffix, SpecCustomClass:
		return false
	case SpecMTP, SpecDSpark:
		return c.Model != ""
	}
	return true
}

// ProposesOnGPU reports whether the proposer runs a network on the GPU
// (n-gram and suffix decoding match tokens on the host; ngram_gpu matches
// on the GPU without weights or KV).
func (c SpeculativeConfig) ProposesOnGPU() bool {
	switch c.Method {
	case SpecNgram, SpecSuffix, SpecNgramGPU:
		return false
	}
	return true
}

// LookaheadTokens is the KV slots the scheduler reserves beyond a running
// request's tokens, num_lookahead_tokens (vllm/config/vllm.py): k for the
// drafting methods, k + 1 for DFlash, 0 for n-gram and suffix decoding,
// whose proposals need no draft KV. k is the tokens proposed per step.
func (c SpeculativeConfig) LookaheadTokens(k int) int {
	switch c.Method {
	case SpecDFlash:
		return k + 1
	case SpecNgram, SpecNgramGPU, SpecSuffix:
		return 0
	}
	return k
}

// String is the JSON as given.
func (c SpeculativeConfig) String() string { return c.raw }

// WithDraftType is the config once the draft checkpoint's config.json is
// read: vLLM infers the method from the draft's model_type when none was
// given (medusa, mlp_speculator, and the per-model MTP types such as
// deepseek_mtp). A method given stays.
func (c SpeculativeConfig) WithDraftType(modelType string) SpeculativeConfig {
	if c.MethodGiven != "" || c.Method != SpecDraftModel {
		return c
	}
	t := strings.ToLower(modelType)
	switch {
	case t == string(SpecMedusa):
		c.Method = SpecMedusa
	case t == string(SpecMLPSpeculator):
		c.Method = SpecMLPSpeculator
	case isMTPName(t):
		c.Method = SpecMTP
	}
	return c
}

// isMTPName reports a per-model MTP name (deepseek_mtp, qwen3_next_mtp,
// glm4_moe_mtp, mimo_mtp, qwen3_5_mtp ...), which vLLM renames to mtp.
func isMTPName(s string) bool { return s == string(SpecMTP) || strings.HasSuffix(s, "_mtp") }

// ParseSpeculativeConfig reads the value of --speculative-config (flag is
// the flag as the user wrote it, for errors). Errors are one line, naming
// the key at fault and what to give.
func ParseSpeculativeConfig(flag, raw string) (*SpeculativeConfig, error) {
	m, err := decodeConfigObject(flag, raw)
	if err != nil {
		return nil, err
	}
	return speculativeFromMap(flag, m, raw)
}

// decodeConfigObject reads a JSON object a flag carries, numbers kept as
// written.
func decodeConfigObject(flag, raw string) (map[string]any, error) {
	if len(raw) > maxConfigJSON {
		return nil, fmt.Errorf("%s: %d bytes of JSON is not a config; give an object such as {\"method\": \"ngram\"}", flag, len(raw))
	}
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%s needs a JSON object", flag)
	}
	if e := varHint(flag, raw); e != nil && !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		return nil, e
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %q is not JSON (%s); quote the object for the shell: '{\"key\": value}'", flag, clip(raw), oneLine(err.Error()))
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: text after the JSON object in %q; give one object", flag, clip(raw))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %q is not a JSON object; give one such as {\"key\": value}", flag, clip(raw))
	}
	return m, nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// speculativeFromMap builds the config from its decoded object; raw is
// the text to render back.
func speculativeFromMap(flag string, m map[string]any, raw string) (*SpeculativeConfig, error) {
	c := &SpeculativeConfig{raw: raw}
	r := configReader{flag: flag, m: m}
	method := r.text("method")
	c.Model = r.text("model")
	c.NumSpeculativeTokens = r.count("num_speculative_tokens", MaxSpeculativeTokens)
	c.DraftTensorParallelSize = r.count("draft_tensor_parallel_size", 1<<10)
	c.Quantization = r.text("quantization")
	c.KVCacheDtype = r.text("kv_cache_dtype")
	c.MaxModelLen = r.count("max_model_len", math.MaxInt32)
	c.PromptLookupMin = r.count("prompt_lookup_min", math.MaxInt32)
	c.PromptLookupMax = r.count("prompt_lookup_max", math.MaxInt32)
	c.DraftSampleMethod = r.text("draft_sample_method")
	c.ParallelDrafting = r.boolean("parallel_drafting")
	if _, ok := m["tensor_parallel_size"]; ok && r.err == nil {
		// vLLM refuses it and points to the right key.
		r.err = fmt.Errorf("%s: tensor_parallel_size is not a key of the speculative config; the draft's is draft_tensor_parallel_size (1 or the target's --tensor-parallel-size)", flag)
	}
	if r.err != nil {
		return nil, r.err
	}
	for k := range m {
		if !r.read[k] && k != "tensor_parallel_size" {
			c.Ignored = append(c.Ignored, k)
		}
	}
	sort.Strings(c.Ignored)
	if err := c.inferMethod(flag, method); err != nil {
		return nil, err
	}
	if c.PromptLookupMin > 0 && c.PromptLookupMax > 0 && c.PromptLookupMin > c.PromptLookupMax {
		return nil, fmt.Errorf("%s: prompt_lookup_min %d is above prompt_lookup_max %d; vLLM refuses it", flag, c.PromptLookupMin, c.PromptLookupMax)
	}
	return c, nil
}

// inferMethod applies vLLM's rules (vllm/config/speculative.py): a method
// given is renamed ("[ngram]" → ngram, per-model MTP names → mtp); without
// one, a model "ngram" is n-gram matching, a dotted import path a custom
// class, and any other model a draft model, refined from its name (EAGLE,
// EAGLE-3, DFlash, DSpark heads) here and from its config by
// WithDraftType.
func (c *SpeculativeConfig) inferMethod(flag, method string) error {
	if method != "" {
		c.MethodGiven = method
		m := strings.ToLower(method)
		switch {
		case m == "[ngram]":
			m = string(SpecNgram)
		case isMTPName(m):
			m = string(SpecMTP)
		}
		for _, known := range specMethods {
			if SpecMethod(m) == known {
				c.Method = known
				return c.needsModel(flag)
			}
		}
		names := make([]string, len(specMethods))
		for i, k := range specMethods {
			names[i] = string(k)
		}
		return fmt.Errorf("%s: method %q is not one vLLM knows; give one of %s (or a per-model MTP name such as deepseek_mtp)", flag, clip(method), strings.Join(names, ", "))
	}
	lower := strings.ToLower(c.Model)
	switch {
	case c.Model == "":
		return fmt.Errorf("%s: neither method nor model is given; give {\"method\": \"ngram\", \"num_speculative_tokens\": 3} or a draft {\"model\": \"...\", \"num_speculative_tokens\": 3}", flag)
	case lower == string(SpecNgram) || lower == "[ngram]":
		c.Method, c.Model = SpecNgram, ""
	case isImportPath(c.Model):
		c.Method = SpecCustomClass
	case strings.Contains(lower, "eagle3"):
		c.Method = SpecEagle3
	case strings.Contains(lower, "eagle-"):
		c.Method = SpecEagle
	case strings.Contains(lower, "dflash"):
		c.Method = SpecDFlash
	case strings.Contains(lower, "dspark"):
		c.Method = SpecDSpark
	default:
		c.Method = SpecDraftModel
	}
	return nil
}

// needsModel refuses a method that needs a draft checkpoint without one,
// as vLLM does ("num_speculative_tokens was provided but without
// speculative model").
func (c *SpeculativeConfig) needsModel(flag string) error {
	if c.Model != "" {
		return nil
	}
	switch c.Method {
	case SpecNgram, SpecNgramGPU, SpecSuffix, SpecMTP, SpecDSpark:
		return nil
	}
	return fmt.Errorf("%s: method %s needs a draft checkpoint: add \"model\": \"<draft or head id>\"", flag, c.Method)
}

// isImportPath reports a dotted Python path to a class ("pkg.mod.Cls"),
// which vLLM loads as a custom proposer; a Hugging Face id has a slash and
// a local path a slash or no dot-separated identifiers.
func isImportPath(s string) bool {
	if strings.ContainsAny(s, "/\\") || !strings.Contains(s, ".") {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for i, r := range part {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// configReader reads typed keys of a decoded JSON object, keeping the
// first error and which keys it read.
type configReader struct {
	flag string
	m    map[string]any
	read map[string]bool
	err  error
}

func (r *configReader) get(key string) (any, bool) {
	if r.read == nil {
		r.read = map[string]bool{}
	}
	r.read[key] = true
	v, ok := r.m[key]
	return v, ok && v != nil
}

func (r *configReader) fail(key, want string, v any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %s is %s; give %s", r.flag, key, clip(renderJSON(v)), want)
	}
}

func (r *configReader) text(key string) string {
	v, ok := r.get(key)
	if !ok {
		return ""
	}
	s, isText := v.(string)
	if !isText {
		r.fail(key, "a string", v)
		return ""
	}
	return s
}

// count reads a whole number from 1 to most (0 when absent).
func (r *configReader) count(key string, most int) int {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !isNum || err != nil || i < 1 || i > int64(most) {
		r.fail(key, fmt.Sprintf("a whole number from 1 to %d", most), v)
		return 0
	}
	return int(i)
}

func (r *configReader) boolean(key string) bool {
	v, ok := r.get(key)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		r.fail(key, "true or false", v)
	}
	return b
}

// renderJSON renders a decoded value back as compact JSON, for errors.
func renderJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(buf.String())
}

// configKey is what a key of vLLM's config objects looks like.
var configKey = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// dottedConfigKey folds a --speculative-config.KEY VALUE option into the
// settings' config, as vLLM's parser folds dotted keys into the JSON
// object: the value is read as JSON when it is (a number, true, a
// quoted string), else as a string. It reports false for any other flag.
func (p *parser) dottedConfigKey(o option, values []string) (bool, error) {
	if (o.base != FlagSpeculativeConfig && o.base != FlagHFOverrides) || o.name == o.base {
		return false, nil
	}
	key := strings.ReplaceAll(o.name[len(o.base)+1:], "-", "_")
	if !configKey.MatchString(key) {
		// the key is not one: the flag as written may hold anything
		return true, fmt.Errorf("%s: %q is not a key of the %s; write keys such as %s", clip(o.spelled), clip(key), o.base, map[string]string{FlagSpeculativeConfig: "num_speculative_tokens", FlagHFOverrides: "max_position_embeddings"}[o.base])
	}
	raw := o.value
	if !o.hasValue {
		if len(values) != 1 {
			return true, fmt.Errorf("%s needs one value", o.spelled)
		}
		raw = values[0]
	}
	m := map[string]any{}
	prevRaw := ""
	if o.base == FlagHFOverrides {
		prevRaw = p.s.HFOverrides.text()
	} else if p.s.Speculative != nil {
		prevRaw = p.s.Speculative.raw
	}
	if prev, err := decodeConfigObject(o.spelled, prevRaw); err == nil {
		m = prev
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		v = raw
	}
	m[key] = v
	merged := renderJSON(m)
	if o.base == FlagHFOverrides {
		c, err := ParseJSONObject(o.spelled, merged)
		if err != nil {
			return true, err
		}
		p.s.HFOverrides = c
		p.set[FlagHFOverrides] = true
		return true, nil
	}
	c, err := speculativeFromMap(o.spelled, m, merged)
	if err != nil {
		return true, err
	}
	p.s.Speculative = c
	p.set[FlagSpeculativeConfig] = true
	return true, nil
}

// SpeculativeForcesRunnerV1 reports whether speculative decoding keeps
// the model on the V1 model runner where Model Runner V2 would otherwise
// run it (pp is the pipeline-parallel size). Model Runner V2 drafts only
// with EAGLE, EAGLE-3, MTP, DFlash, DSpark and extract_hidden_states;
// every other method (n-gram, suffix, a draft model, Medusa, MLP
// speculators, custom classes), EAGLE's parallel drafting and EAGLE-3
// under pipeline parallelism fall back to the V1 runner
// (_get_v2_model_runner_unsupported_features, vllm/config/vllm.py @
// 000fc94b; the list of 0.29.0 may differ slightly, unverified). The
// fallback is taken for every release that picks Model Runner V2 by
// default.
func SpeculativeForcesRunnerV1(c *SpeculativeConfig, pp int) bool {
	if c == nil {
		return false
	}
	switch c.Method {
	case SpecEagle, SpecEagle3:
		return c.ParallelDrafting || (c.Method == SpecEagle3 && pp > 1)
	case SpecMTP, SpecDFlash, SpecDSpark, SpecExtractHidden:
		return false
	}
	return true
}

// ProposedTokens is k, the tokens proposed per step: num_speculative_tokens
// when given; else suffix decoding's tree depth, MTP's n_predict (its
// layers, mtpLayers, when the target drafts), or 1 where vLLM would read
// the draft config's n_predict (given false: the plan says it assumed it).
func (c SpeculativeConfig) ProposedTokens(mtpLayers int) (k int, given bool) {
	switch {
	case c.NumSpeculativeTokens > 0:
		return c.NumSpeculativeTokens, true
	case c.Method == SpecSuffix:
		return DefaultSuffixTreeDepth, true
	case c.Method == SpecMTP && mtpLayers > 0:
		return mtpLayers, true
	}
	return 1, false
}

// DecodeQueryLen is the tokens a decode step runs per request: 1, or 1 + k
// with speculative decoding (uniform_decode_query_len). Without the model
// an MTP drafter is taken to have one layer, as every shipped one has.
func (s Settings) DecodeQueryLen() int {
	if s.Speculative == nil {
		return 1
	}
	k, _ := s.Speculative.ProposedTokens(1)
	return 1 + k
}
