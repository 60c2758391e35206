//go:build unix

package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/standin"
)

// The probe command is driven against the engine stand-in
// probe/testdata/fakevllm, which stands in for vllm and the GPU under it
// (there is no GPU where these tests run); its behaviour is set through
// FAKEVLLM_* assignments in the pasted command, as VLLM_* ones would be.

func TestMain(m *testing.M) { standin.Main(m) }

func probeEnv(t *testing.T) map[string]string {
	return map[string]string{"HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": t.TempDir()}
}

// TestProbeThenPlan: a release without auto takes two launches (the
// prediction fails naming 20000, then 20000 starts); the record it leaves
// makes the next plan use the measured weights.
func TestProbeThenPlan(t *testing.T) {
	env := probeEnv(t)
	code, out, errs := run(t, env, "probe", "--gpu", "L4", "--vllm-bin", standin.Bin(t), "-o", "json",
		"--", "FAKEVLLM_VERSION=0.10.0", "FAKEVLLM_KV_TOKENS=20000", "FAKEVLLM_SPLIT=1",
		"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.92")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		MaxModelLen int     `json:"max_model_len"`
		Launches    int     `json:"launches"`
		KVTokens    int64   `json:"kv_cache_tokens"`
		KVGiB       float64 `json:"available_kv_cache_gib"`
		Version     string  `json:"vllm_version"`
		Seconds     float64 `json:"seconds"`
		Calibration string  `json:"calibration_file"`
		ModelMaxLen int     `json:"model_max_len"`
		History     []struct {
			MaxModelLen any            `json:"max_model_len"`
			Args        []string       `json:"args"`
			Outcome     string         `json:"outcome"`
			Numbers     map[string]any `json:"numbers"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 20000 tokens × 128 KiB (Llama-3.1-8B in bf16) = 2.44 GiB.
	if r.MaxModelLen != 20000 || r.Launches != 2 || r.KVTokens != 20000 || r.KVGiB != 2.44 || r.Version != "0.10.0" ||
		r.ModelMaxLen != 131072 || len(r.History) != 2 || r.History[0].Outcome != "failed" || r.History[1].Outcome != "started" {
		t.Errorf("report %+v", r)
	}
	if r.History[0].Numbers["estimated_max_model_len"] != 20000.0 || !strings.Contains(strings.Join(r.History[1].Args, " "), "--gpu-memory-utilization 0.92 --max-model-len 20000 --host 127.0.0.1") {
		t.Errorf("history %+v", r.History)
	}
	if r.Calibration != filepath.Join(env["XDG_CACHE_HOME"], "headroom", "calibration.jsonl") {
		t.Errorf("calibration file %q", r.Calibration)
	}
	if !strings.Contains(errs, "launch 2: --max-model-len 20000: started") {
		t.Errorf("progress: %s", errs)
	}

	// The stand-in logs weights of 14.99 GiB; the planner now uses them.
	code, out, errs = run(t, env, "plan", "--gpu", "L4", "--vllm-version", "0.10.0", "-o", "json", "--model", "meta-llama/Llama-3.1-8B-Instruct")
	if code > 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var p struct {
		PerGPU struct {
			Weights float64 `json:"weights_gib"`
		} `json:"per_gpu"`
		Notes []string `json:"notes"`
	}
	json.Unmarshal([]byte(out), &p)
	if p.PerGPU.Weights != 14.99 || !strings.Contains(strings.Join(p.Notes, "\n"), "using measured numbers from the probe of meta-llama/Llama-3.1-8B-Instruct on L4 with vLLM 0.10.0") {
		t.Errorf("plan weights %v, notes %q", p.PerGPU.Weights, p.Notes)
	}
	// Another batch (max_num_seqs) changes the activation: no match.
	_, out, _ = run(t, env, "plan", "--gpu", "L4", "--vllm-version", "0.10.0", "-o", "json", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "64")
	if strings.Contains(out, "using measured numbers") {
		t.Error("a record with another max_num_seqs was used")
	}
	// The newest release assumed: the record is pointed at, not used.
	_, out, _ = run(t, env, "plan", "--gpu", "L4", "-o", "json", "--model", "meta-llama/Llama-3.1-8B-Instruct")
	if strings.Contains(out, "using measured numbers") || !strings.Contains(out, "pass --vllm-version 0.10.0 to use its numbers") {
		t.Errorf("plan without a version: %s", out)
	}
}

func TestProbeTable(t *testing.T) {
	code, out, errs := run(t, probeEnv(t), "probe", "--gpu", "L4", "--vllm-bin", standin.Bin(t), "--no-calibration",
		"--", "FAKEVLLM_KV_TOKENS=30000", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"max-model-len 30000: started on L4 (meta-llama/Llama-3.1-8B-Instruct allows 131072)",
		"KV cache 30,000 tokens, 3.66 GiB per GPU; vLLM 0.19.0; 1 launch in",
		"1       auto           started",
		"auto-fit 131072 → 30000, KV 30,000 tokens",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "calibration records:") {
		t.Error("--no-calibration wrote records")
	}
	code, out, errs = run(t, probeEnv(t), "probe", "--gpu", "L4", "--vllm-bin", standin.Bin(t), "-o", "yaml",
		"--", "FAKEVLLM_KV_TOKENS=30000", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
	if code != 0 || !strings.Contains(out, "max_model_len: 30000\n") || !strings.Contains(out, "  max_model_len: auto\n") {
		t.Errorf("yaml: exit %d %s\n%s", code, errs, out)
	}
}

func TestProbeNothingStarts(t *testing.T) {
	code, out, errs := run(t, probeEnv(t), "probe", "--gpu", "L4", "--vllm-bin", standin.Bin(t), "--vllm-version", "0.19.0",
		"--", "FAKEVLLM_FAIL=oom", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
	if code != ExitNoFit || !strings.Contains(errs, "headroom: torch.OutOfMemoryError: CUDA out of memory") || !strings.Contains(out, "no --max-model-len started") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

func TestProbeBadInput(t *testing.T) {
	fake := standin.Bin(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"probe", "--gpu", "L4", "--vllm-bin", fake, "--strategy", "guess", "--model", "Qwen/Qwen3-8B"}, "unknown --strategy"},
		{[]string{"probe", "--gpu", "L4", "--vllm-bin", fake}, "no model"},
		{[]string{"probe", "--gpu", "L4", "-o", "args", "--model", "Qwen/Qwen3-8B"}, "unknown output format"},
		{[]string{"probe", "--gpu", "L4", "--vllm-bin", filepath.Join(t.TempDir(), "vllm"), "--vllm-version", "0.19.0", "--model", "Qwen/Qwen3-8B"}, "no such file"},
		{[]string{"probe", "--gpu", "L4", "--vllm-bin", fake, "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "lots"}, "--max-model-len"},
	} {
		code, _, errs := run(t, probeEnv(t), tt.args...)
		if code != ExitBadInput || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, errs, tt.want)
		}
	}
}
