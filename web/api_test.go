package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/cli"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/web"
)

// offline is the environment of every test: no Hub, no calibration file.
var offline = map[string]string{"HF_HUB_OFFLINE": "1"}

func getenv(k string) string { return offline[k] }

func newServer(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(web.Handler(web.Options{Env: report.Env{Getenv: getenv}, Offline: true}))
	t.Cleanup(srv.Close)
	return srv
}

// newSimServer is newServer: the simulation is the report builder's, as
// the CLI's is.
func newSimServer(t testing.TB) *httptest.Server { return newServer(t) }

// runCLI runs headroom with args in the same environment as the server.
func runCLI(t *testing.T, args ...string) (int, []byte) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Getenv: getenv})
	if code == 2 {
		t.Fatalf("headroom %s: exit 2: %s", strings.Join(args, " "), errb.String())
	}
	return code, out.Bytes()
}

// call sends one request; a body makes it a POST of JSON.
func call(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func post(t *testing.T, url string, body string) (int, []byte) {
	t.Helper()
	code, h, b := call(t, http.MethodPost, url, body)
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST %s: Content-Type %q", url, ct)
	}
	return code, b
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	return call(t, http.MethodGet, url, "")
}

// The page and the CLI cannot disagree: the same plan gives the same bytes.
// Llama-3.1-8B-Instruct on H100-80GB at 0.95 with vLLM 0.19.0 logged
// 476,016 KV tokens (memory/testdata/vllm-0.19.0-h100.csv).
func TestPlanSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	command := "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.95"
	_, want := runCLI(t, append([]string{"plan", "--gpu", "H100-80GB", "--vllm-version", "0.19.0", "-o", "json", "--"}, strings.Fields(command)...)...)
	code, got := post(t, srv.URL+"/api/plan", `{"gpu": "H100-80GB", "vllm_version": "0.19.0", "command": "`+command+`"}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("API and CLI differ:\nAPI: %s\nCLI: %s", got, want)
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if e := math.Abs(float64(r.KVCacheTokens)/476016 - 1); !r.Fits || e > 0.005 {
		t.Errorf("fits %t, %d KV tokens: %.2f%% off the 476,016 logged", r.Fits, r.KVCacheTokens, e*100)
	}
	if len(r.Frontier) == 0 {
		t.Error("no frontier in the plan")
	}
}

// The install the plan assumes comes from the page as from the CLI: a pip
// install of vLLM 0.10.1 without FlashInfer sorts in its dummy sampler, and
// the plan shows how sure each part is and the KV band.
func TestPlanInstallSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	_, want := runCLI(t, "plan", "--gpu", "A100-80GB", "--model", "Qwen/Qwen2.5-7B-Instruct", "--vllm-version", "0.10.1",
		"--vllm-install", "pip", "--max-model-len", "8192", "-o", "json")
	code, got := post(t, srv.URL+"/api/plan", `{"gpu": "A100-80GB", "model": "Qwen/Qwen2.5-7B-Instruct", "vllm_version": "0.10.1",
		"vllm_install": "pip", "flags": {"max-model-len": "8192"}}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if r.Settings.SamplerPath != "sort" || r.Settings.VLLMInstall != "pip" || len(r.Evidence) != 4 || r.KVCacheTokensBand.Low >= r.KVCacheTokens {
		t.Errorf("sampler %s, install %s, evidence %d, band %+v", r.Settings.SamplerPath, r.Settings.VLLMInstall, len(r.Evidence), r.KVCacheTokensBand)
	}
}

// Flags given as fields win over the pasted command's, as headroom's own
// flags do on the command line.
func TestPlanFlagsSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	_, want := runCLI(t, "plan", "--gpu", "L4", "--gpu-count", "2", "--tensor-parallel-size", "2", "--max-model-len", "16384",
		"--kv-cache-dtype", "fp8", "--enforce-eager", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096")
	code, got := post(t, srv.URL+"/api/plan", `{"gpu": "L4", "gpu_count": 2, "command": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096",
		"flags": {"tensor-parallel-size": "2", "max-model-len": "16384", "kv-cache-dtype": "fp8"}, "enforce_eager": true}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
	}
	if !bytes.Contains(got, []byte(`"max_model_len": 16384`)) {
		t.Errorf("the flag did not win over the pasted command: %s", got)
	}
}

func TestAllGPUsSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	_, want := runCLI(t, "plan", "--all-gpus", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4", "-o", "json")
	code, got := post(t, srv.URL+"/api/plan", `{"model": "meta-llama/Llama-3.1-70B-Instruct", "flags": {"tensor-parallel-size": "4"}, "all_gpus": true}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %.400s\nCLI: %.400s", code, got, want)
	}
	var rows []report.GPURow
	if err := json.Unmarshal(got, &rows); err != nil {
		t.Fatal(err)
	}
	// 70B in bf16 is 141 GB of weights: 4 × L4 (4 × 22 GiB) cannot hold
	// it, 4 × H100-80GB can.
	fits := map[string]bool{}
	for _, r := range rows {
		fits[r.GPU] = r.Fits
	}
	if fits["L4"] || !fits["H100-80GB"] {
		t.Errorf("4 × L4 fits %t (want false), 4 × H100-80GB fits %t (want true)", fits["L4"], fits["H100-80GB"])
	}
}

func TestCatalogsSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	for _, c := range []struct{ path, cmd string }{{"/api/gpus", "gpus"}, {"/api/models", "models"}} {
		_, want := runCLI(t, c.cmd, "-o", "json")
		code, _, got := get(t, srv.URL+c.path)
		if code != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: status %d, differs from `headroom %s -o json`", c.path, code, c.cmd)
		}
	}
	_, _, got := get(t, srv.URL+"/api/gpus")
	var cat report.GPUCatalog
	if err := json.Unmarshal(got, &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Devices) < 30 || len(cat.SKUs) == 0 || len(cat.MIG) == 0 {
		t.Errorf("%d devices, %d instance types, %d MIG slices", len(cat.Devices), len(cat.SKUs), len(cat.MIG))
	}
}

// An uploaded config.json plans like the catalog's model: Qwen3-8B on
// H100-80GB at 0.95 with vLLM 0.19.0 logged 418,688 KV tokens (the CSV's
// row 52); the weights come from the architecture, so allow 1%.
func TestPlanUploadedConfig(t *testing.T) {
	srv := newServer(t)
	cfg, err := os.ReadFile("testdata/Qwen3-8B-config.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"model": "my-qwen", "config": string(cfg), "gpu": "H100-80GB", "vllm_version": "0.19.0",
		"flags": map[string]string{"max-model-len": "8192", "gpu-memory-utilization": "0.95"}})
	code, got := post(t, srv.URL+"/api/plan", string(body))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, got)
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if e := math.Abs(float64(r.KVCacheTokens)/418688 - 1); r.Model.Name != "my-qwen" || e > 0.01 {
		t.Errorf("model %q, %d KV tokens: %.2f%% off the 418,688 logged", r.Model.Name, r.KVCacheTokens, e*100)
	}
}

// The doctor box: the same findings as `headroom doctor FILE -o json`
// (the evidence's source name differs: "pasted" against the path).
func TestDoctorMatchesCLI(t *testing.T) {
	srv := newServer(t)
	text, err := os.ReadFile("testdata/oom.txt")
	if err != nil {
		t.Fatal(err)
	}
	code, want := runCLI(t, "doctor", "testdata/oom.txt", "--gpu", "H100-80GB", "-o", "json", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")
	if code != 1 {
		t.Fatalf("doctor found nothing in the OOM (exit %d)", code)
	}
	body, _ := json.Marshal(map[string]any{"text": string(text), "gpu": "H100-80GB", "command": "vllm serve meta-llama/Llama-3.1-8B-Instruct"})
	status, got := post(t, srv.URL+"/api/doctor", string(body))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, got)
	}
	got = bytes.ReplaceAll(got, []byte(`"pasted"`), []byte(`"testdata/oom.txt"`))
	if !bytes.Equal(got, want) {
		t.Errorf("API and CLI differ:\nAPI: %s\nCLI: %s", got, want)
	}
}

// The simulation panel shows `headroom simulate -o json` for the same
// plan and traffic. The page asks for about 60 windows (--window).
func TestSimulateSameBytesAsCLI(t *testing.T) {
	srv := newSimServer(t)
	_, want := runCLI(t, "simulate", "-o", "json", "--gpu", "L4", "--max-model-len", "16384", "--offline",
		"--rate", "2", "--duration", "60s", "--window", "1s", "--prompt-tokens", "fixed:1024", "--output-tokens", "fixed:128",
		"--burst", "20x8000@30s", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct")
	code, got := post(t, srv.URL+"/api/simulate", `{"plan": {"gpu": "L4", "command": "vllm serve Qwen/Qwen2.5-7B-Instruct", "flags": {"max-model-len": "16384"}},
		"rate": 2, "duration_s": 60, "prompt_tokens": 1024, "output_tokens": 128, "bursts": ["20x8000@30s"]}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %.600s\nCLI: %.600s", code, got, want)
	}
	var r struct {
		Requests int64 `json:"requests"`
		Series   []struct {
			KVUsage float64 `json:"kv_usage"`
		} `json:"series"`
	}
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	// 2/s for 60 s is about 120 Poisson arrivals, plus the burst's 20.
	if r.Requests < 100 || r.Requests > 180 || len(r.Series) < 50 {
		t.Errorf("%d requests, %d windows", r.Requests, len(r.Series))
	}
	// The chat endpoint, as --endpoint chat says it.
	_, want = runCLI(t, "simulate", "-o", "json", "--gpu", "L4", "--offline", "--rate", "2", "--duration", "20s", "--window", "1s",
		"--prompt-tokens", "fixed:1024", "--output-tokens", "fixed:128", "--endpoint", "chat", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct")
	code, got = post(t, srv.URL+"/api/simulate", `{"plan": {"gpu": "L4", "command": "vllm serve Qwen/Qwen2.5-7B-Instruct"},
		"rate": 2, "duration_s": 20, "prompt_tokens": 1024, "output_tokens": 128, "endpoint": "chat"}`)
	if code != http.StatusOK || !bytes.Equal(got, want) || !bytes.Contains(got, []byte("to /v1/chat/completions")) {
		t.Fatalf("chat: status %d; API and CLI differ or say no chat:\nAPI: %.600s\nCLI: %.600s", code, got, want)
	}
}

// The capacity form's answer is `headroom capacity -o json` for the same
// plan, options, traffic and SLO.
func TestCapacitySameBytesAsCLI(t *testing.T) {
	srv := newSimServer(t)
	_, want := runCLI(t, "capacity", "-o", "json", "--gpu", "H100-80GB,L40S", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--offline",
		"--rate", "2", "--peak-rate", "12", "--period", "40m", "--duration", "40m", "--window", "10m", "--prompt-tokens", "fixed:1024", "--output-tokens", "fixed:128",
		"--slo", "ttft_p99=2s,tpot_p99=100ms", "--price", "L40S=1.5")
	code, got := post(t, srv.URL+"/api/capacity", `{"plan": {"model": "meta-llama/Llama-3.1-8B-Instruct"}, "gpus": ["H100-80GB", "L40S"],
		"rate": 2, "peak_rate": 12, "period_s": 2400, "duration_s": 2400, "window_s": 600, "prompt_tokens": 1024, "output_tokens": 128,
		"slo": "ttft_p99=2s,tpot_p99=100ms", "prices": {"L40S": 1.5}}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %.600s\nCLI: %.600s", code, got, want)
	}
	var r struct {
		Best    string `json:"best"`
		Options []struct {
			Windows []struct {
				Replicas int `json:"replicas"`
			} `json:"windows"`
		} `json:"options"`
	}
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if r.Best == "" || len(r.Options) != 2 || len(r.Options[0].Windows) != 4 {
		t.Errorf("best %q, %d options", r.Best, len(r.Options))
	}
}

func TestCapacityBadInput(t *testing.T) {
	srv := newSimServer(t)
	plan := `"plan": {"model": "meta-llama/Llama-3.1-8B-Instruct"}, "prompt_tokens": 10, "output_tokens": 10`
	cases := []struct{ name, body, says string }{
		{"no GPU", `{` + plan + `, "rate": 1, "duration_s": 60, "slo": "ttft_p99=1s"}`, "gpus"},
		{"unknown GPU", `{` + plan + `, "gpus": ["H1OO"], "rate": 1, "duration_s": 60, "slo": "ttft_p99=1s"}`, "H100"},
		{"price of an unknown GPU", `{` + plan + `, "gpus": ["L4"], "rate": 1, "duration_s": 60, "slo": "ttft_p99=1s", "prices": {"H999": 1}}`, "H999"},
		{"no SLO", `{` + plan + `, "gpus": ["L4"], "rate": 1, "duration_s": 60}`, "slo"},
		{"too many requests", `{` + plan + `, "gpus": ["L4"], "rate": 1, "peak_rate": 100, "duration_s": 86400, "slo": "ttft_p99=1s"}`, "at most"},
		{"no requests", `{` + plan + `, "gpus": ["L4"], "rate": 0.001, "duration_s": 60, "slo": "ttft_p99=1s"}`, "no requests"},
		{"bad router", `{` + plan + `, "gpus": ["L4"], "rate": 1, "duration_s": 60, "slo": "ttft_p99=1s", "router": "random"}`, "router"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, got := post(t, srv.URL+"/api/capacity", c.body)
			checkError(t, code, got, http.StatusBadRequest, c.says)
		})
	}
}

func TestSimulateBadInput(t *testing.T) {
	srv := newSimServer(t)
	plan := `"plan": {"gpu": "L4", "model": "Qwen/Qwen2.5-7B-Instruct"}`
	cases := []struct{ name, body, says string }{
		{"a request log", `{"plan": {"gpu": "L4", "model": "Qwen/Qwen2.5-7B-Instruct", "command": "vllm serve Qwen/Qwen2.5-7B-Instruct --requests /etc/passwd"}, "rate": 0, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10}`, "no traffic"},
		{"no traffic", `{` + plan + `, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10}`, "no traffic"},
		{"too many requests", `{` + plan + `, "rate": 1000, "duration_s": 3600, "prompt_tokens": 10, "output_tokens": 10}`, "at most"},
		{"bad burst", `{` + plan + `, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10, "bursts": ["lots"]}`, "COUNTxTOKENS"},
		{"bad endpoint", `{` + plan + `, "rate": 1, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10, "endpoint": "embeddings"}`, "use completions or chat"},
		{"no tokens", `{` + plan + `, "rate": 1, "duration_s": 10}`, "prompt_tokens"},
		{"uploaded config", `{"plan": {"gpu": "L4", "config": "{}"}, "rate": 1, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10}`, "config.json"},
		{"unknown model", `{"plan": {"gpu": "L4", "model": "no/such-model"}, "rate": 1, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10}`, "no/such-model"},
		{"server's disk", `{"plan": {"gpu": "L4", "model": "/etc"}, "rate": 1, "duration_s": 10, "prompt_tokens": 10, "output_tokens": 10}`, "does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, got := post(t, srv.URL+"/api/simulate", c.body)
			checkError(t, code, got, http.StatusBadRequest, c.says)
		})
	}
}

// Bad input is a 4xx with one line of JSON, never a 500.
func TestBadInput(t *testing.T) {
	srv := newServer(t)
	cases := []struct {
		name, path, body string
		code             int
		says             string
	}{
		{"not JSON", "/api/plan", `{"gpu": `, 400, "not the JSON object"},
		{"unknown field", "/api/plan", `{"gpus": "L4"}`, 400, `unknown field "gpus"`},
		{"two objects", "/api/plan", `{} {}`, 400, "more than one"},
		{"no model", "/api/plan", `{"gpu": "L4"}`, 400, "no model"},
		{"no GPU", "/api/plan", `{"model": "meta-llama/Llama-3.1-8B-Instruct"}`, 400, "no GPU"},
		{"unknown GPU", "/api/plan", `{"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H1OO"}`, 400, "H100"},
		{"unknown model", "/api/plan", `{"model": "meta-llama/Llama-3.1-8B-Instruc", "gpu": "L4"}`, 400, "Llama-3.1-8B-Instruct"},
		{"server's disk", "/api/plan", `{"model": "/etc", "gpu": "L4"}`, 400, "does not exist"},
		{"unterminated quote", "/api/plan", `{"gpu": "L4", "command": "vllm serve 'x"}`, 400, "command"},
		{"bad flag name", "/api/plan", `{"gpu": "L4", "model": "x", "flags": {"--max-model-len": "1"}}`, 400, "without dashes"},
		{"bad flag value", "/api/plan", `{"gpu": "L4", "command": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len lots"}`, 400, "max-model-len"},
		{"negative count", "/api/plan", `{"gpu": "L4", "model": "x", "gpu_count": -1}`, 400, "positive"},
		{"bad policy", "/api/plan", `{"gpu": "L4", "model": "x", "policy": "yolo"}`, 400, "policy"},
		{"bad config", "/api/plan", `{"gpu": "L4", "config": "{\"hidden_size\": -4}"}`, 400, ""},
		{"bad version", "/api/plan", `{"gpu": "L4", "model": "meta-llama/Llama-3.1-8B-Instruct", "vllm_version": "one"}`, 400, "version"},
		{"bad install", "/api/plan", `{"gpu": "L4", "model": "meta-llama/Llama-3.1-8B-Instruct", "vllm_install": "conda"}`, 400, "--vllm-install"},
		{"bad upgrade_to", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "upgrade_to": "next"}`, 400, "upgrade_to"},
		{"upgrade_to 0.0.0 (it became the default)", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "upgrade_to": "0.0.0"}`, 400, "older than vLLM's first release"},
		{"upgrade_to 1e308", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "upgrade_to": "1e308"}`, 400, "PEP 440 suffix"},
		{"vllm_version 5", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "vllm_version": "5"}`, 400, "is one number"},
		{"bad max_kv_loss", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "upgrade_to": "0.21.0", "max_kv_loss": "120%"}`, 400, "max_kv_loss"},
		{"max_kv_loss alone", "/api/plan", `{"gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_kv_loss": "20%"}`, 400, "needs upgrade_to"},
		{"upgrade on all GPUs", "/api/plan", `{"model": "meta-llama/Llama-3.1-8B-Instruct", "all_gpus": true, "upgrade_to": "0.21.0"}`, 400, "one deployment"},
		{"empty doctor", "/api/doctor", `{"text": "  "}`, 400, "no evidence"},
		{"nothing recognised", "/api/doctor", `{"text": "hello"}`, 400, "nothing recognised"},
		{"no such endpoint", "/api/nope", `{}`, 404, "no such API endpoint"},
		{"path not clean (the mux would redirect, without JSON)", "/api/./plan", `{}`, 404, "no such API endpoint"},
		{"empty simulation", "/api/simulate", `{}`, 400, "duration_s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, got := post(t, srv.URL+c.path, c.body)
			checkError(t, code, got, c.code, c.says)
		})
	}
}

func checkError(t *testing.T, code int, got []byte, wantCode int, says string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("status %d, want %d: %s", code, wantCode, got)
	}
	var e struct {
		Error string `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || strings.Contains(e.Error, "\n") {
		t.Errorf("not one line of {\"error\"}: %s (%v)", got, err)
	}
	if !strings.Contains(e.Error, says) {
		t.Errorf("error %q does not say %q", e.Error, says)
	}
}

func TestMethodsAndLimits(t *testing.T) {
	srv := newServer(t)
	code, _, got := get(t, srv.URL+"/api/plan")
	checkError(t, code, got, http.StatusMethodNotAllowed, "POST")
	code, got = post(t, srv.URL+"/api/gpus", "{}")
	checkError(t, code, got, http.StatusMethodNotAllowed, "GET")

	// 1 MiB of config.json is refused before it is parsed.
	big := `{"gpu": "L4", "config": "` + strings.Repeat("x", 1<<20) + `"}`
	code, got = post(t, srv.URL+"/api/plan", big)
	checkError(t, code, got, http.StatusRequestEntityTooLarge, "1 MiB")
}

// The page is served from the binary with a policy that allows only its
// own files: no inline scripts, no other origins.
func TestPageAndHeaders(t *testing.T) {
	srv := newServer(t)
	code, h, page := get(t, srv.URL+"/")
	if code != http.StatusOK || !bytes.Contains(page, []byte(`<script src="app.js"`)) {
		t.Fatalf("status %d, page without its script file: %.300s", code, page)
	}
	if bytes.Contains(page, []byte("<script>")) || bytes.Contains(page, []byte("http://")) || bytes.Contains(page, []byte("https://")) {
		t.Error("the page has an inline script or a link to another origin")
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("CSP %q, nosniff %q", csp, h.Get("X-Content-Type-Options"))
	}
	for _, f := range []struct{ path, ctype string }{{"/app.js", "text/javascript"}, {"/style.css", "text/css"}} {
		code, h, _ := get(t, srv.URL+f.path)
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), f.ctype) {
			t.Errorf("%s: status %d, Content-Type %q", f.path, code, h.Get("Content-Type"))
		}
	}
}

func TestServerTimeouts(t *testing.T) {
	s := web.NewServer("127.0.0.1:0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("a timeout is unset: %+v", s)
	}
}

// gpus_per_node is --gpus-per-node: 70B on 4 A10Gs in nodes of 4 gets the
// multi-node fix tp 4 × pp 4 (internal/cli TestPlanMultiNode), the same
// bytes as the CLI's.
func TestPlanGPUsPerNodeSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	_, want := runCLI(t, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A10G", "--gpu-count", "4", "--gpus-per-node", "4",
		"--max-model-len", "8192", "--vllm-version", "0.19.0", "-o", "json")
	code, got := post(t, srv.URL+"/api/plan", `{"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "A10G", "gpu_count": 4, "gpus_per_node": 4,
		"vllm_version": "0.19.0", "flags": {"max-model-len": "8192"}}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
	}
	if !bytes.Contains(got, []byte(`"--pipeline-parallel-size",`)) {
		t.Errorf("no pipeline-parallel fix: %s", got)
	}
	if code, _ := post(t, srv.URL+"/api/plan", `{"gpu": "L4", "model": "x", "gpus_per_node": -1}`); code != http.StatusBadRequest {
		t.Errorf("gpus_per_node -1: status %d", code)
	}
}

// The upgrade preflight on the page is plan --upgrade-to's: the same bytes.
// Llama-3.1-8B-Instruct on H100-80GB from 0.20.0 to 0.21.0 with each
// release's default utilization: 0.21.0 moves the default from 0.90 to 0.92
// and the CUDA-graph estimate into the budget (PR #38284), both sides
// start, and the verdict is "ok". Pinned at 0.90 with max_kv_loss 1%, the
// estimate (0.89 GiB of a 54 GiB pool, about 1.6% of the tokens) now comes
// out of the KV cache: "loses-kv", which the CLI exits 1 for and the API
// answers 200 with, as it answers a plan that does not fit.
func TestUpgradeSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	cases := []struct {
		name     string
		args     []string
		body     string
		exit     int
		verdict  string
		lossOver float64
	}{
		{"defaults", []string{"--max-model-len", "8192"},
			`{"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-80GB", "vllm_version": "0.20.0", "flags": {"max-model-len": "8192"}, "upgrade_to": "0.21.0"}`,
			0, "ok", -1},
		{"pinned utilization", []string{"--max-model-len", "8192", "--gpu-memory-utilization", "0.90", "--max-kv-loss", "1%"},
			`{"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-80GB", "vllm_version": "0.20.0", "flags": {"max-model-len": "8192", "gpu-memory-utilization": "0.90"}, "upgrade_to": "0.21.0", "max_kv_loss": "1%"}`,
			1, "loses-kv", 0.01},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exit, want := runCLI(t, append([]string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--vllm-version", "0.20.0",
				"--upgrade-to", "0.21.0", "-o", "json"}, c.args...)...)
			code, got := post(t, srv.URL+"/api/plan", c.body)
			if code != http.StatusOK || !bytes.Equal(got, want) {
				t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
			}
			if exit != c.exit {
				t.Errorf("CLI exit %d, want %d", exit, c.exit)
			}
			var r report.UpgradeReport
			if err := json.Unmarshal(got, &r); err != nil {
				t.Fatal(err)
			}
			if r.Verdict != c.verdict || r.From.VLLMVersion != "0.20.0" || r.To.VLLMVersion != "0.21.0" || !r.From.Fits || !r.To.Fits {
				t.Errorf("verdict %s (%s), %s fits %t, %s fits %t", r.Verdict, r.Why, r.From.VLLMVersion, r.From.Fits, r.To.VLLMVersion, r.To.Fits)
			}
			if r.KVLoss <= c.lossOver {
				t.Errorf("KV loss %.4f, want over %.2f", r.KVLoss, c.lossOver)
			}
			graphs := false
			for _, ch := range r.Changes {
				graphs = graphs || ch.Term == "per_gpu.cudagraph_in_budget" && ch.From == "false" && ch.To == "true"
			}
			if !graphs {
				t.Errorf("no change of per_gpu.cudagraph_in_budget from false to true: %+v", r.Changes)
			}
		})
	}
}

// The page never reads the server's disk: a pasted --config stays a flag
// it does not model, where the command line reads the same file
// (TestPlanReadsConfigFile in internal/cli).
func TestPlanDoesNotReadConfigFile(t *testing.T) {
	srv := newServer(t)
	path := t.TempDir() + "/config.yaml"
	if err := os.WriteFile(path, []byte("max-model-len: 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, got := post(t, srv.URL+"/api/plan", `{"gpu": "H100-80GB", "vllm_version": "0.19.0", "command": "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --config `+path+`"}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, got)
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if r.Settings.MaxModelLen != 8192 || bytes.Contains(got, []byte("config.yaml read")) || !bytes.Contains(got, []byte("--config: flags of a YAML file, read where")) {
		t.Errorf("max-model-len %d: the server read the file, or did not say it left it: %s", r.Settings.MaxModelLen, got)
	}
}

// The page takes a --config file's YAML as text, and plans what the CLI
// plans reading the same file: the same bytes. Without a --config in the
// command the text is refused (400), in one line.
func TestPlanConfigTextSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	t.Chdir(t.TempDir())
	const yaml = "max-model-len: 4096\nmax-num-seqs: 64\n"
	if err := os.WriteFile("serve.yaml", []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	command := "vllm serve Qwen/Qwen3-8B --config serve.yaml --max-num-seqs 32"
	_, want := runCLI(t, append([]string{"plan", "--gpu", "L4", "--vllm-version", "0.19.0", "-o", "json", "--"}, strings.Fields(command)...)...)
	body, err := json.Marshal(map[string]string{"gpu": "L4", "vllm_version": "0.19.0", "command": command, "vllm_config": yaml})
	if err != nil {
		t.Fatal(err)
	}
	code, got := post(t, srv.URL+"/api/plan", string(body))
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
	}
	var r report.Report
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if r.Settings.MaxModelLen != 4096 || r.Settings.MaxNumSeqs != 32 {
		t.Errorf("max-model-len %d (the file's 4096), max-num-seqs %d (the line's 32)", r.Settings.MaxModelLen, r.Settings.MaxNumSeqs)
	}
	code, got = post(t, srv.URL+"/api/plan", `{"gpu": "L4", "command": "vllm serve Qwen/Qwen3-8B", "vllm_config": "max-model-len: 4096"}`)
	if code != http.StatusBadRequest || !bytes.Contains(got, []byte("add --config FILE to the command")) {
		t.Errorf("vllm_config without --config: status %d, %s", code, got)
	}
}
