package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/internal/report"
)

var fuzzSeeds = []string{
	`{"gpu": "H100-80GB", "command": "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"}`,
	`{"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": "L4", "gpu_count": 2, "flags": {"tensor-parallel-size": "2"}, "enforce_eager": true}`,
	`{"model": "meta-llama/Llama-3.1-70B-Instruct", "flags": {"tensor-parallel-size": "4"}, "all_gpus": true}`,
	`{"gpu_memory": "24GiB", "model": "mistralai/Mistral-7B-Instruct-v0.3", "policy": "kaito", "typical_context": 2048}`,
	`{"gpu": "A100-80GB:3g.40gb", "config": "{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4}"}`,
	`{"text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "gpu": "L4"}`,
	`{"gpu": "L4", "command": "vllm serve 'x"}`,
	`{"flags": {"--x": "1"}}`,
	`{"plan": {"gpu": "L4", "model": "Qwen/Qwen2.5-7B-Instruct"}, "rate": 2, "duration_s": 60, "prompt_tokens": 1024, "output_tokens": 128, "bursts": ["20x8000@30s"]}`,
	`{"plan": {"gpu": "L4"}, "rate": -1, "duration_s": 1e308, "bursts": ["1x1@1.5s", "x"]}`,
	`{"plan": {"model": "meta-llama/Llama-3.1-8B-Instruct"}, "gpus": ["H100-80GB", "L40S"], "rate": 2, "peak_rate": 8, "period_s": 3600, "duration_s": 3600, "prompt_tokens": 1024, "output_tokens": 128, "slo": "ttft_p99=2s", "prices": {"L40S": 1.5}}`,
	`{"plan": {}, "gpus": ["H999"], "rate": 1e308, "peak_rate": -1, "duration_s": 1, "slo": "ttft=1", "window_s": 1, "router": "x"}`,
	`{"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-80GB", "vllm_version": "0.20.0", "upgrade_to": "0.21.0", "max_kv_loss": "20%"}`,
	`{"model": "x", "gpu": "L4", "upgrade_to": "v0.33", "max_kv_loss": "1e400%", "all_gpus": true}`,
	`{"max_kv_loss": "0.2"}`,
	`{"gpu": "L4", "command": "vllm serve Qwen/Qwen3-8B --config c.yaml", "vllm_config": "max-model-len: 4096\ncompilation-config: {cudagraph_mode: PIECEWISE}\nenable-chunked-prefill: off"}`,
	`{"gpu": "L4", "command": "vllm serve m --config=c.json", "vllm_config": "- [", "flags": {"max-model-len": "1"}}`,
	`[1, 2]`, `null`, `{} {}`, `{"gpu_count": 1e99}`, "",
}

// FuzzDecode: no body makes the decoders panic, and whatever they accept
// is a request the builder can be handed.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if p, err := decodePlan(bytes.NewReader(body)); err == nil {
			if p.req.GPUCount < 0 || p.opt.TypicalContext < 0 || p.opt.Policy == "" {
				t.Errorf("accepted %+v", p)
			}
			if u := p.upgrade; u != nil && (!(u.maxLoss >= 0 && u.maxLoss <= 1) || p.req.AllGPUs) {
				t.Errorf("accepted an upgrade out of bounds: %+v", u)
			}
			for _, fl := range p.req.Flags {
				if fl == "" || fl == "--" {
					t.Errorf("accepted an empty flag: %q", p.req.Flags)
				}
			}
		}
		if d, err := decodeDoctor(bytes.NewReader(body)); err == nil && d.policy == "" {
			t.Errorf("accepted a doctor request without a policy: %+v", d)
		}
		if c, err := decodeCapacity(bytes.NewReader(body)); err == nil {
			w := c.Workload
			if len(c.GPUs) == 0 || len(c.GPUs) > maxCapacityGPUs || len(c.SLO) == 0 || max(w.Rate, w.PeakRate)*w.Duration > maxCapacityRequests ||
				c.MaxReplicas > maxCapacityReplicas || w.Validate() != nil {
				t.Errorf("accepted a capacity request out of bounds: %+v", c)
			}
		}
		if s, err := decodeSimulate(bytes.NewReader(body)); err == nil {
			w := s.Workload
			if w.Duration <= 0 || w.Duration > maxSimSeconds || w.Rate*w.Duration > maxSimRequests || w.Validate() != nil {
				t.Errorf("accepted a simulation out of bounds: %+v", w)
			}
		}
	})
}

// FuzzHandler: the whole API answers any body with JSON and never with a
// 5xx. Simulations are held to a second each (Options.SimulationTime), so
// that /api/simulate and /api/capacity are fuzzed too.
func FuzzHandler(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add("/api/plan", []byte(s))
		f.Add("/api/doctor", []byte(s))
		f.Add("/api/simulate", []byte(s))
	}
	f.Add("/api/simulate", []byte(`{"plan":{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB","flags":{"num-gpu-blocks-override":"400000000"}},"rate":1,"duration_s":10,"prompt_tokens":100,"output_tokens":10}`))
	f.Add("/api/capacity", []byte(`{"plan": {"model": "meta-llama/Llama-3.1-8B-Instruct"}, "gpus": ["L4"], "rate": 1, "duration_s": 60, "slo": "ttft_p99=1s", "prompt_tokens": 10, "output_tokens": 10}`))
	f.Add("/api/capacity", []byte(`{"plan": {"model": "Qwen/Qwen2.5-7B-Instruct"}, "gpus": ["A100-80GB"], "rate": 0.5, "peak_rate": 50, "period_s": 600, "duration_s": 600, "window_s": 60, "prompt_tokens": 4000, "output_tokens": 1, "slo": "e2e_p50=100ms", "router": "least-outstanding", "max_replicas": 3}`))
	h := Handler(Options{Env: report.Env{Getenv: func(string) string { return "1" }}, Offline: true, SimulationTime: time.Second})
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		if !strings.HasPrefix(path, "/api/") || strings.ContainsAny(path, " ?#%\x00") {
			return
		}
		req, err := http.NewRequest(http.MethodPost, "http://x"+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Errorf("%s %q: status %d: %s", path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Errorf("%s %q: not JSON: %s", path, body, rec.Body)
		}
	})
}
