package sim

import (
	"math"
	"testing"

	"headroom.dev/headroom/vllm"
)

// The expected largest of n standard normals: 1/√π for two (exact), 1.42360
// for eight (tabulated in the literature), and Blom's approximation past
// the table within a percent of it where they meet.
func TestExpectedMaxNormal(t *testing.T) {
	for n, want := range map[int]float64{1: 0, 2: 1 / math.Sqrt(math.Pi), 4: 1.02938, 8: 1.42360, 16: 1.76599} {
		if got := expectedMaxNormal(n); math.Abs(got-want) > 1e-4 {
			t.Errorf("n = %d: %.5f, want %.5f", n, got, want)
		}
	}
	at := expectedMaxNormal(maxNormalTable)
	if b := blom(maxNormalTable); math.Abs(b/at-1) > 0.01 || expectedMaxNormal(maxNormalTable+1) < at {
		t.Errorf("at %d ranks: %.4f tabulated, %.4f by Blom, %.4f past the table", maxNormalTable, at, b, expectedMaxNormal(maxNormalTable+1))
	}
}

// DeepSeek-V3 on 8 H200s with --enable-expert-parallel: each rank holds 32
// of the 256 routed experts whole. A decode of 4 tokens touches
// 1 − (1 − 8/256)^4 = 0.11927 of the experts, 3.817 of a rank's 32 on
// average, with a standard deviation of √(32 × 0.11927 × 0.88073) = 1.8334;
// the busiest of 8 ranks lies 1.42360 of them above: 6.427 experts, a share
// of 0.20083, so the step reads 1.684 times what a tensor-parallel rank
// (a slice of every touched expert) reads. Its 4 × 8 / 8 = 4 pairs a rank
// become 4 + 1.4236 × √(4 × 7/8) = 6.663 (×1.666). A prefill of 8,192
// tokens touches every expert on every rank, and its 8,192 pairs a rank
// are 1 + 1.4236 × √(8192 × 7/8) / 8192 = 1.0147 of the mean.
func TestExpertParallelBusiestRank(t *testing.T) {
	tp8 := vllm.Settings{TensorParallelSize: 8, Version: vllm.Version{Minor: 11}}
	ep := tp8
	ep.Extra = []string{"--enable-expert-parallel"}
	b := plan(t, "deepseek-ai/DeepSeek-V3", "H200", 8, tp8)
	c, _ := CalibrationFor(b.Device)
	mTP, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	mEP, err := RooflineFor(plan(t, "deepseek-ai/DeepSeek-V3", "H200", 8, ep), c)
	if err != nil {
		t.Fatal(err)
	}
	if mTP.ExpertParallel != 0 || mEP.ExpertParallel != 8 || mEP.MoEInter != 8*mTP.MoEInter || math.Abs(mEP.ExpertBytes/mTP.ExpertBytes-1) > 1e-9 {
		t.Fatalf("TP: %d ranks of whole experts, width %.0f; EP: %d, width %.0f; bytes a rank %.3g against %.3g",
			mTP.ExpertParallel, mTP.MoEInter, mEP.ExpertParallel, mEP.MoEInter, mEP.ExpertBytes, mTP.ExpertBytes)
	}
	share, work := mEP.busiestRank(4, mEP.expertsTouched(4))
	if math.Abs(share-0.20083) > 2e-5 || math.Abs(work-1.6658) > 2e-4 {
		t.Errorf("4 tokens: the busiest rank reads %.5f of its experts (want 0.20083) and does %.4f of a rank's mean pairs (want 1.6658)", share, work)
	}
	if r := share / mTP.expertsTouched(4); math.Abs(r-1.684) > 0.001 {
		t.Errorf("4 tokens: the busiest rank reads %.3f times a TP rank's, want 1.684", r)
	}
	share, work = mEP.busiestRank(8192, mEP.expertsTouched(8192))
	if share < 0.99999 || math.Abs(work-1.014713) > 1e-5 {
		t.Errorf("8,192 tokens: share %.5f (want 1), work %.6f (want 1.014713)", share, work)
	}
	// The step: a 4-token decode's experts are read-bound, the busiest
	// rank's read 1.68 times a TP rank's.
	if r := mEP.expertTime(4) / mTP.expertTime(4); r < 1.6 || r > 1.75 {
		t.Errorf("4-token decode: experts %.3f times TP's, want about 1.68", r)
	}
	// A prefill: the down GEMM reduces over the whole width, 2,048, not
	// 256 a rank (r(K) = ⅔ × 7,450/7,168 + ⅓ × (K + 282)/K: 1.072 against
	// 1.393), so the math is 1.072 / 1.393 × 1.0147 = 0.781 of TP's; but a
	// rank moves every pair's intermediates at the whole width (fused_moe
	// writes zeros for other ranks' experts, the activation and the sum
	// run over all pairs): 2 × 7,168 + 5 × 2,048 + 7,168 × 1.0147 / 8 =
	// 25,485 values a pair against 3 × 7,168 + 5 × 256 = 22,784 (1.119).
	// The step lies between the two.
	if r := mEP.expertTime(8192) / mTP.expertTime(8192); r < 0.781 || r > 1.119 {
		t.Errorf("8,192-token prefill: experts %.3f times TP's, want between 0.781 and 1.119", r)
	}
	t.Logf("8,192-token prefill: experts %.3f times TP's", mEP.expertTime(8192)/mTP.expertTime(8192))
}
