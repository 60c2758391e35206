package memory_test

import (
	"math"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The catalog's FP8 checkpoints store their linear weights in one byte a
// parameter. RedHatAI's Llama-3.3-70B FP8 (the same architecture, the same
// byte a weight) logged "Model loading took 33.88 GiB" per GPU at TP 2 on
// vLLM 0.19.0 (testdata/vllm-0.19.0-h100.csv): 67.76 GiB for the model,
// which the Llama-3.1-70B FP8 entry must give within 1%; Qwen's block-wise
// FP8 checkpoints hold a little more than half their BF16 base.
func TestCatalogFP8Checkpoints(t *testing.T) {
	weights := func(id string) float64 {
		b, err := weightsOf(t, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return float64(b) / (1 << 30)
	}
	if gib := weights("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"); math.Abs(gib/67.76-1) > 0.01 {
		t.Errorf("Llama-3.1-70B FP8: %.2f GiB of weights, want 67.76 within 1%%", gib)
	}
	for _, id := range []string{"Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B"} {
		if r := weights(id+"-FP8") / weights(id); r < 0.5 || r > 0.6 {
			t.Errorf("%s-FP8 holds %.2f of its base's bytes, want a little more than half", id, r)
		}
	}
}

// weightsOf is the whole model's weight bytes as a plan on one H100-80GB
// loads them.
func weightsOf(t *testing.T, id string) (int64, error) {
	b, err := memory.Plan(upgradeInput(t, id, vllm.Settings{MaxModelLen: 4096, Version: vllm.MustVersion("0.19.0")}))
	return b.WeightsTotal, err
}
