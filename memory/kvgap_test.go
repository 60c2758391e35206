package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// kvInput is Qwen3-14B on one H100 at --gpu-memory-utilization 0.9 and
// --max-model-len 8192 on release v.
func kvInput(t *testing.T, v string) memory.Input {
	t.Helper()
	set, err := vllm.ParseFlags([]string{"--gpu-memory-utilization", "0.9", "--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = vllm.MustVersion(v)
	return memory.Input{Model: spec(t, "Qwen/Qwen3-14B"), Device: device(t, "H100-80GB"), Count: 1, Settings: set}
}

// TestCompareKV: a server with 31% of the planned blocks is far below the
// plan, and the cause follows the release's rules; 90% is not far.
func TestCompareKV(t *testing.T) {
	in := kvInput(t, "0.21.0")
	b := plan(t, in)
	got := memory.EngineCache{NumGPUBlocks: b.NumBlocks * 31 / 100, BlockSize: 16, GPUMemoryUtilization: 0.9}
	g, ok := memory.CompareKV(in, b, got)
	if !ok || !g.Far || g.Share < 0.30 || g.Share > 0.32 {
		t.Fatalf("%+v", g)
	}
	// 0.21.0 holds the CUDA-graph estimate inside the budget: the cause
	// names that boundary, the fix pins the planned pool.
	for _, want := range []string{"the CUDA-graph estimate is inside the budget (0.21.0, PR #38284)", "vllm #45178"} {
		if !strings.Contains(g.Cause, want) {
			t.Errorf("cause lacks %q: %s", want, g.Cause)
		}
	}
	if want := fmt.Sprintf("--kv-cache-memory-bytes %d", b.PerGPU.KVCache); !strings.Contains(g.Fix, want) {
		t.Errorf("fix lacks %q: %s", want, g.Fix)
	}
	// What is missing: (predicted − actual tokens) × KV bytes per token.
	missing := memory.GiB((g.PredictedTokens - g.ActualTokens) * b.KVBytesPerToken)
	if !strings.Contains(g.Cause, missing+" of KV memory per GPU is missing") {
		t.Errorf("cause lacks the missing %s: %s", missing, g.Cause)
	}

	// 0.20.0 keeps graphs outside the budget: memory the plan does not see.
	in20 := kvInput(t, "0.20.0")
	b20 := plan(t, in20)
	g, _ = memory.CompareKV(in20, b20, memory.EngineCache{NumGPUBlocks: b20.NumBlocks / 2, BlockSize: 16, GPUMemoryUtilization: 0.9})
	if !g.Far || !strings.Contains(g.Cause, "memory the plan does not count") {
		t.Errorf("0.20.0: %+v", g)
	}

	// A server at 0.7 where the plan says 0.9: the plan at 0.7 holds its
	// blocks, so the utilization is named.
	at7 := in20
	at7.Settings.GPUMemoryUtilization = 0.7
	b7 := plan(t, at7)
	g, _ = memory.CompareKV(in20, b20, memory.EngineCache{NumGPUBlocks: b7.NumBlocks, BlockSize: 16, GPUMemoryUtilization: 0.7})
	if !g.Far || !strings.Contains(g.Cause, "vLLM runs at --gpu-memory-utilization 0.7, the plan at 0.9") || !strings.Contains(g.Fix, "--gpu-memory-utilization 0.9") {
		t.Errorf("utilization: %+v", g)
	}

	// 90% of the plan is within DefaultMaxKVLoss: no cause.
	g, _ = memory.CompareKV(in, b, memory.EngineCache{NumGPUBlocks: b.NumBlocks * 9 / 10, BlockSize: 16})
	if g.Far || g.Cause != "" {
		t.Errorf("90%%: %+v", g)
	}
	if _, ok := memory.CompareKV(in, b, memory.EngineCache{}); ok {
		t.Error("nothing reported, yet compared")
	}
}
