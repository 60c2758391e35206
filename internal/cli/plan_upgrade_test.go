package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// upgrade runs `plan --upgrade-to` with -o json and decodes it.
func upgrade(t *testing.T, wantCode int, args ...string) report.UpgradeReport {
	t.Helper()
	code, out, errs := run(t, offline, append([]string{"plan", "--gpu", "H100-80GB", "--offline", "-o", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d: %s%s", code, wantCode, errs, out)
	}
	var r report.UpgradeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

// change finds a term's change; ok false when it does not change.
func change(r report.UpgradeReport, term string) (report.UpgradeChange, bool) {
	for _, c := range r.Changes {
		if c.Term == term {
			return c, true
		}
	}
	return report.UpgradeChange{}, false
}

// causedBy reports whether a change names rule (at release since) with its
// source among its causes.
func causedBy(c report.UpgradeChange, rule, since, source string) bool {
	for _, b := range c.Causes {
		if b.Rule == rule && b.Since.String() == since && strings.Contains(b.Source, source) {
			return true
		}
	}
	return false
}

// TestUpgradeAcrossBoundaries: each boundary of the version notes that
// moves a GiB of the plan shows up, across it, as the term it moves, with
// the boundary's rule and source as the cause; nothing else is blamed.
func TestUpgradeAcrossBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name, model, from, to string
		util                  string
		term, from2, to2      string
		rule, since, source   string
	}{
		// 0.17.0: the profile run's activation of Qwen3-14B on an H100
		// logged 5.64 GiB on 0.16.0 and 2.23 GiB on 0.17.0 (vLLM start-up
		// logs, the sampler's path changing from a sort to Triton).
		{"0.17 sampler", "Qwen/Qwen3-14B", "0.16.0", "0.17.0", "0.9", "per_gpu.activation_gib", "5.64", "2.23", "DummySampler", "0.17.0", "PR #33538"},
		{"0.19 MoE workspace", "Qwen/Qwen3-30B-A3B", "0.18.0", "0.19.0", "0.9", "per_gpu.activation_gib", "", "", "PersistentMoEWorkspace", "0.19.0", "calibration start-ups"},
		{"0.21 graphs in budget", "Qwen/Qwen3-14B", "0.20.0", "0.21.0", "0.9", "per_gpu.cudagraph_in_budget", "false", "true", "CUDAGraphsInBudget", "0.21.0", "PR #38284"},
		{"0.21 default utilization", "Qwen/Qwen3-14B", "0.20.0", "0.21.0", "", "settings.gpu_memory_utilization", "0.9", "0.92", "DefaultGPUMemoryUtilization", "0.21.0", "PR #38284"},
		{"0.25 runner V2", "Qwen/Qwen2.5-7B-Instruct", "0.24.0", "0.25.0", "0.9", "per_gpu.cudagraph_in_budget", "true", "false", "ModelRunnerV2", "0.25.0", "#49224"},
		{"0.29 runner V2 graphs", "Qwen/Qwen2.5-7B-Instruct", "0.28.0", "0.29.0", "0.9", "per_gpu.cudagraph_in_budget", "false", "true", "CUDAGraphEstimateIsZero", "0.29.0", "PR #57865"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--model", tc.model, "--vllm-version", tc.from, "--upgrade-to", tc.to}
			if tc.util != "" {
				args = append(args, "--gpu-memory-utilization", tc.util)
			}
			r := upgrade(t, ExitFits, args...)
			c, ok := change(r, tc.term)
			if !ok {
				t.Fatalf("%s does not change: %+v", tc.term, r.Changes)
			}
			if tc.from2 != "" && (c.From != tc.from2 || c.To != tc.to2) {
				t.Errorf("%s: %s -> %s, want %s -> %s", tc.term, c.From, c.To, tc.from2, tc.to2)
			}
			if !causedBy(c, tc.rule, tc.since, tc.source) {
				t.Errorf("%s: causes %+v, want %s at %s (%s)", tc.term, c.Causes, tc.rule, tc.since, tc.source)
			}
			kv, ok := change(r, "per_gpu.kv_cache_gib")
			if !ok || !causedBy(kv, tc.rule, tc.since, tc.source) {
				t.Errorf("the KV cache's change %+v does not name %s", kv, tc.rule)
			}
			// The other side of the boundary: a release on the same side
			// as the source changes nothing.
			same := upgrade(t, ExitFits, append(args[:4:4], "--upgrade-to", tc.from, "--gpu-memory-utilization", "0.9")...)
			if len(same.Changes) != 0 || same.KVLoss != 0 {
				t.Errorf("%s -> %s changes %+v", tc.from, tc.from, same.Changes)
			}
		})
	}
}

// TestUpgradeGraphEstimateCost: with the utilization held at 0.9, 0.21.0
// takes the CUDA-graph estimate out of the KV cache: KV before − KV after
// = the graphs + the activation's change (Qwen3-14B on an H100: the
// graphs 1.10 GiB, the activation 2.23 → 2.16 GiB, so 1.10 − 0.07 = 1.03
// GiB fewer, 41.27 → 40.24 GiB; within 0.02 GiB of rounding).
func TestUpgradeGraphEstimateCost(t *testing.T) {
	r := upgrade(t, ExitFits, "--model", "Qwen/Qwen3-14B", "--vllm-version", "0.20.0", "--upgrade-to", "0.21.0", "--gpu-memory-utilization", "0.9")
	lost := r.From.PerGPU.KVCacheGiB - r.To.PerGPU.KVCacheGiB
	want := r.To.PerGPU.CUDAGraphGiB + r.To.PerGPU.ActivationGiB - r.From.PerGPU.ActivationGiB
	if math.Abs(lost-want) > 0.02 || lost <= 0 {
		t.Errorf("KV lost %.2f GiB, want the graphs plus the activation's change, %.2f GiB", lost, want)
	}
	if r.KVLoss <= 0 || r.To.KVCacheTokens >= r.From.KVCacheTokens {
		t.Errorf("KV tokens %d -> %d, loss %.3f", r.From.KVCacheTokens, r.To.KVCacheTokens, r.KVLoss)
	}
}

// TestUpgradeVerdicts: exit 1 when the new release does not start the
// deployment or loses more KV than allowed; a downgrade reads the same
// changes the other way.
func TestUpgradeVerdicts(t *testing.T) {
	// At 0.80 the MoE workspace of 0.19.0 (about 0.5 GiB) takes the KV
	// cache of Qwen3-30B-A3B below one 40,960-token request (3.75 GiB).
	r := upgrade(t, ExitNoFit, "--model", "Qwen/Qwen3-30B-A3B", "--vllm-version", "0.18.0", "--upgrade-to", "0.19.0", "--gpu-memory-utilization", "0.80")
	if r.Verdict != "stops" || r.OK || !r.From.Fits || r.To.Fits || r.To.MaxFitLen >= r.From.MaxFitLen {
		t.Errorf("verdict %s ok %v, fits %v -> %v, max len %d -> %d", r.Verdict, r.OK, r.From.Fits, r.To.Fits, r.From.MaxFitLen, r.To.MaxFitLen)
	}
	// Qwen3-14B loses about 2.5% of its KV tokens across 0.21.0 at 0.9.
	args := []string{"--model", "Qwen/Qwen3-14B", "--vllm-version", "0.20.0", "--upgrade-to", "0.21.0", "--gpu-memory-utilization", "0.9"}
	r = upgrade(t, ExitNoFit, append(args, "--max-kv-loss", "2%")...)
	if r.Verdict != "loses-kv" || r.MaxKVLoss != 0.02 {
		t.Errorf("verdict %s, max loss %v", r.Verdict, r.MaxKVLoss)
	}
	if r = upgrade(t, ExitFits, append(args, "--max-kv-loss", "0.03")...); r.Verdict != "ok" {
		t.Errorf("verdict %s at 3%%", r.Verdict)
	}
	down := upgrade(t, ExitFits, "--model", "Qwen/Qwen3-14B", "--vllm-version", "0.21.0", "--upgrade-to", "0.20.0", "--gpu-memory-utilization", "0.9")
	c, ok := change(down, "per_gpu.cudagraph_in_budget")
	if !ok || c.From != "true" || c.To != "false" || !causedBy(c, "CUDAGraphsInBudget", "0.21.0", "PR #38284") {
		t.Errorf("downgrade: %+v", c)
	}
	if down.KVLoss >= 0 {
		t.Errorf("the downgrade gains KV, loss %v", down.KVLoss)
	}
}

// TestUpgradeOutputs: the table puts the verdict first and names the
// cause; YAML carries the same fields; bad input is one line and exit 2.
func TestUpgradeOutputs(t *testing.T) {
	code, out, errs := run(t, offline, "plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen3-30B-A3B", "--vllm-version", "0.20.0", "--upgrade-to", "0.21.0")
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Upgrade vLLM 0.20.0 -> 0.21.0: OK", "KV cache tokens", "longest context that fits", "in the budget", "CUDAGraphsInBudget", "PR #38284", "0.90", "0.92"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "Upgrade vLLM") {
		t.Errorf("the verdict is not first:\n%s", out)
	}
	code, out, _ = run(t, offline, "plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen3-14B", "--vllm-version", "0.20.0", "--upgrade-to", "0.21.0", "-o", "yaml")
	if code != ExitFits || !strings.Contains(out, "verdict: ok") || !strings.Contains(out, "term: per_gpu.cudagraph_in_budget") {
		t.Errorf("yaml (exit %d):\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"--upgrade-to", "zero"},
		{"--upgrade-to", "0.21.0", "--max-kv-loss", "150%"},
		{"--max-kv-loss", "10%"},
		{"--upgrade-to", "0.21.0", "-o", "kaito"},
		{"--upgrade-to", "0.21.0", "--pin-kv"},
	} {
		code, out, errs := run(t, offline, append([]string{"plan", "--gpu", "H100-80GB", "--model", "Qwen/Qwen3-14B"}, bad...)...)
		if code != ExitBadInput || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", bad, code, errs, out)
		}
	}
}

// FuzzParseShare: any --max-kv-loss is a share in [0, 1] or one error.
func FuzzParseShare(f *testing.F) {
	for _, s := range []string{"20%", "0.2", "", "%", "NaN", "-1", "1e400%", " 5 % "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseShare("max-kv-loss", s)
		if err == nil && (v < 0 || v > 1 || math.IsNaN(v)) {
			t.Errorf("%q read as %v", s, v)
		}
	})
}

// TestUpgradeNewWarnings: a risk the rules know but do not size shows up
// as new on the target release: Model Runner V2 from 0.25.0 reserves no
// CUDA-graph memory (until 0.29), so 0.24.0 -> 0.25.0 warns of it and
// 0.28.0 -> 0.29.0 does not.
func TestUpgradeNewWarnings(t *testing.T) {
	has := func(r report.UpgradeReport) bool {
		for _, w := range r.NewWarnings {
			if w.Code == memory.CodeRunnerV2NoGraphs {
				return true
			}
		}
		return false
	}
	args := []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"}
	if r := upgrade(t, ExitFits, append(args, "--vllm-version", "0.24.0", "--upgrade-to", "0.25.0")...); !has(r) {
		t.Errorf("0.24.0 -> 0.25.0: new warnings %+v", r.NewWarnings)
	}
	if r := upgrade(t, ExitFits, append(args, "--vllm-version", "0.28.0", "--upgrade-to", "0.29.0")...); has(r) || r.NewWarnings == nil {
		t.Errorf("0.28.0 -> 0.29.0: new warnings %+v", r.NewWarnings)
	}
}

// TestUpgradeFromImage: the first release is read from --vllm-image's tag,
// vendors' tags included; a tag naming none says so and takes the newest.
func TestUpgradeFromImage(t *testing.T) {
	r := upgrade(t, ExitFits, "--model", "Qwen/Qwen3-14B", "--vllm-image", "rocm/vllm:rocm6.4.1_vllm_0.20.0_20251001", "--upgrade-to", "0.21.0")
	if r.From.VLLMVersion != "0.20.0" || !strings.Contains(strings.Join(r.Notes, "\n"), "vendor image") {
		t.Errorf("from %s, notes %q", r.From.VLLMVersion, r.Notes)
	}
	r = upgrade(t, ExitFits, "--model", "Qwen/Qwen3-14B", "--vllm-image", "vllm/vllm-openai:latest", "--upgrade-to", "0.21.0")
	if r.From.VLLMVersion != vllm.Newest().String() || !strings.Contains(strings.Join(r.Notes, "\n"), "names no vLLM release") {
		t.Errorf("from %s, notes %q", r.From.VLLMVersion, r.Notes)
	}
}
