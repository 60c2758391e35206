package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
)

// The same deployment with LoRA slots, a draft model and a flag the
// planner does not model, through check (the webhook's verdicts), plan
// (the flags after --) and audit: one KV cache, and the flag named by all.
func TestFeatureFlagsAgree(t *testing.T) {
	path := filepath.Join("testdata", "deployments", "features.yaml")
	args := []string{"Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64",
		"--speculative-config", `{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}`, "--compilation-config", `{"cudagraph_mode":"FULL"}`}
	const named = "--compilation-config: compile passes"

	code, out, errs := run(t, offline, append([]string{"plan", "--gpu", "L4", "--vllm-version", "0.27.1", "-o", "json", "--", "vllm", "serve"}, args...)...)
	var plan struct {
		Fits     bool  `json:"fits"`
		KVTokens int64 `json:"kv_cache_tokens"`
		Warnings []struct {
			Code, Message string
		} `json:"warnings"`
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 0 {
		t.Fatalf("plan: exit %d, %v: %s", code, err, errs)
	}
	warned := false
	for _, w := range plan.Warnings {
		warned = warned || w.Code == "flags_not_modelled" && strings.Contains(w.Message, named)
	}
	if !warned || !strings.Contains(strings.Join(plan.Notes, "\n"), named) {
		t.Errorf("plan names the flag in warnings %v / notes %q", plan.Warnings, plan.Notes)
	}

	// Without the features the same plan holds more KV: the slots and the
	// draft are planned, not echoed.
	_, bare, _ := run(t, offline, "plan", "--gpu", "L4", "--vllm-version", "0.27.1", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192")
	var without struct {
		KVTokens int64 `json:"kv_cache_tokens"`
	}
	if err := json.Unmarshal([]byte(bare), &without); err != nil || without.KVTokens <= plan.KVTokens {
		t.Errorf("without the features %d KV tokens, with them %d", without.KVTokens, plan.KVTokens)
	}

	code, out, errs = run(t, offline, "check", path, "-o", "json")
	var checked []CheckResult
	if err := json.Unmarshal([]byte(out), &checked); err != nil || len(checked) != 1 {
		t.Fatalf("check: exit %d, %v: %s %s", code, err, out, errs)
	}
	if !strings.Contains(strings.Join(checked[0].Warnings, "\n"), named) {
		t.Errorf("check's warnings %q do not name the flag", checked[0].Warnings)
	}

	a := auditOf(t, path)
	if len(a.Workloads) != 1 || len(a.Workloads[0].Engines) != 1 {
		t.Fatalf("audit: %+v", a.Workloads)
	}
	if got := a.Workloads[0].Engines[0].KVTokens; got != plan.KVTokens {
		t.Errorf("audit plans %d KV tokens, plan %d", got, plan.KVTokens)
	}
}

// A pasted --config is read where headroom runs, as vLLM reads it: its
// flags before the line's, which win; the plan says which flags it read and
// which of its keys vLLM drops.
func TestPlanReadsConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("max-model-len: 4096\ntensor-parallel-size: 2\nenable-chunked-prefill: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, offline, "plan", "--gpu", "H100-80GB", "--vllm-version", "0.19.0", "-o", "json",
		"--", "vllm", "serve", "Qwen/Qwen3-8B", "--config", path, "--max-model-len", "8192")
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Settings.MaxModelLen != 8192 || r.Settings.TensorParallelSize != 2 || r.GPU.Count != 2 {
		t.Errorf("max-model-len %d (the line's 8192 wins), TP %d on %d GPUs (the file's 2)", r.Settings.MaxModelLen, r.Settings.TensorParallelSize, r.GPU.Count)
	}
	if !strings.Contains(out, "--config "+path+" read: --max-model-len 4096 --tensor-parallel-size 2") || !strings.Contains(out, "sets enable-chunked-prefill to false") {
		t.Errorf("the notes do not say what the file gave: %s", out)
	}
	// A file that is not here (a line pasted from a server) leaves the line
	// alone, and a note says so; one that is not flags stops in one line.
	code, out, errs = run(t, offline, "plan", "--gpu", "H100-80GB", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--config", path+".missing.yaml", "--max-model-len", "8192")
	if code != ExitFits || !strings.Contains(out, "missing.yaml is not read (no such file or directory): planned on the line alone") {
		t.Errorf("a missing file: exit %d, %s %s", code, out, errs)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("- max-model-len\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = run(t, offline, "plan", "--gpu", "H100-80GB", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--config", bad)
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "not a mapping of flag names") {
		t.Errorf("a file that is not flags: exit %d, %q", code, errs)
	}
}

// Qwen's YaRN recipe for Qwen3-8B (testdata/deployments/yarn.yaml): with
// the rope_scaling override vLLM derives 32,768 × 4 = 131,072 tokens and
// starts at --max-model-len 131072, which the config alone (40,960)
// refuses. plan, check and audit read the override alike.
func TestLongContextOverrideAgrees(t *testing.T) {
	path := filepath.Join("testdata", "deployments", "yarn.yaml")
	line := []string{"plan", "--gpu", "H100-80GB", "--vllm-version", "0.19.0", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "131072"}
	var plan struct {
		Fits     bool  `json:"fits"`
		KVTokens int64 `json:"kv_cache_tokens"`
		Problems []struct {
			Code string `json:"code"`
		} `json:"problems"`
		Notes []string `json:"notes"`
	}
	code, out, errs := run(t, offline, line...)
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Fits || len(plan.Problems) == 0 || plan.Problems[0].Code != "max_model_len_exceeds_model" {
		t.Errorf("131072 without the override: exit %d, %+v %v %s", code, plan, err, errs)
	}
	plan.Problems = nil
	code, out, errs = run(t, offline, append(line, "--hf-overrides", `{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}`)...)
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 0 || !plan.Fits || len(plan.Problems) != 0 ||
		!strings.Contains(strings.Join(plan.Notes, "\n"), "read with --hf-overrides: longest context 40960 → 131072") {
		t.Fatalf("with the override: exit %d, %+v %v %s", code, plan, err, errs)
	}
	code, out, errs = run(t, offline, "check", path, "-o", "json")
	var checked []CheckResult
	if err := json.Unmarshal([]byte(out), &checked); err != nil || code != 0 || len(checked) != 1 || checked[0].Verdict == "denied" || checked[0].Verdict == "error" {
		t.Fatalf("check: exit %d, %v: %s %s", code, err, out, errs)
	}
	a := auditOf(t, path)
	if len(a.Workloads) != 1 || len(a.Workloads[0].Engines) != 1 || a.Workloads[0].Engines[0].KVTokens != plan.KVTokens {
		t.Errorf("audit: %+v, plan %d KV tokens", a.Workloads, plan.KVTokens)
	}
}
