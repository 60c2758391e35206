package memory_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// vLLM refuses what a GPU's compute capability cannot run: any GPU under
// 7.0 (K80 is 3.7), an explicit bfloat16 under 8.0 (T4 is 7.5; under auto
// it loads float16 there, the same bytes), FP8 weights under 8.0 (its
// minimum capability 80: T4 7.5, V100 7.0). Quantizing on load to fp8 is
// then no alternative for a model too large for a V100.
func TestComputeCapability(t *testing.T) {
	for _, c := range []struct {
		gpu   string
		flags []string
		want  string // the problem's words, "" for none
	}{
		{"K80", nil, "compute capability 7.0 or newer and K80 is compute capability 3.7"},
		{"T4", []string{"--dtype", "bfloat16"}, "--dtype bfloat16 needs compute capability 8.0"},
		{"T4", []string{"--quantization", "fp8"}, "the fp8 quantization needs compute capability 8.0 and T4 is compute capability 7.5"},
		{"T4", nil, ""},
		{"A100-80GB", []string{"--quantization", "fp8"}, ""},
	} {
		set, err := vllm.ParseFlags(append([]string{"--max-model-len", "4096"}, c.flags...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		b := plan(t, memory.Input{Model: spec(t, "Qwen/Qwen2.5-0.5B-Instruct"), Device: device(t, c.gpu), Settings: set})
		var got string
		for _, p := range b.Problems {
			if p.Code == memory.CodeComputeCapability {
				got = p.Message
			}
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %v: %q, want %q", c.gpu, c.flags, got, c.want)
		}
	}
	set := vllm.Settings{Version: v019}
	for _, a := range memory.Alternatives(memory.Input{Model: spec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: device(t, "V100-16GB"), Count: 1, Settings: set}, nil) {
		if a.Code == memory.AltQuantizeFP8 {
			t.Errorf("fp8 offered on a V100: %s", a.Message)
		}
	}
}

// Llama-3.1-8B on one L4 at vLLM 0.10.1, whose CUDA graphs are captured
// outside the budget: at --gpu-memory-utilization 0.95 no request of
// 131,072 tokens fits, and neither do the graphs beside the budget, so
// the largest context is the one at the utilization that leaves them
// room. Planned again at that context and utilization, it fits: the
// problem's answer is one plan confirms.
func TestLargestFitLeavesGraphsRoom(t *testing.T) {
	at := func(flags ...string) memory.Budget {
		set, err := vllm.ParseFlags(flags)
		if err != nil {
			t.Fatal(err)
		}
		set.Version = vllm.MustVersion("0.10.1")
		return plan(t, memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: set})
	}
	b := at("--max-model-len", "131072", "--gpu-memory-utilization", "0.95")
	fit, u := b.LargestFit()
	if u == 0 || u >= 0.95 || fit <= 0 || fit >= b.MaxFitLen {
		t.Fatalf("largest fit %d at %.2f; the plan's own %d at 0.95", fit, u, b.MaxFitLen)
	}
	var msg string
	for _, p := range b.Problems {
		if p.Code == memory.CodeRequestDoesntFit {
			msg = p.Message
		}
	}
	if want := fmt.Sprintf("the largest context that fits is %d tokens at --gpu-memory-utilization %.2f", fit, u); !strings.Contains(msg, want) {
		t.Errorf("problem %q, want it to say %q", msg, want)
	}
	if again := at("--max-model-len", strconv.Itoa(fit), "--gpu-memory-utilization", fmt.Sprintf("%.2f", u)); !again.Fits {
		t.Errorf("replanned at %d tokens and %.2f: %v", fit, u, again.Problems)
	}
}
