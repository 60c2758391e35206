package memory

import (
	"fmt"
	"strings"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// features are the parts of a `vllm serve` line beside the model that move
// GPU memory: LoRA slots, a speculative drafter, multimodal limits. Each
// adds its term to the plan through the hooks below (planWith calls them),
// and its findings to the plan's.
type features struct {
	lora    loraShape
	hasLoRA bool
	draft   *drafter
	mm      *multimodal
	// noHybrid is --disable-hybrid-kv-cache-manager (unifyHybrid).
	noHybrid bool
	// dcp is --decode-context-parallel-size (shardTokens).
	dcp int
	// stateBlocks is the Mamba state blocks of a request by its length
	// (--mamba-cache-mode).
	stateBlocks func(length int) int64
}

// featuresFor reads the settings' features for a plan.
func featuresFor(in Input, set vllm.Settings, dtypeBytes, kvBytes int) (features, error) {
	var f features
	var err error
	if f.lora, f.hasLoRA, err = loraShapeFor(in.Model, set, dtypeBytes); err != nil {
		return f, err
	}
	if f.draft, err = drafterFor(in, set, dtypeBytes, kvBytes); err != nil {
		return f, err
	}
	f.mm = multimodalFor(in.Model, set)
	f.noHybrid = set.HybridKVCacheManagerDisabled()
	f.dcp = max(set.DecodeContextParallelSize, 1)
	if set.MambaCacheMode != "" {
		f.stateBlocks = func(length int) int64 { return set.MambaStateBlocks(length, set.BlockSize) }
	}
	return f, nil
}

// runner is the profile run once speculative decoding has had its say: a
// method Model Runner V2 does not draft with keeps the V1 runner, and with
// it the V1 runner's sampler.
func (f features) runner(run profileRun, set vllm.Settings) profileRun {
	if run.runnerV2 && vllm.SpeculativeForcesRunnerV1(set.Speculative, set.PipelineParallelSize) {
		run.runnerV2 = false
		run.sampler = vllm.DummySampler(set.Version, false, set.Install)
	}
	return run
}

// weights is what the features load on one rank of stage st, inside
// "Model loading took": the LoRA slots of its layers and, on the last
// stage (where vLLM places the drafter), the drafter.
func (f features) weights(s model.Spec, st stage, dtypeBytes int) int64 {
	var n int64
	if f.hasLoRA {
		n += loraBytes(s, st, f.lora, dtypeBytes)
	}
	if st.isLast {
		n += f.draft.weightBytes(dtypeBytes) + f.draft.ropeBytes(s, dtypeBytes)
	}
	return n
}

// activationSpec is the model the profile run's language-model pass sees.
func (f features) activationSpec(s model.Spec) model.Spec { return f.mm.activationSpec(s) }

// activation is the stage's profile peak once the encoder's own pass is
// taken into account: the larger of the language model's peak and, on
// the first stage, the encoder's.
func (f features) activation(s model.Spec, st stage, tp, dtypeBytes int, lm int64) int64 {
	if !st.isFirst {
		return lm
	}
	return max(lm, f.mm.encoderPeak(s, tp, dtypeBytes))
}

// layout is the stage's KV layout with the drafter's attention layers in
// the last stage's pool.
func (f features) layout(s model.Spec, st stage, tp, kvBytes, blockSize int) kvLayout {
	layers := layerSpecs(s, st.first, st.last, tp, kvBytes, blockSize)
	if st.isLast {
		layers = append(layers, f.draft.kvLayers(blockSize)...)
	}
	if f.noHybrid {
		layers = unifyHybrid(layers)
	}
	l := layoutOf(shardTokens(layers, f.dcp), blockSize)
	l.stateBlocks = f.stateBlocks
	return l
}

// modelLayout is the whole model's layout on one worker without tensor
// or context parallelism: what a token costs the model.
func (f features) modelLayout(s model.Spec, kvBytes, blockSize int) kvLayout {
	g := f
	g.dcp = 1
	return g.layout(s, stage{first: 0, last: s.Layers}, 1, kvBytes, blockSize)
}

// shardTokens is decode context parallelism: each rank of a group of dcp
// keeps 1/dcp of every request's tokens in its attention layers, so a
// page holds a block's tokens at 1/dcp of the bytes (vLLM's KV tokens and
// a request's need: × and ÷ DCP, docs/vllm-memory.md §3.4, §4). Linear states
// are per request and stay.
func shardTokens(layers []layerSpec, dcp int) []layerSpec {
	if dcp <= 1 {
		return layers
	}
	out := make([]layerSpec, len(layers))
	for i, l := range layers {
		if l.kind != model.Linear {
			l.pageBytes /= int64(dcp)
		}
		out[i] = l
	}
	return out
}

// unifyHybrid is vLLM's unify_hybrid_kv_cache_specs, run when the hybrid
// KV cache manager is disabled (vllm/v1/core/kv_cache_utils.py): where
// full-attention (or MLA) layers sit beside sliding or chunked local
// ones, those become full-attention specs, which hold every token of the
// context ("we do not enable any optimizations for saving KV cache
// memory"). Linear-attention states cannot be unified (hybridUnified).
func unifyHybrid(layers []layerSpec) []layerSpec {
	full, local := false, false
	for _, l := range layers {
		full = full || l.kind == model.Full || l.kind == model.MLA
		local = local || l.kind == model.Sliding
	}
	if !full || !local {
		return layers
	}
	out := make([]layerSpec, len(layers))
	for i, l := range layers {
		if l.kind == model.Sliding {
			l.kind, l.window, l.chunked = model.Full, 0, false
		}
		out[i] = l
	}
	return out
}

// hybridUnified says why vLLM refuses to start s with the hybrid KV cache
// manager disabled: attention beside linear-attention states has no one
// spec to convert to ("failed to convert the KV cache specs to one
// unified type"); "" when it starts.
func hybridUnified(s model.Spec) string {
	kinds := s.CountKind()
	if kinds[model.Linear] > 0 && kinds[model.Linear] < s.Layers-kinds[model.NoMixer] {
		return "its linear-attention layers beside attention layers cannot be converted to one KV cache spec (\"Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type\")"
	}
	return ""
}

// findings adds what the features found to the plan: problems before the
// verdict is taken, warnings beside the plan's own.
func (f features) findings(b *Budget) {
	if d := f.draft; d != nil {
		b.Problems = append(b.Problems, d.problems...)
		b.Warnings = append(b.Warnings, d.findings...)
	}
	if f.mm != nil {
		b.Warnings = append(b.Warnings, f.mm.findings...)
	}
	for _, n := range b.Settings.OutsideRelease() {
		b.Problems = append(b.Problems, Finding{Code: CodeFlagNotInRelease, Message: fmt.Sprintf(
			"vLLM %s does not know --%s (%s): its parser refuses it and the server does not start (drop it, or set --vllm-version to a release that has it)", b.Settings.Version, n.Flag, n.Why)})
	}
	for _, n := range b.Settings.Misspelled() {
		b.Problems = append(b.Problems, Finding{Code: CodeFlagUnknown, Message: fmt.Sprintf(
			"--%s is not a vLLM flag (%s): its parser stops with \"unrecognized arguments\" and the server does not start", n.Flag, n.Why)})
	}
	if n := b.Settings.NotModelled(); len(n) > 0 {
		parts := make([]string, len(n))
		for i, x := range n {
			parts[i] = x.String()
		}
		b.Warnings = append(b.Warnings, Finding{Code: CodeFlagsNotModelled, Message: "may move memory, not modelled: " + strings.Join(parts, "; ")})
	}
}

// Codes of the flags a plan cannot follow.
const (
	// CodeFlagsNotModelled names the flags given that may move memory
	// and are not modelled (vllm.Settings.NotModelled).
	CodeFlagsNotModelled = "flags_not_modelled"
	// CodeFlagUnknown: a flag no release has, close to one that does
	// (vllm.Settings.Misspelled).
	CodeFlagUnknown = "flag_unknown"
	// CodeFlagNotInRelease: a flag the release does not know; vLLM's
	// parser refuses it.
	CodeFlagNotInRelease = "flag_not_in_release"
)

// SpeculativeTokens is k, the tokens the drafter proposes per step as
// planned (the configured number, or the MTP layers, or the method's
// default); 0 without speculative decoding.
func (b Budget) SpeculativeTokens() int {
	if b.feat.draft == nil {
		return 0
	}
	return b.feat.draft.k
}

// Features is what the plan's features add on the worker it sizes the KV
// cache by (PerGPU): the `features` object of plan's JSON.
type Features struct {
	LoRA        *LoRAFeature        `json:"lora,omitempty"`
	Speculative *SpeculativeFeature `json:"speculative,omitempty"`
	Multimodal  *MultimodalFeature  `json:"multimodal,omitempty"`
}

// LoRAFeature is --enable-lora's slots: max_loras of max_lora_rank, and
// the bytes they take in the weights.
type LoRAFeature struct {
	Slots int   `json:"max_loras"`
	Rank  int   `json:"max_lora_rank"`
	Bytes int64 `json:"bytes"`
}

// SpeculativeFeature is the drafter: its method as vLLM resolves it, the
// tokens it proposes a step, the checkpoint it loads (empty for n-gram
// and suffix matching, the target's name for its own MTP layers), the
// bytes it adds to the weights, its attention layers in the KV cache, and
// whether it keeps the model on the V1 runner.
type SpeculativeFeature struct {
	Method         string `json:"method"`
	Tokens         int    `json:"num_speculative_tokens"`
	Draft          string `json:"draft,omitempty"`
	DraftTP        int    `json:"draft_tensor_parallel_size,omitempty"`
	WeightsBytes   int64  `json:"weights_bytes"`
	KVLayers       int    `json:"kv_layers"`
	ForcesV1Runner bool   `json:"forces_v1_runner"`
}

// MultimodalFeature is what the limits leave of the encoder's profile
// pass: none in text-only mode, else its dummy items and their peak.
type MultimodalFeature struct {
	Modalities       []string `json:"modalities"`
	TextOnly         bool     `json:"text_only"`
	EncoderItems     int64    `json:"encoder_items"`
	EncoderPeakBytes int64    `json:"encoder_peak_bytes"`
}

// Features says what the plan's features add; nil parts are features not
// used.
func (b Budget) Features() Features {
	var out Features
	f := b.feat
	st := stage{first: 0, last: b.Model.Layers, isFirst: true, isLast: true}
	if pp := b.Settings.PipelineParallelSize; pp > 1 {
		all := stages(b.Model.Layers, pp)
		for i, p := range b.Stages {
			if p == b.PerGPU && i < len(all) {
				st = all[i]
				break
			}
		}
	}
	if f.hasLoRA {
		out.LoRA = &LoRAFeature{Slots: int(f.lora.slots), Rank: int(f.lora.rank), Bytes: loraBytes(b.Model, st, f.lora, b.DtypeBytes)}
	}
	if d := f.draft; d != nil {
		sf := &SpeculativeFeature{Method: string(d.cfg.Method), Tokens: d.k, Draft: d.cfg.Model,
			ForcesV1Runner: vllm.SpeculativeForcesRunnerV1(b.Settings.Speculative, b.Settings.PipelineParallelSize)}
		if d.spec != nil {
			sf.DraftTP = d.tp
			if d.cfg.Model == "" {
				sf.Draft = b.Model.ID
			}
			if st.isLast {
				sf.WeightsBytes = d.weightBytes(b.DtypeBytes) + d.ropeBytes(b.Model, b.DtypeBytes)
				sf.KVLayers = len(d.kvLayers(b.Settings.BlockSize))
			}
		}
		out.Speculative = sf
	}
	if m := f.mm; m != nil {
		mf := &MultimodalFeature{Modalities: Modalities(b.Model), TextOnly: m.textOnly, EncoderItems: m.items}
		if st.isFirst {
			mf.EncoderPeakBytes = m.encoderPeak(b.Model, b.Settings.TensorParallelSize, b.DtypeBytes)
		}
		out.Multimodal = mf
	}
	return out
}
