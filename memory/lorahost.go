package memory

import (
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// LoRAAdapterBytes is one LoRA adapter of --max-lora-rank as a worker
// holds it in host memory (the LRU cache of --max-cpu-loras adapters,
// vllm/lora/worker_manager.py): every wrapped layer's A and B whole, as
// the adapter is loaded before it is sharded, in the LoRA dtype; 0
// without --enable-lora. An adapter of a lower rank takes less: the rank
// bounds it. It is one GPU slot at TP 1, without the extra vocabulary
// rows the model's own tables grow by.
func LoRAAdapterBytes(s model.Spec, set vllm.Settings, dtypeBytes int) (int64, error) {
	l, ok, err := loraShapeFor(s, set, dtypeBytes)
	if !ok || err != nil {
		return 0, err
	}
	l.slots, l.tp, l.fullyShard, l.expertShards, l.extraVocab = 1, 1, false, 1, 0
	whole := stage{first: 0, last: s.Layers, isFirst: true, isLast: true}
	return loraBytes(s, whole, l, dtypeBytes), nil
}
