package memory_test

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

const gib = 1 << 30

func spec(t testing.TB, id string) model.Spec {
	t.Helper()
	s, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s not in the catalog", id)
	}
	return s
}

func device(t testing.TB, name string) gpu.Device {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Device
}

func plan(t testing.TB, in memory.Input) memory.Budget {
	t.Helper()
	b, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var v019 = vllm.MustVersion("0.19.0")

// Llama-3.1-8B-Instruct on H100 at utilization 0.95 with vLLM 0.19.0, as
// logged (calibration CSV): "Model loading took 14.99 GiB",
// requested 75.23 GiB, "GPU KV cache size: 476,016 tokens".
func TestLlama8BOnH100(t *testing.T) {
	b := plan(t, memory.Input{
		Model:    spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:   device(t, "H100-80GB"),
		Settings: vllm.Settings{GPUMemoryUtilization: 0.95, MaxModelLen: 8192, Version: v019},
	})
	p := b.PerGPU
	// requested = ceil(85,029,158,912 × 0.95) = 80,777,700,967 B = 75.23 GiB.
	if p.Requested != 80777700967 {
		t.Errorf("requested = %d, want 80777700967", p.Requested)
	}
	// weights = 8,030,261,248 parameters × 2 B + the rotary table
	// 131,072 positions × 128 dims × 2 B = 16,060,522,496 + 33,554,432.
	if p.Weights != 16094076928 {
		t.Errorf("weights = %d, want 16094076928 (14.99 GiB logged)", p.Weights)
	}
	// One token costs 32 layers × 2 (K, V) × 8 heads × 128 × 2 B = 131,072 B.
	if b.KVBytesPerToken != 131072 {
		t.Errorf("KV bytes per token = %d, want 131072", b.KVBytesPerToken)
	}
	// Blocks are 16 tokens × 131,072 B = 2 MiB; tokens = blocks × 16.
	if b.NumBlocks != p.KVCache/(2<<20) || b.KVTokens != b.NumBlocks*16 {
		t.Errorf("blocks %d tokens %d for %d KV bytes", b.NumBlocks, b.KVTokens, p.KVCache)
	}
	if e := math.Abs(float64(b.KVTokens)/476016 - 1); e > 0.005 {
		t.Errorf("KV tokens %d vs 476,016 logged: %.2f%% off", b.KVTokens, e*100)
	}
	// Logged: num_gpu_blocks 29,751, and "Maximum concurrency for 8192
	// tokens per request: 58.11x" (476,016 / 8192 = 58.11).
	if e := math.Abs(float64(b.NumBlocks)/29751 - 1); e > 0.005 {
		t.Errorf("blocks %d vs 29,751 logged: %.2f%% off", b.NumBlocks, e*100)
	}
	if got := b.MaxConcurrency; math.Abs(got-float64(b.KVTokens)/8192) > 1e-9 || math.Abs(got/58.11-1) > 0.005 {
		t.Errorf("max concurrency %.4f, want tokens/8192 and within 0.5%% of 58.11 logged", got)
	}
	if !b.Fits || len(b.Problems) != 0 {
		t.Errorf("want a fit, got problems %v", b.Problems)
	}
	if b.CUDAGraphInBudget {
		t.Error("vLLM 0.19.0 keeps CUDA graphs outside the budget")
	}
}

// vLLM 0.21.0 subtracts its CUDA-graph estimate from the KV budget; 0.20.0
// does not (vllm-memory.md §2.4). Everything else equal, the KV cache
// shrinks by exactly the graph estimate.
func TestCUDAGraphBudgetBoundary(t *testing.T) {
	in := memory.Input{
		Model:    spec(t, "Qwen/Qwen2.5-7B-Instruct"),
		Device:   device(t, "H100-80GB"),
		Settings: vllm.Settings{GPUMemoryUtilization: 0.9, MaxModelLen: 8192},
	}
	in.Settings.Version = vllm.MustVersion("0.20.0")
	before := plan(t, in)
	in.Settings.Version = vllm.MustVersion("0.21.0")
	after := plan(t, in)
	if before.CUDAGraphInBudget || !after.CUDAGraphInBudget {
		t.Fatalf("in budget: 0.20.0=%t 0.21.0=%t", before.CUDAGraphInBudget, after.CUDAGraphInBudget)
	}
	// 0.21.0 also moves the dummy sampler from the Triton kernel to
	// FlashInfer (PR #40376): the same b + 12 bytes a logit, without the
	// Triton kernel's cached buffer of 132 SMs × 152,064 × 4 B = 80.3 MB.
	tritonBuffer := int64(132 * 152064 * 4)
	if d := before.PerGPU.Activation - after.PerGPU.Activation; d != tritonBuffer {
		t.Errorf("0.20.0 → 0.21.0 activation falls by %d B, want the Triton buffer's %d", d, tritonBuffer)
	}
	if want := before.PerGPU.KVCache - before.PerGPU.CUDAGraph + tritonBuffer; after.PerGPU.KVCache != want {
		t.Errorf("0.21.0 KV = %d, want %d (0.20.0 KV − graphs + the Triton buffer)", after.PerGPU.KVCache, want)
	}
	// The env var turns the estimate off again.
	in.Env = map[string]string{"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}
	if off := plan(t, in); off.CUDAGraphInBudget || off.PerGPU.KVCache != before.PerGPU.KVCache+tritonBuffer {
		t.Errorf("with the estimate off KV = %d, want %d", off.PerGPU.KVCache, before.PerGPU.KVCache+tritonBuffer)
	}
	// --enforce-eager captures no graphs at all.
	in.Env = nil
	in.Settings.EnforceEager = true
	if eager := plan(t, in); eager.PerGPU.CUDAGraph != 0 || eager.PerGPU.KVCache != before.PerGPU.KVCache+tritonBuffer {
		t.Errorf("eager: graphs %d, KV %d", eager.PerGPU.CUDAGraph, eager.PerGPU.KVCache)
	}
}

// vLLM 0.17.0 cut the profiled activation peak: Qwen3-14B 5.64 GiB in
// 0.16.0 against 2.23 GiB in 0.17.0 (vllm-memory.md §2.5).
func TestActivationProfileBoundary(t *testing.T) {
	in := memory.Input{Model: spec(t, "Qwen/Qwen3-14B"), Device: device(t, "H100-80GB"), Settings: vllm.Settings{MaxModelLen: 8192}}
	in.Settings.Version = vllm.MustVersion("0.16.0")
	old := plan(t, in).PerGPU.Activation
	in.Settings.Version = vllm.MustVersion("0.17.0")
	lean := plan(t, in).PerGPU.Activation
	if r := float64(old) / float64(lean); math.Abs(r-5.64/2.23) > 0.01 {
		t.Errorf("0.16/0.17 activation ratio %.3f, want 5.64/2.23 = %.3f", r, 5.64/2.23)
	}
	if g := float64(lean) / gib; g < 2.0 || g > 2.5 {
		t.Errorf("0.17.0 activation %.2f GiB, measured 2.23", g)
	}
}

// Gemma-3-27B: 62 layers, every sixth global (10 full), 52 sliding. vLLM
// 0.19.0 logged 15,997 blocks and "GPU KV cache size: 36,560 tokens" from
// 19.53 GiB: groups of 10 layers, 1 full + ceil(52/10) = 6 sliding groups,
// tokens = 15,997 // 7 × 16 = 36,560.
func TestHybridGroupsGemma3(t *testing.T) {
	// One block: 10 layers × 16 tokens × 16 KV heads × (128 + 128) × 2 B.
	const blockBytes = 10 * 16 * 16 * 256 * 2
	in := memory.Input{
		Model:    spec(t, "google/gemma-3-27b-it"),
		Device:   device(t, "H100-80GB"),
		Settings: vllm.Settings{KVCacheMemoryBytes: 15997 * blockBytes, MaxModelLen: 8192, Version: v019},
	}
	b := plan(t, in)
	if b.NumBlocks != 15997 || b.KVTokens != 36560 {
		t.Errorf("blocks %d tokens %d, want 15997 and 36560", b.NumBlocks, b.KVTokens)
	}
	// Only the 10 global layers grow with the context: 10 × 16 × 256 × 2 B.
	if b.KVBytesPerToken != 10*16*256*2 {
		t.Errorf("KV bytes per token %d, want %d", b.KVBytesPerToken, 10*16*256*2)
	}
}

// DeepSeek-V2-Lite keeps one MLA latent of 512 + 64 elements per token and
// layer, on every TP rank: 27 × 576 × 2 B = 31,104 B. vllm#15871 reports
// "0.95 GiB KV cache is needed" for 32,768 tokens: 31,104 × 32,768 B =
// 0.949 GiB.
func TestMLA(t *testing.T) {
	in := memory.Input{Model: spec(t, "deepseek-ai/DeepSeek-V2-Lite-Chat"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{MaxModelLen: 32768, Version: v019}}
	for _, tp := range []int{1, 2} {
		in.Settings.TensorParallelSize = tp
		if b := plan(t, in); b.KVBytesPerToken != 31104 {
			t.Errorf("tp %d: KV bytes per token %d, want 31104 (MLA is not split by TP)", tp, b.KVBytesPerToken)
		}
	}
	in.Settings.KVCacheDtype = "fp8"
	in.Settings.TensorParallelSize = 1
	if b := plan(t, in); b.KVBytesPerToken != 15552 {
		t.Errorf("fp8 KV bytes per token %d, want 27 × 576 × 1 = 15552", b.KVBytesPerToken)
	}
}

// KV heads are replicated when TP exceeds them: Qwen2.5-7B has 4 KV heads,
// so each rank keeps max(1, 4 // tp): 28 layers × 2 × heads × 128 × 2 B.
func TestKVHeadReplication(t *testing.T) {
	in := memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{MaxModelLen: 8192, Version: v019}}
	for tp, want := range map[int]int64{1: 57344, 2: 28672, 4: 14336} {
		in.Settings.TensorParallelSize = tp
		if b := plan(t, in); b.KVBytesPerToken != want {
			t.Errorf("tp %d: %d bytes per token per rank, want %d", tp, b.KVBytesPerToken, want)
		}
	}
	// 28 heads: TP 8 does not divide them; vLLM refuses to start.
	in.Settings.TensorParallelSize = 8
	b := plan(t, in)
	if b.KVBytesPerToken != 14336 {
		t.Errorf("tp 8: %d bytes per token per rank, want 14336 (1 replicated head)", b.KVBytesPerToken)
	}
	if !hasCode(b.Problems, memory.CodeHeadsNotDivisible) {
		t.Errorf("tp 8 over 28 heads: want %s, got %v", memory.CodeHeadsNotDivisible, b.Problems)
	}
	// phi-4: 40 heads and 10 KV heads. TP 4 divides the heads; its KV
	// heads neither divide by 4 nor does 4 divide by 10, and vLLM fails
	// loading the weights. TP 2 shards both.
	phi := memory.Input{Model: spec(t, "microsoft/phi-4"), Device: device(t, "L4"), Count: 4,
		Settings: vllm.Settings{MaxModelLen: 8192, TensorParallelSize: 4, Version: v019}}
	if b := plan(t, phi); !hasCode(b.Problems, memory.CodeHeadsNotDivisible) || b.Fits {
		t.Errorf("phi-4 at tp 4: fits %v, problems %v", b.Fits, b.Problems)
	}
	phi.Count, phi.Settings.TensorParallelSize = 2, 2
	if b := plan(t, phi); hasCode(b.Problems, memory.CodeHeadsNotDivisible) {
		t.Errorf("phi-4 at tp 2: %v", b.Problems)
	}
}

func hasCode(fs []memory.Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

// Llama-3.1-8B's full 131,072-token context needs 131,072 × 128 KiB = 16 GiB
// of KV, more than an L4 (22.03 GiB) has left after 14.99 GiB of weights:
// vLLM refuses with "To serve at least one request ..." and names the
// largest length that fits, which is whole blocks of 16 tokens × 128 KiB.
func TestRequestDoesNotFit(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"),
		Settings: vllm.Settings{Version: v019}}
	b := plan(t, in)
	if b.Fits || !hasCode(b.Problems, memory.CodeRequestDoesntFit) {
		t.Fatalf("want %s, got fits=%t %v", memory.CodeRequestDoesntFit, b.Fits, b.Problems)
	}
	if want := int(b.PerGPU.KVCache / (128 << 10) / 16 * 16); b.MaxFitLen != want {
		t.Errorf("max fit len %d, want %d (whole 2 MiB blocks of 16 tokens in %d bytes)", b.MaxFitLen, want, b.PerGPU.KVCache)
	}
	if !strings.Contains(b.Problems[0].Message, itoa(b.MaxFitLen)) {
		t.Errorf("the message should name the largest length: %s", b.Problems[0].Message)
	}
	// At that length it fits.
	in.Settings.MaxModelLen = b.MaxFitLen
	if b2 := plan(t, in); !b2.Fits {
		t.Errorf("at %d tokens: %v", b.MaxFitLen, b2.Problems)
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}

// Llama-3.1-70B in bf16 is 141 GB of weights: no single H100 holds it. The
// alternatives name a TP size that fits and a bigger GPU, not fp8 weights
// quantized on load: those ~66 GiB would fit, but vLLM reads the 131 GiB
// of bf16 weights first (CodeOnlineQuantLoad), so loading runs out first.
func TestWeightsDoNotFit(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{MaxModelLen: 8192, Version: v019}}
	b := plan(t, in)
	if !hasCode(b.Problems, memory.CodeWeightsDontFit) {
		t.Fatalf("want %s, got %v", memory.CodeWeightsDontFit, b.Problems)
	}
	alts := memory.Alternatives(in, gpu.Devices())
	codes := map[string]memory.Alternative{}
	for _, a := range alts {
		codes[a.Code] = a
	}
	if a, ok := codes["more_gpus"]; !ok || a.Args[1] != "2" {
		t.Errorf("want TP 2 (2 × 65.7 GiB halves), got %+v", alts)
	}
	if a, ok := codes["quantize_fp8"]; ok {
		t.Errorf("quantizing on load reads 131 GiB of bf16 weights into an 80 GB H100: %+v", a)
	}
	q := in
	q.Settings.Quantization = "fp8"
	if b := plan(t, q); !hasCode(b.Warnings, memory.CodeOnlineQuantLoad) {
		t.Errorf("--quantization fp8 on the bf16 checkpoint: warnings %v", b.Warnings)
	}
	if a, ok := codes["bigger_gpu"]; !ok || !strings.HasPrefix(a.GPU, "H200") && !strings.HasPrefix(a.GPU, "B") && !strings.HasPrefix(a.GPU, "MI") && !strings.HasPrefix(a.GPU, "GH") {
		t.Errorf("want a ≥141 GB GPU, got %+v", a)
	}
}

// KAITO's utilization curve, min(0.95, floor((1 − 1.5 GiB / mem) × 100) /
// 100), as tabulated in kaito.md §4a.
func TestKAITOPolicy(t *testing.T) {
	for memGiB, want := range map[int64]float64{8: 0.81, 12: 0.87, 16: 0.90, 24: 0.93, 32: 0.95, 80: 0.95} {
		b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-0.5B-Instruct"), Device: gpu.Custom(memGiB * gib),
			Settings: vllm.Settings{MaxModelLen: 4096}})
		if got, _ := memory.Utilization(b, memory.PolicyKAITO); got != want {
			t.Errorf("%d GiB: %.2f, want %.2f", memGiB, got, want)
		}
	}
	// KAITO reads the nominal size: a T4 (16 GB) gets 0.90 although CUDA
	// reports 14.75 GiB of it.
	b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-0.5B-Instruct"), Device: device(t, "T4"),
		Settings: vllm.Settings{MaxModelLen: 4096}})
	if got, _ := memory.Utilization(b, memory.PolicyKAITO); got != 0.90 {
		t.Errorf("T4: %.2f, want 0.90", got)
	}
}

// The recommended utilization leaves the card room for everything vLLM
// does not budget; the plan at the recommended settings fits without a
// thin-margin warning, and graphs inside the budget (0.21.0) allow more.
func TestRecommend(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{Version: v019}}
	r, err := memory.Recommend(in, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Budget.Fits || len(r.Budget.Warnings) != 0 {
		t.Errorf("recommended plan: fits=%t warnings=%v", r.Budget.Fits, r.Budget.Warnings)
	}
	p := r.Budget.PerGPU
	if free := p.Total - r.Budget.Footprint; free < 150<<20+p.Total/100 {
		t.Errorf("only %d bytes left beyond the footprint", free)
	}
	if r.MaxModelLen != 131072 {
		t.Errorf("max-model-len %d, want the full 131072 (16 GiB of KV fits an H100)", r.MaxModelLen)
	}
	// Without a typical context (the traffic), max-num-seqs stays vLLM's
	// 1024 on an H100: the quarter rule's KV tokens / 32768 = 14 made chat
	// traffic queue. The reason says what the cache holds, at which
	// utilization, and names the one rule.
	if r.MaxNumSeqs != 1024 || !strings.Contains(strings.Join(r.Why, "\n"), fmt.Sprintf("the KV cache holds %s tokens at --gpu-memory-utilization %.2f", vllm.Thousands(r.Budget.KVTokens), r.GPUMemoryUtilization)) ||
		!strings.Contains(strings.Join(r.Why, "\n"), memory.MaxNumSeqsRule) {
		t.Errorf("max-num-seqs %d, want vLLM's 1024; why %q", r.MaxNumSeqs, r.Why)
	}
	in.Settings.Version = vllm.MustVersion("0.21.0")
	r21, err := memory.Recommend(in, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r21.GPUMemoryUtilization <= r.GPUMemoryUtilization {
		t.Errorf("graphs inside the budget should allow a higher utilization: 0.21.0 %.2f vs 0.19.0 %.2f", r21.GPUMemoryUtilization, r.GPUMemoryUtilization)
	}
	// A user's max-model-len that fits is kept, and called theirs.
	in.Settings.MaxModelLen = 32768
	in.Settings.Set = map[string]bool{vllm.FlagMaxModelLen: true}
	r32, err := memory.Recommend(in, memory.Options{TypicalContext: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if r32.MaxModelLen != 32768 || r32.TypicalContext != 2000 || !strings.Contains(strings.Join(r32.Why, "\n"), "max-model-len 32768: yours") {
		t.Errorf("kept %d with typical %d, want 32768 and 2000; why %q", r32.MaxModelLen, r32.TypicalContext, r32.Why)
	}
	// A length the user did not set (an alternative's shorter context,
	// chosen at another utilization) is not "yours": the recommendation
	// is the longest that fits at its own utilization, 131072 here.
	in.Settings.Set = nil
	rAlt, err := memory.Recommend(in, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rAlt.MaxModelLen != 131072 || strings.Contains(strings.Join(rAlt.Why, "\n"), "yours") {
		t.Errorf("an alternative's 32768: recommended %d, why %q; want 131072 and not called yours", rAlt.MaxModelLen, rAlt.Why)
	}
}

// Pipeline stages split 27 layers 7/7/7/6 (vLLM gives the remainder to the
// stages before the last) and the last stage carries the sampler; the KV
// cache follows the worker with the fewest blocks.
func TestPipelineStages(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{PipelineParallelSize: 2, GPUMemoryUtilization: 0.95, MaxModelLen: 8192, Version: v019}}
	b := plan(t, in)
	if len(b.Stages) != 2 {
		t.Fatalf("%d stages", len(b.Stages))
	}
	// Logged for PP=2 (first worker): weights 7.51 GiB, activation 1.10 GiB.
	first := b.Stages[0]
	if g := float64(first.Weights) / gib; math.Abs(g-7.51) > 0.01 {
		t.Errorf("first stage weights %.2f GiB, logged 7.51", g)
	}
	// hiddenBuffers is fitted over every forward-bound start-up, Granite's
	// with Llama's (TestForwardFit), and plans this one 0.04 GiB short.
	if g := float64(first.Activation) / gib; math.Abs(g-1.10) > 0.05 {
		t.Errorf("first stage activation %.2f GiB, logged 1.10", g)
	}
	if b.Stages[1].Activation <= first.Activation || b.PerGPU != b.Stages[1] {
		t.Errorf("the last stage (sampler) should bind: %+v", b.Stages)
	}
}

func TestPlanRejectsEmptyInputs(t *testing.T) {
	if _, err := memory.Plan(memory.Input{Device: gpu.Custom(gib)}); err == nil {
		t.Error("a model without layers must be an error")
	}
	if _, err := memory.Plan(memory.Input{Model: spec(t, "Qwen/Qwen3-8B")}); err == nil {
		t.Error("a GPU without memory must be an error")
	}
}

// A plan must take well under a millisecond (the plan issue).
func BenchmarkPlan(b *testing.B) {
	in := memory.Input{Model: spec(b, "google/gemma-3-27b-it"), Device: device(b, "H100-80GB"),
		Settings: vllm.Settings{MaxModelLen: 32768}}
	for b.Loop() {
		if _, err := memory.Plan(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecommend(b *testing.B) {
	in := memory.Input{Model: spec(b, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(b, "A100-80GB"),
		Settings: vllm.Settings{TensorParallelSize: 4}}
	for b.Loop() {
		if _, err := memory.Recommend(in, memory.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// --max-model-len auto: vLLM picks the largest length that fits, at most
// the model's maximum; versions before the flag refuse it.
func TestAutoMaxModelLen(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"),
		Settings: vllm.Settings{MaxModelLen: vllm.AutoMaxModelLen, Version: vllm.MustVersion("0.19.0")}}
	b := plan(t, in)
	if !b.Fits || !b.AutoFit || b.MaxModelLen != b.MaxFitLen || b.MaxModelLen >= 131072 || b.MaxModelLen <= 0 {
		t.Errorf("auto on L4: fits=%t len=%d fit=%d %v", b.Fits, b.MaxModelLen, b.MaxFitLen, b.Problems)
	}
	in.Device = device(t, "H100-80GB")
	if b := plan(t, in); b.MaxModelLen != 131072 {
		t.Errorf("auto on H100: %d, want the model's 131072", b.MaxModelLen)
	}
	in.Settings.Version = vllm.MustVersion("0.13.0")
	if b := plan(t, in); !hasCode(b.Problems, memory.CodeAutoUnsupported) {
		t.Errorf("0.13.0 has no auto: %v", b.Problems)
	}
}

// What a denial costs: the plan and every alternative (the admission
// webhook quotes them).
func BenchmarkAlternatives(b *testing.B) {
	in := memory.Input{Model: spec(b, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(b, "L4"),
		Settings: vllm.Settings{MaxModelLen: 8192}}
	devs := gpu.Devices()
	for b.Loop() {
		if len(memory.Alternatives(in, devs)) == 0 {
			b.Fatal("no alternatives")
		}
	}
}

// The variants for a plan already made answer as the functions that plan
// the input themselves: the admission webhook relies on it to plan a
// container once per review.
func TestFromPlanMatches(t *testing.T) {
	auto := vllm.Settings{MaxModelLen: vllm.AutoMaxModelLen, Version: v019}
	for _, in := range []memory.Input{
		{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Settings: vllm.Settings{Version: v019}},
		{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: vllm.Settings{MaxModelLen: 131072, Version: v019}},
		{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: vllm.Settings{MaxModelLen: 4096, GPUMemoryUtilization: 0.8, Version: v019}},
		{Model: spec(t, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(t, "H100-80GB"), Settings: vllm.Settings{MaxModelLen: 8192, Version: v019}},
		{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "L4"), Settings: auto},
	} {
		name := in.Model.ID + " on " + in.Device.Name
		base := plan(t, in)
		for _, policy := range []string{memory.PolicyHeadroom, memory.PolicyKAITO} {
			opt := memory.Options{Policy: policy}
			full, err := memory.Recommend(in, opt)
			if err != nil {
				t.Fatal(err)
			}
			part, err := memory.RecommendContext(in, base, opt)
			if err != nil {
				t.Fatal(err)
			}
			if part.Policy != full.Policy || part.GPUMemoryUtilization != full.GPUMemoryUtilization || part.MaxModelLen != full.MaxModelLen {
				t.Errorf("%s, %s: RecommendContext %s %.2f %d, Recommend %s %.2f %d", name, policy,
					part.Policy, part.GPUMemoryUtilization, part.MaxModelLen, full.Policy, full.GPUMemoryUtilization, full.MaxModelLen)
			}
			if len(part.Why) > len(full.Why) || strings.Join(part.Why, "\n") != strings.Join(full.Why[:len(part.Why)], "\n") {
				t.Errorf("%s, %s: reasons %q are not the start of %q", name, policy, part.Why, full.Why)
			}
		}
		want, got := memory.Alternatives(in, gpu.Devices()), memory.AlternativesFrom(in, base, gpu.Devices())
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: AlternativesFrom %+v, Alternatives %+v", name, got, want)
		}
	}
}

// A search plans one model many times and counts its layers once: each
// plan that reuses the counts is the plan that makes its own, whatever
// the first plan of the search was (another GPU, TP size, quantization).
func TestPlanReusesLayerCounts(t *testing.T) {
	for _, id := range []string{"meta-llama/Llama-3.1-8B-Instruct", "deepseek-ai/DeepSeek-V2-Lite-Chat", "Qwen/Qwen2.5-7B-Instruct"} {
		var layers []model.LayerParams
		for _, in := range []memory.Input{
			{Model: spec(t, id), Device: device(t, "L4"), Settings: vllm.Settings{MaxModelLen: 131072, Version: v019}},
			{Model: spec(t, id), Device: device(t, "L4"), Settings: vllm.Settings{MaxModelLen: 4096, TensorParallelSize: 2, Version: v019}},
			{Model: spec(t, id), Device: device(t, "A100-80GB"), Settings: vllm.Settings{Quantization: "fp8", PipelineParallelSize: 2, Version: v019}},
			{Model: spec(t, id), Device: device(t, "H100-80GB"), Settings: vllm.Settings{KVCacheDtype: "fp8", Version: v019}},
		} {
			got, err := memory.PlanWith(in, &layers)
			if err != nil {
				t.Fatal(err)
			}
			if want := plan(t, in); !reflect.DeepEqual(got, want) {
				t.Errorf("%s on %s %+v: the plan with reused layer counts differs", id, in.Device.Name, in.Settings)
			}
		}
		if len(layers) == 0 {
			t.Errorf("%s: the layer counts were not kept for the next plan", id)
		}
	}
}

// TestModelKVBytesPerToken: Llama-3.1-8B keeps K and V for 8 KV heads of
// 128 dims in each of 32 layers, 2 bytes each in bfloat16:
// 32 × 2 × 8 × 128 × 2 = 131,072 bytes per token for the whole model.
// Tensor parallelism over 2 GPUs gives each 4 heads (65,536 bytes);
// the whole model's figure does not change.
func TestModelKVBytesPerToken(t *testing.T) {
	const whole = 32 * 2 * 8 * 128 * 2
	for _, tp := range []int{1, 2} {
		b := plan(t, memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"),
			Settings: vllm.Settings{MaxModelLen: 8192, TensorParallelSize: tp, Version: v019}})
		if b.ModelKVBytesPerToken != whole || b.KVBytesPerToken != whole/int64(tp) {
			t.Errorf("tp %d: model %d, per GPU %d bytes per token; want %d and %d", tp, b.ModelKVBytesPerToken, b.KVBytesPerToken, whole, whole/tp)
		}
	}
}

// A start-up log of Llama-3.1-8B-Instruct on an L4 at the default
// utilization 0.90 (vLLM 0.19.0) says "Model loading took 14.99 GiB" and
// "Available KV cache memory: 3.50 GiB" (14.99 GiB = 16,095,389,942 B, as the
// log reader rounds it); vLLM's error estimates the longest
// context as 28672. The measured KV cache outranks the prediction:
//
//	L4 total 22559 MiB = 23,654,825,984 B; requested = ceil(total × 0.90) = 21,289,343,386 B
//	non-KV (what the engine kept) = 21,289,343,386 − 3.50 GiB (3,758,096,384) = 17,531,247,002 B
//	page: 16 tokens × 8 KV heads × (128 + 128) × 2 B = 64 KiB per layer, × 32 layers = 2 MiB a block
//	blocks = 3,758,096,384 / 2,097,152 = 1792; tokens = 1792 × 16 = 28,672 (vLLM's estimate)
//
// At utilization 0.85 the non-KV memory stays: requested = ceil(total ×
// 0.85) = 20,106,602,087 B, KV = 20,106,602,087 − 17,531,247,002 =
// 2,575,355,085 B, 1228 blocks, 19,648 tokens.
func TestMeasuredKVCacheOutranksPlan(t *testing.T) {
	in := memory.Input{
		Model:    spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:   device(t, "L4"),
		Settings: vllm.Settings{Version: v019},
		Measured: &memory.Measured{Weights: 16095389942, AvailableKV: 3758096384, Utilization: 0.90, Source: "l4.log"},
	}
	b := plan(t, in)
	if b.PerGPU.KVCache != 3758096384 || b.KVTokens != 28672 || b.MaxFitLen != 28672 || b.FitLen() != 28672 {
		t.Errorf("at 0.90: KV %d B, %d tokens, fit %d (aligned %d); want 3758096384 B, 28672, 28672, 28672",
			b.PerGPU.KVCache, b.KVTokens, b.MaxFitLen, b.FitLen())
	}
	// The activation absorbs what the log's numbers leave unexplained:
	// non-KV 17,531,247,002 − weights 16,095,054,725 − non-torch as
	// planned.
	if got, want := b.PerGPU.Activation+b.PerGPU.NonTorch, int64(17531247002-16095389942); got != want {
		t.Errorf("activation + non-torch = %d, want %d", got, want)
	}
	want := memory.Origins{Weights: memory.OriginMeasured, Activation: memory.OriginDerived, NonTorch: memory.OriginPlan,
		CUDAGraph: memory.OriginPlan, KVCache: memory.OriginMeasured, KVTokens: memory.OriginDerived, MaxFitLen: memory.OriginDerived}
	if b.Origins != want {
		t.Errorf("origins %+v, want %+v", b.Origins, want)
	}
	if got := b.TokensIn(3758096384); got != 28672 {
		t.Errorf("TokensIn(3.50 GiB) = %d, want 28672", got)
	}

	in.Settings.GPUMemoryUtilization = 0.85
	b = plan(t, in)
	if b.PerGPU.KVCache != 2575355085 || b.KVTokens != 19648 {
		t.Errorf("at 0.85: KV %d B, %d tokens; want 2575355085 B, 19648", b.PerGPU.KVCache, b.KVTokens)
	}
	if b.Origins.KVCache != memory.OriginDerived {
		t.Errorf("at 0.85 the KV cache is derived, got %q", b.Origins.KVCache)
	}

	// Without the measurement the plan predicts more (its activation
	// estimate is smaller than what this engine kept).
	in.Measured, in.Settings.GPUMemoryUtilization = nil, 0
	if p := plan(t, in); p.MaxFitLen <= 28672 || p.Origins.KVCache != memory.OriginPlan {
		t.Errorf("predicted fit %d (origin %s), want above the measured 28672, from the plan", p.MaxFitLen, p.Origins.KVCache)
	}
}

// The same L4 launch, had it also logged "GPU KV cache size: 28,656
// tokens": 3.50 GiB is a rounding of anything from 3.495 to 3.505 GiB, the
// tokens name 28,656 / 16 = 1791 blocks exactly, so the KV cache is held to
// 1791 blocks of 2 MiB: at most 1792 × 2,097,152 − 1 = 3,758,096,383 B.
func TestMeasuredTokensPinTheBlocks(t *testing.T) {
	in := memory.Input{
		Model:    spec(t, "meta-llama/Llama-3.1-8B-Instruct"),
		Device:   device(t, "L4"),
		Settings: vllm.Settings{Version: v019},
		Measured: &memory.Measured{Weights: 16095389942, AvailableKV: 3758096384, KVTokens: 28656, Utilization: 0.90},
	}
	b := plan(t, in)
	if b.KVTokens != 28656 || b.MaxFitLen != 28656 || b.PerGPU.KVCache != 3758096383 || b.Origins.KVTokens != memory.OriginMeasured {
		t.Errorf("KV %d B, %d tokens, fit %d, tokens from %s; want 3758096383 B, 28656, 28656, measured",
			b.PerGPU.KVCache, b.KVTokens, b.MaxFitLen, b.Origins.KVTokens)
	}
}

// The length a max_model_len_too_long problem tells the user to set must
// itself pass: Llama-3.1-8B allows 131072 tokens, but on an L4 (about 4
// GiB of KV cache at 128 KiB a token, some 33,000 tokens) 131072 does not
// fit either, so the value named is the longest that fits, on a first
// start with a cold compile cache too (1.65 GiB, 13,517 tokens, less:
// about 19,900), and planned again it fits without a warning of it.
func TestMaxLenTooLongNamesAFit(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--max-model-len", "1000000"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: set}
	b := plan(t, in)
	if len(b.Problems) == 0 || b.Problems[0].Code != memory.CodeMaxLenTooLong {
		t.Fatalf("problems %v", b.Problems)
	}
	m := regexp.MustCompile(`set --max-model-len (\d+) or less`).FindStringSubmatch(b.Problems[0].Message)
	if m == nil {
		t.Fatalf("no length to set in %q", b.Problems[0].Message)
	}
	n, _ := strconv.Atoi(m[1])
	if n >= 131072 || n < 19000 || n > 21000 {
		t.Errorf("names %d: want the longest that fits an L4 cold, about 19,900", n)
	}
	in.Settings.MaxModelLen = n
	if nb := plan(t, in); !nb.Fits || hasCode(nb.Warnings, memory.CodeColdStart) {
		t.Errorf("--max-model-len %d, as the problem says, does not fit, or only warm: %v %v", n, nb.Problems, nb.Warnings)
	}
}

// One edge for the planner, the webhook and doctor: a utilization above
// what Utilization computes warns thin_margin, and the value it names does
// not. Llama-3.1-8B on an L4 at 8192 tokens, vLLM 0.19.0, from 0.80 to
// 0.95: each above the computed value warns, each at or below it does not.
func TestThinMarginIsTheUtilizationRule(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: set}
	safe, _ := memory.Utilization(plan(t, in), memory.PolicyHeadroom)
	warned := 0
	for u := 0.80; u <= 0.955; u += 0.01 {
		in.Settings.GPUMemoryUtilization = math.Round(u*100) / 100
		b := plan(t, in)
		if !b.Fits {
			continue
		}
		thin := false
		for _, w := range b.Warnings {
			thin = thin || w.Code == memory.CodeThinMargin
		}
		if above := in.Settings.GPUMemoryUtilization > safe+0.005; thin != above {
			t.Errorf("utilization %.2f (computed %.2f): thin_margin %t", in.Settings.GPUMemoryUtilization, safe, thin)
		}
		if thin {
			warned++
		}
	}
	if warned == 0 {
		t.Errorf("no utilization from 0.80 to 0.95 above %.2f fits: the test checks nothing", safe)
	}
}

// A cudagraph_mode of NONE captures no graph, as --enforce-eager does: the
// plan holds no graph memory, and the KV cache gets it.
func TestNoGraphsMode(t *testing.T) {
	plan := func(set vllm.Settings) memory.Budget {
		t.Helper()
		set.Version = vllm.MustVersion("0.19.0")
		b, err := memory.Plan(memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Settings: set})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	none, err := vllm.ParseFlags([]string{"--compilation-config", `{"cudagraph_mode":"NONE"}`})
	if err != nil {
		t.Fatal(err)
	}
	graphs, eager, noMode := plan(vllm.Settings{}), plan(vllm.Settings{EnforceEager: true}), plan(none)
	if graphs.PerGPU.CUDAGraph == 0 || noMode.PerGPU.CUDAGraph != 0 || noMode.PerGPU.CUDAGraph != eager.PerGPU.CUDAGraph {
		t.Errorf("graph memory: default %d B, enforce-eager %d B, cudagraph_mode NONE %d B; want the last two 0", graphs.PerGPU.CUDAGraph, eager.PerGPU.CUDAGraph, noMode.PerGPU.CUDAGraph)
	}
}

// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm/envs.py reads "1" or "true") lets
// vLLM start Qwen3-8B (40,960 tokens) at --max-model-len 65536 with a
// warning, in the pod's environment or before the command; "yes" is not
// read as on, so vLLM refuses as without it.
func TestAllowLongMaxModelLen(t *testing.T) {
	for _, c := range []struct {
		env, line map[string]string
		allowed   bool
	}{
		{nil, nil, false},
		{map[string]string{vllm.EnvAllowLongMaxModelLen: "1"}, nil, true},
		{nil, map[string]string{vllm.EnvAllowLongMaxModelLen: "True"}, true},
		{map[string]string{vllm.EnvAllowLongMaxModelLen: "yes"}, nil, false},
	} {
		set := vllm.Settings{Version: v019, MaxModelLen: 65536, Env: c.line}
		b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen3-8B"), Device: device(t, "H100-80GB"), Settings: set, Env: c.env})
		past := false
		for _, w := range b.Warnings {
			past = past || w.Code == memory.CodeMaxLenPastModel
		}
		if b.Fits != c.allowed || past != c.allowed {
			t.Errorf("env %v, line %v: fits %t, warned %t, problems %v; want %t", c.env, c.line, b.Fits, past, b.Problems, c.allowed)
		}
	}
}
