package memory

import (
	"math"
	"testing"

	"headroom.dev/headroom/vllm"
)

// TestExpertShapeMXFP4Padding: the routed experts' shapes on one rank, as
// mxfp4.py allocates them per kernel, worked from gpt-oss's hidden size and
// expert width (both 2,880):
//   - H100 (triton_kernels, width to a multiple of 64): 2,880 is one; at TP 2
//     1,440 becomes 1,472 (23 × 64), 1,472 / 1,440 = 1.0222;
//   - A100 (Marlin: width to 128, hidden to 256): 2,944 × 3,072, over
//     2,880 × 2,880 = 9,043,968 / 8,294,400 = 1.0904;
//   - B200 (FlashInfer: both to 256) at TP 8: 360 becomes 512, 2,880
//     becomes 3,072: 1,572,864 / 1,036,800 = 1.5170;
//   - a BF16 MoE (Mixtral, width 14,336) keeps its shapes: 7,168 at TP 2;
//   - FlashInfer's CUTLASS kernels take both to 128: on a B200 with
//     VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS at TP 8, 384 × 2,944,
//     1,130,496 / 1,036,800 = 1.0904, MXFP8 activations; on an H100 with
//     VLLM_USE_FLASHINFER_MOE_MXFP4_BF16 at TP 2, 1,536 × 2,944,
//     4,521,984 / 4,147,200 = 1.0904, BF16 activations.
func TestExpertShapeMXFP4Padding(t *testing.T) {
	for _, c := range []struct {
		model, gpu    string
		tp            int
		env           map[string]string
		hidden, inter int
		pad           float64
		mxfp8         bool
	}{
		{"openai/gpt-oss-20b", "H100-80GB", 1, nil, 2880, 2880, 1, false},
		{"openai/gpt-oss-120b", "H100-80GB", 2, nil, 2880, 1472, 1.0222, false},
		{"openai/gpt-oss-20b", "A100-80GB", 1, nil, 3072, 2944, 1.0904, false},
		{"openai/gpt-oss-120b", "B200", 8, nil, 3072, 512, 1.5170, false},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", 2, nil, 4096, 7168, 1, false},
		{"openai/gpt-oss-120b", "B200", 8, map[string]string{vllm.EnvFlashInferMXFP4MXFP8Cutlass: "1"}, 2944, 384, 1.0904, true},
		{"openai/gpt-oss-120b", "H100-80GB", 2, map[string]string{vllm.EnvFlashInferMXFP4BF16: "1"}, 2944, 1536, 1.0904, false},
	} {
		got := ExpertShapeFor(catalogSpec(t, c.model), vllm.Settings{TensorParallelSize: c.tp, Env: c.env}, catalogDevice(t, c.gpu))
		if got.Hidden != c.hidden || got.Intermediate != c.inter || math.Abs(got.Pad-c.pad) > 5e-5 || got.MXFP8 != c.mxfp8 {
			t.Errorf("%s on %s at TP %d: %+v, want hidden %d, width %d, pad %.4f", c.model, c.gpu, c.tp, got, c.hidden, c.inter, c.pad)
		}
	}
}

// TestExpertWeightsPerRank: what a GPU holds of the experts follows the
// shapes above and the ranks vLLM splits them over.
//   - gpt-oss-20b on one A100 holds its 10,152,345,600 B of MXFP4 experts
//     (TestExpertWeightsTotal) padded by 749,568 / 8,294,400: 917,471,232 B
//     more than on one H100, everything else equal.
//   - Mixtral-8x7B at TP 2 holds half its experts (90,194,313,216 B) a GPU;
//     at TP 2 × DP 2 they are split over all four ranks
//     (FusedMoEParallelConfig flattens TP across DP), attention and the rest
//     over TP alone: each GPU holds a quarter, 22,548,578,304 B less.
func TestExpertWeightsPerRank(t *testing.T) {
	plan := func(model, dev string, set vllm.Settings) int64 {
		t.Helper()
		b, err := Plan(Input{Model: catalogSpec(t, model), Device: catalogDevice(t, dev), Settings: set})
		if err != nil {
			t.Fatal(err)
		}
		return b.PerGPU.Weights
	}
	a100 := plan("openai/gpt-oss-20b", "A100-80GB", vllm.Settings{})
	h100 := plan("openai/gpt-oss-20b", "H100-80GB", vllm.Settings{})
	if d := a100 - h100; d < 917_471_232-2 || d > 917_471_232+2 {
		t.Errorf("gpt-oss-20b: A100 holds %d B more weights than H100, want 917,471,232 (Marlin's padding)", d)
	}
	one := plan("mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", vllm.Settings{TensorParallelSize: 2})
	dp := plan("mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", vllm.Settings{TensorParallelSize: 2, DataParallelSize: 2})
	if d := one - dp; d < 22_548_578_304-2 || d > 22_548_578_304+2 {
		t.Errorf("Mixtral TP 2 × DP 2: %d B fewer weights a GPU than TP 2 alone, want 22,548,578,304 (half of its half of the experts)", d)
	}
}
