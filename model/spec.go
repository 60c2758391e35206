// Package model describes a transformer checkpoint as the memory planner needs it:
// its architecture (layers, heads, widths, experts, per-layer attention kind),
// its dtype and quantization, and its parameter and weight-byte counts. It loads
// that description from a Hugging Face config.json, safetensors headers, the Hub
// over HTTP, or the embedded catalog. It knows nothing about vLLM.
package model

// AttentionKind says how one decoder layer keeps its KV state.
type AttentionKind string

const (
	// Full attention keeps K and V for every token of the context.
	Full AttentionKind = "full"
	// Sliding attention keeps K and V only for the last Window tokens.
	Sliding AttentionKind = "sliding"
	// MLA (multi-head latent attention, DeepSeek-V2/V3, Kimi) keeps one
	// compressed latent vector per token, shared by all heads.
	MLA AttentionKind = "mla"
	// Linear layers (Mamba, gated delta-net) keep a fixed-size state per
	// sequence, independent of its length.
	Linear AttentionKind = "linear"
	// NoMixer layers have no attention or state at all (Nemotron-H's
	// MLP-only and MoE-only layers); they keep nothing per token or sequence.
	NoMixer AttentionKind = "none"
)

// Layer is the attention kind of one decoder layer.
type Layer struct {
	Kind AttentionKind `json:"kind"`
	// Window is the sliding-window length in tokens (Sliding only).
	Window int `json:"window,omitempty"`
	// StateBytes is the per-sequence state size in bytes (Linear only),
	// in the model's dtype; SSMBytes its Mamba SSM (temporal) part, whose
	// dtype --mamba-ssm-cache-dtype may set apart (0 for a gated
	// delta-net, whose whole state follows --mamba-cache-dtype).
	StateBytes int64 `json:"state_bytes,omitempty"`
	SSMBytes   int64 `json:"ssm_bytes,omitempty"`
	// Groups is a Mamba-2 layer's n_groups and GroupConvBytes one group's
	// share of its conv state (B and C: 2 × d_state × (conv_kernel − 1)
	// elements): tensor parallelism replicates groups that do not split
	// (StateAt). 0 for other layers.
	Groups         int   `json:"state_groups,omitempty"`
	GroupConvBytes int64 `json:"group_conv_bytes,omitempty"`
	// Chunked marks a Sliding layer that attends within fixed chunks of
	// Window tokens rather than a window sliding with each token (Llama 4's
	// local layers; vLLM's ChunkedLocalAttentionSpec).
	Chunked bool `json:"chunked,omitempty"`
}

// StateAt is a Linear layer's per-sequence state, and its SSM part, on
// one of tp tensor-parallel ranks, as vLLM's MambaStateShapeCalculator
// shards them: the SSM's heads and the conv state's channels split tp
// ways (vLLM refuses a model whose heads do not split), after a Mamba-2
// layer with fewer groups than ranks replicates them up to tp
// (extra_groups_for_head_shards: tp − n_groups more).
func (l Layer) StateAt(tp int) (state, ssm int64) {
	if tp <= 1 || l.StateBytes <= 0 {
		return l.StateBytes, l.SSMBytes
	}
	conv := l.StateBytes - l.SSMBytes
	if l.Groups > 0 && l.Groups < tp {
		conv += int64(tp-l.Groups) * l.GroupConvBytes
	}
	n := int64(tp)
	return conv/n + l.SSMBytes/n, l.SSMBytes / n
}

// MoE holds the mixture-of-experts facts of a model.
type MoE struct {
	Experts      int `json:"experts"`      // routed experts per MoE layer
	TopK         int `json:"top_k"`        // experts chosen per token
	Intermediate int `json:"intermediate"` // FFN width of one routed expert
	Shared       int `json:"shared"`       // shared (always-on) experts
	SharedInter  int `json:"shared_inter"` // FFN width of all shared experts together
	DenseLayers  int `json:"dense_layers"` // leading layers with a dense MLP instead (first_k_dense_replace)
	LayerFreq    int `json:"layer_freq"`   // every LayerFreq-th layer is MoE (1 = all)
}

// MLAConfig holds the multi-head latent attention widths (DeepSeek naming).
type MLAConfig struct {
	KVLoraRank    int `json:"kv_lora_rank"`
	QLoraRank     int `json:"q_lora_rank"` // 0: queries are not compressed
	QKRopeHeadDim int `json:"qk_rope_head_dim"`
	QKNopeHeadDim int `json:"qk_nope_head_dim"`
	VHeadDim      int `json:"v_head_dim"`
}

// Quantization describes how the checkpoint's linear weights are stored.
type Quantization struct {
	// Method is the quantization method as vLLM names it: "fp8",
	// "compressed-tensors", "awq", "gptq", "gptq_marlin", "awq_marlin",
	// "bitsandbytes", "mxfp4", "modelopt", "modelopt_fp4" ...
	Method string `json:"method"`
	// Bits per weight of the quantized linear layers (4, 8).
	Bits int `json:"bits,omitempty"`
	// GroupSize is the number of weights sharing one scale (0 = per channel).
	GroupSize int `json:"group_size,omitempty"`
	// Float is true for floating-point formats (fp8, fp4) and false for integers.
	Float bool `json:"float,omitempty"`
	// ActOrder (GPTQ desc_act) stores a g_idx int32 per input channel.
	ActOrder bool `json:"act_order,omitempty"`
	// Symmetric schemes store no zero points.
	Symmetric bool `json:"symmetric,omitempty"`
	// Format is the compressed-tensors storage format ("float-quantized",
	// "pack-quantized", "nvfp4-pack-quantized" ...), empty for other methods.
	Format string `json:"format,omitempty"`
}

// Vision describes a vision encoder attached to a language model.
type Vision struct {
	Params       int64 `json:"params"`       // parameters of the encoder and projector
	Hidden       int   `json:"hidden"`       // encoder width
	Layers       int   `json:"layers"`       // encoder depth
	Intermediate int   `json:"intermediate"` // encoder MLP width
	ImageTokens  int   `json:"image_tokens"` // tokens one image becomes in the decoder
	PatchTokens  int   `json:"patch_tokens"` // patches the encoder sees for its largest image
	// RopeTableBytes is a rotary table the encoder computes on its first
	// image and keeps for the life of the process, on every rank that runs
	// it: MoonViT's 2-D table (vllm moonvit.py Rope2DPosEmb, a
	// cached_property) of 512 × 512 positions × head_dim/2 complex64
	// values. Other encoders compute their rotary angles per image.
	RopeTableBytes int64 `json:"rope_table_bytes,omitempty"`
}

// Canonical is the model to name in a command to paste for a reference
// that resolved to s: the catalog's id where the reference was an alias of
// it, the reference itself otherwise (a local path, a Hub id).
func Canonical(ref string, s Spec) string {
	if s.Alias != "" && s.Alias == ref && s.ID != "" {
		return s.ID
	}
	return ref
}

// Spec is everything the planner needs to know about a model.
type Spec struct {
	// config is the config.json the spec was read from, which
	// WithOverrides reads again with vLLM's --hf-overrides.
	config []byte
	// ID is the Hugging Face id (or the path it was loaded from).
	ID string `json:"id"`
	// Alias is the name the user typed when the catalog knew it under
	// another id ("llama-3.1-8b-instruct"): vLLM cannot load it, so a
	// command to paste names ID instead (Canonical).
	Alias        string `json:"-"`
	Architecture string `json:"architecture"` // architectures[0], e.g. LlamaForCausalLM
	ModelType    string `json:"model_type"`   // e.g. llama, qwen2, gemma3
	// TextModelType is the model_type of the language model inside a
	// multimodal config (text_config.model_type, e.g. gemma3_text); equal to
	// ModelType for text-only models.
	TextModelType string `json:"text_model_type,omitempty"`

	Layers       int `json:"layers"`       // decoder layers (num_hidden_layers)
	Hidden       int `json:"hidden"`       // hidden_size
	Intermediate int `json:"intermediate"` // dense MLP width
	Heads        int `json:"heads"`        // query heads
	KVHeads      int `json:"kv_heads"`     // key/value heads (== Heads for MHA, 1 for MQA)
	HeadDim      int `json:"head_dim"`     // q/k head size
	VHeadDim     int `json:"v_head_dim"`   // v head size when it differs from HeadDim (0 = same)
	Vocab        int `json:"vocab"`
	// MaxPositions is the longest context vLLM derives from config.json
	// (_get_and_verify_max_len): the smallest of its length keys
	// (max_position_embeddings, n_positions, ...; model_max_length in
	// their place when given), times a RoPE scaling factor vLLM does not
	// take as already counted (YaRN's from its original length). It is
	// max_position_embeddings itself for most checkpoints.
	MaxPositions int `json:"max_position_embeddings"`

	TieEmbeddings bool `json:"tie_word_embeddings"`
	// MTPLayers are the multi-token-prediction layers the checkpoint
	// carries beside its decoder layers (num_nextn_predict_layers), loaded
	// only to draft for speculative decoding; 0 for most models.
	MTPLayers int  `json:"mtp_layers,omitempty"`
	QKVBias   bool `json:"qkv_bias,omitempty"`
	// GatedMLP is true for SwiGLU-style MLPs with gate, up and down
	// projections; false for two-matrix MLPs (GPT-2, Falcon, Phi-2).
	GatedMLP bool `json:"gated_mlp"`

	// RotaryDim is the number of rotary dimensions per head (0 = no RoPE).
	RotaryDim int `json:"rotary_dim,omitempty"`
	// RopePositions is the length of the rotary cos/sin table an engine
	// precomputes (max positions times a linear/dynamic scaling factor).
	RopePositions int `json:"rope_positions,omitempty"`
	// RopeTables is how many distinct rotary tables the model builds (Gemma 3
	// keeps one for local and one for global layers).
	RopeTables int `json:"rope_tables,omitempty"`

	// Attention is the attention kind of each decoder layer; len == Layers.
	Attention []Layer `json:"attention"`

	MoE    *MoE          `json:"moe,omitempty"`
	MLA    *MLAConfig    `json:"mla,omitempty"`
	Quant  *Quantization `json:"quantization,omitempty"`
	Vision *Vision       `json:"vision,omitempty"`

	// Dtype is the checkpoint's torch_dtype: "bfloat16", "float16", "float32".
	Dtype string `json:"dtype"`

	// CheckpointBytes is the exact size of the weight tensors in the
	// checkpoint (safetensors total_size), 0 when unknown.
	CheckpointBytes int64 `json:"checkpoint_bytes,omitempty"`
	// CheckpointSource says where CheckpointBytes came from.
	CheckpointSource string `json:"checkpoint_source,omitempty"`
}
