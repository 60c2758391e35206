package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

func TestKAITODefaults(t *testing.T) {
	tests := []struct {
		name        string
		gpus, nodes int
		device      string
		heads       int
		given       vllm.Settings
		tp, pp      int
		util        float64
		maxLen      int
	}{
		// One A10: KAITO's A10 utilization 0.82, max-model-len auto.
		{name: "1 x A10", gpus: 1, nodes: 1, device: "A10", heads: 40, tp: 1, pp: 1, util: 0.82, maxLen: vllm.AutoMaxModelLen},
		// 8 GPUs a node, 28 heads (Qwen2.5-7B): 8 does not divide 28, 4 does.
		{name: "8 GPUs, 28 heads", gpus: 8, nodes: 1, device: "A100-40GB", heads: 28, tp: 4, pp: 1, util: 0.84, maxLen: vllm.AutoMaxModelLen},
		// Two nodes of 8: pipeline parallel over the nodes.
		{name: "2 nodes x 8", gpus: 8, nodes: 2, device: "H100-80GB", heads: 64, tp: 8, pp: 2, util: 0.84, maxLen: vllm.AutoMaxModelLen},
		// The inference config's values win.
		{name: "config sets all", gpus: 4, nodes: 1, device: "A10G", heads: 32,
			given: vllm.Settings{TensorParallelSize: 2, MaxModelLen: 4096, GPUMemoryUtilization: 0.9,
				Set: map[string]bool{vllm.FlagTensorParallelSize: true, vllm.FlagMaxModelLen: true, vllm.FlagGPUMemoryUtilization: true}},
			tp: 2, pp: 1, util: 0.9, maxLen: 4096},
	}
	for _, tc := range tests {
		sel, err := gpu.Resolve(tc.device)
		if err != nil {
			t.Fatal(err)
		}
		sel.Count = tc.gpus
		ev := gpuEvidence{sel: sel, known: true, count: tc.gpus * tc.nodes}
		s := tc.given
		kaitoDefaults(ev)(model.Spec{Heads: tc.heads}, &s)
		if s.TensorParallelSize != tc.tp || s.PipelineParallelSize != tc.pp || s.GPUMemoryUtilization != tc.util || s.MaxModelLen != tc.maxLen {
			t.Errorf("%s: tp %d pp %d util %v max-model-len %d; want %d %d %v %d", tc.name,
				s.TensorParallelSize, s.PipelineParallelSize, s.GPUMemoryUtilization, s.MaxModelLen, tc.tp, tc.pp, tc.util, tc.maxLen)
		}
	}
}

// TestKAITOConfigMapRoundTrip: the ConfigMap KAITOConfigMap writes is a
// ConfigMap Kubernetes reads, named for the model, and its
// inference_config.yaml reads back, as a Workspace's inference config is
// read, to the flags it was written from.
func TestKAITOConfigMapRoundTrip(t *testing.T) {
	args := []string{"--enable-prefix-caching", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "fp8", "--enforce-eager"}
	m, err := KAITOConfigMap("Qwen/Qwen2.5-7B-Instruct", "fits=true", args)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if cm.Kind != "ConfigMap" || cm.Name != "qwen2-5-7b-instruct-inference-params" || cm.Annotations[AnnotationPlan] != "fits=true" {
		t.Errorf("ConfigMap %s %s %v", cm.Kind, cm.Name, cm.Annotations)
	}
	got, err := kaitoConfig([]byte(cm.Data[kaitoConfigKey]))
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxModelLen != 8192 || got.GPUMemoryUtilization != 0.9 || got.KVCacheDtype != "fp8" || !got.EnforceEager ||
		len(got.Extra) != 1 || got.Extra[0] != "--enable-prefix-caching" {
		t.Errorf("read back %+v\n%s", got, cm.Data[kaitoConfigKey])
	}
}
