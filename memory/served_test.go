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
