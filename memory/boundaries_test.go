package memory_test

import (
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// TestReleasesThatMoveNoGiB: the releases in docs/vllm-versions.md whose
// change leaves a default plan's GiB where they were, each planned on both
// sides for a model the change concerns. These are decisions, written here
// so a later rule that moves a GiB there has to change this test too:
//
//   - 0.14.0, native CPU KV offloading (PR #32421): opt-in
//     (--kv-offloading-size), and the GPU pool is sized as before; the
//     offload spends pinned host RAM.
//   - 0.16.0, Mamba prefix-caching modes (PR #30877): they set how many
//     Mamba blocks a request holds (1, 2 or one per block of context), not
//     the pool; no model of the catalog has Mamba layers, and a hybrid
//     model from a config keeps one state block a request.
//   - 0.23.0, multi-tier KV offloading (PR #40020): the GPU pool is
//     unchanged. Qwen3-30B-A3B stays on the V1 runner there (Model Runner
//     V2 takes Llama and Mistral dense models and two other MoE
//     architectures, DeepSeek-V2 and Qwen2-MoE, from 0.23.0).
//   - 0.28.0, shared-expert sharding for some MoE models (PR #50912):
//     optional, with no flag name documented; the default keeps the shared
//     experts replicated, so DeepSeek-V2-Lite's weights per GPU at TP 2
//     stay.
//   - 0.33.0, KV-cache planning moved to kv_cache_planning.py (PR #42309,
//     PR #53558): no size changes documented with the move.
func TestReleasesThatMoveNoGiB(t *testing.T) {
	for _, tc := range []struct {
		model    string
		tp       int
		from, to string
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 1, "0.13.0", "0.14.0"},
		{"meta-llama/Llama-3.1-8B-Instruct", 1, "0.15.1", "0.16.0"},
		{"Qwen/Qwen3-30B-A3B", 1, "0.22.0", "0.23.0"},
		{"deepseek-ai/DeepSeek-V2-Lite-Chat", 2, "0.27.0", "0.28.0"},
		{"Qwen/Qwen3-30B-A3B", 1, "0.32.0", "0.33.0"},
	} {
		set := vllm.Settings{Version: vllm.MustVersion(tc.from), TensorParallelSize: tc.tp, MaxModelLen: 8192}
		in := memory.Input{Model: spec(t, tc.model), Device: device(t, "H100-80GB"), Count: tc.tp, Settings: set}
		u, err := memory.PlanUpgrade(in, vllm.MustVersion(tc.to))
		if err != nil {
			t.Fatalf("%s %s -> %s: %v", tc.model, tc.from, tc.to, err)
		}
		if u.Before.KVTokens == 0 || u.Before.KVTokens != u.After.KVTokens || u.Before.PerGPU.Weights != u.After.PerGPU.Weights || len(u.Changes) != 0 {
			t.Errorf("%s TP %d, %s -> %s: KV tokens %d -> %d, weights %d -> %d, changes %+v; want none", tc.model, tc.tp, tc.from, tc.to,
				u.Before.KVTokens, u.After.KVTokens, u.Before.PerGPU.Weights, u.After.PerGPU.Weights, u.Changes)
		}
	}
}
