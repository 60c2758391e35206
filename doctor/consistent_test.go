package doctor

import (
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
)

// sampler-profile-oom.log: RedHatAI's Llama-3.1-70B FP8 (67.72 GiB of
// weights) on one H100-80GB at the 65,536 tokens the user asked for; vLLM
// 0.11.0 runs out of memory in _dummy_sampler_run, called from profile_run
// (the chained traceback shows it). That is vLLM's memory profiling,
// inside the budget, not the sampler warm-up outside it. Before, doctor
// named the warm-up "outside the budget", offered --max-model-len 4,416
// first and TP 2 second, and listed a 0.92 utilization beside a dead end
// that said raising it would not help.
func TestDoctorOneRecommendation(t *testing.T) {
	h100, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	ev := readCorpus(t, "sampler-profile-oom.log")
	for _, o := range ev.OOMs {
		if o.Phase != PhaseProfiling {
			t.Errorf("OOM at line %d placed in %q, want the profiling (the traceback runs through profile_run)", o.Line.Line, o.Phase)
		}
	}
	d := Diagnose(ev, Options{ResolveModel: catalogModel, GPU: h100, HasGPU: true})
	if _, ok := finding(d, CodeOutsideBudget); ok || len(d.Findings) == 0 || d.Findings[0].Code != CodeWeightsTooLarge {
		t.Fatalf("findings %v, want weights_too_large first and no outside_budget", codes(d))
	}
	for _, f := range d.Findings {
		if len(f.Reasons) != len(uniq(f.Reasons)) {
			t.Errorf("%s repeats a reason: %q", f.Code, f.Reasons)
		}
		keep := true
		for _, r := range f.Remedies {
			cut := cutsContext(r, 65536)
			if cut && strings.Join(r.Args, " ") != "--max-model-len 4336" {
				t.Errorf("%s: a shorter context %v, want the one length that fits, 4336", f.Code, r.Args)
			}
			if !cut && !keep {
				t.Errorf("%s: %v comes after a remedy that cuts the 65,536 tokens asked for", f.Code, r.Args)
			}
			keep = keep && !cut
			if v, ok := flagValue(r.Args, "gpu-memory-utilization"); ok {
				if u, _ := strconv.ParseFloat(v, 64); u > 0.90 {
					t.Errorf("%s: raises the utilization to %s", f.Code, v)
				}
			}
		}
	}
	if first := d.Findings[0].Remedies[0]; strings.Join(first.Args, " ") != "--tensor-parallel-size 2" {
		t.Errorf("first remedy %v, want TP 2, which keeps the context", first.Args)
	}
	if d.Command != "vllm serve RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8 --tensor-parallel-size 2 --max-model-len 65536" {
		t.Errorf("suggested %q", d.Command)
	}
	// The same sampler message after the KV cache was sized is the
	// warm-up, outside the budget.
	warm := readString(t, "w", strings.Join([]string{
		"(EngineCore_DP0 pid=1) INFO 11-22 10:00:23 [gpu_model_runner.py:2392] Model loading took 14.99 GiB memory and 4.830211 seconds",
		"(EngineCore_DP0 pid=1) INFO 11-22 10:00:42 [kv_cache_utils.py:1087] GPU KV cache size: 495,520 tokens",
		"RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
	}, "\n")+"\n")
	if len(warm.OOMs) != 1 || warm.OOMs[0].Phase != PhaseSampler {
		t.Errorf("warm-up after the KV cache: %+v", warm.OOMs)
	}
}

// The suggested command names only what differs from vLLM's defaults: a
// start-up log's engine config spells every value out (capture-oom.log:
// tp 1, pp 1, bfloat16 for a bfloat16 checkpoint, kv-cache-dtype auto).
func TestDoctorCommandWithoutDefaults(t *testing.T) {
	h100, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(readCorpus(t, "capture-oom.log"), Options{ResolveModel: catalogModel, GPU: h100, HasGPU: true})
	for _, def := range []string{"--tensor-parallel-size 1", "--pipeline-parallel-size 1", "--dtype", "--kv-cache-dtype auto"} {
		if strings.Contains(d.Command, def) {
			t.Errorf("suggested %q spells the default %s", d.Command, def)
		}
	}
	if !strings.HasPrefix(d.Command, "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization ") {
		t.Errorf("suggested %q", d.Command)
	}
}

// A model the catalog does not know, with the GPU given: the remedy asks
// for what is missing (its config.json), not for the model and GPU the
// evidence already named.
func TestDoctorUnknownModel(t *testing.T) {
	h100, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	ev := readString(t, "u", strings.Join([]string{
		"(APIServer pid=1) INFO 11-24 09:00:01 [utils.py:233] non-default args: {'model': 'acme/inhouse-70b-fp8', 'max_model_len': 65536}",
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 501.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 399.06 MiB is free. Process 212 has 78.80 GiB memory in use.",
	}, "\n")+"\n")
	d := Diagnose(ev, Options{ResolveModel: catalogModel, GPU: h100, HasGPU: true})
	var whys []string
	for _, f := range d.Findings {
		for _, r := range f.Remedies {
			whys = append(whys, r.Why)
		}
	}
	all := strings.Join(whys, "\n")
	if strings.Contains(all, "give the model and GPU") || !strings.Contains(all, "acme/inhouse-70b-fp8 is not one headroom can plan") || !strings.Contains(all, "--model ./config.json") {
		t.Errorf("remedies:\n%s", all)
	}
}

func uniq(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
