package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/internal/testkit"
)

var servingAddr = regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+/metrics)`)

// startExporter runs `headroom exporter` until the test ends and returns
// its metrics URL.
func startExporter(t *testing.T, args ...string) (metricsURL string, stderr *testkit.SyncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out testkit.SyncBuffer
	stderr = &testkit.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"exporter", "--listen", "127.0.0.1:0"}, args...), Env{
			Stdout: &out, Stderr: stderr, Getenv: func(k string) string { return offline[k] }})
	}()
	stop = func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(10 * time.Second):
			t.Fatal("exporter did not stop")
			return -1
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingAddr.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stderr, stop
		}
		select {
		case code := <-done:
			t.Fatalf("exporter exited %d: %s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	t.Fatalf("exporter never served: %s", stderr.String())
	return "", nil, nil
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExporterCommand(t *testing.T) {
	vllmSrv := telemetryVLLM(t, "vllm-0.11.0-dp2.txt")
	smi := telemetryFakeSMI(t, "query-gpu-570-nounits.csv", "compute-apps-empty.csv")
	url, stderr, stop := startExporter(t, "--metrics-url", vllmSrv.URL, "--nvidia-smi", smi, "--min-free", "4GiB")
	body := getText(t, url)
	// The two-engine page: fuller engine's KV 0.97; 6 waiting, 45 running.
	// GPU: 6399 MiB free - 4096 MiB required = 2303 MiB = 2414870528 bytes.
	for _, want := range []string{
		"headroom_up 1",
		"headroom_kv_cache_usage 0.97",
		"headroom_queue_depth 6",
		"headroom_requests_running 45",
		"headroom_gpu_memory_required_free_bytes 4.294967296e+09",
		`headroom_gpu_memory_headroom_bytes{gpu="0",uuid="GPU-b2c6f0d4-1e3a-7c59-a8b4-6d2e0f1c3a57"} 2.414870528e+09`,
		"headroom_oom_risk ",
	} {
		if !strings.Contains(body, want+"\n") && !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d after cancel: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("no graceful stop in the log: %s", stderr.String())
	}
}

func TestExporterWithoutVLLMYet(t *testing.T) {
	// vLLM starts after its sidecar: the exporter serves, headroom_up 0.
	down := telemetryVLLM(t, "not metrics\n")
	url, _, stop := startExporter(t, "--metrics-url", down.URL+"/nope", "--no-gpu")
	defer stop()
	body := getText(t, url)
	if !strings.Contains(body, "headroom_up 0") || strings.Contains(body, "headroom_kv_cache_usage") {
		t.Errorf("/metrics:\n%s", body)
	}
}

func TestExporterBadInput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"exporter"}, "no --url"},
		{[]string{"exporter", "--metrics-url", "127.0.0.1:1", "--no-gpu", "--listen", "256.0.0.1:99999"}, "cannot listen"},
		{[]string{"exporter", "--metrics-url", "127.0.0.1:1", "--no-gpu", "--min-free", "lots"}, "--min-free"},
		{[]string{"exporter", "--metrics-url", "x:1", "--nvidia-smi", "/nonexistent/nvidia-smi"}, "no NVIDIA GPU"},
	}
	for _, tt := range tests {
		code, _, errs := run(t, offline, tt.args...)
		if code != ExitBadInput || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, errs)
		}
	}
}

// Given the vLLM command, the exporter serves the plan `headroom plan -o
// json` prints for it: the same blocks, utilization and parts.
func TestExporterServesThePlan(t *testing.T) {
	command := []string{"--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"}
	code, out, errs := run(t, offline, append([]string{"plan", "--gpu", "H100-80GB", "--vllm-version", "0.11.0", "-o", "json"}, command...)...)
	if code != ExitFits {
		t.Fatalf("plan exit %d: %s", code, errs)
	}
	var plan struct {
		NumGPUBlocks int64 `json:"num_gpu_blocks"`
		PerGPU       struct {
			WeightsGiB float64 `json:"weights_gib"`
		} `json:"per_gpu"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	vllmSrv := telemetryVLLM(t, "vllm-0.11.0-v1.txt")
	url, _, stop := startExporter(t, append([]string{"--metrics-url", vllmSrv.URL, "--no-gpu", "--gpu", "H100-80GB", "--vllm-version", "0.11.0"}, command...)...)
	defer stop()
	body := getText(t, url)
	for _, want := range []string{
		fmt.Sprintf("headroom_plan_num_gpu_blocks %d", plan.NumGPUBlocks),
		"headroom_plan_gpu_memory_utilization 0.9",
		// The recorded server's vllm:cache_config_info.
		"headroom_vllm_num_gpu_blocks 29751",
		"headroom_vllm_gpu_memory_utilization 0.9",
		"headroom_vllm_restarts_total 0",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	weights := regexp.MustCompile(`headroom_plan_memory_bytes\{part="weights"\} (\S+)`).FindStringSubmatch(body)
	if weights == nil {
		t.Fatalf("no planned weights in:\n%s", body)
	}
	w, _ := strconv.ParseFloat(weights[1], 64)
	if gib := math.Round(w/(1<<30)*100) / 100; gib != plan.PerGPU.WeightsGiB {
		t.Errorf("planned weights %.2f GiB served, plan -o json says %.2f", gib, plan.PerGPU.WeightsGiB)
	}
}

// TestExporterWithoutGPUServesVLLM: with no GPU to read and none named,
// the vLLM command given serves the vLLM gauges, not an error; one
// warning line says the plan's are not served and how to get them.
func TestExporterWithoutGPUServesVLLM(t *testing.T) {
	vllmSrv := telemetryVLLM(t, "vllm-0.11.0-v1.txt")
	url, stderr, stop := startExporter(t, "--url", vllmSrv.URL, "--no-gpu", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384")
	defer stop()
	body := getText(t, url)
	if !strings.Contains(body, "headroom_up 1\n") || !strings.Contains(body, "headroom_kv_cache_usage ") || strings.Contains(body, "headroom_plan_") {
		t.Errorf("/metrics:\n%s", body)
	}
	if n := strings.Count(stderr.String(), "level=WARN"); n != 1 || !strings.Contains(stderr.String(), "give --gpu") {
		t.Errorf("want one warning naming --gpu, got %d:\n%s", n, stderr.String())
	}
}
