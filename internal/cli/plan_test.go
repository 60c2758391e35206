package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/vllm"
)

// run executes headroom with args and a fixed environment.
func run(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return code, out.String(), errb.String()
}

var offline = map[string]string{"HF_HUB_OFFLINE": "1"}

// The JSON contract of docs/architecture.md: these fields are used by other tools.
func TestPlanJSONContract(t *testing.T) {
	code, out, errs := run(t, offline, "plan", "--gpu", "H100-80GB", "-o", "json", "--vllm-version", "0.19.0",
		"--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.95")
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"model":                {"name", "params", "weights_bytes", "kv_bytes_per_token", "max_position_embeddings"},
		"gpu":                  {"name", "count", "total_bytes"},
		"settings":             {"tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "dtype", "kv_cache_dtype", "block_size", "vllm_version", "vllm_install", "sampler_path", "model_runner_v2"},
		"kv_cache_tokens_band": {"low", "high", "basis"},
		"per_gpu":              {"total_gib", "requested_gib", "weights_gib", "activation_gib", "non_torch_gib", "cudagraph_gib", "cudagraph_in_budget", "kv_cache_gib"},
		"recommended":          {"gpu_memory_utilization", "max_model_len", "max_num_seqs"},
	}
	for obj, keys := range want {
		sub, ok := m[obj].(map[string]any)
		if !ok {
			t.Fatalf("%s is not an object in %s", obj, out)
		}
		for _, k := range keys {
			if _, ok := sub[k]; !ok {
				t.Errorf("%s.%s missing", obj, k)
			}
		}
	}
	for _, k := range []string{"kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "fits", "problems", "warnings", "vllm_args", "evidence"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	// Values from the real start-up this command describes (vLLM 0.19.0 log):
	// 14.99 GiB of weights, 79.19 GiB total, 75.23 GiB requested, 128 KiB per token.
	pg := m["per_gpu"].(map[string]any)
	if pg["weights_gib"] != 14.99 || pg["total_gib"] != 79.19 || pg["requested_gib"] != 75.23 {
		t.Errorf("per_gpu %v", pg)
	}
	if m["model"].(map[string]any)["kv_bytes_per_token"] != float64(131072) {
		t.Errorf("kv_bytes_per_token %v, want 131072", m["model"].(map[string]any)["kv_bytes_per_token"])
	}
	if m["fits"] != true {
		t.Errorf("fits = %v", m["fits"])
	}
	if s := m["settings"].(map[string]any); s["vllm_version"] != "0.19.0" || s["max_num_seqs"] != float64(1024) || s["max_num_batched_tokens"] != float64(8192) {
		t.Errorf("settings %v (vLLM's H100 defaults are 1024 seqs, 8192 batched tokens)", s)
	}
}

// --vllm-image names the install and, without --vllm-version, the release;
// --vllm-install overrides the install; a bad install is bad input.
func TestPlanInstallFlags(t *testing.T) {
	base := []string{"plan", "--gpu", "A100-80GB", "--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "-o", "json"}
	decode := func(out string) report.Report {
		var r report.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	code, out, errs := run(t, offline, append(base, "--vllm-image", "docker.io/vllm/vllm-openai:v0.10.1.1")...)
	if code != ExitFits {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r := decode(out)
	if r.Settings.VLLMVersion != "0.10.1.1" || r.Settings.SamplerPath != "flashinfer" || r.Settings.VLLMInstall != "image" ||
		!strings.Contains(strings.Join(r.Notes, "\n"), "read from the image tag") || !strings.Contains(strings.Join(r.Notes, "\n"), "has FlashInfer") {
		t.Errorf("image: version %s, sampler %s, install %s, notes %v", r.Settings.VLLMVersion, r.Settings.SamplerPath, r.Settings.VLLMInstall, r.Notes)
	}
	code, out, _ = run(t, offline, append(base, "--vllm-version", "0.10.1", "--vllm-install", "pip")...)
	if r := decode(out); code != ExitFits || r.Settings.SamplerPath != "sort" {
		t.Errorf("pip: exit %d, sampler %s", code, r.Settings.SamplerPath)
	}
	code, _, errs = run(t, offline, append(base, "--vllm-install", "conda")...)
	if code != ExitBadInput || !strings.Contains(errs, "--vllm-install") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("bad install: exit %d, %q", code, errs)
	}
	// The table says how sure each part is.
	_, table, _ := run(t, offline, "plan", "--gpu", "L40S", "--model", "Qwen/Qwen2.5-7B-Instruct", "--vllm-version", "0.10.1",
		"--tensor-parallel-size", "4", "--max-model-len", "8192")
	for _, want := range []string{"How sure", "non-torch    extrapolated", "between ", "dummy sampler's top-k/top-p: flashinfer"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestPlanFormats(t *testing.T) {
	base := []string{"plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "Standard_NC24ads_A100_v4"}
	_, js, _ := run(t, offline, append(base, "-o", "json")...)
	_, ym, _ := run(t, offline, append(base, "-o", "yaml")...)
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal([]byte(js), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(ym), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if fromJSON["kv_cache_tokens"] != fromYAML["kv_cache_tokens"] || fromJSON["gpu"].(map[string]any)["name"] != "A100-80GB" {
		t.Errorf("json and yaml disagree or the SKU did not resolve: %v / %v", fromJSON["gpu"], fromYAML["kv_cache_tokens"])
	}

	// -o args prints flags vLLM accepts; they carry the recommendation.
	code, args, errs := run(t, offline, append(base, "-o", "args")...)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	words, err := vllm.SplitCommandLine(strings.TrimSpace(args))
	if err != nil {
		t.Fatal(err)
	}
	s, err := vllm.ParseFlags(words)
	if err != nil {
		t.Fatalf("vLLM flags %q: %v", args, err)
	}
	rec := fromJSON["recommended"].(map[string]any)
	if s.GPUMemoryUtilization != rec["gpu_memory_utilization"] || float64(s.MaxModelLen) != rec["max_model_len"] || float64(s.MaxNumSeqs) != rec["max_num_seqs"] {
		t.Errorf("args %q do not carry the recommendation %v", args, rec)
	}

	// -o kaito prints a ConfigMap whose inference_config.yaml has a vllm: section.
	_, cm, _ := run(t, offline, append(base, "-o", "kaito")...)
	var obj struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(cm), &obj); err != nil || obj.Kind != "ConfigMap" {
		t.Fatalf("not a ConfigMap: %v\n%s", err, cm)
	}
	var inner struct {
		VLLM map[string]any `json:"vllm"`
	}
	if err := yaml.Unmarshal([]byte(obj.Data["inference_config.yaml"]), &inner); err != nil {
		t.Fatal(err)
	}
	if inner.VLLM["gpu-memory-utilization"] != rec["gpu_memory_utilization"] {
		t.Errorf("kaito vllm section %v", inner.VLLM)
	}

	// The table shows the bar and the verdict.
	_, table, _ := run(t, offline, base...)
	for _, want := range []string{"Per GPU [", "█ weights", "Verdict    FITS", "Recommended", "vllm serve Qwen/Qwen2.5-7B-Instruct"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestPlanExitCodes(t *testing.T) {
	// 70B in bf16 needs ~131 GiB: exit 1, with what would fit.
	code, out, _ := run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "L4")
	if code != ExitNoFit || !strings.Contains(out, "DOES NOT FIT") || !strings.Contains(out, "would fit") {
		t.Errorf("exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H10"}, `unknown GPU "H10": did you mean`},
		{[]string{"plan", "--model", "lama-3.1-8b-instruct", "--gpu", "L4"}, "did you mean"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B"}, "no GPU"},
		{[]string{"plan", "--gpu", "L4"}, "no model"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "-o", "xml"}, "unknown output format"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--gpu-memory-utilization", "1.5"}, "gpu-memory-utilization"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--max-model-len", "lots"}, "max-model-len"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu-memory", "24 apples"}, "--gpu-memory"},
		{[]string{"plan", "--bogus"}, "unknown flag"},
		{[]string{"plan", "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L4", "--typical-context", "100000000"}, "longer than the longest request served (32768 tokens)"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--", "vllm", "serve", "Qwen/Qwen3-8B", "-o", "args"}, "-o after --"},
		{[]string{"plan", "--all-gpus", "--model", "Qwen/Qwen3-8B", "-o", "args"}, "--all-gpus prints a table, json or yaml"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--max-num-seqs", "99999999999"}, "past the 1048576"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu-memory", "24"}, "under 1 GiB, not a GPU's memory: give a unit"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100-80GB", "--gpu-count", "100000"}, "--gpu-count 100000: give 1 to 4096"},
		{[]string{"plan", "--model", "Qwen/Qwen3-8B", "--gpu", "g6.12xlarge", "--gpu-count", "8"}, "more than the 4 GPUs of a g6.12xlarge"},
	} {
		code, out, errs := run(t, offline, tc.args...)
		if code != ExitBadInput || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stderr %q (want one line containing %q)", tc.args, code, errs, tc.want)
		}
	}
}

// A headroom flag overrides the same flag in the pasted command.
func TestFlagOverridesPastedCommand(t *testing.T) {
	_, out, errs := run(t, offline, "plan", "--gpu", "L4", "--max-model-len", "4096", "-o", "json",
		"--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8192", "-tp", "2")
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err, errs)
	}
	if r.Settings.MaxModelLen != 4096 || r.Settings.TensorParallelSize != 2 || r.GPU.Count != 2 {
		t.Errorf("max-model-len %d tp %d count %d", r.Settings.MaxModelLen, r.Settings.TensorParallelSize, r.GPU.Count)
	}
}

// A local model directory: config.json plus the safetensors index, whose
// total_size gives the exact weight bytes.
func TestPlanLocalDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg, err := os.ReadFile("../../model/catalog/configs/meta-llama--Llama-3.1-8B-Instruct.json")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config.json"), cfg)
	// 8,030,261,248 parameters × 2 B.
	write(t, filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"metadata":{"total_size":16060522496},"weight_map":{"lm_head.weight":"model-00004-of-00004.safetensors"}}`))
	code, out, errs := run(t, offline, "plan", "--model", dir, "--gpu", "L4", "--gpu-count", "2", "--tensor-parallel-size", "2", "-o", "json")
	if code > 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Model.WeightsSource, "model.safetensors.index.json") {
		t.Errorf("weights source %q", r.Model.WeightsSource)
	}
	// Half of 14.96 GiB of parameters plus the 32 MiB rotary table per rank.
	if r.PerGPU.WeightsGiB != 7.51 {
		t.Errorf("weights per GPU %.2f GiB, want 7.51 (logged by vLLM at TP=2)", r.PerGPU.WeightsGiB)
	}
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A model fetched from a server that serves the Hugging Face Hub's layout,
// with a token, over real HTTP.
func TestPlanFromHub(t *testing.T) {
	cfg, err := os.ReadFile("../../model/catalog/configs/Qwen--Qwen3-8B.json")
	if err != nil {
		t.Fatal(err)
	}
	var sawToken bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawToken = sawToken || r.Header.Get("Authorization") == "Bearer hf_test"
		switch r.URL.Path {
		case "/acme/private-8b/resolve/main/config.json":
			w.Write(cfg)
		case "/acme/private-8b/resolve/main/model.safetensors.index.json":
			w.Write([]byte(`{"metadata":{"total_size":16381470720},"weight_map":{}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	env := map[string]string{"HF_ENDPOINT": srv.URL, "HF_TOKEN": "hf_test"}
	code, out, errs := run(t, env, "plan", "--model", "acme/private-8b", "--gpu", "A10G", "-o", "json")
	if code > 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Model.Name != "acme/private-8b" || r.Model.Layers != 36 || !sawToken {
		t.Errorf("model %q layers %d token sent %t", r.Model.Name, r.Model.Layers, sawToken)
	}
	// Offline, the same id is unknown.
	if code, _, errs := run(t, map[string]string{"HF_HUB_OFFLINE": "1"}, "plan", "--model", "acme/private-8b", "--gpu", "A10G"); code != ExitBadInput || !strings.Contains(errs, "Hub is off") {
		t.Errorf("offline: exit %d %s", code, errs)
	}
}

func TestAllGPUs(t *testing.T) {
	code, out, errs := run(t, offline, "plan", "--all-gpus", "--model", "meta-llama/Llama-3.1-8B-Instruct", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []report.GPURow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(gpu.Devices()) {
		t.Fatalf("%d rows for %d GPUs", len(rows), len(gpu.Devices()))
	}
	byName := map[string]report.GPURow{}
	for _, r := range rows {
		byName[r.GPU] = r
	}
	// 16 GiB of 16-bit weights cannot load on a 16 GB T4: the fewest T4s
	// that serve the full context are 4 at TP 4, and only at the
	// recommended utilization (0.85: the default 0.92 leaves the CUDA
	// context and sampler no room on a 14.75 GiB card), which the row is
	// planned at; an H100 holds the full context at the default.
	if t4 := byName["T4"]; !t4.Fits || t4.Count != 4 || t4.Utilization != t4.Recommended || t4.Utilization >= 0.92 {
		t.Errorf("T4 %+v", t4)
	}
	if h := byName["H100-80GB"]; !h.Fits || h.MaxFitLen != 131072 || h.Count != 1 || h.Utilization != 0.92 {
		t.Errorf("H100 %+v", h)
	}
}

func TestListCommands(t *testing.T) {
	if code, out, _ := run(t, offline, "gpus"); code != 0 || !strings.Contains(out, "H100-80GB") || !strings.Contains(out, "p4d.24xlarge") {
		t.Errorf("gpus: %d\n%s", code, out)
	}
	if code, out, _ := run(t, offline, "models"); code != 0 || !strings.Contains(out, "deepseek-ai/DeepSeek-V2-Lite-Chat") {
		t.Errorf("models: %d", code)
	}
	// The JSON holds the table's facts: Llama-3.1-8B's 8,030,261,248
	// parameters (Meta's model card: 8.03B), 32 layers, 131,072 positions.
	code, out, _ := run(t, offline, "models", "-o", "json")
	var rows []struct {
		ID           string `json:"id"`
		Params       int64  `json:"params"`
		Layers       int    `json:"layers"`
		Attention    string `json:"attention"`
		MaxPositions int    `json:"max_position_embeddings"`
	}
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("models -o json: %d %v", code, err)
	}
	for _, r := range rows {
		if r.ID == "meta-llama/Llama-3.1-8B-Instruct" && (r.Params != 8_030_261_248 || r.Layers != 32 || r.Attention != "32 full" || r.MaxPositions != 131072) {
			t.Errorf("Llama-3.1-8B: %+v", r)
		}
	}
	// A count that rounds to a thousand millions reads as billions.
	if got := humanCount(999_999_999); got != "1.00B" {
		t.Errorf("humanCount(999,999,999) = %s", got)
	}
}

// TestPlanRecommendsTheAlternative: tp 8 on one H100 fails on the count;
// the alternatives are 8 GPUs or tp 1, and the Recommended block is for the
// first of them (8 × H100-80GB, tp 8 kept), never a tp-16 or fp8 answer.
func TestPlanRecommendsTheAlternative(t *testing.T) {
	args := []string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--gpu-count", "1",
		"--tensor-parallel-size", "8", "--vllm-version", "0.19.0"}
	code, out, _ := run(t, offline, args...)
	i := strings.Index(out, "Recommended")
	if code != ExitNoFit || i < 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	wouldFit := strings.Count(out, "\n  would fit:")
	if wouldFit != 2 || !strings.Contains(out, "would fit: give 8 × H100-80GB") ||
		!strings.Contains(out, "would fit: --tensor-parallel-size 1 on the 1 × H100-80GB given") ||
		strings.Contains(out, "--tensor-parallel-size 16") || strings.Contains(out, "16 ×") || strings.Contains(out, "fp8") {
		t.Errorf("alternatives:\n%s", out)
	}
	rec := out[i:]
	if !strings.Contains(rec, "with the first alternative: give 8 × H100-80GB") || !strings.Contains(rec, "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 8 ") {
		t.Errorf("recommended block:\n%s", rec)
	}
	_, out, _ = run(t, offline, append(args, "-o", "json")...)
	var r struct {
		Recommended struct {
			Alternative string `json:"alternative"`
			Fits        bool   `json:"fits"`
		} `json:"recommended"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Recommended.Alternative != "gpu_count" || !r.Recommended.Fits {
		t.Errorf("recommended %+v, want for gpu_count, fitting", r.Recommended)
	}
}
