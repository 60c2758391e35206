package memory

import "headroom.dev/headroom/model"

// hybridBlockSize is the block size vLLM gives a model whose attention
// layers sit beside linear-attention (Mamba, gated delta-net) layers, so
// that every KV-cache group shares one page size
// (HybridAttentionMambaModelConfig.verify_and_update_config,
// vllm/model_executor/models/config.py): the attention block grows to the
// smallest multiple of the attention backend's alignment (16 tokens, 64
// for MLA) whose page holds a rank's Mamba state, "Setting attention block
// size to N tokens to ensure that attention page size is >= mamba page
// size", and the Mamba page is then padded to the attention page. A
// --block-size already that large is kept. Qwen3-Next at TP 1 in bf16: a
// state of 1,097,728 B against 2,048 B a token of attention gives 16 ×
// ⌈1,097,728 / 32,768⌉ = 544 tokens, the state padded by 1.49%. With
// Mamba prefix caching on, vLLM aligns the block to the Mamba kernel's
// chunk instead, which is not modelled: the plan takes the smallest block.
// bs for any other model.
func hybridBlockSize(s model.Spec, tp, kvBytes, bs int) int {
	var state int64
	attention := false
	for i := range s.Layers {
		switch k := s.LayerKind(i); k.Kind {
		case model.Linear:
			st, _ := k.StateAt(tp)
			state = max(state, st)
		case model.Full, model.Sliding, model.MLA:
			attention = true
		}
	}
	perToken := tokenBytesPerLayer(s, tp, kvBytes)
	if state <= 0 || !attention || perToken <= 0 {
		return bs
	}
	align := int64(16)
	if s.MLA != nil && s.MLA.KVLoraRank > 0 {
		align = 64
	}
	need := align * cdiv(state, align*perToken)
	if need > int64(bs) && need <= maxHybridBlock {
		return int(need)
	}
	return bs
}

// maxHybridBlock bounds the block hybridBlockSize gives: a state past a
// million tokens of attention is a malformed config, planned at its own
// block size rather than at an int32 overflow.
const maxHybridBlock = 1 << 20
