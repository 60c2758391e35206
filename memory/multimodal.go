package memory

import (
	"fmt"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Multimodal limits (docs/features.md §3). Before the language model's
// dummy pass, vLLM's profile run feeds the encoder a batch of dummy items
// of the modality whose items are largest, as many as the encoder budget
// (max(max_num_batched_tokens, one item's tokens)) holds and the limits
// allow (max_num_seqs × the modality's limit), at least one; their outputs
// stay alive through the language model's pass (the activation's
// encoder-output term). With every modality the model takes at 0 (from
// 0.10.1, #22299), --language-model-only, or --skip-mm-profiling, none of
// that runs: the profile is the language model's alone.

// Warning codes of multimodal limits.
const (
	// CodeMMProfilingSkipped: --skip-mm-profiling leaves the encoder out
	// of the profile while images are still served.
	CodeMMProfilingSkipped = "mm_profiling_skipped"
	// CodeTextOnlyTooOld: all limits 0 on a release before the text-only
	// mode still profiles one item.
	CodeTextOnlyTooOld = "mm_text_only_needs_newer_vllm"
)

// modalitiesOf are the modalities a model type's processor takes (vLLM's
// get_supported_mm_limits); image alone for the types not listed.
var modalitiesOf = map[string][]string{
	"qwen2_vl":         {vllm.ModalityImage, vllm.ModalityVideo},
	"qwen2_5_vl":       {vllm.ModalityImage, vllm.ModalityVideo},
	"qwen3_vl":         {vllm.ModalityImage, vllm.ModalityVideo},
	"qwen3_vl_moe":     {vllm.ModalityImage, vllm.ModalityVideo},
	"qwen2_5_omni":     {vllm.ModalityImage, vllm.ModalityVideo, vllm.ModalityAudio},
	"llava_onevision":  {vllm.ModalityImage, vllm.ModalityVideo},
	"llava_next_video": {vllm.ModalityImage, vllm.ModalityVideo},
}

// Modalities lists the modalities a multimodal model takes; nil for a
// text model.
func Modalities(s model.Spec) []string {
	if s.Vision == nil {
		return nil
	}
	if m, ok := modalitiesOf[s.ModelType]; ok {
		return m
	}
	return []string{vllm.ModalityImage}
}

// qwen2VL's image processor: 14-pixel patches merged 2 × 2 into one token,
// at most max_pixels = 12,845,056 pixels (16,384 tokens) an image unless
// --mm-processor-kwargs lowers it (Qwen2VLImageProcessor's defaults).
const (
	qwenVLPatch         = 14
	qwenVLMerge         = 4
	qwenVLMaxPixels     = 12845056
	encoderHiddenTensor = 3 // residual, its norm and the attention output
)

// multimodal is what the limits change in a plan.
type multimodal struct {
	// textOnly: no encoder pass in the profile.
	textOnly bool
	// items and patches: the profile's dummy batch, patches per item.
	items, patches, itemTokens int64
	findings                   []Finding
}

// multimodalFor reads the limits for a model with an encoder; nil for a
// text model.
func multimodalFor(s model.Spec, set vllm.Settings) *multimodal {
	mods := Modalities(s)
	if mods == nil {
		return nil
	}
	m := &multimodal{}
	var enabled []string
	for _, mod := range mods {
		if set.LimitMMPerPrompt.Of(mod).Count > 0 {
			enabled = append(enabled, mod)
		}
	}
	switch {
	case set.SkipMMProfiling():
		m.textOnly = true
		if len(enabled) > 0 {
			m.findings = append(m.findings, Finding{Code: CodeMMProfilingSkipped, Message: "--skip-mm-profiling leaves the encoder and its cache out of the profile run: the first large image or video runs them outside the budget and can run out of memory (lower --gpu-memory-utilization to leave them room)"})
		}
	case set.LanguageModelOnly():
		m.textOnly = true
	case len(enabled) == 0 && set.Version.AtLeast(vllm.TextOnlyModeSince()):
		m.textOnly = true
	case len(enabled) == 0:
		m.findings = append(m.findings, Finding{Code: CodeTextOnlyTooOld, Message: fmt.Sprintf(
			"every multimodal limit is 0, but vLLM %s still profiles the encoder with one item; the text-only mode that skips it came in %s (#22299)", set.Version, vllm.TextOnlyModeSince())})
		enabled = mods[:1]
	}
	if m.textOnly {
		return m
	}
	v := s.Vision
	m.patches, m.itemTokens = int64(v.PatchTokens), int64(v.ImageTokens)
	if s.ModelType == "qwen2_vl" || s.ModelType == "qwen2_5_vl" {
		px := int64(qwenVLMaxPixels)
		if k := set.MMProcessorKwargs; k != nil && k.MaxPixels > 0 {
			px = k.MaxPixels
		}
		m.patches = px / (qwenVLPatch * qwenVLPatch)
		m.itemTokens = m.patches / qwenVLMerge
	}
	if m.patches <= 0 || m.itemTokens <= 0 {
		return m // the item's size is not known: no encoder term
	}
	budget := max(int64(set.MaxNumBatchedTokens), m.itemTokens)
	limit := int64(0)
	for _, mod := range enabled {
		limit = max(limit, int64(set.LimitMMPerPrompt.Of(mod).Count))
	}
	m.items = max(1, min(budget/m.itemTokens, int64(set.MaxNumSeqs)*max(limit, 1)))
	return m
}

// activationSpec is the model as the profile run sees it: without its
// encoder in text-only mode.
func (m *multimodal) activationSpec(s model.Spec) model.Spec {
	if m != nil && m.textOnly {
		s.Vision = nil
	}
	return s
}

// encoderPeak is the encoder pass of the profile run on the first stage,
// split by TP like the encoder: per patch of the dummy batch, the MLP's
// hidden activation and its output (a third for gated MLPs) beside
// encoderHiddenTensor encoder-wide tensors. Attention runs in
// flash-attention kernels without a patches² matrix.
func (m *multimodal) encoderPeak(s model.Spec, tp, dtypeBytes int) int64 {
	if m == nil || m.textOnly || m.items == 0 {
		return 0
	}
	v := s.Vision
	mlp := int64(2)
	if s.ModelType == "mistral3" || s.ModelType == "qwen2_5_vl" {
		mlp = 3 // SwiGLU encoders: gate, up, their product
	}
	perPatch := encoderHiddenTensor*int64(v.Hidden) + mlp*int64(v.Intermediate)/int64(tp)
	return m.items * m.patches * perPatch * int64(dtypeBytes)
}
