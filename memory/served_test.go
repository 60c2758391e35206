package memory_test

import (
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// Gemma-3-12B with --disable-sliding-window on an L40S: vLLM serves at most
// its 1,024-token window, and every one of its 48 layers keeps K and V for
// each token: 48 × 2 × 8 KV heads × 256 × 2 B = 393,216 B a token, where
// the sliding model's full layers (8 of 48) cost 65,536 B a token. The
// same line with --hf-overrides reads the override first.
func TestServedModel(t *testing.T) {
	gemma := spec(t, "google/gemma-3-12b-it")
	set, err := vllm.ParseFlags([]string{"--disable-sliding-window"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	served, err := memory.ServedModel(gemma, set)
	if err != nil {
		t.Fatal(err)
	}
	b := plan(t, memory.Input{Model: served, Device: device(t, "L40S"), Settings: set})
	sliding := plan(t, memory.Input{Model: gemma, Device: device(t, "L40S"), Settings: vllm.Settings{Version: v019}})
	if b.MaxModelLen != 1024 || b.ModelKVBytesPerToken != 393216 || sliding.ModelKVBytesPerToken != 65536 {
		t.Errorf("max-model-len %d, KV %d B a token (sliding: %d B)", b.MaxModelLen, b.ModelKVBytesPerToken, sliding.ModelKVBytesPerToken)
	}
	set2, err := vllm.ParseFlags([]string{"--hf-overrides", `{"text_config": {"sliding_window": 2048}}`, "--disable-sliding-window"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := memory.ServedModel(gemma, set2); err != nil || s.MaxPositions != 2048 {
		t.Errorf("the override, then the window: context %d, %v", s.MaxPositions, err)
	}
}

// EPLB's redundant experts: DeepSeek-V3 (256 routed experts) on 16 H200s
// as data parallel 16 with expert parallelism holds 16 experts a GPU; 32
// redundant ones make 288 physical experts, 18 a GPU: the weights grow
// by 2/16 of a GPU's experts, the whole model's expert bytes × 32/256 /
// 16, times the few percent the plan scales computed weights by to match
// the checkpoint's bytes on disk (checkpointScale: 2.3% here).
// Redundant experts without --enable-eplb, and EPLB without expert
// parallelism, are refused as vLLM's ParallelConfig refuses them.
func TestRedundantExperts(t *testing.T) {
	ds := spec(t, "deepseek-ai/DeepSeek-V3")
	at := func(flags ...string) memory.Budget {
		t.Helper()
		set, err := vllm.ParseFlags(append([]string{"--tensor-parallel-size", "1", "--data-parallel-size", "16", "--max-model-len", "32768"}, flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		return plan(t, memory.Input{Model: ds, Device: device(t, "H200"), Count: 16, GPUsPerNode: 16, Settings: set})
	}
	base := at("--enable-expert-parallel")
	for _, flags := range [][]string{
		{"--enable-expert-parallel", "--enable-eplb", "--num-redundant-experts", "32"},
		{"--enable-expert-parallel", "--enable-eplb", "--eplb-config", `{"num_redundant_experts": 32, "window_size": 1000}`},
	} {
		b := at(flags...)
		want := float64(base.ExpertWeightsTotal) * 32 / 256 / 16
		got := float64(b.PerGPU.Weights - base.PerGPU.Weights)
		if len(b.Problems) != 0 || got/want < 1 || got/want > 1.03 || b.KVTokens >= base.KVTokens {
			t.Errorf("%v: weights +%.2f GiB a GPU, want +%.2f; KV %d against %d; problems %v", flags, got/(1<<30), want/(1<<30), b.KVTokens, base.KVTokens, b.Problems)
		}
	}
	for _, flags := range [][]string{
		{"--enable-expert-parallel", "--num-redundant-experts", "32"},
		{"--enable-eplb"},
	} {
		b := at(flags...)
		if len(b.Problems) == 0 || b.Problems[0].Code != memory.CodeEPLBRefused {
			t.Errorf("%v: problems %v, want %s", flags, b.Problems, memory.CodeEPLBRefused)
		}
	}
}
