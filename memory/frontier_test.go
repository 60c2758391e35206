package memory_test

import (
	"math"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The frontier of Llama-3.1-8B-Instruct on H100 at 0.95 with vLLM 0.19.0,
// max-model-len 8192: the logged run held 476,016 KV tokens and logged
// "Maximum concurrency for 8192 tokens per request: 58.11x"; the model
// allows 131,072 positions. Lengths double from 512 to 131,072 (the model's
// maximum, where 476,016 / 131,072 = 3.63), with 8192 among them.
func TestFrontierLlama8BOnH100(t *testing.T) {
	b := plan(t, memory.Input{
		Model:    spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:   device(t, "H100-80GB"),
		Settings: vllmSettings(0.95, 8192),
	})
	f := b.Frontier()
	want := []int{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}
	if len(f) != len(want) {
		t.Fatalf("frontier has %d points, want %d: %+v", len(f), len(want), f)
	}
	logged := map[int]float64{8192: 58.11, 131072: 3.63, 512: 929.72} // 476,016 / L
	for i, p := range f {
		if p.ContextTokens != want[i] {
			t.Errorf("point %d at %d tokens, want %d", i, p.ContextTokens, want[i])
		}
		if i > 0 && p.Concurrency >= f[i-1].Concurrency {
			t.Errorf("concurrency does not fall with context: %+v then %+v", f[i-1], p)
		}
		if c, ok := logged[p.ContextTokens]; ok && math.Abs(p.Concurrency/c-1) > 0.005 {
			t.Errorf("concurrency at %d = %.2f, want %.2f within 0.5%% (476,016 tokens logged)", p.ContextTokens, p.Concurrency, c)
		}
	}
}

// A context that does not fit still has its point: the frontier shows the
// cliff (Llama-3.1-70B on one H100 in bf16: 141 GB of weights, no KV cache).
func TestFrontierNoFit(t *testing.T) {
	b := plan(t, memory.Input{
		Model:    spec(t, "meta-llama/Llama-3.1-70B-Instruct"),
		Device:   device(t, "H100-80GB"),
		Settings: vllmSettings(0.9, 8192),
	})
	for _, p := range b.Frontier() {
		if p.Concurrency != 0 {
			t.Errorf("70B on one H100 holds %.2f requests of %d tokens, want 0", p.Concurrency, p.ContextTokens)
		}
	}
}

func vllmSettings(util float64, maxLen int) vllm.Settings {
	return vllm.Settings{GPUMemoryUtilization: util, MaxModelLen: maxLen, Version: v019}
}
