package model

// LayerParams counts the parameters of one decoder layer by how an engine
// places them: tensor parallelism shards the projections and experts, but
// replicates norms, routers and (for MLA) the low-rank down projections.
type LayerParams struct {
	// QO are the query and output projections (sharded by heads).
	QO int64
	// KV are the key and value projections; when TP exceeds the KV heads
	// an engine replicates heads instead of splitting them further.
	KV int64
	// Bias are attention biases (sharded with their projection).
	Bias int64
	// MLADown are MLA's low-rank down projections (q_a, kv_a), replicated
	// on every TP rank.
	MLADown int64
	// MLAUp are MLA's up projections (q_b, kv_b), sharded by heads.
	MLAUp int64
	// MLP is the dense feed-forward block.
	MLP int64
	// Experts are the routed experts of an MoE layer, all of them.
	Experts int64
	// Shared are the always-on shared experts.
	Shared int64
	// Router is the expert gate (replicated, never quantized).
	Router int64
	// Norms are the layer's normalisation weights (replicated).
	Norms int64
}

// Linear is the number of parameters in quantizable linear layers.
func (p LayerParams) Linear() int64 {
	return p.QO + p.KV + p.MLADown + p.MLAUp + p.MLP + p.Experts + p.Shared
}

// Total is every parameter of the layer.
func (p LayerParams) Total() int64 {
	return p.Linear() + p.Bias + p.Router + p.Norms
}

// IsMoELayer reports whether decoder layer i uses experts instead of a dense
// MLP (DeepSeek's first_k_dense_replace, Qwen-MoE's decoder_sparse_step).
func (s Spec) IsMoELayer(i int) bool {
	if s.MoE == nil || s.MoE.Experts == 0 {
		return false
	}
	if i < s.MoE.DenseLayers {
		return false
	}
	freq := s.MoE.LayerFreq
	if freq <= 1 {
		return true
	}
	return (i+1)%freq == 0
}

// mlpMatrices is 3 for gated (gate, up, down) and 2 for plain (up, down) MLPs.
func (s Spec) mlpMatrices() int64 {
	if s.GatedMLP {
		return 3
	}
	return 2
}

// vHeadDim is the value head size.
func (s Spec) vHeadDim() int {
	if s.VHeadDim > 0 {
		return s.VHeadDim
	}
	return s.HeadDim
}

// Layer counts the parameters of decoder layer i.
func (s Spec) Layer(i int) LayerParams {
	h := int64(s.Hidden)
	var p LayerParams
	if s.MLA != nil && s.MLA.KVLoraRank > 0 {
		m := s.MLA
		heads := int64(s.Heads)
		qkHead := int64(m.QKNopeHeadDim + m.QKRopeHeadDim)
		if m.QLoraRank > 0 {
			p.MLADown += h * int64(m.QLoraRank)
			p.MLAUp += int64(m.QLoraRank) * heads * qkHead
			p.Norms += int64(m.QLoraRank)
		} else {
			p.QO += h * heads * qkHead
		}
		p.MLADown += h * int64(m.KVLoraRank+m.QKRopeHeadDim)
		p.Norms += int64(m.KVLoraRank)
		p.MLAUp += int64(m.KVLoraRank) * heads * int64(m.QKNopeHeadDim+m.VHeadDim)
		p.QO += heads * int64(m.VHeadDim) * h
	} else {
		qDim := int64(s.Heads) * int64(s.HeadDim)
		p.QO = h*qDim + int64(s.Heads)*int64(s.vHeadDim())*h
		p.KV = h * int64(s.KVHeads) * int64(s.HeadDim+s.vHeadDim())
		if s.QKVBias {
			p.Bias = qDim + int64(s.KVHeads)*int64(s.HeadDim+s.vHeadDim())
		}
	}
	if s.IsMoELayer(i) {
		m := s.MoE
		p.Experts = int64(m.Experts) * s.mlpMatrices() * h * int64(m.Intermediate)
		p.Shared = s.mlpMatrices() * h * int64(m.SharedInter)
		p.Router = h * int64(m.Experts)
	} else {
		p.MLP = s.mlpMatrices() * h * int64(s.Intermediate)
	}
	p.Norms += 2 * h
	return p
}

// EmbeddingParams is the input embedding (vocab × hidden).
func (s Spec) EmbeddingParams() int64 { return int64(s.Vocab) * int64(s.Hidden) }

// LMHeadParams is the output projection, 0 when it shares the embedding.
func (s Spec) LMHeadParams() int64 {
	if s.TieEmbeddings {
		return 0
	}
	return s.EmbeddingParams()
}

// VisionParams is the vision encoder and projector, 0 for text-only models.
func (s Spec) VisionParams() int64 {
	if s.Vision == nil {
		return 0
	}
	return s.Vision.Params
}

// Params is the model's total parameter count as its checkpoint stores it
// (decoder layers, embeddings, untied LM head, final norm, vision tower).
func (s Spec) Params() int64 {
	n := s.EmbeddingParams() + s.LMHeadParams() + int64(s.Hidden) + s.VisionParams()
	for i := 0; i < s.Layers; i++ {
		n += s.Layer(i).Total()
	}
	return n
}

// ActiveParams is the parameter count one token passes through: for MoE
// models only TopK routed experts per layer count.
func (s Spec) ActiveParams() int64 {
	n := s.Params()
	if s.MoE == nil || s.MoE.Experts == 0 {
		return n
	}
	for i := 0; i < s.Layers; i++ {
		if s.IsMoELayer(i) {
			e := s.Layer(i).Experts
			n -= e - e/int64(s.MoE.Experts)*int64(s.MoE.TopK)
		}
	}
	return n
}

// CountKind returns how many layers have each attention kind.
func (s Spec) CountKind() map[AttentionKind]int {
	c := map[AttentionKind]int{}
	for i := 0; i < s.Layers; i++ {
		c[s.LayerKind(i).Kind]++
	}
	return c
}

// LayerKind is the attention of layer i; full attention when unspecified
// (MLA when the model has an MLA configuration).
func (s Spec) LayerKind(i int) Layer {
	if i < len(s.Attention) {
		return s.Attention[i]
	}
	if s.MLA != nil && s.MLA.KVLoraRank > 0 {
		return Layer{Kind: MLA}
	}
	return Layer{Kind: Full}
}
