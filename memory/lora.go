package memory

import (
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// LoRA slots (docs/features.md §1). With --enable-lora vLLM wraps every
// linear layer of the language model and allocates, once at start-up and
// inside "Model loading took", max_loras slots of max_lora_rank for each:
// per slice an A matrix [rank, in] and a B matrix [out, rank] in the LoRA
// dtype (vllm/lora/layers/base_linear.py, column_parallel_linear.py,
// row_parallel_linear.py). The rank sets the cost, not the adapters
// loaded. Under tensor parallelism a column-parallel layer keeps A whole
// and splits B by its output; a row-parallel layer splits A by its input
// and keeps B whole; --fully-sharded-loras splits the other matrix too.
// The profile run's dummy adapters use these slots and add only the
// kernels' few MiB of scratch, which is not planned.

// embeddingLoRAArchitectures declare embedding_modules (embed_tokens and
// lm_head), so vLLM gives their vocabulary LoRA slots too (llama.py,
// mixtral.py, granite.py; Mistral and Phi-3 are Llama's class). Qwen2,
// Qwen3 and Gemma declare none; models not listed are taken to declare
// none.
var embeddingLoRAArchitectures = map[string]bool{
	"LlamaForCausalLM":      true,
	"MistralForCausalLM":    true,
	"MixtralForCausalLM":    true,
	"Phi3ForCausalLM":       true,
	"GraniteForCausalLM":    true,
	"GraniteMoeForCausalLM": true,
}

// loraVocabPadding is lora_vocab_padding_size: the LM head's LoRA B and,
// with LoRA, the vocabulary-parallel layers pad the vocabulary to it.
const loraVocabPadding = 256

// loraShape is what one plan's LoRA slots depend on.
type loraShape struct {
	slots, rank  int64
	dtypeBytes   int64
	tp           int64
	fullyShard   bool
	extraVocab   int64
	experts      bool // fused-MoE experts have slots (vllm.LoRAOnExperts)
	expertShards int64
	bias         bool
}

// loraShapeFor reads the settings; ok is false without --enable-lora.
func loraShapeFor(s model.Spec, set vllm.Settings, dtypeBytes int) (loraShape, bool, error) {
	slots, rank := set.LoRASlots()
	if slots == 0 {
		return loraShape{}, false, nil
	}
	d := dtypeBytes
	if set.LoRADtype != "" && set.LoRADtype != "auto" {
		var err error
		if d, err = vllm.DtypeBytes(set.LoRADtype, s.Dtype); err != nil {
			return loraShape{}, false, err
		}
	}
	tp := int64(max(set.TensorParallelSize, 1))
	l := loraShape{slots: int64(slots), rank: int64(rank), dtypeBytes: int64(d), tp: tp,
		fullyShard: set.FullyShardedLoRAs(), extraVocab: int64(set.LoRAExtraVocab()),
		experts: vllm.LoRAOnExperts(set.Version), expertShards: 1, bias: set.LoRABias()}
	if set.ExpertParallel() {
		l.expertShards = tp * int64(max(set.DataParallelSize, 1))
	}
	return l, true, nil
}

// column is the elements of one slot of a column-parallel linear of input
// in and slice outputs outs (whole, before TP): A [rank, in] per slice,
// whole (rank/TP fully sharded); B [out/TP, rank] per slice.
func (l loraShape) column(in int64, outs ...int64) int64 {
	ra := l.rank
	if l.fullyShard {
		ra = l.rank / l.tp
	}
	var n int64
	for _, out := range outs {
		n += ra*in + out/l.tp*l.rank
		if l.bias {
			n += out / l.tp
		}
	}
	return n
}

// row is a row-parallel linear: A [rank, in/TP], B [out, rank] whole
// (out/TP fully sharded).
func (l loraShape) row(in, out int64) int64 {
	ob := out
	if l.fullyShard {
		ob = out / l.tp
	}
	n := l.rank*(in/l.tp) + ob*l.rank
	if l.bias {
		n += ob
	}
	return n
}

// replicated is a linear every rank holds whole (MLA's down projections,
// the expert router): A [rank, in], B [out, rank].
func (l loraShape) replicated(in, out int64) int64 {
	n := l.rank * (in + out)
	if l.bias {
		n += out
	}
	return n
}

// layerElements is one slot of decoder layer i on one rank.
func (l loraShape) layerElements(s model.Spec, i int) int64 {
	h := int64(s.Hidden)
	var n int64
	switch k := s.LayerKind(i).Kind; {
	case k == model.MLA && s.MLA != nil:
		m := s.MLA
		heads := int64(s.Heads)
		qk := int64(m.QKNopeHeadDim + m.QKRopeHeadDim)
		if m.QLoraRank > 0 {
			n += l.replicated(h, int64(m.QLoraRank)) + l.column(int64(m.QLoraRank), heads*qk)
		} else {
			n += l.column(h, heads*qk)
		}
		n += l.replicated(h, int64(m.KVLoraRank+m.QKRopeHeadDim))
		n += l.column(int64(m.KVLoraRank), heads*int64(m.QKNopeHeadDim+m.VHeadDim))
		n += l.row(heads*int64(m.VHeadDim), h)
	case k == model.Full || k == model.Sliding:
		vdim := int64(s.HeadDim)
		if s.VHeadDim > 0 {
			vdim = int64(s.VHeadDim)
		}
		q := int64(s.Heads) * int64(s.HeadDim)
		kv, v := int64(s.KVHeads)*int64(s.HeadDim), int64(s.KVHeads)*vdim
		if s.KVHeads > 0 && l.tp > int64(s.KVHeads) {
			// KV heads are replicated past their count: a rank keeps one.
			kv, v = kv*l.tp/int64(s.KVHeads), v*l.tp/int64(s.KVHeads)
		}
		n += l.column(h, q, kv, v)
		n += l.row(int64(s.Heads)*vdim, h)
	}
	// Linear-attention and MLP-only layers: their mixers' projections are
	// not counted (no hybrid model's LoRA slots were measured).
	if s.IsMoELayer(i) {
		moe := s.MoE
		e, ie := int64(moe.Experts), int64(moe.Intermediate)
		n += l.replicated(h, e) // the router
		if moe.SharedInter > 0 {
			n += l.mlp(s, h, int64(moe.SharedInter))
		}
		if l.experts {
			local, width := e/l.expertShards, ie/l.tp
			if l.expertShards > 1 {
				width = ie
			}
			// w13: A [rank, H] and B [width, rank] for gate and up
			// (once for an ungated expert); w2: A [rank, width], B [H, rank].
			up := int64(1)
			if s.GatedMLP {
				up = 2
			}
			n += local * l.rank * (up*(h+width) + width + h)
		}
	} else if s.Intermediate > 0 {
		n += l.mlp(s, h, int64(s.Intermediate))
	}
	return n
}

// mlp is a dense MLP of width inter: gate_up (two slices) or up, then down.
func (l loraShape) mlp(s model.Spec, h, inter int64) int64 {
	if s.GatedMLP {
		return l.column(h, inter, inter) + l.row(inter, h)
	}
	return l.column(h, inter) + l.row(inter, h)
}

// loraBytes is what the LoRA slots of one rank of stage st take: every
// wrapped layer's slots, the vocabulary's on models that declare
// embedding modules (first and last stage), and before 0.12 the extra
// vocabulary rows those models' embedding and LM head grow by (in the
// model's dtype, dtypeBytes).
func loraBytes(s model.Spec, st stage, l loraShape, dtypeBytes int) int64 {
	var perSlot int64
	for i := st.first; i < st.last; i++ {
		perSlot += l.layerElements(s, i)
	}
	var base int64
	if embeddingLoRAArchitectures[s.Architecture] {
		h, v, x := int64(s.Hidden), int64(s.Vocab), l.extraVocab
		if st.isFirst {
			// VocabParallelEmbeddingWithLoRA: A [V + extra, rank], B
			// [H, rank], and the extra rows' embeddings [extra, H].
			perSlot += (v+x)*l.rank + h*l.rank + x*h
		}
		if st.isLast {
			// LogitsProcessorWithLoRA: A [rank, H], B [padded V, rank],
			// and the extra embeddings.
			padded := (v + x + loraVocabPadding - 1) / loraVocabPadding * loraVocabPadding
			perSlot += l.rank*h + padded*l.rank + x*h
		}
		if x > 0 {
			// The model's own embedding (and an untied LM head) gain the
			// extra rows, split by TP.
			tables := int64(0)
			if st.isFirst {
				tables++
			}
			if st.isLast && !s.TieEmbeddings {
				tables++
			}
			base = tables * x * h / l.tp * int64(dtypeBytes)
		}
	}
	return l.slots*perSlot*l.dtypeBytes + base
}
