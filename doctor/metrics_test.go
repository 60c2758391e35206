package doctor

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
)

// metrics-cache-config.txt is a V1 server's /metrics: every series names
// model_name="Qwen/Qwen2.5-7B-Instruct", and vllm:cache_config_info says
// gpu_memory_utilization="0.9", num_gpu_blocks="5984", block_size="16".
// What the server says of itself is the deployment: the plan runs at 0.9
// (not the release's default), with the server's KV cache, 5,984 × 16 =
// 95,744 tokens, and says the numbers came from /metrics.
func TestMetricsDescribeTheServer(t *testing.T) {
	l4, err := gpu.Resolve("L4")
	if err != nil {
		t.Fatal(err)
	}
	d := Diagnose(readCorpus(t, "metrics-cache-config.txt"), Options{ResolveModel: catalogModel, GPU: l4, HasGPU: true})
	dep := d.Deployment
	if dep.Model != "Qwen/Qwen2.5-7B-Instruct" || !strings.Contains(dep.ModelSource, "/metrics: vllm:cache_config_info, model_name") {
		t.Errorf("model %q from %q", dep.Model, dep.ModelSource)
	}
	p := d.Memory.Plan
	if p == nil {
		t.Fatalf("no plan; notes %v", d.Notes)
	}
	if p.Utilization != 0.9 || p.KVTokens != 95744 || p.Sources.KVTokens != SourceMetrics || p.Sources.KVCache != SourceMetrics {
		t.Errorf("plan at %.2f, %d KV tokens from %q: want 0.90 and 95,744 from %q", p.Utilization, p.KVTokens, p.Sources.KVTokens, SourceMetrics)
	}
	if !strings.Contains(dep.Measured, "vllm:cache_config_info") {
		t.Errorf("measured from %q", dep.Measured)
	}

	// A server older than 0.9.2 has no cache_config_info, but its
	// model_name labels still name the model.
	d = Diagnose(readCorpus(t, "metrics-old.txt"), Options{ResolveModel: catalogModel})
	if d.Deployment.Model != "meta-llama/Llama-3.1-8B-Instruct" || slices.ContainsFunc(d.Notes, func(n string) bool { return strings.HasPrefix(n, "no model named") }) {
		t.Errorf("model %q, notes %v", d.Deployment.Model, d.Notes)
	}
	if u := d.Memory.MaxKVUsage; u == nil || *u != 0.31 {
		t.Errorf("KV usage %v, want 0.31", u)
	}
}

// metrics-bad.txt: a NaN KV usage, a negative queue and 1e308
// preemptions. None is a figure: the memory section gives none (null in
// JSON, never 0), the sample's values are null, and the input's note
// says what was left out.
func TestMetricsLeftOutAreNull(t *testing.T) {
	ev := readCorpus(t, "metrics-bad.txt")
	d := Diagnose(ev, Options{ResolveModel: catalogModel})
	if d.Memory.MaxKVUsage != nil || d.Memory.Preemptions != nil {
		t.Errorf("KV usage %v, preemptions %v: want no figure", d.Memory.MaxKVUsage, d.Memory.Preemptions)
	}
	notes := strings.Join(ev.Inputs[0].Notes, " ")
	for _, name := range []string{"vllm:gpu_cache_usage_perc is NaN", "vllm:num_requests_waiting is -5", "vllm:num_preemptions_total is 1e+308"} {
		if !strings.Contains(notes, name) {
			t.Errorf("notes %q lack %q", notes, name)
		}
	}
	b, err := json.Marshal(d.Memory)
	if err != nil {
		t.Fatal(err)
	}
	for _, null := range []string{`"preemptions":null`, `"max_kv_cache_usage":null`, `"kv_cache_usage":null`, `"num_requests_waiting":null`, `"num_preemptions_total":null`} {
		if !strings.Contains(string(b), null) {
			t.Errorf("memory JSON lacks %s: %s", null, b)
		}
	}
}
