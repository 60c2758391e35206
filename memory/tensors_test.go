package memory

import (
	"math"
	"testing"

	"headroom.dev/headroom/vllm"
)

// LayerTensors splits each layer as splitWeights counts it: the two must
// sum to the same bytes on every kind of model and TP size (dense, GQA
// with replicated KV heads, MoE, MLA, quantized).
func TestLayerTensorsSumToTheRankWeights(t *testing.T) {
	for _, id := range []string{"meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mixtral-8x7B-Instruct-v0.1", "deepseek-ai/DeepSeek-V2-Lite-Chat", "Qwen/Qwen2.5-7B-Instruct-AWQ", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"} {
		s := catalogSpec(t, id)
		layers := layerParams(s)
		f := quantFormat(s.Quant)
		for _, tp := range []int{1, 2, 8, 16} {
			for i := range s.Layers {
				var sum int64
				ts := LayerTensors(s, i, tp, 2)
				for _, b := range ts {
					sum += b
				}
				want := splitWeights(s, layers, stage{first: i, last: i + 1}, tp).bytes(2, f, false)
				// Each tensor truncates its bytes to an integer.
				if math.Abs(float64(sum)-want) > float64(len(ts)) {
					t.Fatalf("%s tp %d layer %d: tensors sum to %d B, splitWeights %.0f", id, tp, i, sum, want)
				}
			}
		}
	}
}

// Llama-3.1-8B's layer in bf16 at TP 1, written out: QKV (4096 + 2 ×
// 1024) × 4096 × 2 B, O 4096 × 4096 × 2 B, gate-up 2 × 14336 × 4096 × 2 B,
// down 14336 × 4096 × 2 B, two norms of 4096 × 2 B.
func TestLayerTensorsLlama(t *testing.T) {
	got := LayerTensors(catalogSpec(t, "meta-llama/Llama-3.1-8B-Instruct"), 0, 1, 2)
	want := []int64{6144 * 4096 * 2, 4096 * 4096 * 2, 2 * 14336 * 4096 * 2, 14336 * 4096 * 2, 2 * 4096 * 2}
	if len(got) != len(want) {
		t.Fatalf("tensors %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tensors %v, want %v", got, want)
		}
	}
	if LayerTensors(catalogSpec(t, "meta-llama/Llama-3.1-8B-Instruct"), 32, 1, 2) != nil {
		t.Fatal("a layer past the last has no tensors")
	}
}

// docs/vllm-features.md §1.4: Qwen2.5-7B-Instruct at max_lora_rank 64 in
// bf16 (Qwen2 declares no embedding modules): 5,767,168 elements a layer
// × 28 layers × 2 B = 322,961,408 B (308.0 MiB) an adapter.
func TestLoRAAdapterBytes(t *testing.T) {
	s := catalogSpec(t, "Qwen/Qwen2.5-7B-Instruct")
	set := vllm.Settings{TensorParallelSize: 2, MaxLoRARank: 64, Extra: []string{"--enable-lora"}}
	got, err := LoRAAdapterBytes(s, set, 2)
	if err != nil || got != 322961408 {
		t.Fatalf("%d B, %v; want 322,961,408", got, err)
	}
	if n, _ := LoRAAdapterBytes(s, vllm.Settings{MaxLoRARank: 64}, 2); n != 0 {
		t.Fatalf("without --enable-lora: %d B", n)
	}
}
