package memory_test

import (
	"strconv"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// TestBatchShardedSampling: --enable-batch-sharded-sampling (0.29.0+,
// Model Runner V2, TP ≥ 2) leaves each rank 1/TP of the dummy sampler's
// logits. Llama-3.1-8B at TP 2 on H100 with 2048 batched tokens and 1024
// sequences: the sampler sets the peak (its forward pass is 2048 × (6.42 ×
// 4096 + 3 × 14336 / 2) × 2 B = 0.19 GiB), and its logits are 1024 rows ×
// 128,256 × (2 + 4) B = 788,004,864 B, of which half, 394,002,432 B, stays
// off each rank: the KV cache grows by that much.
func TestBatchShardedSampling(t *testing.T) {
	in := func(version string, tp int, extra ...string) memory.Input {
		args := append([]string{"--tensor-parallel-size", strconv.Itoa(tp), "--max-model-len", "8192", "--max-num-seqs", "1024", "--max-num-batched-tokens", "2048"}, extra...)
		set, err := vllm.ParseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		set.Version = vllm.MustVersion(version)
		return memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Count: tp, Settings: set}
	}
	const flag = "--enable-batch-sharded-sampling"
	off, on := plan(t, in("0.29.0", 2)), plan(t, in("0.29.0", 2, flag))
	if d := on.PerGPU.KVCache - off.PerGPU.KVCache; d < 394002432-2 || d > 394002432+2 {
		t.Errorf("0.29.0 TP 2: the flag moves the KV cache by %d B, want 394,002,432", d)
	}
	if off.PerGPU.Activation-on.PerGPU.Activation != on.PerGPU.KVCache-off.PerGPU.KVCache || !on.Fits {
		t.Errorf("the activation (%d → %d) should move as the KV cache does; fits %t %+v", off.PerGPU.Activation, on.PerGPU.Activation, on.Fits, on.Problems)
	}
	// The release before has no such flag: vLLM refuses the command, and
	// nothing is split.
	old := plan(t, in("0.28.0", 2, flag))
	if old.Fits || old.Problems[0].Code != memory.CodeFlagNotInRelease || old.PerGPU.Activation != plan(t, in("0.28.0", 2)).PerGPU.Activation {
		t.Errorf("0.28.0: fits %t, problems %+v", old.Fits, old.Problems)
	}
	// vLLM's validation: TP 1, or the V1 runner (an ngram speculator keeps
	// it), is refused.
	for name, b := range map[string]memory.Budget{
		"TP 1":  plan(t, in("0.29.0", 1, flag)),
		"ngram": plan(t, in("0.29.0", 2, flag, `--speculative-config={"method":"ngram","num_speculative_tokens":3}`)),
	} {
		refused := false
		for _, p := range b.Problems {
			refused = refused || p.Code == memory.CodeShardedSampling
		}
		if b.Fits || !refused {
			t.Errorf("%s: fits %t, problems %+v; want %s", name, b.Fits, b.Problems, memory.CodeShardedSampling)
		}
	}
}
