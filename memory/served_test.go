package memory_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
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

// --disable-hybrid-kv-cache-manager: Gemma-3-12B's 40 sliding layers beside
// its 8 full ones become full-attention specs (unify_hybrid_kv_cache_specs):
// 393,216 B of KV a token instead of 65,536, the same KV tokens as vLLM
// counts them, and fewer requests of 32,768 tokens at once. A sliding
// layer held cdiv(min(1,024 − 1 + 2,048 batched tokens, 32,768), 16) + 1
// = 193 blocks of a request, a full one 2,048: 8 × 2,048 + 40 × 193 =
// 24,104 pages a request against 48 × 2,048 = 98,304, 4.078 times fewer
// requests. A model with linear-attention layers cannot be unified, and
// vLLM refuses it.
func TestHybridKVCacheManagerDisabled(t *testing.T) {
	at := func(s model.Spec, flags ...string) memory.Budget {
		t.Helper()
		set, err := vllm.ParseFlags(append([]string{"--max-model-len", "32768"}, flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		return plan(t, memory.Input{Model: s, Device: device(t, "L40S"), Settings: set})
	}
	gemma := spec(t, "google/gemma-3-12b-it")
	hybrid, unified := at(gemma), at(gemma, "--disable-hybrid-kv-cache-manager")
	ratio := hybrid.MaxConcurrency / unified.MaxConcurrency
	if unified.ModelKVBytesPerToken != 393216 || hybrid.ModelKVBytesPerToken != 65536 || unified.KVTokens != hybrid.KVTokens ||
		math.Abs(ratio/4.078-1) > 0.01 || !unified.Fits {
		t.Errorf("KV %d B a token (hybrid %d), %d KV tokens (%d), concurrency %.2f (%.2f: %.3f times)", unified.ModelKVBytesPerToken, hybrid.ModelKVBytesPerToken,
			unified.KVTokens, hybrid.KVTokens, unified.MaxConcurrency, hybrid.MaxConcurrency, ratio)
	}
	next := qwen3NextShaped(t)
	b := at(next, "--disable-hybrid-kv-cache-manager")
	if len(b.Problems) == 0 || b.Problems[0].Code != memory.CodeHybridUnifyRefused {
		t.Errorf("a gated delta-net model without the hybrid manager: problems %v", b.Problems)
	}
}

// Decode context parallelism: DeepSeek-V3 at TP 8 on H200s keeps one
// 576-element latent a token a layer on every rank (61 × 576 × 2 B =
// 70,272 B a token, not split by heads); -dcp 8 keeps each request's
// tokens an eighth a rank, so the pool holds 8 times the tokens (within
// the blocks' rounding) and 8 times the requests of 131,072 tokens. A
// size that does not divide the tensor-parallel size is refused.
func TestDecodeContextParallel(t *testing.T) {
	at := func(flags ...string) memory.Budget {
		t.Helper()
		set, err := vllm.ParseFlags(append([]string{"-tp", "8", "--max-model-len", "131072"}, flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		return plan(t, memory.Input{Model: spec(t, "deepseek-ai/DeepSeek-V3"), Device: device(t, "H200"), Count: 8, Settings: set})
	}
	one, eight := at(), at("-dcp", "8")
	if r := float64(eight.KVTokens) / float64(one.KVTokens); math.Abs(r/8-1) > 0.001 || eight.ModelKVBytesPerToken != 70272 || one.ModelKVBytesPerToken != 70272 ||
		math.Abs(eight.MaxConcurrency/one.MaxConcurrency/8-1) > 0.01 {
		t.Errorf("-dcp 8: %d KV tokens against %d (%.4f×), %d B a token, concurrency %.2f against %.2f", eight.KVTokens, one.KVTokens, r,
			eight.ModelKVBytesPerToken, eight.MaxConcurrency, one.MaxConcurrency)
	}
	if b := at("-dcp", "3"); len(b.Problems) == 0 || b.Problems[0].Code != memory.CodeContextParallel {
		t.Errorf("-dcp 3 at TP 8: problems %v", b.Problems)
	}
}

// --mamba-cache-mode (vLLM 0.16): a request keeps 1 Mamba state block a
// linear layer (none), 2 (align), or one every block of its tokens (all).
// A Qwen3-Next-shaped model of 6 gated delta-net layers and 2 full ones
// groups them by 2 (the smaller count; 6 is not within 1.5 times it): 3
// linear groups, 1 full. Its blocks are 544 tokens (vLLM raises the
// --block-size 16 given: TestHybridBlockSize), so a request of 32,768
// tokens needs 3 + 61 blocks (none), 6 + 61 (align), 3 × 61 + 61 (all):
// all serves 244 / 64 = 3.8125 times fewer at once. With prefix caching
// off the mode is none.
func TestMambaCacheMode(t *testing.T) {
	next := qwen3NextShaped(t)
	at := func(flags ...string) float64 {
		t.Helper()
		set, err := vllm.ParseFlags(append([]string{"--max-model-len", "32768", "--block-size", "16"}, flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		b := plan(t, memory.Input{Model: next, Device: device(t, "H100-80GB"), Settings: set})
		if !b.Fits {
			t.Fatalf("%v: %v", flags, b.Problems)
		}
		return b.MaxConcurrency
	}
	none, align, all := at(), at("--mamba-cache-mode", "align"), at("--mamba-cache-mode", "all")
	off := at("--mamba-cache-mode", "all", "--no-enable-prefix-caching")
	if math.Abs(none/all/(244.0/64)-1) > 0.001 || math.Abs(none/align/(67.0/64)-1) > 0.001 || off != none {
		t.Errorf("concurrency: none %.2f, align %.2f, all %.2f (%.3f times fewer), all without prefix caching %.2f", none, align, all, none/all, off)
	}
}

// vLLM gives a hybrid model the attention block whose page holds a rank's
// Mamba state, 16 tokens at a time (HybridAttentionMambaModelConfig): the
// Qwen3-Next-shaped model's 1,097,728 B state against 2 KV heads × 512 ×
// 2 B = 2,048 B a token at TP 1 is 16 × ⌈1,097,728 / 32,768⌉ = 544
// tokens; at TP 2, 548,864 B against one head's 1,024 B, 544 again; at
// TP 4 (the 2 heads replicated, one a rank) 274,432 B, 16 × 17 = 272; at
// TP 8, 137,216 B, 16 × 9 = 144, where a --block-size of 256 is kept. A request of 32,768 tokens then holds
// ⌈32,768 / 544⌉ = 61 blocks of the full group and 1 of each of the 3
// linear groups, 64 blocks: the concurrency is the pool's blocks / 64.
// Before, blocks of 16 each took the state's page: 0.55 requests of
// 32,768 tokens on a B200 where vLLM holds 17.
func TestHybridBlockSize(t *testing.T) {
	next := qwen3NextShaped(t)
	at := func(tp int, flags ...string) memory.Budget {
		t.Helper()
		set, err := vllm.ParseFlags(append([]string{"--max-model-len", "32768", "-tp", strconv.Itoa(tp)}, flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		return plan(t, memory.Input{Model: next, Device: device(t, "H100-80GB"), Count: tp, Settings: set})
	}
	for _, c := range []struct {
		tp    int
		flags []string
		block int
	}{{1, nil, 544}, {1, []string{"--block-size", "16"}, 544}, {2, nil, 544}, {4, nil, 272}, {8, nil, 144}, {8, []string{"--block-size", "256"}, 256}} {
		if b := at(c.tp, c.flags...); b.Settings.BlockSize != c.block {
			t.Errorf("TP %d %v: blocks of %d, want %d", c.tp, c.flags, b.Settings.BlockSize, c.block)
		}
	}
	b := at(1)
	if want := float64(b.NumBlocks) / 64; math.Abs(b.MaxConcurrency/want-1) > 1e-9 {
		t.Errorf("concurrency %.3f, want %d blocks / 64 = %.3f", b.MaxConcurrency, b.NumBlocks, want)
	}
}

// qwen3NextShaped is a small model of Qwen3-Next's layout: 6 gated
// delta-net layers (1,097,728 B of state each, model's TestLinearStateLayers)
// and 2 full-attention ones.
func qwen3NextShaped(t *testing.T) model.Spec {
	t.Helper()
	s, err := model.ParseConfig([]byte(`{"model_type": "qwen3_next", "num_hidden_layers": 8, "hidden_size": 2048, "intermediate_size": 5120,
		"num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "max_position_embeddings": 262144,
		"torch_dtype": "bfloat16", "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
		"linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A model whose weights are 40 GiB past the card (Qwen3-32B in bf16,
// 61.03 GiB, on one L4 of 22 GiB) gets no KV tokens from the parts'
// uncertainty (about 1 GiB): the band starts from how far past the
// budget the rest goes, not from an empty cache.
func TestKVBandPastTheCard(t *testing.T) {
	b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen3-32B"), Device: device(t, "L4"), Settings: vllm.Settings{Version: v019}})
	if b.Fits || b.KVTokens != 0 || b.KVTokensBand.High != 0 || b.KVTokensBand.Low != 0 {
		t.Errorf("fits %t, %d KV tokens, band %d–%d", b.Fits, b.KVTokens, b.KVTokensBand.Low, b.KVTokensBand.High)
	}
}

// The KV band's basis names the settings the plan reads from vLLM's code
// that no calibration start-up runs.
func TestKVBandNamesUnmeasuredLayout(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"-tp", "8", "-dcp", "8", "--max-model-len", "131072"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	b := plan(t, memory.Input{Model: spec(t, "deepseek-ai/DeepSeek-V3"), Device: device(t, "H200"), Count: 8, Settings: set})
	if !strings.Contains(b.KVTokensBand.Basis, "decode context parallel 8's tokens a rank read from vLLM's code: no calibration start-up runs them") {
		t.Errorf("basis %q", b.KVTokensBand.Basis)
	}
}

// Decode context parallelism over ranks that hold different KV heads is
// warned of: Llama-3.1-70B's 8 KV heads at TP 8 sit one a rank, so -dcp 2
// has no copies to shard tokens over; Qwen3-235B-A22B's 4 at TP 8 sit on
// 2 ranks each, and DeepSeek-V3's latent on all 8: no warning.
func TestDecodeContextParallelKVHeads(t *testing.T) {
	for _, c := range []struct {
		model string
		warn  bool
	}{{"meta-llama/Llama-3.1-70B-Instruct", true}, {"Qwen/Qwen3-235B-A22B", false}, {"deepseek-ai/DeepSeek-V3", false}} {
		set, err := vllm.ParseFlags([]string{"-tp", "8", "-dcp", "2", "--max-model-len", "32768"})
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		b := plan(t, memory.Input{Model: spec(t, c.model), Device: device(t, "H200"), Count: 8, Settings: set})
		warned := false
		for _, w := range b.Warnings {
			warned = warned || w.Code == memory.CodeContextParallelGQA
		}
		if warned != c.warn {
			t.Errorf("%s: warned %t, want %t (%v)", c.model, warned, c.warn, b.Warnings)
		}
	}
}
