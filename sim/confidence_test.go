package sim

import (
	"strings"
	"testing"

	"headroom.dev/headroom/vllm"
)

// Inside the training rows' conditions a simulation is fitted and gets the
// fitted band; each condition outside is named, and an architecture or a
// model family no row runs gets the wider unseen band.
func TestConfidenceOfPlan(t *testing.T) {
	v := func(s string) vllm.Version { return vllm.MustVersion(s) }
	for _, c := range []struct {
		name    string
		id, gpu string
		tp      int
		set     vllm.Settings
		outside []string // substrings, one per condition outside, in order
		unseen  bool
	}{
		// a dense model the rows do not hold, on an sm_90 device they do not
		// hold either: architecture, family, path, TP and version all covered
		{"dense on H200", "Qwen/Qwen3-32B", "H200", 1, vllm.Settings{Version: v("0.11.0")}, nil, false},
		{"gpt-oss-120b tp 2 on A100", "openai/gpt-oss-120b", "A100-80GB", 2, vllm.Settings{Version: v("0.10.2"), TensorParallelSize: 2}, nil, false},
		{"tp 4", "openai/gpt-oss-120b", "H100-80GB", 4, vllm.Settings{Version: v("0.11.0"), TensorParallelSize: 4},
			[]string{"tensor parallel 4: the rows run 1, 2, 8"}, false},
		{"0.19", "Qwen/Qwen3-0.6B", "H100-80GB", 1, vllm.Settings{Version: v("0.19.0")},
			[]string{"vLLM 0.19.0: the rows run 0.10.2–0.11.0"}, false},
		{"MLA MoE on B200 at tp 4", "deepseek-ai/DeepSeek-V2-Lite", "B200", 4, vllm.Settings{Version: v("0.11.0"), TensorParallelSize: 4},
			[]string{"GPU architecture sm_100 (B200)", "model family MLA", "tensor parallel 4"}, true},
		{"MLA on H100", "deepseek-ai/DeepSeek-V2-Lite", "H100-80GB", 1, vllm.Settings{Version: v("0.11.0")},
			[]string{"model family MLA"}, true},
		{"MI300X", "Qwen/Qwen3-8B", "MI300X", 1, vllm.Settings{Version: v("0.11.0")},
			[]string{"GPU architecture amd (MI300X)"}, true},
		{"FP8 on H100", "Qwen/Qwen3-8B", "H100-80GB", 1, vllm.Settings{Version: v("0.11.0"), Quantization: "fp8"},
			[]string{"weights path sm_90/fp8: no row runs it"}, false},
		{"FP8 on A100: Marlin", "Qwen/Qwen3-8B", "A100-80GB", 1, vllm.Settings{Version: v("0.11.0"), Quantization: "fp8"},
			[]string{"weights path sm_80/fp8 marlin (weight-only, dequantized)"}, false},
		// a tensor-parallel group of 16 spans two nodes of 8: its
		// all-reduce crosses the network, which no row does
		{"tp 16 on two nodes", "meta-llama/Llama-3.1-70B-Instruct", "H100-80GB", 16, vllm.Settings{Version: v("0.11.0"), TensorParallelSize: 16},
			[]string{"tensor parallel 16: the rows run 1, 2, 8", "2 nodes: the rows run on one"}, true},
	} {
		got := ConfidenceOfRun(plan(t, c.id, c.gpu, c.tp, c.set), nil)
		if len(got.Outside) != len(c.outside) {
			t.Errorf("%s: outside %q, want %q", c.name, got.Outside, c.outside)
			continue
		}
		for i, w := range c.outside {
			if !strings.HasPrefix(got.Outside[i], w) {
				t.Errorf("%s: outside[%d] %q, want %q", c.name, i, got.Outside[i], w)
			}
		}
		wantEv, band := "fitted", fittedBand
		switch {
		case c.unseen:
			wantEv, band = "extrapolated", unseenBand
		case len(c.outside) > 0:
			wantEv, band = "extrapolated", extrapolatedBand
		}
		if got.Evidence != wantEv || got.TPOTPct != band.TPOT || got.TTFTPct != band.TTFT || got.ThroughputPct != band.Throughput {
			t.Errorf("%s: %+v, want %s with %+v", c.name, got, wantEv, band)
		}
	}
}

// The one-line summary names every band and what lies outside.
func TestConfidenceSummary(t *testing.T) {
	c := Confidence{Evidence: "extrapolated", Outside: []string{"tensor parallel 4: the rows run 1, 2, 8"}, ThroughputPct: 32, TTFTPct: 51, TPOTPct: 36, E2EPct: 51}
	want := "throughput ±32%, TTFT ±51%, TPOT and ITL ±36%, E2E ±51% (extrapolated: tensor parallel 4: the rows run 1, 2, 8)"
	if got := c.Summary(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := c.Band(c.TPOTPct); got != "±36%, extrapolated" {
		t.Errorf("band %q", got)
	}
}

// A run that never holds more than 8 sequences is a small-batch regime:
// covered for a dense model on one GPU (Qwen3-8B at concurrency 1 and 4),
// unseen for a MoE model or at TP 8, whatever the plan says.
func TestConfidenceOfRunSmallBatch(t *testing.T) {
	v := vllm.MustVersion("0.11.0")
	dense := plan(t, "Qwen/Qwen3-8B", "H100-80GB", 1, vllm.Settings{Version: v})
	moe := plan(t, "Qwen/Qwen3-235B-A22B", "H100-80GB", 8, vllm.Settings{Version: v, TensorParallelSize: 8})
	for _, c := range []struct {
		name    string
		got     Confidence
		outside string
	}{
		{"dense, 4 at once", ConfidenceOfRun(dense, &Report{MaxRunning: 4}), ""},
		{"MoE at TP 8, 500 at once", ConfidenceOfRun(moe, &Report{MaxRunning: 500}), ""},
		{"MoE at TP 8, plan alone", ConfidenceOfRun(moe, nil), ""},
		{"MoE at TP 8, 4 at once", ConfidenceOfRun(moe, &Report{MaxRunning: 4}), "at most 8 sequences a step, MoE at TP 8: the rows decode small batches only for dense at TP 1"},
	} {
		if c.outside == "" {
			if !c.got.Fitted() || c.got.TPOTPct != fittedBand.TPOT {
				t.Errorf("%s: %+v, want fitted", c.name, c.got)
			}
			continue
		}
		if c.got.Fitted() || len(c.got.Outside) != 1 || !strings.HasPrefix(c.got.Outside[0], c.outside) || c.got.TPOTPct != unseenBand.TPOT {
			t.Errorf("%s: %+v, want extrapolated at the unseen band: %q", c.name, c.got, c.outside)
		}
	}
}

// A server of four or more GPUs (tensor × pipeline parallel) runs its API
// server on a whole node's host, a class of its own: rows that ran none
// leave it outside, named by kind, and a server of two GPUs inside.
func TestConfidenceHostClass(t *testing.T) {
	v := vllm.MustVersion("0.11.0")
	sliceHosts := trainingCoverage
	sliceHosts.Hosts = []string{"slice"}
	for _, c := range []struct {
		name   string
		tp, pp int
		node   bool
	}{{"TP 2", 2, 1, false}, {"TP 4", 4, 1, true}, {"TP 2 × PP 2", 2, 2, true}} {
		b := plan(t, "Qwen/Qwen3-32B", "H100-80GB", c.tp*c.pp, vllm.Settings{Version: v, TensorParallelSize: c.tp, PipelineParallelSize: c.pp})
		var kinds []string
		for _, g := range sliceHosts.gaps(conditionsOf(b)) {
			kinds = append(kinds, g.Kind)
		}
		if got := strings.Contains(strings.Join(kinds, ";"), kindHost); got != c.node {
			t.Errorf("%s: gaps %q, want the host class outside: %v", c.name, kinds, c.node)
		}
	}
}

// No row runs data parallelism: engines sharing an API server, and a MoE
// model's ranks in lockstep, are extrapolated, at the extrapolated band
// (the kernels are the rows'; the exchange and the wait are not fitted).
func TestConfidenceDataParallel(t *testing.T) {
	v := vllm.MustVersion("0.11.0")
	one := plan(t, "Qwen/Qwen3-30B-A3B", "H100-80GB", 1, vllm.Settings{Version: v})
	two := plan(t, "Qwen/Qwen3-30B-A3B", "H100-80GB", 2, vllm.Settings{Version: v, DataParallelSize: 2})
	if c := ConfidenceOfRun(one, &Report{MaxRunning: 100}); !c.Fitted() {
		t.Errorf("DP 1: %+v", c)
	}
	c := ConfidenceOfRun(two, &Report{MaxRunning: 100})
	if c.Fitted() || len(c.Outside) != 1 || !strings.HasPrefix(c.Outside[0], "data parallel 2: the rows run one engine a server") || c.TPOTPct != extrapolatedBand.TPOT {
		t.Errorf("DP 2: %+v", c)
	}
}

// No row runs expert parallelism: whole experts a rank, the step waiting
// for the busiest, is extrapolated; the same flag on a dense model changes
// nothing.
func TestConfidenceExpertParallel(t *testing.T) {
	v := vllm.MustVersion("0.11.0")
	set := vllm.Settings{Version: v, TensorParallelSize: 2, Extra: []string{"--enable-expert-parallel"}}
	c := ConfidenceOfRun(plan(t, "openai/gpt-oss-120b", "H100-80GB", 2, set), &Report{MaxRunning: 100})
	if c.Fitted() || len(c.Outside) != 1 || !strings.HasPrefix(c.Outside[0], "expert parallel: the rows split every expert") || c.TPOTPct != extrapolatedBand.TPOT {
		t.Errorf("gpt-oss-120b at TP 2 with expert parallel: %+v", c)
	}
	set.TensorParallelSize = 1
	if c := ConfidenceOfRun(plan(t, "Qwen/Qwen3-14B", "H100-80GB", 1, set), &Report{MaxRunning: 100}); !c.Fitted() {
		t.Errorf("a dense model with the flag: %+v", c)
	}
}
