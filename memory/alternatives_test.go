package memory_test

import (
	"slices"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// alt is what a test asserts of an alternative.
type alt struct {
	code  string
	args  string
	gpu   string
	count int
	cost  int
}

func checkAlternatives(t *testing.T, in memory.Input, want []alt) {
	t.Helper()
	alts := memory.Alternatives(in, gpu.Devices())
	var got []alt
	for _, a := range alts {
		got = append(got, alt{a.Code, strings.Join(a.Args, " "), a.GPU, a.Count, a.Cost})
		// Every alternative is planned on the GPUs it names, and fits.
		b := plan(t, a.Input)
		if !b.Fits {
			t.Errorf("%s: re-planned, it does not fit: %v", a.Code, b.Problems)
		}
		if a.Count > 0 && b.Count != a.Count {
			t.Errorf("%s: planned on %d GPUs, names %d", a.Code, b.Count, a.Count)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("alternatives\n got %+v\nwant %+v", got, want)
	}
}

// Llama-3.1-8B with --tensor-parallel-size 8 on one H100 fails on the GPU
// count alone. What answers it: 8 GPUs (cost 2: more of the same GPU), or
// tp 1 on the one given (cost 2: a flag the user set). The tie keeps the
// user's flag. Not offered: 16 GPUs at tp 16, fp8, a bigger GPU: none of
// them gives the 8 GPUs tp 8 needs, or they change what did not fail.
func TestAlternativesGPUCount(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--tensor-parallel-size", "8"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Count: 1, Settings: set}
	if b := plan(t, in); b.Fits || len(b.Problems) != 1 || b.Problems[0].Code != memory.CodeNotEnoughGPUs {
		t.Fatalf("want only %s, got %v", memory.CodeNotEnoughGPUs, b.Problems)
	}
	checkAlternatives(t, in, []alt{
		{code: memory.AltGPUCount, gpu: "H100-80GB", count: 8, cost: 2},
		{code: memory.AltTensorShards, args: "--tensor-parallel-size 1", cost: 2},
	})
}

// Llama-3.1-70B-Instruct on one A10G at 8192 tokens (vLLM 0.19.0): 131
// GiB of bf16 weights on a 22 GiB card. fp8 weights (~66 GiB) do not fit
// either, nor do 2, 4 or 8 A10Gs (16.4 GiB of weights each at tp 8, with
// ~2 GiB of non-torch memory and the activation, over the 0.90 budget).
// What fits, cheapest first:
//
//	B200 (178.40 GiB), the smallest card that holds it: another GPU = 3
//	16 × A10G at tp 16: tp (default) 1 + more of the same GPU 2 +
//	  --gpu-memory-utilization 0.84 (default) 1 = 4 (graphs stay outside
//	  vLLM 0.19.0's budget, so the card needs room beside it)
func TestAlternativesMemoryBound(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(t, "A10G"),
		Settings: vllm.Settings{MaxModelLen: 8192, Version: v019}}
	checkAlternatives(t, in, []alt{
		{code: memory.AltBiggerGPU, gpu: "B200", count: 1, cost: 3},
		{code: memory.AltMoreGPUs, args: "--tensor-parallel-size 16 --gpu-memory-utilization 0.84", gpu: "A10G", count: 16, cost: 4},
	})
}

// Llama-3.1-8B on an L4 with --max-model-len 65536 given (vLLM 0.19.0):
// one request needs 8 GiB of KV, the card has ~4 GiB for it. Each lever
// alone, by cost:
//
//	fp8 KV cache (kv-cache-dtype at its default): 1
//	fp8 weights (quantization at its default): 1 — after KV, by kind
//	the longest context that fits, 33,776 (a flag the user set): 2
//	a bigger GPU, RTX-5090 (31.36 GiB): 3
//	2 × L4 at tp 2 and utilization 0.85: 1 + 2 + 1 = 4
func TestAlternativesContext(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--max-model-len", "65536"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: set}
	checkAlternatives(t, in, []alt{
		{code: memory.AltKVCacheFP8, args: "--kv-cache-dtype fp8", cost: 1},
		{code: memory.AltQuantizeFP8, args: "--quantization fp8", cost: 1},
		{code: memory.AltShorter, args: "--max-model-len 33776", cost: 2},
		{code: memory.AltBiggerGPU, gpu: "RTX-5090", count: 1, cost: 3},
		{code: memory.AltMoreGPUs, args: "--tensor-parallel-size 2 --gpu-memory-utilization 0.85", gpu: "L4", count: 2, cost: 4},
	})
}
