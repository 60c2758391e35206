package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/host"
)

// offloadDeployment is Llama-3.1-8B on an L4 with autofix and a CPU KV
// cache of offload GiB, at a 16Gi memory limit.
func offloadDeployment(t *testing.T, offload string) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-offload
  namespace: llm
  annotations: {headroom.dev/autofix: "true"}
spec:
  selector: {matchLabels: {app: vllm-offload}}
  template:
    metadata: {labels: {app: vllm-offload}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.19.0
        args: [--model, meta-llama/Llama-3.1-8B-Instruct, --max-model-len, "8192", --kv-offloading-size, "` + offload + `"]
        resources:
          limits: {memory: 16Gi, nvidia.com/gpu: "1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "llm", Name: "vllm-offload",
		Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Object: runtime.RawExtension{Raw: raw}}
}

// The webhook never writes a memory limit no node has. vLLM 0.19 pins a
// CPU KV cache per KV tensor, each rounded up to a power of two: Llama-3.1-8B
// has 32 layers, one tensor each, so --kv-offloading-size 20000 is 625 GiB
// a tensor, rounded to 1024 GiB, × 32 = 32768 GiB (32 TiB) of host memory,
// past the 8 TiB bound: /mutate (autofix) patches no memory and /validate
// denies, naming the term and its setting. --kv-offloading-size 4000 is
// 125 GiB a tensor, rounded to 128, × 32 = 4096 GiB: under the bound, so
// autofix sets the limit the host plan needs (more than 4096Gi).
func TestAutofixNeverWritesAnAbsurdLimit(t *testing.T) {
	h := NewHandler(Deps{})
	ctx := context.Background()
	req := offloadDeployment(t, "20000")
	resp := h.Mutate(ctx, req)
	var ops []PatchOp
	if len(resp.Patch) > 0 {
		if err := json.Unmarshal(resp.Patch, &ops); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range ops {
		if strings.Contains(op.Path, "/resources") {
			t.Errorf("autofix wrote %s = %v", op.Path, op.Value)
		}
	}
	v := h.Validate(ctx, req)
	if v.Allowed || v.Result == nil || !strings.Contains(v.Result.Message, `container "vllm": vLLM would hold 32772.01 GiB in host memory (offloaded kv cache 32768.00 GiB`) ||
		!strings.Contains(v.Result.Message, "headroom proposes no memory limit past 8Ti") || !strings.Contains(v.Result.Message, "--kv-offloading-size 20000.00 GiB") {
		t.Fatalf("validate: %+v", v.Result)
	}
	e := h.Check(ctx, req).Evaluation
	if len(e.PodFixes) != 0 || e.Denials[0].Code != CodeHostMemoryBeyondNodes {
		t.Errorf("fixes %+v, denials %+v", e.PodFixes, e.Denials)
	}

	resp = h.Mutate(ctx, offloadDeployment(t, "4000"))
	ops = nil
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	limit := ""
	for _, op := range ops {
		if op.Path == "/spec/template/spec/containers/0/resources/limits/memory" {
			limit, _ = op.Value.(string)
		}
	}
	// The rest: a worker and the server, a few GiB (the plan of 20000
	// above: 32772.01 - 32768 = 4 GiB beside the offload).
	q, err := resource.ParseQuantity(limit)
	if err != nil || q.Value() <= 4096<<30 || q.Value() > 4200<<30 {
		t.Errorf("limit %q, want the 4096 GiB offload and a few GiB more", limit)
	}
}

// The bound itself: a host plan of 8 TiB gets its limit proposed, one
// byte more gets none; the policy that warns keeps it a warning.
func TestMemoryChecksBound(t *testing.T) {
	c := gkeDeployment(nil, nil).Spec.Containers[0]
	spec := gkeDeployment(nil, nil).Spec
	for _, tc := range []struct {
		bytes int64
		fix   bool
	}{{MaxPodMemoryBytes, true}, {MaxPodMemoryBytes + 1, false}} {
		hp := host.Plan{RequiredBytes: tc.bytes, RequiredHighBytes: tc.bytes, MemoryLimitBytes: tc.bytes, MemoryLimit: host.Quantity(tc.bytes)}
		findings, fixes := memoryChecks(spec, 0, c, `container "vllm"`, hp)
		if (len(fixes) == 1) != tc.fix || len(findings) != 1 {
			t.Errorf("%d bytes: findings %+v, fixes %+v", tc.bytes, findings, fixes)
		}
		if !tc.fix && (findings[0].Code != CodeHostMemoryBeyondNodes || !PodPolicyDefault.denies(findings[0].Code) || PodPolicyWarn.denies(findings[0].Code)) {
			t.Errorf("%d bytes: %+v", tc.bytes, findings)
		}
	}
}
