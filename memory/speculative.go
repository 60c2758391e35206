package memory

import (
	"fmt"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Speculative decoding (docs/features.md §2). The drafter is loaded in
// the same "Model loading took" block as the target, its attention layers
// register with the target's and take their KV cache from the same pool,
// and the target's decode graphs grow to max_num_seqs × (1 + k) tokens (vllm.Settings.WithDefaults).
// A method that Model Runner V2 does not run keeps the V1 runner, with
// its sampler and its CUDA-graph reserve (vllm.SpeculativeForcesRunnerV1).
// The drafter runs in the profile run after the target, on fewer and
// narrower layers, so its activations are not added to the target's peak;
// its CUDA graphs are captured in the target's pool, whose blocks the
// target's wider graphs already hold, so they add nothing planned either.
// Measured on one L4 (vLLM 0.27.1, rows 204 and 205 of
// testdata/features): a 0.5B draft beside the n-gram arm's runner costs
// 0.93 GiB of weights and at most 0.03 GiB more.

// Warning codes of speculative decoding.
const (
	// CodeDraftNotRead: the draft checkpoint could not be read, so its
	// weights, KV layers and graphs are not planned.
	CodeDraftNotRead = "draft_not_planned"
	// CodeDraftTP: draft_tensor_parallel_size is neither 1 nor the
	// target's; vLLM refuses it.
	CodeDraftTP = "draft_tensor_parallel_size_invalid"
	// CodeSpecTokensAssumed: num_speculative_tokens was not given and the
	// draft's config is not known to headroom.
	CodeSpecTokensAssumed = "speculative_tokens_assumed"
	// CodeNoMTPLayers: MTP was asked of a model whose checkpoint ships no
	// MTP layers.
	CodeNoMTPLayers = "model_has_no_mtp_layers"
)

// drafter is what speculative decoding adds to a plan.
type drafter struct {
	cfg vllm.SpeculativeConfig
	// k is the tokens proposed per step.
	k int
	// spec is the checkpoint the drafter's layers are counted from: the
	// draft model or head, or the target's MTP layers as a model of
	// their own; nil when nothing is loaded (n-gram, suffix) or the draft
	// could not be read.
	spec   *model.Spec
	format linearFormat
	tp     int
	// kvBytes is the draft's KV dtype size.
	kvBytes int
	// sharedEmbedding and sharedHead: the drafter uses the target's
	// embedding and LM head (same shapes), which are not counted twice.
	sharedEmbedding, sharedHead bool
	// fcIn is the input width of the head's fusing projection in
	// hidden sizes (EAGLE 2, EAGLE-3 3, MTP's eh_proj 2), held in the
	// compute dtype on every rank.
	fcIn int
	// hidden is the drafter's hidden size.
	hidden int

	findings []Finding // warnings
	problems []Finding
}

// drafterFor reads --speculative-config; nil without one.
func drafterFor(in Input, set vllm.Settings, dtypeBytes, kvBytes int) (*drafter, error) {
	if set.Speculative == nil {
		return nil, nil
	}
	target := in.Model
	c := *set.Speculative
	if in.Draft != nil {
		c = c.WithDraftType(in.Draft.ModelType)
	}
	d := &drafter{cfg: c, tp: set.TensorParallelSize, kvBytes: kvBytes}
	if n := c.DraftTensorParallelSize; n > 0 {
		if n != 1 && n != set.TensorParallelSize {
			d.problems = append(d.problems, Finding{Code: CodeDraftTP, Message: fmt.Sprintf(
				"draft_tensor_parallel_size %d is neither 1 nor --tensor-parallel-size %d; vLLM refuses it (set 1 or %d)", n, set.TensorParallelSize, set.TensorParallelSize)})
		}
		d.tp = n
	}
	if c.KVCacheDtype != "" {
		var err error
		if d.kvBytes, err = vllm.KVCacheDtypeBytes(c.KVCacheDtype, dtypeBytes); err != nil {
			return nil, fmt.Errorf("--speculative-config kv_cache_dtype: %v", err)
		}
	}
	switch {
	case !c.ProposesOnGPU() || c.Method == vllm.SpecCustomClass:
		// Matching on the host (or a class headroom cannot see).
	case c.Method == vllm.SpecMTP && c.Model == "" || c.Method == vllm.SpecDSpark && c.Model == "":
		n := target.MTPLayers
		if n == 0 {
			d.problems = append(d.problems, Finding{Code: CodeNoMTPLayers, Message: fmt.Sprintf(
				"%s ships no multi-token-prediction layers (no num_nextn_predict_layers in its config): vLLM cannot draft with method mtp from it (name an MTP draft with \"model\", or use another method)", target.ID)})
			break
		}
		mtp := mtpModel(target, n)
		d.spec, d.sharedEmbedding, d.sharedHead, d.fcIn, d.hidden = &mtp, true, true, 2, target.Hidden
		var err error
		if d.format, err = linearFormatFor(target, set); err != nil {
			return nil, err
		}
	case in.Draft == nil:
		d.findings = append(d.findings, Finding{Code: CodeDraftNotRead, Message: fmt.Sprintf(
			"the draft %q could not be read (offline, or not in the catalog): its weights, KV layers and CUDA graphs are not planned, and the KV cache is smaller than shown", c.Model)})
	default:
		draft := *in.Draft
		d.spec, d.hidden = &draft, draft.Hidden
		same := draft.Vocab == target.Vocab && draft.Hidden == target.Hidden
		switch c.Method {
		case vllm.SpecEagle:
			d.sharedEmbedding, d.sharedHead, d.fcIn = same, same, 2
		case vllm.SpecEagle3:
			d.sharedEmbedding, d.fcIn = same, 3
		case vllm.SpecMTP, vllm.SpecDSpark, vllm.SpecDFlash:
			d.sharedEmbedding, d.sharedHead = same, same
		}
		if c.Method == vllm.SpecMTP && draft.MTPLayers > 0 {
			mtp := mtpModel(draft, draft.MTPLayers)
			d.spec, d.fcIn = &mtp, 2
		}
		q := set
		q.Quantization = c.Quantization
		var err error
		if d.format, err = linearFormatFor(draft, q); err != nil {
			return nil, fmt.Errorf("--speculative-config: %v", err)
		}
	}
	mtpLayers := target.MTPLayers
	if in.Draft != nil && c.Model != "" {
		mtpLayers = in.Draft.MTPLayers
	}
	var given bool
	if d.k, given = c.ProposedTokens(mtpLayers); !given {
		d.findings = append(d.findings, Finding{Code: CodeSpecTokensAssumed, Message: fmt.Sprintf(
			"--speculative-config gives no num_speculative_tokens: vLLM takes the draft config's n_predict or refuses to start; planned with %d (give it, e.g. \"num_speculative_tokens\": 3)", d.k)})
	}
	return d, nil
}

// mtpModel is a target's n multi-token-prediction layers as a model of
// their own: decoder layers like the target's last, attending as its
// full-attention layers do (MLA for DeepSeek), each an MoE layer when the
// target has experts.
func mtpModel(target model.Spec, n int) model.Spec {
	m := target
	m.Layers = n
	kind := model.Full
	if target.MLA != nil && target.MLA.KVLoraRank > 0 {
		kind = model.MLA
	}
	m.Attention = make([]model.Layer, n)
	for i := range m.Attention {
		m.Attention[i] = model.Layer{Kind: kind}
	}
	if target.MoE != nil {
		moe := *target.MoE
		moe.DenseLayers, moe.LayerFreq = 0, 1
		m.MoE = &moe
	}
	m.Vision, m.MTPLayers, m.CheckpointBytes = nil, 0, 0
	return m
}

// weightBytes is what the drafter holds on one rank of the last stage:
// its layers at its own TP, its embedding and LM head unless shared, its
// fusing projection, in its checkpoint's format.
func (d *drafter) weightBytes(dtypeBytes int) int64 {
	if d == nil || d.spec == nil {
		return 0
	}
	s := *d.spec
	layers := layerParams(s)
	w := splitWeights(s, layers, stage{first: 0, last: s.Layers, isFirst: !d.sharedEmbedding, isLast: true}, d.tp)
	if d.sharedHead {
		// The drafter's own final norm stays; its LM head is the target's.
		w.dense -= lmHeadRows(s, d.sharedEmbedding) / float64(d.tp)
	}
	bytes := w.bytes(dtypeBytes, d.format, false) * checkpointScale(s, dtypeBytes, d.format, splitWeights(s, layers, stage{0, s.Layers, true, true}, 1))
	fc := int64(d.fcIn) * int64(d.hidden) * int64(d.hidden) * int64(dtypeBytes)
	return int64(bytes) + fc
}

// ropeBytes is the drafter's own rotary table: vLLM caches rotary
// embeddings by their parameters (get_rope), so a drafter whose heads,
// rotary width and positions match the target's shares the target's.
func (d *drafter) ropeBytes(target model.Spec, dtypeBytes int) int64 {
	if d == nil || d.spec == nil {
		return 0
	}
	s := *d.spec
	if s.HeadDim == target.HeadDim && s.RotaryDim == target.RotaryDim && s.RopePositions == target.RopePositions && s.MaxPositions == target.MaxPositions {
		return 0
	}
	return ropeCacheBytes(s, dtypeBytes)
}

// lmHeadRows is the LM head splitWeights counted on a last stage: its own
// when untied, the embedding's copy when tied on a stage without the
// embedding; zero when a tied head is the embedding on the same stage.
func lmHeadRows(s model.Spec, embeddingShared bool) float64 {
	if s.LMHeadParams() == 0 && !embeddingShared {
		return 0
	}
	return float64((s.Vocab+63)/64*64) * float64(s.Hidden)
}

// kvLayers are the drafter's attention layers in the KV pool of the last
// stage: all a draft model's and a head's layers at the drafter's TP, and
// the MTP layers with the target's spec. Medusa and MLP speculators have
// no attention.
func (d *drafter) kvLayers(blockSize int) []layerSpec {
	if d == nil || d.spec == nil || d.cfg.Method == vllm.SpecMedusa || d.cfg.Method == vllm.SpecMLPSpeculator {
		return nil
	}
	return layerSpecs(*d.spec, 0, d.spec.Layers, d.tp, d.kvBytes, blockSize)
}
