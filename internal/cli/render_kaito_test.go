package cli

import (
	"bytes"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
	"sigs.k8s.io/yaml"
)

// TestWriteKAITOSwitches: flags without a value, at the end of the list or
// before another flag, become true; the others keep their typed values.
func TestWriteKAITOSwitches(t *testing.T) {
	var r report.Report
	r.Model.Name = "Qwen/Qwen2.5-7B-Instruct"
	r.VLLMArgs = []string{"--enable-prefix-caching", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "fp8", "--enforce-eager"}
	var out bytes.Buffer
	if err := writeKAITO(&out, r); err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(out.Bytes(), &cm); err != nil {
		t.Fatal(err)
	}
	var inner struct {
		VLLM map[string]any `json:"vllm"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["inference_config.yaml"]), &inner); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enable-prefix-caching": true, "max-model-len": float64(8192), "gpu-memory-utilization": 0.9, "kv-cache-dtype": "fp8", "enforce-eager": true}
	for k, v := range want {
		if inner.VLLM[k] != v {
			t.Errorf("%s = %v (%T), want %v\n%s", k, inner.VLLM[k], inner.VLLM[k], v, strings.TrimSpace(out.String()))
		}
	}
	if len(inner.VLLM) != len(want) {
		t.Errorf("vllm section %v, want %v", inner.VLLM, want)
	}
}
