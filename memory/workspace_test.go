package memory

import (
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// TestMoEWorkspaceArithmetic sizes the fused-MoE workspace for models the
// calibration start-ups do not hold, one kernel path or sharding at a time.
// Every expected value is worked out in its comment from the model's
// config (top-k experts, expert width I, hidden size K), the tokens of one
// call M and the kernel's buffer shapes (workspace.go); bf16, 2 bytes.
func TestMoEWorkspaceArithmetic(t *testing.T) {
	v019, v018 := vllm.MustVersion("0.19.0"), vllm.MustVersion("0.18.0")
	cases := []struct {
		name   string
		model  string
		gpu    string
		set    vllm.Settings
		env    map[string]string
		kernel moeKernel
		bytes  int64
	}{
		// Qwen3-30B-A3B: top-8 of 128 experts, I = 768, K = 2048, one
		// H100, 8192 tokens in one chunk. workspace13 = 8192 × 8 ×
		// max(768, 2048), workspace2 = 8192 × 8 × max(1536, 2048); the
		// output (8192 × 2048) fits in workspace13. 2 × 65,536 × 2048
		// elements × 2 B = 536,870,912 B = 0.5 GiB, the "about half a
		// GiB" missing on the start-up of the plan issue.
		{"qwen3-30b tp1", "Qwen/Qwen3-30B-A3B", "H100-80GB", vllm.Settings{}, nil, kernelTriton, 536_870_912},
		// The same at TP 2: I = 384 per rank, but both buffers are
		// hidden-wide (max(384, 2048), max(768, 2048)): still 0.5 GiB.
		{"qwen3-30b tp2", "Qwen/Qwen3-30B-A3B", "H100-80GB", vllm.Settings{TensorParallelSize: 2}, nil, kernelTriton, 536_870_912},
		// Mixtral-8x7B, top-2, I = 14336, K = 4096, TP 2: I = 7168 per
		// rank. 16,384 routed rows × (max(7168, 4096) + max(14336, 4096))
		// = 16,384 × 21,504 elements × 2 B.
		{"mixtral tp2", "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", vllm.Settings{TensorParallelSize: 2}, nil, kernelTriton, 704_643_072},
		// With --enable-expert-parallel each rank holds 4 whole experts:
		// I = 14336, 16,384 × (14336 + 28672) × 2 B, twice the TP case.
		{"mixtral tp2 ep", "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB",
			vllm.Settings{TensorParallelSize: 2, Extra: []string{"--enable-expert-parallel"}}, nil, kernelTriton, 1_409_286_144},
		// DP 2 without EP: the experts are split over TP × DP = 2 ranks
		// (I = 7168) and each rank sees both DP ranks' 8192 tokens:
		// 16,384 tokens × 2 = 32,768 rows × 21,504 × 2 B.
		{"mixtral dp2", "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", vllm.Settings{DataParallelSize: 2}, nil, kernelTriton, 1_409_286_144},
		// DP 2 with EP: the profile run asks for a whole 32,768-token
		// chunk: 65,536 rows × (14336 + 28672) + a separate output of
		// 32,768 × 4096 = 2,818,572,288 + 134,217,728 elements × 2 B.
		{"mixtral dp2 ep", "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB",
			vllm.Settings{DataParallelSize: 2, Extra: []string{"--enable-expert-parallel"}}, nil, kernelTriton, 5_905_580_032},
		// gpt-oss-20b (MXFP4; top-4, I = K = 2880) on Hopper runs
		// triton_kernels: workspace2 = 8192 × 4 × 2880 = 94,371,840 and
		// no workspace13, so the output 8192 × 2880 = 23,592,960 is
		// separate: 117,964,800 elements × 2 B.
		{"gpt-oss h100", "openai/gpt-oss-20b", "H100-80GB", vllm.Settings{}, nil, kernelOAITriton, 235_929_600},
		// On an A100 (8192 tokens given: vLLM's A100 default is 2048)
		// MXFP4 runs the Marlin MoE: 32,768 rows ×
		// (max(2880, 2880) + max(5760, 2880)) = 32,768 × 8640 × 2 B.
		{"gpt-oss a100", "openai/gpt-oss-20b", "A100-80GB", vllm.Settings{MaxNumBatchedTokens: 8192}, nil, kernelMarlin, 566_231_040},
		// On a B200 FlashInfer keeps its scratch; vLLM asks the workspace
		// for the output alone: 8192 × 2880 × 2 B.
		{"gpt-oss b200", "openai/gpt-oss-20b", "B200", vllm.Settings{}, nil, kernelFlashInfer, 47_185_920},
		// DeepSeek-V3 (block FP8; top-8 of 256, I = 2048, K = 7168) at TP 8
		// on H200 runs DeepGEMM: I = 256 per rank; rows = 65,536 + 256
		// experts × 127 = 98,048 (already a multiple of 128) × (max(256,
		// 7168) + max(512, 7168)) = 98,048 × 14,336 elements × 2 B.
		{"deepseek-v3 h200 tp8", "deepseek-ai/DeepSeek-V3", "H200", vllm.Settings{TensorParallelSize: 8}, nil, kernelDeepGEMM, 2_811_232_256},
		// On L40S (8.9, FP8 but no DeepGEMM) the Triton kernel: 65,536 ×
		// 14,336 × 2 B; on A100 (8.0, no FP8) Marlin, the same bytes.
		{"deepseek-v3 l40s tp8", "deepseek-ai/DeepSeek-V3", "L40S", vllm.Settings{TensorParallelSize: 8, MaxNumBatchedTokens: 8192}, nil, kernelTriton, 1_879_048_192},
		{"deepseek-v3 a100 tp8", "deepseek-ai/DeepSeek-V3", "A100-80GB", vllm.Settings{TensorParallelSize: 8, MaxNumBatchedTokens: 8192}, nil, kernelMarlin, 1_879_048_192},
		// 65,536 batched tokens are two 32,768-token chunks: 262,144
		// rows × 4096 for the buffers and a separate output of all
		// 65,536 tokens × 2048: (1,073,741,824 + 134,217,728) × 2 B.
		{"qwen3-30b chunked", "Qwen/Qwen3-30B-A3B", "H100-80GB", vllm.Settings{MaxNumBatchedTokens: 65536}, nil, kernelTriton, 2_415_919_104},
		// VLLM_FUSED_MOE_CHUNK_SIZE=8192 with 16,384 tokens: 65,536 rows
		// × 4096 + 16,384 × 2048 output = 301,989,888 elements × 2 B.
		{"qwen3-30b chunk env", "Qwen/Qwen3-30B-A3B", "H100-80GB", vllm.Settings{MaxNumBatchedTokens: 16384},
			map[string]string{vllm.EnvFusedMoEChunkSize: "8192"}, kernelTriton, 603_979_776},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dev := catalogSpec(t, c.model), catalogDevice(t, c.gpu)
			set := c.set.WithDefaults(v019, dev.Name, dev.TotalBytes, s.MaxPositions)
			got := moeScratchFor(s, set, dev, c.env, set.MaxNumBatchedTokens, 2)
			if got.kernel != c.kernel {
				t.Errorf("kernel %v, want %v", got.kernel, c.kernel)
			}
			if got.persistent != c.bytes {
				t.Errorf("workspace %d B, want %d B", got.persistent, c.bytes)
			}
			// Before the boundary nothing persists: the three caches
			// are per call, topk × (2I + I + K) elements a token.
			old := moeScratchFor(s, c.set.WithDefaults(v018, dev.Name, dev.TotalBytes, s.MaxPositions), dev, c.env, set.MaxNumBatchedTokens, 2)
			if old.persistent != 0 || old.callPerToken <= 0 {
				t.Errorf("vLLM 0.18.0: persistent %d B, per-call %.0f elements a token; want 0 and the three caches", old.persistent, old.callPerToken)
			}
		})
	}
}

// TestMoEScratchBeforeWorkspace: Qwen3-30B-A3B before the workspace
// manager allocates per call 8 × (1536 + 768 + 2048) = 34,816 elements a
// token, and nothing persists.
func TestMoEScratchBeforeWorkspace(t *testing.T) {
	s, dev := catalogSpec(t, "Qwen/Qwen3-30B-A3B"), catalogDevice(t, "H100-80GB")
	set := vllm.Settings{}.WithDefaults(vllm.MustVersion("0.18.0"), dev.Name, dev.TotalBytes, s.MaxPositions)
	got := moeScratchFor(s, set, dev, nil, 8192, 2)
	if got.persistent != 0 || got.callPerToken != 34816 {
		t.Errorf("got persistent %d B, per-call %.0f elements; want 0 and 34816", got.persistent, got.callPerToken)
	}
}

// TestMoEKernelChoice: the quantization formats the planner tells apart,
// on GPUs of each generation.
func TestMoEKernelChoice(t *testing.T) {
	gptq := &model.Quantization{Method: "gptq", Bits: 4, GroupSize: 128}
	awq8 := &model.Quantization{Method: "awq", Bits: 8, GroupSize: 128}
	w8a8 := &model.Quantization{Method: "compressed-tensors", Bits: 8, Format: "int-quantized"}
	fp8ch := &model.Quantization{Method: "compressed-tensors", Bits: 8, Float: true, Format: "float-quantized"}
	fp8blk := &model.Quantization{Method: "fp8", Bits: 8, Float: true, GroupSize: 16384}
	nvfp4 := &model.Quantization{Method: "modelopt_fp4", Bits: 4, Float: true, GroupSize: 16}
	mxfp4 := &model.Quantization{Method: "mxfp4", Bits: 4, Float: true, GroupSize: 32}
	cases := []struct {
		q    *model.Quantization
		flag string
		cc   string
		want moeKernel
	}{
		{nil, "", "9.0", kernelTriton},
		{nil, "", "", kernelTriton},
		{nil, "fp8", "9.0", kernelTriton}, // per-tensor FP8 on the fly
		{nil, "fp8", "8.0", kernelMarlin}, // no FP8 units on Ampere
		{nil, "experts_int8", "9.0", kernelTriton},
		{gptq, "", "9.0", kernelMarlin},
		{awq8, "", "8.6", kernelMarlin},
		{w8a8, "", "9.0", kernelTriton},
		{fp8ch, "", "9.0", kernelTriton},
		{fp8ch, "", "8.9", kernelTriton},
		{fp8blk, "", "9.0", kernelDeepGEMM},
		{fp8blk, "", "10.0", kernelDeepGEMM},
		{fp8blk, "", "8.9", kernelTriton},
		{fp8blk, "", "8.0", kernelMarlin},
		{nvfp4, "", "10.0", kernelFlashInfer},
		{nvfp4, "", "12.0", kernelFlashInfer},
		{nvfp4, "", "9.0", kernelMarlin},
		{mxfp4, "", "10.0", kernelFlashInfer},
		{mxfp4, "", "9.0", kernelOAITriton},
		{mxfp4, "", "8.0", kernelMarlin},
		{mxfp4, "", "12.0", kernelMarlin},
	}
	for _, c := range cases {
		s := model.Spec{Quant: c.q}
		if got := moeKernelFor(s, c.flag, c.cc, nil); got != c.want {
			name := "unquantized"
			if c.q != nil {
				name = c.q.Method
			}
			t.Errorf("%s --quantization %q on CC %q: %v, want %v", name, c.flag, c.cc, got, c.want)
		}
	}
}

// TestMoEWorkspaceOnlyOnMoEStages: with pipeline parallelism only a stage
// that holds MoE layers keeps the workspace. A 24-layer Qwen3-30B-A3B
// variant whose first 12 layers are dense, split over 2 stages: stage 0
// holds no MoE layer and its activation is as at 0.18.0 (no workspace,
// lean profile both); stage 1 holds the 0.5 GiB workspace on top.
func TestMoEWorkspaceOnlyOnMoEStages(t *testing.T) {
	s := catalogSpec(t, "Qwen/Qwen3-30B-A3B")
	s.Layers, s.Attention = 24, nil
	moe := *s.MoE
	moe.DenseLayers = 12
	s.MoE = &moe
	dev := catalogDevice(t, "H100-80GB")
	at := func(v string) Budget {
		b, err := Plan(Input{Model: s, Device: dev, Settings: vllm.Settings{PipelineParallelSize: 2, Version: vllm.MustVersion(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now, before := at("0.19.0"), at("0.18.0")
	if now.Stages[0].Activation != before.Stages[0].Activation {
		t.Errorf("dense stage: activation %d B at 0.19.0, %d B at 0.18.0; want equal", now.Stages[0].Activation, before.Stages[0].Activation)
	}
	// The last stage is sampler-bound on both sides, so the difference is
	// the workspace alone (±1 B of rounding).
	if d := now.Stages[1].Activation - before.Stages[1].Activation; d < 536_870_911 || d > 536_870_913 {
		t.Errorf("MoE stage: activation grew by %d B at 0.19.0, want the 536,870,912 B workspace", d)
	}
}

func catalogSpec(t *testing.T, id string) model.Spec {
	t.Helper()
	s, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s is not in the catalog", id)
	}
	return s
}

func catalogDevice(t *testing.T, name string) gpu.Device {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Device
}

// TestMoEWorkspaceReachesTheAdvice: the workspace moves what the plan
// advises, not only its numbers. Qwen3-30B-A3B on one H100 at utilization
// 0.8 and max-model-len 40960 fits at vLLM 0.18.0 and not at 0.19.0: the
// sampler run outweighs the forward pass on both sides, so the activation
// gains exactly the 536,870,912 B workspace and the KV cache loses it:
// 536,870,912 / 98,304 B a token = 5,461 tokens, 341 whole blocks of 16 =
// 5,456. `--max-model-len auto` then chooses the shorter length, and the
// alternatives offer a change that fits.
func TestMoEWorkspaceReachesTheAdvice(t *testing.T) {
	s, dev := catalogSpec(t, "Qwen/Qwen3-30B-A3B"), catalogDevice(t, "H100-80GB")
	in := func(v string, maxLen int) Input {
		return Input{Model: s, Device: dev, Settings: vllm.Settings{GPUMemoryUtilization: 0.8, MaxModelLen: maxLen, Version: vllm.MustVersion(v)}}
	}
	plan := func(in Input) Budget {
		b, err := Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before, now := plan(in("0.18.0", 40960)), plan(in("0.19.0", 40960))
	if !before.Fits || now.Fits {
		t.Fatalf("fits at 0.18.0: %v (%d KV tokens), at 0.19.0: %v (%d KV tokens); want true, false", before.Fits, before.KVTokens, now.Fits, now.KVTokens)
	}
	gained := now.PerGPU.Activation - before.PerGPU.Activation
	if lost := before.PerGPU.KVCache - now.PerGPU.KVCache; lost != gained || gained < 536_870_911 || gained > 536_870_913 {
		t.Errorf("KV cache lost %d B, activation gained %d B; want both the 536,870,912 B workspace", lost, gained)
	}
	if d := before.KVTokens - now.KVTokens; d != 5456 {
		t.Errorf("KV tokens %d → %d: %d fewer, want 5,456", before.KVTokens, now.KVTokens, d)
	}

	auto := plan(in("0.19.0", vllm.AutoMaxModelLen))
	if !auto.Fits || auto.MaxModelLen >= 40960 || int64(auto.MaxModelLen) > auto.KVTokens {
		t.Errorf("auto at 0.19.0: max-model-len %d with %d KV tokens (fits %v); want below 40960, within the cache", auto.MaxModelLen, auto.KVTokens, auto.Fits)
	}
	if a := plan(in("0.18.0", vllm.AutoMaxModelLen)); a.MaxModelLen != 40960 {
		t.Errorf("auto at 0.18.0: max-model-len %d, want the model's 40960", a.MaxModelLen)
	}

	alts := Alternatives(in("0.19.0", 40960), []gpu.Device{dev})
	if len(alts) == 0 {
		t.Fatal("no alternative for the plan that no longer fits")
	}
	for _, a := range alts {
		if b := plan(a.Input); !b.Fits {
			t.Errorf("alternative %q (%v) does not fit", a.Code, a.Changes)
		}
	}
	t.Logf("0.19.0 at 40960: %d KV tokens; alternatives: %v; auto: %d", now.KVTokens, alts[0].Changes, auto.MaxModelLen)
}

// TestExpertWeightsTotal: the routed experts' bytes, in their own format,
// which the simulator's clock reads apart from the rest (a decode step
// reads only the experts its tokens reach).
//   - gpt-oss-20b: 24 layers × 32 experts × (2880 × 5760 gate/up + 2880 ×
//     2880 down) = 19,110,297,600 parameters in MXFP4, 4 bits and one
//     E8M0 scale byte per 32: 0.53125 B each = 10,152,345,600 B, while
//     attention and the embeddings stay bf16.
//   - Mixtral-8x7B: 32 layers × 8 experts × 3 × 4096 × 14336 =
//     45,097,156,608 parameters × 2 B (bf16) = 90,194,313,216 B.
//   - A dense model has none.
func TestExpertWeightsTotal(t *testing.T) {
	for _, c := range []struct {
		id   string
		want int64
	}{
		{"openai/gpt-oss-20b", 10_152_345_600},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", 90_194_313_216},
		{"meta-llama/Llama-3.1-8B-Instruct", 0},
	} {
		b, err := Plan(Input{Model: catalogSpec(t, c.id), Device: catalogDevice(t, "H100-80GB"), Settings: vllm.Settings{TensorParallelSize: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if b.ExpertWeightsTotal != c.want {
			t.Errorf("%s: routed experts %d B, want %d", c.id, b.ExpertWeightsTotal, c.want)
		}
		if b.ExpertWeightsTotal >= b.WeightsTotal {
			t.Errorf("%s: experts %d B of %d B in all", c.id, b.ExpertWeightsTotal, b.WeightsTotal)
		}
	}
}
