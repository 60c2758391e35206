package memory_test

import (
	"math"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// Qwen3-14B (V 151,936, h 5,120, I 17,408, bf16) on one H100-80GB at the
// server defaults (T = 8192 batched tokens, S = 1024 seqs, so R = 1024
// sampler rows). The sampler terms every path shares:
//
//	hidden states T·h·b     = 8192 × 5120 × 2   =  83,886,080 B = 0.078125 GiB
//	selected rows 2·R·h·b   = 2 × 1024 × 5120 × 2 = 20,971,520 B = 0.019531 GiB
//	fixed                   = 33 MiB                             = 0.032227 GiB
//	                                                        sum = 0.129883 GiB
//
// and per path R·V·(b + c):
//
//	sort       1024 × 151,936 × 38 = 5,912,133,632 B = 5.506104 GiB → 5.635986
//	FlashInfer 1024 × 151,936 × 14 = 2,178,154,496 B = 2.028564 GiB → 2.158447
//	Triton     the same + 132 SMs × 151,936 × 4 = 80,222,208 B (0.074713 GiB) → 2.233160
//	V2 (none)  1024 × 151,936 × 6  =   933,494,784 B = 0.869385 GiB → 0.999268,
//	           below the forward pass: 8192 × 2 × (3 × 17,408 + 6.42 × 5120)
//	           = 1,394,186,649 B = 1.298440 GiB
const (
	qwen14Sort       = 5.635986
	qwen14FlashInfer = 2.158447
	qwen14Triton     = 2.233160
	qwen14Forward    = 1.298440
)

func qwen14At(t *testing.T, version string, inst vllm.Install) memory.Budget {
	t.Helper()
	return plan(t, memory.Input{Model: spec(t, "Qwen/Qwen3-14B"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{MaxModelLen: 8192, Version: vllm.MustVersion(version), Install: inst}})
}

// TestLoggedQwen3_14B: the logs say 5.64 GiB on 0.16.0 and 2.23 GiB on
// 0.17.0; the mechanism gives 5.6360 and 2.2332, 5.64 and 2.23 to the
// log's two decimals.
func TestLoggedQwen3_14B(t *testing.T) {
	for _, c := range []struct {
		version string
		logged  float64
		path    vllm.SamplerPath
	}{{"0.16.0", 5.64, vllm.SamplerSort}, {"0.17.0", 2.23, vllm.SamplerTriton}} {
		b := qwen14At(t, c.version, "")
		g := float64(b.PerGPU.Activation) / gib
		t.Logf("vLLM %s: %s sampler, activation %.4f GiB (logged %.2f)", c.version, b.SamplerPath, g, c.logged)
		if b.SamplerPath != c.path || math.Abs(g-c.logged) > 0.005 {
			t.Errorf("vLLM %s: %s, %.4f GiB; logged %.2f with the %s path", c.version, b.SamplerPath, g, c.logged, c.path)
		}
	}
}

// TestProfileBoundaries plans Qwen3-14B on both sides of every boundary
// of the profile run (the arithmetic is above).
func TestProfileBoundaries(t *testing.T) {
	for _, c := range []struct {
		version string
		inst    vllm.Install
		want    float64
		path    vllm.SamplerPath
	}{
		{"0.10.1", vllm.InstallImage, qwen14FlashInfer, vllm.SamplerFlashInfer},
		{"0.10.1", vllm.InstallPip, qwen14Sort, vllm.SamplerSort},
		{"0.11.0", vllm.InstallImage, qwen14FlashInfer, vllm.SamplerFlashInfer},
		{"0.11.1", vllm.InstallImage, qwen14Sort, vllm.SamplerSort}, // PR #26859
		{"0.16.0", vllm.InstallImage, qwen14Sort, vllm.SamplerSort},
		{"0.17.0", vllm.InstallImage, qwen14Triton, vllm.SamplerTriton}, // PR #33538
		{"0.20.0", vllm.InstallImage, qwen14Triton, vllm.SamplerTriton},
		{"0.21.0", vllm.InstallImage, qwen14FlashInfer, vllm.SamplerFlashInfer}, // PR #40376
		{"0.21.0", vllm.InstallPip, qwen14Triton, vllm.SamplerTriton},
		{"0.22.0", vllm.InstallImage, qwen14Forward, vllm.SamplerNoTopK}, // Qwen3 dense on Model Runner V2
		{"0.33.0", vllm.InstallImage, qwen14Forward, vllm.SamplerNoTopK},
	} {
		b := qwen14At(t, c.version, c.inst)
		g := float64(b.PerGPU.Activation) / gib
		if b.SamplerPath != c.path || math.Abs(g-c.want) > 0.0005 {
			t.Errorf("vLLM %s (%s): %s path, %.6f GiB; want %s, %.6f", c.version, c.inst, b.SamplerPath, g, c.path, c.want)
		}
	}
	// Llama-3.1-8B moves to V2 at 0.23.0, not 0.22.0: 0.22.0 still runs
	// FlashInfer (1024 × 128,256 × 14 B = 1.712 GiB of logits).
	llama := func(version string) memory.Budget {
		return plan(t, memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"),
			Settings: vllm.Settings{MaxModelLen: 8192, Version: vllm.MustVersion(version)}})
	}
	if b := llama("0.22.0"); b.ModelRunnerV2 || b.SamplerPath != vllm.SamplerFlashInfer {
		t.Errorf("Llama on 0.22.0: V2 %t, %s", b.ModelRunnerV2, b.SamplerPath)
	}
	if b := llama("0.23.0"); !b.ModelRunnerV2 || b.SamplerPath != vllm.SamplerNoTopK {
		t.Errorf("Llama on 0.23.0: V2 %t, %s", b.ModelRunnerV2, b.SamplerPath)
	}
}

// TestSamplerDoesNotShrinkWithTP: logits are all-gathered to every rank,
// so Qwen2.5-7B's sampler-bound peak is the same at TP 1, 2 and 4 (as the
// 0.19.0 logs show: 2.21 GiB each).
func TestSamplerDoesNotShrinkWithTP(t *testing.T) {
	var first int64
	for _, tp := range []int{1, 2, 4} {
		b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB"),
			Settings: vllm.Settings{TensorParallelSize: tp, MaxModelLen: 8192, Version: v019}})
		if tp == 1 {
			first = b.PerGPU.Activation
		} else if b.PerGPU.Activation != first {
			t.Errorf("TP %d: activation %d, TP 1: %d", tp, b.PerGPU.Activation, first)
		}
	}
}

// TestModelRunnerV2Graphs: from 0.21.0 the graph estimate is in the budget,
// but Model Runner V2's estimate is zero until 0.29 (#49224, #50159), so a
// Qwen3 dense model on 0.25.0 reserves nothing and the plan warns; on
// 0.29.0 the graphs are inside the budget again.
func TestModelRunnerV2Graphs(t *testing.T) {
	v25 := qwen14At(t, "0.25.0", "")
	if v25.CUDAGraphInBudget || !v25.CUDAGraphEstimateZero || !hasFinding(v25.Warnings, memory.CodeRunnerV2NoGraphs) {
		t.Errorf("0.25.0: in budget %t, zero estimate %t, warnings %v", v25.CUDAGraphInBudget, v25.CUDAGraphEstimateZero, v25.Warnings)
	}
	v29 := qwen14At(t, "0.29.0", "")
	if !v29.CUDAGraphInBudget || v29.CUDAGraphEstimateZero || hasFinding(v29.Warnings, memory.CodeRunnerV2NoGraphs) {
		t.Errorf("0.29.0: in budget %t, zero estimate %t", v29.CUDAGraphInBudget, v29.CUDAGraphEstimateZero)
	}
	// Same activation and non-torch: the KV cache differs by the graphs.
	if d := v25.PerGPU.KVCache - v29.PerGPU.KVCache; d != v29.PerGPU.CUDAGraph {
		t.Errorf("0.25.0 − 0.29.0 KV = %d, want the graphs' %d", d, v29.PerGPU.CUDAGraph)
	}
}

// TestRules033: 0.33.0 moved KV-cache planning into a new module without
// changing a size (PR #42309): its plan equals 0.32.0's.
func TestRules033(t *testing.T) {
	a, b := qwen14At(t, "0.32.0", ""), qwen14At(t, "0.33.0", "")
	if a.PerGPU != b.PerGPU || a.KVTokens != b.KVTokens {
		t.Errorf("0.32.0 %+v / %d tokens, 0.33.0 %+v / %d", a.PerGPU, a.KVTokens, b.PerGPU, b.KVTokens)
	}
}

func hasFinding(fs []memory.Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

// TestEvidence: a 0.19.0 plan of a calibrated family on the H100 is
// calibrated in every part; the same model on 0.10.1 at TP 4 on L40S
// extrapolates non-torch memory (release, GPU, link and TP size) and says
// why; Model Runner V2's activation is extrapolated.
func TestEvidence(t *testing.T) {
	class := func(b memory.Budget, term string) memory.Term {
		for _, e := range b.Evidence {
			if e.Term == term {
				return e
			}
		}
		t.Fatalf("no evidence for %s", term)
		return memory.Term{}
	}
	b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "H100-80GB"),
		Settings: vllm.Settings{TensorParallelSize: 2, MaxModelLen: 8192, Version: v019}})
	for _, term := range []string{"weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes"} {
		if e := class(b, term); e.Class != memory.EvidenceFitted || e.CalibratedOn == "" {
			t.Errorf("0.19.0 H100 TP 2 %s: %+v", term, e)
		}
	}
	if b.KVTokensBand.Low >= b.KVTokens || b.KVTokensBand.High <= b.KVTokens {
		t.Errorf("band %+v around %d", b.KVTokensBand, b.KVTokens)
	}
	old := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "L40S"),
		Settings: vllm.Settings{TensorParallelSize: 8, MaxModelLen: 8192, Version: vllm.MustVersion("0.10.1")}})
	nt := class(old, "non_torch_bytes")
	if nt.Class != memory.EvidenceExtrapolated {
		t.Fatalf("0.10.1 L40S TP 8 non-torch: %+v", nt)
	}
	for _, want := range []string{"PCIe", "L40S", "TP 8", "0.28.0"} {
		if !strings.Contains(nt.Why, want) {
			t.Errorf("non-torch why %q does not name %s", nt.Why, want)
		}
	}
	// The L40S has no NVLink: the PCIe point of 0.28.0 on L4, 0.25 +
	// 0.185 × 3584 / 8 / 1024 = 0.331 GiB, with the extrapolation floor of
	// ± 0.25 GiB (it is the only PCIe point, so nothing wider spans it).
	if g := float64(old.PerGPU.NonTorch) / gib; math.Abs(g-0.331) > 0.001 {
		t.Errorf("0.10.1 L40S TP 8 non-torch %.3f GiB, want 0.331", g)
	}
	if g := float64(nt.UncertaintyBytes) / gib; math.Abs(g-0.25) > 0.001 {
		t.Errorf("extrapolated non-torch ± %.3f GiB, want the floor, 0.25", g)
	}
	if a := class(qwen14At(t, "0.25.0", ""), "activation_bytes"); a.Class != memory.EvidenceExtrapolated || !strings.Contains(a.Why, "Model Runner V2") {
		t.Errorf("V2 activation: %+v", a)
	}
	if a := class(qwen14At(t, "0.16.0", ""), "activation_bytes"); a.Class != memory.EvidenceFitted {
		t.Errorf("0.16.0 Qwen3 sort activation: %+v", a)
	}
	if a := class(qwen14At(t, "0.13.0", ""), "activation_bytes"); a.Class != memory.EvidenceFitted {
		t.Errorf("0.13.0 Qwen3 sort activation (same range as 0.16.0): %+v", a)
	}
}

// TestKVBandCoversCalibration: every calibration start-up's logged KV
// tokens lie inside its plan's band.
func TestKVBandCoversCalibration(t *testing.T) {
	var width float64
	rows := readCalibration(t)
	for _, r := range rows {
		b := plan(t, r.input(t))
		if r.tokens < b.KVTokensBand.Low || r.tokens > b.KVTokensBand.High {
			t.Errorf("%s tp%d pp%d: logged %d outside %d–%d (%s)", r.model, r.tp, r.pp, r.tokens, b.KVTokensBand.Low, b.KVTokensBand.High, b.KVTokensBand.Basis)
		}
		width += float64(b.KVTokensBand.High-b.KVTokensBand.Low) / float64(b.KVTokens) / 2
	}
	t.Logf("mean half-width of the band: ±%.2f%% of KV tokens", width/float64(len(rows))*100)
}

// TestKVResidual finds the largest miss of the planned KV cache over the
// calibration start-ups ("Available KV cache memory", two decimals) and
// checks it is the constant the band is built on.
func TestKVResidual(t *testing.T) {
	var worst float64
	label := ""
	for _, r := range readCalibration(t) {
		b := plan(t, r.input(t))
		// vLLM logs the first worker's KV memory.
		if d := math.Abs(float64(b.Stages[0].KVCache)/gib - r.kvGiB); d > worst {
			worst, label = d, r.model
		}
	}
	for _, r := range readStartups010(t) {
		b := plan(t, r.input(t, device(t, r.gpu)))
		if d := math.Abs(float64(b.PerGPU.KVCache)/gib - r.kvGiB); d > worst {
			worst, label = d, "Qwen2-7B on "+r.gpu
		}
	}
	t.Logf("largest KV miss %.3f GiB (%s)", worst, label)
	if worst > memory.KVResidualErr || worst < memory.KVResidualErr-0.015 {
		t.Errorf("largest KV miss %.3f GiB, the band's constant is %.2f", worst, memory.KVResidualErr)
	}
}

// TestOneGPUNonTorchBound: a TP 2 group's non-torch memory holds the
// one-GPU part and the all-reduce buffers, so the 0.10.1 start-ups' 0.11
// GiB at TP 2 on one node bounds a 0.10 single-GPU plan (0.19.0 logs 0.25
// GiB on one GPU, which the 0.10.1 rows rule out for their era).
func TestOneGPUNonTorchBound(t *testing.T) {
	for _, c := range []struct {
		version string
		want    float64
	}{{"0.10.1", 0.11}, {"0.12.0", 0.11}, {"0.16.0", 0.25}, {"0.19.0", 0.25}} {
		b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "A100-80GB"),
			Settings: vllm.Settings{MaxModelLen: 8192, Version: vllm.MustVersion(c.version)}})
		if g := float64(b.PerGPU.NonTorch) / gib; math.Abs(g-c.want) > 0.001 {
			t.Errorf("vLLM %s one GPU: non-torch %.3f GiB, want %.2f", c.version, g, c.want)
		}
	}
}
