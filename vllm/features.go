package vllm

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// This file holds the flags of the features that move memory beside the
// model itself: LoRA slots, speculative decoding, multimodal limits, and
// the scheduler caps of the 0.29–0.31 releases. Valued flags are typed
// fields of Settings (featureFlags); switches stay in Extra, verbatim, and
// are read with extraBool.

// Flag names of the feature settings (keys of Settings.Set).
const (
	FlagSpeculativeConfig    = "speculative-config"
	FlagEnableLoRA           = "enable-lora"
	FlagMaxLoRAs             = "max-loras"
	FlagMaxLoRARank          = "max-lora-rank"
	FlagLoRADtype            = "lora-dtype"
	FlagLoRAExtraVocabSize   = "lora-extra-vocab-size"
	FlagFullyShardedLoRAs    = "fully-sharded-loras"
	FlagEnableLoRABias       = "enable-lora-bias"
	FlagLimitMMPerPrompt     = "limit-mm-per-prompt"
	FlagHFOverrides          = "hf-overrides"
	FlagDisableSlidingWindow = "disable-sliding-window"
	FlagEnableEPLB           = "enable-eplb"
	FlagMambaCacheDtype      = "mamba-cache-dtype"
	// FlagMambaCacheMode and FlagMambaBlockSize: the Mamba states a
	// request keeps for prefix caching (MambaStateBlocks).
	FlagMambaCacheMode = "mamba-cache-mode"
	FlagMambaBlockSize = "mamba-block-size"
	// FlagDecodeContextParallelSize shards each request's KV cache by
	// tokens over that many ranks of the tensor-parallel group.
	FlagDecodeContextParallelSize   = "decode-context-parallel-size"
	FlagDisableHybridKVCacheManager = "disable-hybrid-kv-cache-manager"
	FlagMambaSSMCacheDtype          = "mamba-ssm-cache-dtype"
	FlagEPLBConfig                  = "eplb-config"
	FlagNumRedundantExperts         = "num-redundant-experts"
	FlagRopeScaling                 = "rope-scaling"
	FlagMMProcessorKwargs           = "mm-processor-kwargs"
	FlagSkipMMProfiling             = "skip-mm-profiling"
	FlagLanguageModelOnly           = "language-model-only"
	// FlagMaxNumActiveSeqs caps the requests running at once while the
	// KV cache and CUDA graphs are still sized by --max-num-seqs (#56758).
	FlagMaxNumActiveSeqs = "max-num-active-seqs"
	// FlagMaxNumQueuedReqs and FlagMaxNumQueuedTokens bound the waiting
	// queue; past them the server refuses new requests (#49445).
	FlagMaxNumQueuedReqs   = "max-num-queued-reqs"
	FlagMaxNumQueuedTokens = "max-num-queued-tokens"
	// FlagDeviceMemoryUtilization is the alias of --gpu-memory-utilization
	// that vLLM added for devices other than GPUs (#56547).
	FlagDeviceMemoryUtilization = "device-memory-utilization"
)

// Environment variables of the features.
const (
	// EnvStartupPlan makes vLLM reuse the KV size a previous start-up of
	// the same configuration measured instead of profiling again (#47388).
	EnvStartupPlan = "VLLM_ENABLE_STARTUP_PLAN"
)

// LoRA defaults (vllm/config/lora.py): one slot of rank 16 in the model's
// dtype, and 256 extra vocabulary rows until the extra vocabulary was
// removed (LoRAExtraVocab).
const (
	DefaultMaxLoRAs           = 1
	DefaultMaxLoRARank        = 16
	DefaultLoRAExtraVocabSize = 256
)

// Version boundaries of the feature rules (never written).
var (
	// loraExtraVocabRemovedIn: lora_extra_vocab_size was deprecated in
	// #23635 and removed by #28382/#28545; its config text said "will be
	// removed in v0.12.0".
	loraExtraVocabRemovedIn = Version{0, 12, 0, ""}
	// moeLoRASince: LoRA on fused-MoE experts (#21229, merged October
	// 2025), usable from 0.11.2 by its users' reports.
	moeLoRASince = Version{0, 11, 2, ""}
	// textOnlyModeSince: all multimodal limits 0 skips the encoder's
	// profile and cache (#22299, merged 2025-08-06, first in 0.10.1).
	textOnlyModeSince = Version{0, 10, 1, ""}
	// newSchedulerFlagsSince: the releases 0.29–0.31 added
	// --device-memory-utilization (#56547), --max-num-queued-reqs and
	// --max-num-queued-tokens (#49445), --max-num-active-seqs (#56758),
	// --load-format ipc_cache (#54921). The notes name the range, not
	// the release of each; 0.29.0 is taken as the first, so at 0.29 and
	// 0.30 a flag may be accepted here that the release refuses.
	newSchedulerFlagsSince = Version{0, 29, 0, ""}
	// mambaCacheModeSince: --mamba-cache-mode none/align/all and
	// --mamba-block-size, Mamba prefix caching (#30877, v0.16 docs).
	mambaCacheModeSince = Version{0, 16, 0, ""}
)

// featureFlags are the valued feature flags Settings holds, rendered after
// the engine's own (engineFlags). Read-only.
var featureFlags = []engineFlag{
	{name: FlagSpeculativeConfig, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.Speculative, err = ParseSpeculativeConfig(f, r); return },
		get: func(s Settings) string {
			if s.Speculative == nil {
				return ""
			}
			return s.Speculative.raw
		}},
	{name: FlagMaxLoRAs,
		set: func(s *Settings, f, r string) (err error) { s.MaxLoRAs, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxLoRAs)) }},
	{name: FlagMaxLoRARank,
		set: func(s *Settings, f, r string) (err error) {
			s.MaxLoRARank, err = parseChoiceInt(f, r, LoRARanks...)
			return
		},
		get: func(s Settings) string { return itoa(int64(s.MaxLoRARank)) }},
	{name: FlagLoRADtype,
		set: func(s *Settings, f, r string) (err error) { s.LoRADtype, err = parseDtypeFlag(f, r); return },
		get: func(s Settings) string { return s.LoRADtype }},
	{name: FlagLoRAExtraVocabSize,
		set: func(s *Settings, f, r string) (err error) { s.LoRAExtraVocabSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.LoRAExtraVocabSize)) }},
	{name: FlagLimitMMPerPrompt, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.LimitMMPerPrompt, err = ParseMMLimits(f, r); return },
		get: func(s Settings) string {
			if s.LimitMMPerPrompt == nil {
				return ""
			}
			return s.LimitMMPerPrompt.raw
		}},
	{name: FlagMMProcessorKwargs, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) {
			s.MMProcessorKwargs, err = ParseMMProcessorKwargs(f, r)
			return
		},
		get: func(s Settings) string {
			if s.MMProcessorKwargs == nil {
				return ""
			}
			return s.MMProcessorKwargs.raw
		}},
	{name: FlagHFOverrides, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.HFOverrides, err = ParseJSONObject(f, r); return },
		get: func(s Settings) string { return s.HFOverrides.text() }},
	{name: FlagRopeScaling, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.RopeScaling, err = ParseJSONObject(f, r); return },
		get: func(s Settings) string { return s.RopeScaling.text() }},
	{name: FlagEPLBConfig, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.EPLBConfig, err = parseEPLBConfig(f, r); return },
		get: func(s Settings) string { return s.EPLBConfig.text() }},
	{name: FlagNumRedundantExperts,
		set: func(s *Settings, f, r string) (err error) {
			s.NumRedundantExperts, err = parseCountOrZero(f, r)
			return
		},
		get: func(s Settings) string { return itoa(int64(s.NumRedundantExperts)) }},
	{name: FlagMambaCacheDtype,
		set: func(s *Settings, f, r string) (err error) { s.MambaCacheDtype, err = parseDtypeFlag(f, r); return },
		get: func(s Settings) string { return s.MambaCacheDtype }},
	{name: FlagMambaSSMCacheDtype,
		set: func(s *Settings, f, r string) (err error) { s.MambaSSMCacheDtype, err = parseDtypeFlag(f, r); return },
		get: func(s Settings) string { return s.MambaSSMCacheDtype }},
	{name: FlagDecodeContextParallelSize,
		set: func(s *Settings, f, r string) (err error) {
			s.DecodeContextParallelSize, err = parseCount(f, r)
			return
		},
		get: func(s Settings) string { return itoa(int64(s.DecodeContextParallelSize)) }},
	{name: FlagMambaCacheMode,
		set: func(s *Settings, f, r string) (err error) { s.MambaCacheMode, err = parseMambaCacheMode(f, r); return },
		get: func(s Settings) string { return s.MambaCacheMode }},
	{name: FlagMambaBlockSize,
		set: func(s *Settings, f, r string) (err error) { s.MambaBlockSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MambaBlockSize)) }},
	{name: FlagMaxNumActiveSeqs,
		set: func(s *Settings, f, r string) (err error) { s.MaxNumActiveSeqs, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxNumActiveSeqs)) }},
	{name: FlagMaxNumQueuedReqs,
		set: func(s *Settings, f, r string) (err error) { s.MaxNumQueuedReqs, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxNumQueuedReqs)) }},
	{name: FlagMaxNumQueuedTokens,
		set: func(s *Settings, f, r string) (err error) { s.MaxNumQueuedTokens, err = parseTokens(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxNumQueuedTokens)) }},
}

// extraBool reads a switch kept in Extra: --NAME or --NAME=true is on,
// --no-NAME or --NAME=false off, the last one written wins; absent is off.
func (s Settings) extraBool(name string) bool {
	on := false
	for _, tok := range s.Extra {
		if !isFlag(tok) {
			continue
		}
		o := splitOption(tok)
		switch o.name {
		case name:
			on = true
			if o.hasValue {
				on, _ = parseBool(o.spelled, o.value)
			}
		case "no-" + name:
			on = false
		}
	}
	return on
}

// LoRAEnabled reports --enable-lora: vLLM then allocates MaxLoRAs adapter
// slots of MaxLoRARank on every wrapped module at start-up.
func (s Settings) LoRAEnabled() bool { return s.extraBool(FlagEnableLoRA) }

// FullyShardedLoRAs reports --fully-sharded-loras: both LoRA matrices are
// split by tensor parallelism, not only the one the base layer splits.
func (s Settings) FullyShardedLoRAs() bool { return s.extraBool(FlagFullyShardedLoRAs) }

// LoRABias reports --enable-lora-bias: a bias slot beside each B matrix.
func (s Settings) LoRABias() bool { return s.extraBool(FlagEnableLoRABias) }

// SkipMMProfiling reports --skip-mm-profiling (#22950): the profile run
// leaves the encoder and its cache out, and the user owns that memory.
func (s Settings) SkipMMProfiling() bool { return s.extraBool(FlagSkipMMProfiling) }

// LanguageModelOnly reports --language-model-only (2026 releases): as all
// multimodal limits 0, the encoder is neither profiled nor, for models that
// implement it, loaded.
func (s Settings) LanguageModelOnly() bool { return s.extraBool(FlagLanguageModelOnly) }

// LoRASlots is the slots and rank vLLM allocates with --enable-lora, the
// defaults filled in; zero when LoRA is off.
func (s Settings) LoRASlots() (slots, rank int) {
	if !s.LoRAEnabled() {
		return 0, 0
	}
	slots, rank = s.MaxLoRAs, s.MaxLoRARank
	if slots == 0 {
		slots = DefaultMaxLoRAs
	}
	if rank == 0 {
		rank = DefaultMaxLoRARank
	}
	return slots, rank
}

// LoRAExtraVocab is the extra vocabulary rows each LoRA slot (and the
// model's embedding and LM head) carries: --lora-extra-vocab-size, 256 by
// default, before 0.12.0; none from 0.12.0, which removed them.
func (s Settings) LoRAExtraVocab() int {
	if !s.LoRAEnabled() || orNewest(s.Version).AtLeast(loraExtraVocabRemovedIn) {
		return 0
	}
	if s.LoRAExtraVocabSize > 0 {
		return s.LoRAExtraVocabSize
	}
	return DefaultLoRAExtraVocabSize
}

// LoRAOnExperts reports whether the release gives fused-MoE experts LoRA
// slots (0.11.2 on, #21229); before, adapters with expert weights were
// refused and the experts had none.
func LoRAOnExperts(v Version) bool { return orNewest(v).AtLeast(moeLoRASince) }

// TextOnlyModeSince is the release from which all multimodal limits 0
// run a multimodal model as text only.
func TextOnlyModeSince() Version { return textOnlyModeSince }

// NewSchedulerFlagsSince is the first release taken to know
// --device-memory-utilization, --max-num-queued-reqs/-tokens,
// --max-num-active-seqs and --load-format ipc_cache.
func NewSchedulerFlagsSince() Version { return newSchedulerFlagsSince }

// StartupPlanEnabled reports VLLM_ENABLE_STARTUP_PLAN=1 (#47388): vLLM
// reuses its own measured KV size from an earlier start-up.
func (s Settings) StartupPlanEnabled() bool {
	on, _ := envBool(s.Env, EnvStartupPlan)
	return on
}

// Modalities vLLM names in --limit-mm-per-prompt.
const (
	ModalityImage = "image"
	ModalityVideo = "video"
	ModalityAudio = "audio"
)

// DefaultMMLimit is the items per prompt of a modality the flag does not
// name (MultiModalConfig.limit_per_prompt's default, 999).
const DefaultMMLimit = 999

// maxMMItems bounds one modality's count and sizes: far past any prompt,
// so that arithmetic on them cannot overflow.
const maxMMItems = 1 << 20

// MMLimit is one modality of --limit-mm-per-prompt: how many items a
// prompt may carry and, from about 0.11, the size the profile run's dummy
// item takes (0 when not given: the model's largest).
type MMLimit struct {
	Count     int `json:"count"`
	Width     int `json:"width,omitempty"`
	Height    int `json:"height,omitempty"`
	NumFrames int `json:"num_frames,omitempty"`
	Length    int `json:"length,omitempty"`
}

// MMLimits is --limit-mm-per-prompt by modality.
type MMLimits struct {
	Limits map[string]MMLimit `json:"limits"`
	raw    string
}

// Of is the limit of a modality: the one given, or DefaultMMLimit.
func (m *MMLimits) Of(modality string) MMLimit {
	if m != nil {
		if l, ok := m.Limits[modality]; ok {
			return l
		}
	}
	return MMLimit{Count: DefaultMMLimit}
}

// ParseMMLimits reads --limit-mm-per-prompt: a JSON object of counts or of
// {"count": N, "width": W, "height": H, "num_frames": F, "length": L}, or
// the older image=N,video=M form.
func ParseMMLimits(flag, raw string) (*MMLimits, error) {
	m := &MMLimits{Limits: map[string]MMLimit{}, raw: raw}
	if t := strings.TrimSpace(raw); t != "" && !strings.HasPrefix(t, "{") {
		for _, part := range strings.Split(t, ",") {
			k, v, ok := strings.Cut(part, "=")
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if !ok || err != nil || n < 0 || n > maxMMItems || strings.TrimSpace(k) == "" {
				if e := varHint(flag, raw); e != nil {
					return nil, e
				}
				return nil, fmt.Errorf("%s: %q is not JSON or MODALITY=COUNT pairs; give '{\"image\": 2, \"video\": 0}'", flag, clip(raw))
			}
			m.Limits[strings.TrimSpace(k)] = MMLimit{Count: n}
		}
		return m, nil
	}
	obj, err := decodeConfigObject(flag, raw)
	if err != nil {
		return nil, err
	}
	for k, v := range obj {
		r := configReader{flag: flag + " " + k, m: map[string]any{"count": v}}
		if sub, ok := v.(map[string]any); ok {
			r.m = sub
		}
		l := MMLimit{Count: r.amount("count")}
		l.Width, l.Height = r.amount("width"), r.amount("height")
		l.NumFrames, l.Length = r.amount("num_frames"), r.amount("length")
		if r.err != nil {
			return nil, r.err
		}
		m.Limits[k] = l
	}
	return m, nil
}

// amount reads a whole number from 0 to maxMMItems (0 when absent).
func (r *configReader) amount(key string) int {
	v, ok := r.get(key)
	if !ok {
		return 0
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !isNum || err != nil || i < 0 || i > maxMMItems {
		r.fail(key, fmt.Sprintf("a whole number from 0 to %d", maxMMItems), v)
		return 0
	}
	return int(i)
}

// MMProcessorKwargs is --mm-processor-kwargs: keyword arguments of the
// model's multimodal processor. The ones that bound an item's size are
// read; the rest are kept verbatim.
type MMProcessorKwargs struct {
	// MaxPixels and MinPixels bound an image's pixels (Qwen2-VL and
	// Qwen2.5-VL); 0 when not given.
	MaxPixels int64 `json:"max_pixels,omitempty"`
	MinPixels int64 `json:"min_pixels,omitempty"`
	// Keys lists every key given, sorted.
	Keys []string `json:"keys"`
	raw  string
}

// ParseMMProcessorKwargs reads --mm-processor-kwargs, a JSON object.
func ParseMMProcessorKwargs(flag, raw string) (*MMProcessorKwargs, error) {
	obj, err := decodeConfigObject(flag, raw)
	if err != nil {
		return nil, err
	}
	k := &MMProcessorKwargs{raw: raw}
	r := configReader{flag: flag, m: obj}
	k.MaxPixels = int64(r.count("max_pixels", math.MaxInt32))
	k.MinPixels = int64(r.count("min_pixels", math.MaxInt32))
	if r.err != nil {
		return nil, r.err
	}
	for key := range obj {
		k.Keys = append(k.Keys, key)
	}
	sort.Strings(k.Keys)
	return k, nil
}

// JSONObject is a flag's JSON object: --hf-overrides and --rope-scaling
// (keys for the model's config.json), --eplb-config.
type JSONObject struct {
	// Keys lists every key given, sorted.
	Keys   []string `json:"keys"`
	values map[string]any
	raw    string
}

// ParseJSONObject reads a JSON object of config keys.
func ParseJSONObject(flag, raw string) (*JSONObject, error) {
	obj, err := decodeConfigObject(flag, raw)
	if err != nil {
		return nil, err
	}
	o := &JSONObject{values: obj, raw: raw}
	for key := range obj {
		o.Keys = append(o.Keys, key)
	}
	sort.Strings(o.Keys)
	return o, nil
}

func (o *JSONObject) text() string {
	if o == nil {
		return ""
	}
	return o.raw
}

// ModelOverrides are the keys vLLM sets on the model's config before it
// reads it (ModelConfig): --hf-overrides, then --rope-scaling's value as
// rope_scaling, which vLLM folds in after them; nil when neither is given.
func (s Settings) ModelOverrides() map[string]any {
	if s.HFOverrides == nil && s.RopeScaling == nil {
		return nil
	}
	out := map[string]any{}
	if s.HFOverrides != nil {
		for k, v := range s.HFOverrides.values {
			out[k] = v
		}
	}
	if s.RopeScaling != nil {
		out["rope_scaling"] = s.RopeScaling.values
	}
	return out
}

// StateDtypeBytes are the bytes an element of a linear-attention layer's
// conv state and of a Mamba layer's SSM state, as vLLM's
// MambaStateDtypeCalculator picks them for a model whose dtype is
// checkpoint: --mamba-cache-dtype (auto: the model's --dtype) for the
// conv state (and a gated delta-net's whole state), --mamba-ssm-cache-dtype
// (auto: the conv state's) for the SSM state.
func (s Settings) StateDtypeBytes(checkpoint string) (conv, ssm int, err error) {
	cd := s.MambaCacheDtype
	if cd == "" || cd == "auto" {
		cd = s.Dtype
	}
	if conv, err = DtypeBytes(cd, checkpoint); err != nil {
		return 0, 0, err
	}
	if sd := s.MambaSSMCacheDtype; sd != "" && sd != "auto" {
		ssm, err = DtypeBytes(sd, checkpoint)
		return conv, ssm, err
	}
	return conv, conv, nil
}

// mambaCacheModes are --mamba-cache-mode's values (MambaCacheMode, #30877).
var mambaCacheModes = []string{"none", "align", "all"}

func parseMambaCacheMode(flag, raw string) (string, error) {
	for _, m := range mambaCacheModes {
		if raw == m {
			return raw, nil
		}
	}
	return "", fmt.Errorf("%s: %q is not one of %s", flag, clip(raw), strings.Join(mambaCacheModes, ", "))
}

// MambaStateBlocks is how many state blocks a request of length tokens
// keeps in each linear-attention (Mamba) layer (vLLM 0.16, #30877):
// --mamba-cache-mode none 1 (the running state), align 2, all one at
// every --mamba-block-size tokens (default the block size); with prefix
// caching off the mode is none. Without the flag, 1.
func (s Settings) MambaStateBlocks(length, blockSize int) int64 {
	if s.Set[FlagNoPrefixCaching] {
		return 1
	}
	switch s.MambaCacheMode {
	case "align":
		return 2
	case "all":
		bs := s.MambaBlockSize
		if bs <= 0 {
			bs = blockSize
		}
		return int64(max((length+bs-1)/max(bs, 1), 1))
	}
	return 1
}

// EPLB is --enable-eplb: vLLM's expert-parallel load balancer.
func (s Settings) EPLB() bool { return s.extraBool(FlagEnableEPLB) }

// RedundantExperts is the experts EPLB replicates beyond the model's
// (num_redundant_experts): --eplb-config's key, else
// --num-redundant-experts (its older flag); 0 when neither gives it. An
// unreadable key is 0 (the parse said so already).
func (s Settings) RedundantExperts() int {
	if s.EPLBConfig != nil {
		if n, ok := redundantKey(s.EPLBConfig.values); ok {
			return n
		}
	}
	return s.NumRedundantExperts
}

// maxRedundantExperts bounds num_redundant_experts: far above any
// model's experts (DeepSeek-V3 has 256).
const maxRedundantExperts = 1 << 16

// redundantKey reads num_redundant_experts of an EPLB config: a whole
// number from 0; ok false when absent or not one.
func redundantKey(m map[string]any) (int, bool) {
	v, ok := m["num_redundant_experts"]
	if !ok {
		return 0, false
	}
	n, isNum := v.(json.Number)
	i, err := strconv.ParseInt(string(n), 10, 64)
	if !isNum || err != nil || i < 0 || i > maxRedundantExperts {
		return 0, false
	}
	return int(i), true
}

// parseEPLBConfig reads --eplb-config, a JSON object whose
// num_redundant_experts, when given, is a whole number from 0.
func parseEPLBConfig(flag, raw string) (*JSONObject, error) {
	o, err := ParseJSONObject(flag, raw)
	if err != nil {
		return nil, err
	}
	if v, ok := o.values["num_redundant_experts"]; ok {
		if _, ok := redundantKey(o.values); !ok {
			return nil, fmt.Errorf("%s: num_redundant_experts is %s, want a whole number from 0 to %d", flag, clip(renderJSON(v)), maxRedundantExperts)
		}
	}
	return o, nil
}

// HybridKVCacheManagerDisabled is --disable-hybrid-kv-cache-manager.
func (s Settings) HybridKVCacheManagerDisabled() bool {
	return s.extraBool(FlagDisableHybridKVCacheManager)
}

// DisableSlidingWindow is --disable-sliding-window.
func (s Settings) DisableSlidingWindow() bool { return s.extraBool(FlagDisableSlidingWindow) }

// OverrideFlags names the flags that change the model vLLM serves from
// its config (memory.ServedModel).
func (s Settings) OverrideFlags() string {
	var f []string
	if s.HFOverrides != nil {
		f = append(f, "--"+FlagHFOverrides)
	}
	if s.RopeScaling != nil {
		f = append(f, "--"+FlagRopeScaling)
	}
	if s.DisableSlidingWindow() {
		f = append(f, "--"+FlagDisableSlidingWindow)
	}
	if s.MambaCacheDtype != "" {
		f = append(f, "--"+FlagMambaCacheDtype)
	}
	if s.MambaSSMCacheDtype != "" {
		f = append(f, "--"+FlagMambaSSMCacheDtype)
	}
	return strings.Join(f, " and ")
}

// canonicalName is a long option's name as vLLM reads it: no dashes in
// front, underscores as dashes.
func canonicalName(spelled string) string {
	return strings.ReplaceAll(strings.TrimLeft(spelled, "-"), "_", "-")
}

// FlagWords is one flag given by name and value, as a form or an API body
// gives it ("enable-lora": "true"), written as the words of a command
// line, as FromMap reads a map: a switch on is the bare flag, off its
// --no- form where it is on by default (else nothing), and a value flag
// --NAME VALUE.
func FlagWords(name, value string) ([]string, error) {
	if canonicalName(name) == FlagModel {
		return []string{"--" + FlagModel + "=" + value}, nil
	}
	s, err := FromMap(map[string]any{name: value})
	if err != nil {
		return nil, err
	}
	return s.Args(), nil
}
