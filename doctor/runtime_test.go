package doctor

import (
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/vllm"
)

// runtimeOOM diagnoses runtime-oom.log with the deployment's command:
// Llama-3.1-8B-Instruct on an H100 at --max-model-len 32768,
// --gpu-memory-utilization 0.95, --max-num-seqs 512.
func runtimeOOM(t *testing.T) Diagnosis {
	t.Helper()
	h100, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	set, err := vllm.ParseCommand(strings.Fields("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95 --max-num-seqs 512"))
	if err != nil {
		t.Fatal(err)
	}
	return Diagnose(readCorpus(t, "runtime-oom.log"), Options{ResolveModel: catalogModel, Settings: set, HasSettings: true, GPU: h100, HasGPU: true})
}

// A CUDA OOM in execute_model while the KV cache reads 99.2% is a step's
// allocation beside the budget: vLLM allocated the KV cache whole at
// start-up, and a full one preempts or queues, it never asks CUDA for
// more. The values come from the error's own figures:
//
//	tried 1.96 GiB, free 1.02 GiB, total 79.19 GiB: 0.94 GiB short
//	reserve = 150 MiB + 79.19 GiB / 100 = 0.146 + 0.792 = 0.938 GiB
//	0.95 × 79.19 = 75.23 GiB; − 0.94 − 0.938 = 73.35 GiB; / 79.19 = 0.9263 → 0.92
//
// and the allocation is the logits of a whole step, 8,192 tokens ×
// 128,256 vocabulary × 2 B = 2,101,346,304 B = 1.957 GiB (the message
// prints 1.96), so a step of 8,192 × 1.02 / 1.96 = 4,263 tokens, 4,096 in
// steps of 256, fits it in what was free (0.98 GiB).
func TestRuntimeOOMIsOutsideTheBudget(t *testing.T) {
	d := runtimeOOM(t)
	if got := codes(d); len(got) == 0 || got[0] != CodeOutsideBudget {
		t.Fatalf("findings %v, want %s first", got, CodeOutsideBudget)
	}
	f := d.Findings[0]
	if f.Predicted || !strings.Contains(f.Reasons[0], "preempts or queues") {
		t.Errorf("reasons %q: want the OOM read as the step's own allocation", f.Reasons)
	}
	if len(f.Remedies) < 2 || !slicesEqual(f.Remedies[0].Args, "--gpu-memory-utilization", "0.92") ||
		!slicesEqual(f.Remedies[1].Args, "--max-num-batched-tokens", "4096") {
		t.Fatalf("remedies %v, want --gpu-memory-utilization 0.92 then --max-num-batched-tokens 4096", remedyArgs(f))
	}
	if !strings.Contains(f.Remedies[1].Why, "8,192 tokens × 128,256 vocabulary × 2 B") {
		t.Errorf("why %q: want the allocation named as a step's logits", f.Remedies[1].Why)
	}
	if !strings.Contains(d.Command, "--gpu-memory-utilization 0.92") || d.CommandWhen != "" {
		t.Errorf("suggested command %q (when %q), want --gpu-memory-utilization 0.92 at once", d.Command, d.CommandWhen)
	}
	// The full KV cache is reported for what it is, a throughput matter
	// whose values need the traffic; it asks for the request log and
	// offers an fp8 cache, which the suggested command leaves to the user.
	kv, ok := finding(d, CodeKVCachePressure)
	if !ok || kv.Confidence >= f.Confidence || kv.Remedies[0].Action != ActionGiveInput {
		t.Errorf("kv_cache_pressure %+v", kv)
	}
	if strings.Contains(d.Command, "--kv-cache-dtype") {
		t.Errorf("suggested command %q takes a trade-off the user chooses", d.Command)
	}
	noEmptyFlags(t, d)
}

// noEmptyFlags: a set_flag remedy always has the flags to set; advice and
// requests for input have actions of their own.
func noEmptyFlags(t *testing.T, d Diagnosis) {
	t.Helper()
	for _, f := range d.Findings {
		for _, r := range f.Remedies {
			if r.Action == ActionSetFlag && len(r.Args) == 0 {
				t.Errorf("%s: set_flag with no flags: %q", f.Code, r.Why)
			}
		}
	}
}
