package memory_test

import (
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The drafter the simulator prices: the 0.5B draft as loaded, at the
// target's TP 2 unless draft_tensor_parallel_size says 1; DeepSeek-V3's
// one MTP layer as a model of one MoE layer; none for n-gram matching.
func TestDrafterNetwork(t *testing.T) {
	target, draft := spec(t, "Qwen/Qwen2.5-7B-Instruct"), spec(t, "Qwen/Qwen2.5-0.5B-Instruct")
	planOf := func(line string) memory.Budget {
		in := memory.Input{Model: target, Device: device(t, "L4"), Draft: &draft}
		in.Settings = settingsOf(t, line)
		in.Settings.Version = vllm.MustVersion("0.27.1")
		return plan(t, in)
	}
	const line = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 -tp 2 --speculative-config "
	if s, tp, ok := planOf(line + `'{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":3}'`).DrafterNetwork(); !ok || s.ID != draft.ID || tp != 2 {
		t.Errorf("draft model: %s at TP %d (%v)", s.ID, tp, ok)
	}
	if _, tp, _ := planOf(line + `'{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":3,"draft_tensor_parallel_size":1}'`).DrafterNetwork(); tp != 1 {
		t.Errorf("draft TP %d, want 1", tp)
	}
	if _, _, ok := planOf(line + `'{"method":"ngram","num_speculative_tokens":3}'`).DrafterNetwork(); ok {
		t.Error("n-gram matching has a drafter network")
	}
	ds := spec(t, "deepseek-ai/DeepSeek-V3")
	in := memory.Input{Model: ds, Device: device(t, "H200"), Count: 8}
	in.Settings = settingsOf(t, `vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --speculative-config '{"method":"mtp","num_speculative_tokens":1}'`)
	s, tp, ok := plan(t, in).DrafterNetwork()
	if !ok || s.Layers != 1 || !s.IsMoELayer(0) || tp != 8 {
		t.Errorf("MTP: %d layers (MoE %v) at TP %d (%v)", s.Layers, s.IsMoELayer(0), tp, ok)
	}
}
