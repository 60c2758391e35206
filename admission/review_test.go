package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"headroom.dev/headroom/vllm"
)

// fixture reads testdata/reviews/NAME.json.
func fixture(t testing.TB, name string) *admissionv1.AdmissionReview {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "reviews", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeReview(body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// fixtureNames lists the review fixtures, by the names fixture takes.
func fixtureNames(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "reviews", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no review fixtures: %v", err)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".json")
	}
	return names
}

// fakeCluster is the API server the unit tests read from: the model config
// and KAITO inference config ConfigMaps, a CPU-only HPA and the target of
// the HPA fixtures.
func fakeCluster(t testing.TB) Cluster {
	t.Helper()
	mixtral, err := os.ReadFile(filepath.Join("testdata", "mixtral-8x7b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cpu := int32(70)
	target := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "vllm-qwen", Namespace: "llm"}}
	target.Spec.Template.Spec.Containers = []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.19.0", Args: []string{"--model", "Qwen/Qwen2.5-7B-Instruct"}}}
	return Cluster{Client: fake.NewSimpleDynamicClient(testScheme(t),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "acme-moe-config", Namespace: "llm"}, Data: map[string]string{keyConfig: string(mixtral)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vllm-flags", Namespace: "llm"}, Data: map[string]string{"flags.yaml": "max-model-len: 8192\n"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "phi4-inference", Namespace: "llm"}, Data: map[string]string{
			kaitoConfigKey: "max_probe_steps: 6\nvllm:\n  max-model-len: 16384\n  cpu-offload-gb: 0\n"}},
		&autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "llm-cpu", Namespace: "llm"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "deployment-hpa"},
				MaxReplicas:    4,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &cpu}}}},
			}},
		&target,
	)}
}

// testScheme knows the objects of fakeCluster, for the fake client to
// store them as the API server would.
func testScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestHandler(t testing.TB) *Handler {
	c := fakeCluster(t)
	return NewHandler(Deps{ConfigMaps: c, HPAs: c, PodTemplates: c})
}

// contains reports whether some string of list contains sub.
func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestValidateFixtures(t *testing.T) {
	tests := []struct {
		fixture string
		allowed bool
		// denial holds substrings of the denial message; warnings
		// substrings that some warning must contain.
		denial   []string
		warnings []string
		// quiet means no warning at all.
		quiet bool
	}{
		// The calibration set (memory/testdata/vllm-0.19.0-h100.csv) has
		// Qwen2.5-7B-Instruct starting on an H100-80GB at max-model-len 8192.
		{fixture: "deployment-fits", allowed: true, quiet: true},
		{fixture: "deployment-weights", denial: []string{"meta-llama/Llama-3.1-70B-Instruct on 1 × L4", "node label node.kubernetes.io/instance-type=g6.xlarge", "weights take", "To fix:"}},
		// 131072 tokens × 128 KiB per token (32 layers × 8 KV heads × 128 ×
		// K and V × 2 bytes = 131072 B) = 16 GiB.
		{fixture: "deployment-kv", denial: []string{"one request of 131072 tokens needs 16.00 GiB of KV cache", "largest context that fits is"}},
		// The same server with --config /etc/vllm/serve.yaml, the file
		// item serve.yaml of ConfigMap vllm-flags (key flags.yaml):
		// max-model-len 8192 from the file, 1 GiB of KV, fits. On an
		// emptyDir the file cannot be read: the line alone is checked (the
		// model's 131072 tokens) and a warning says why.
		{fixture: "deployment-config-file", allowed: true},
		{fixture: "deployment-config-file-unread", denial: []string{"16.00 GiB"}, warnings: []string{`the flags of its --config file are not read (--config /etc/vllm/serve.yaml: volume "flags" is not a ConfigMap`}},
		{fixture: "deployment-tp", denial: []string{"--tensor-parallel-size 3 does not divide the model's 32 attention heads"}},
		{fixture: "deployment-bypass-true", allowed: true, warnings: []string{"bypassed by annotation, would be denied: container \"vllm\"", "16.00 GiB"}},
		{fixture: "deployment-bypass-false", denial: []string{"16.00 GiB"}},
		{fixture: "deployment-bypass-kaito-true", allowed: true, warnings: []string{"bypassed by annotation"}},
		// KAITO bypasses on any value; headroom only on "true".
		{fixture: "deployment-bypass-kaito-yes", denial: []string{"16.00 GiB"}},
		// The pod may land on an A100 or an L4: planned on the L4, where
		// Llama 3.1 8B's full 131072-token context does not fit.
		{fixture: "statefulset-affinity", denial: []string{"1 × L4", "the smallest of 2 allowed values", "largest context that fits"}},
		{fixture: "pod-unknown-model", allowed: true, warnings: []string{`model "/models/acme-chat" is not in headroom's catalog`, AnnotationModelConfig}},
		{fixture: "pod-unknown-gpu", allowed: true, warnings: []string{"cannot tell which GPU it gets", AnnotationGPU}},
		{fixture: "pod-owned", allowed: true, quiet: true},
		// A 1g.10gb slice of an A100-80GB reports 9728 MiB = 9.50 GiB;
		// 8.03 B parameters × 2 bytes = 14.96 GiB of weights.
		{fixture: "pod-mig", denial: []string{"A100-80GB-MIG-1g.10gb (9.50 GiB", "weights take"}},
		{fixture: "pod-shared", allowed: true, warnings: []string{"the GPU looks shared: it requests nvidia.com/gpu.shared"}},
		{fixture: "pod-probe", allowed: true, warnings: []string{"its startupProbe restarts it after 30s (initialDelaySeconds 0 + failureThreshold 3 × periodSeconds 10)"}},
		{fixture: "deployment-shell", denial: []string{"one request of 131072 tokens needs 16.00 GiB"}},
		{fixture: "deployment-model-config", denial: []string{"/models/acme-moe on 1 × L4", "weights take"}},
		{fixture: "deployment-gpu-annotation", denial: []string{"on 1 × custom-16GiB (16.00 GiB, from annotation headroom.dev/gpu=16GiB)"}},
		{fixture: "deployment-hpa", allowed: true, warnings: []string{`HorizontalPodAutoscaler "llm-cpu" scales the vLLM server Deployment "deployment-hpa" on cpu alone`, "vllm:num_requests_waiting"}},
		{fixture: "hpa-cpu", allowed: true, warnings: []string{`HorizontalPodAutoscaler "hpa-cpu" scales the vLLM server Deployment "vllm-qwen" on cpu alone`}},
		{fixture: "hpa-custom", allowed: true, quiet: true},
		{fixture: "deployment-not-vllm", allowed: true, quiet: true},
		{fixture: "deployment-delete", allowed: true, quiet: true},
		// phi-4's weights are 27.31 GiB (KAITO's catalog, docs/kaito.md):
		// more than an A10's 24 GB.
		{fixture: "workspace-phi4-a10", denial: []string{"workspace: microsoft/phi-4 on 1 × A10", "resource.instanceType=Standard_NV36ads_A10_v5", "weights take"}},
		{fixture: "workspace-phi4-a10-bypass-false", denial: []string{"weights take"}},
		{fixture: "workspace-phi4-a100", allowed: true},
		// KAITO accepts any Standard_N* name silently; headroom says so.
		{fixture: "workspace-unknown-sku", allowed: true, warnings: []string{`resource.instanceType "Standard_NC999ads_Z9_v9": unknown GPU`}},
	}
	h := newTestHandler(t)
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			r := fixture(t, tc.fixture)
			resp := h.Validate(context.Background(), r.Request)
			if resp.UID != r.Request.UID {
				t.Errorf("uid %q, want %q", resp.UID, r.Request.UID)
			}
			if resp.Patch != nil || resp.PatchType != nil {
				t.Errorf("the validating webhook returned a patch")
			}
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v; result %+v; warnings %q", resp.Allowed, tc.allowed, resp.Result, resp.Warnings)
			}
			if !tc.allowed {
				if resp.Result == nil || resp.Result.Code != 403 {
					t.Fatalf("denial without a 403 status: %+v", resp.Result)
				}
				for _, sub := range tc.denial {
					if !strings.Contains(resp.Result.Message, sub) {
						t.Errorf("denial %q\nlacks %q", resp.Result.Message, sub)
					}
				}
				if !strings.Contains(resp.Result.Message, AnnotationBypass+`: "true"`) {
					t.Errorf("denial does not say how to bypass: %q", resp.Result.Message)
				}
			}
			for _, sub := range tc.warnings {
				if !contains(resp.Warnings, sub) {
					t.Errorf("no warning contains %q; warnings: %q", sub, resp.Warnings)
				}
			}
			if tc.quiet && len(resp.Warnings) > 0 {
				t.Errorf("want no warnings, got %q", resp.Warnings)
			}
			for _, w := range resp.Warnings {
				if !strings.HasPrefix(w, "headroom: ") || strings.ContainsAny(w, "\n\r\t") {
					t.Errorf("warning %q is not one prefixed line", w)
				}
			}
		})
	}
}

// number extracts the first float after prefix in s.
func number(t *testing.T, s, prefix string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + `([0-9.]+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%q not found in %q", prefix, s)
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(m[1], "."), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDenialNumbers checks the planner's numbers quoted in denials against
// arithmetic on the models' published sizes.
func TestDenialNumbers(t *testing.T) {
	h := newTestHandler(t)
	msg := func(name string) string {
		resp := h.Validate(context.Background(), fixture(t, name).Request)
		if resp.Allowed || resp.Result == nil {
			t.Fatalf("%s: not denied", name)
		}
		return resp.Result.Message
	}
	tests := []struct {
		fixture, prefix string
		lo, hi          float64
	}{
		// Llama 3.1 70B: 70.55 B parameters × 2 bytes (bf16) = 141.1e9 B =
		// 131.4 GiB, all on one GPU.
		{"deployment-weights", "weights take ", 129, 134},
		// Mixtral 8x7B: 46.7 B parameters × 2 bytes = 93.4e9 B = 87.0 GiB.
		{"deployment-model-config", "weights take ", 85, 89},
		// phi-4: 27.31 GiB of safetensors (KAITO's catalog).
		{"workspace-phi4-a10", "weights take ", 26.5, 28.2},
		// Llama 3.1 8B on an L4 (22.03 GiB as CUDA reports it) at vLLM
		// 0.19's default utilization 0.9: 19.83 GiB budget − 14.96 GiB
		// weights = 4.87 GiB for KV, activation and non-torch memory. At
		// 128 KiB a token (8192 tokens a GiB) that is at most 39,900
		// tokens; with at most 2.5 GiB of activation and overhead at
		// least 19,400.
		{"deployment-kv", "the largest context that fits is ", 19400, 39900},
	}
	for _, tc := range tests {
		if v := number(t, msg(tc.fixture), tc.prefix); v < tc.lo || v > tc.hi {
			t.Errorf("%s: %s%v, want %v to %v", tc.fixture, tc.prefix, v, tc.lo, tc.hi)
		}
	}
}

// mutate runs the mutating webhook on a fixture and decodes its patch.
func mutate(t *testing.T, h *Handler, name string) ([]PatchOp, *admissionv1.AdmissionResponse) {
	t.Helper()
	r := fixture(t, name)
	resp := h.Mutate(context.Background(), r.Request)
	if !resp.Allowed {
		t.Fatalf("%s: the mutating webhook denied: %+v", name, resp.Result)
	}
	if len(resp.Patch) == 0 {
		if resp.PatchType != nil {
			t.Fatalf("%s: patchType without a patch", name)
		}
		return nil, resp
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("%s: patch without patchType JSONPatch", name)
	}
	var ops []PatchOp
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	return ops, resp
}

// applyPatch applies a patch to the fixture's object with the JSON patch
// library the API server's ecosystem uses, and returns the new object.
func applyPatch(t *testing.T, object, patch []byte) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch does not decode: %v", err)
	}
	out, err := p.Apply(object)
	if err != nil {
		t.Fatalf("patch does not apply: %v\n%s", err, patch)
	}
	return out
}

func TestMutateExactPatches(t *testing.T) {
	envVar := map[string]any{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}
	tests := []struct {
		fixture string
		want    string // the patch, as JSON; "" for none
	}{
		// No autofix: only the allocator setting, on a container without env.
		{"mutate-env-only", mustJSON([]PatchOp{{Op: "add", Path: "/spec/template/spec/containers/0/env", Value: []any{envVar}}})},
		// An env list exists: append to it.
		{"mutate-env-append", mustJSON([]PatchOp{{Op: "add", Path: "/spec/containers/0/env/-", Value: envVar}})},
		{"pod-owned", ""},
		{"deployment-not-vllm", ""},
		{"deployment-delete", ""},
		{"hpa-cpu", ""},
		// TP 1 but the model is unknown: the allocator setting still applies.
		{"pod-unknown-model", mustJSON([]PatchOp{{Op: "add", Path: "/spec/containers/0/env", Value: []any{envVar}}})},
	}
	h := newTestHandler(t)
	for _, tc := range tests {
		_, resp := mutate(t, h, tc.fixture)
		if got := string(resp.Patch); got != tc.want {
			t.Errorf("%s: patch\n%s\nwant\n%s", tc.fixture, got, tc.want)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestAutofixRoundTrip: Llama 3.1 8B with no --max-model-len is denied on
// an L4 (its 131072-token context does not fit); the mutating webhook's
// patch must make the same Deployment pass validation.
func TestAutofixRoundTrip(t *testing.T) {
	h := newTestHandler(t)
	r := fixture(t, "mutate-autofix")
	if resp := h.Validate(context.Background(), r.Request); resp.Allowed {
		t.Fatalf("the unpatched Deployment was allowed: %q", resp.Warnings)
	}
	ops, resp := mutate(t, h, "mutate-autofix")
	var paths []string
	var maxLen int
	var util float64
	for _, op := range ops {
		if op.Op != "add" {
			t.Errorf("unexpected op %+v", op)
		}
		paths = append(paths, op.Path)
		if s, ok := op.Value.(string); ok && op.Path == "/spec/template/spec/containers/0/args/-" {
			switch {
			case strings.HasPrefix(s, "--max-model-len="):
				maxLen, _ = strconv.Atoi(strings.TrimPrefix(s, "--max-model-len="))
			case strings.HasPrefix(s, "--gpu-memory-utilization="):
				util, _ = strconv.ParseFloat(strings.TrimPrefix(s, "--gpu-memory-utilization="), 64)
			}
		}
	}
	wantPaths := []string{
		"/spec/template/spec/containers/0/env",
		"/spec/template/spec/containers/0/args/-",
		"/spec/template/spec/containers/0/args/-",
		// The annotations map exists: the key is added with "/" escaped.
		"/metadata/annotations/headroom.dev~1plan",
	}
	if strings.Join(paths, " ") != strings.Join(wantPaths, " ") {
		t.Fatalf("patch paths %q, want %q", paths, wantPaths)
	}
	// The longest context that fits is well below the model's 131072 (see
	// TestDenialNumbers) and above zero.
	if maxLen <= 0 || maxLen >= 131072 {
		t.Errorf("--max-model-len=%d", maxLen)
	}
	if util < 0.5 || util > 0.98 {
		t.Errorf("--gpu-memory-utilization=%v", util)
	}
	if !contains(resp.Warnings, "autofix added [--max-model-len=") {
		t.Errorf("the mutating webhook does not say what it added: %q", resp.Warnings)
	}

	patched := applyPatch(t, r.Request.Object.Raw, resp.Patch)
	var d appsv1.Deployment
	if err := json.Unmarshal(patched, &d); err != nil {
		t.Fatal(err)
	}
	if d.Annotations["team"] != "ml" || !strings.Contains(d.Annotations[AnnotationPlan], "meta-llama/Llama-3.1-8B-Instruct on 1 × L4") {
		t.Errorf("annotations after the patch: %q", d.Annotations)
	}
	req := *r.Request
	req.Object.Raw = patched
	if v := h.Validate(context.Background(), &req); !v.Allowed {
		t.Errorf("the patched Deployment is still denied: %s", v.Result.Message)
	}
	// Mutating the patched object again adds nothing: the flags are set
	// and the plan annotation is current.
	if again := h.Mutate(context.Background(), &req); len(again.Patch) != 0 {
		t.Errorf("second mutation patched again: %s", again.Patch)
	}
}

// TestAutofixAtUserUtilization: with --gpu-memory-utilization given and no
// --max-model-len, autofix adds only the length, and one that fits at the
// user's utilization rather than at the one it would recommend (0.89 here,
// with room for about 32,000 tokens). Llama 3.1 8B on an L4 (22.03 GiB) at
// 0.8: 17.62 GiB budget − 14.96 GiB weights = 2.66 GiB for KV, activation
// and non-torch memory; at 8192 tokens a GiB (TestDenialNumbers) at most
// 21,900 tokens, and with at most 2.5 GiB of activation and overhead at
// least 1,300.
func TestAutofixAtUserUtilization(t *testing.T) {
	h := newTestHandler(t)
	r := fixture(t, "mutate-autofix")
	var d appsv1.Deployment
	if err := json.Unmarshal(r.Request.Object.Raw, &d); err != nil {
		t.Fatal(err)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--gpu-memory-utilization", "0.8")
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	req := *r.Request
	req.Object.Raw = raw
	resp := h.Mutate(context.Background(), &req)
	var ops []PatchOp
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, op := range ops {
		if op.Path == "/spec/template/spec/containers/0/args/-" {
			added = append(added, op.Value.(string))
		}
	}
	if len(added) != 1 || !strings.HasPrefix(added[0], "--max-model-len=") {
		t.Fatalf("args added %q, want --max-model-len alone", added)
	}
	if n, _ := strconv.Atoi(strings.TrimPrefix(added[0], "--max-model-len=")); n < 1300 || n > 21900 {
		t.Errorf("%s, want 1300 to 21900", added[0])
	}
	req.Object.Raw = applyPatch(t, raw, resp.Patch)
	if v := h.Validate(context.Background(), &req); !v.Allowed {
		t.Errorf("the patched Deployment is denied: %s", v.Result.Message)
	}
}

func TestMutateChoices(t *testing.T) {
	h := newTestHandler(t)

	// TP 2: no allocator setting (KAITO issue #1077); the missing
	// utilization is filled, and the /dev/shm NCCL needs at TP 2 is
	// mounted (the pod has none).
	ops, _ := mutate(t, h, "mutate-tp2")
	for _, op := range ops {
		if strings.HasSuffix(op.Path, "/env") || strings.HasSuffix(op.Path, "/env/-") {
			t.Errorf("env patched at TP 2: %+v", op)
		}
	}
	if len(ops) != 4 || ops[0].Value.(string)[:len("--gpu-memory-utilization=")] != "--gpu-memory-utilization=" ||
		ops[1].Path != "/spec/template/spec/volumes" || ops[2].Path != "/spec/template/spec/containers/0/volumeMounts" ||
		ops[3].Path != "/metadata/annotations/headroom.dev~1plan" {
		t.Errorf("TP 2 patch: %+v", ops)
	}

	// The user's PYTORCH_CUDA_ALLOC_CONF stays; both flags are set, so only
	// the stale plan annotation is replaced.
	ops, _ = mutate(t, h, "mutate-user-env")
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "/metadata/annotations/headroom.dev~1plan" {
		t.Fatalf("user-env patch: %+v", ops)
	}
	if s := ops[0].Value.(string); !strings.Contains(s, "at --gpu-memory-utilization 0.90") || !strings.HasSuffix(s, "; fits") {
		t.Errorf("plan annotation %q", s)
	}

	// A shell script takes the flags right after its vLLM command, before
	// the redirection and the pipe; the patched script reads back with them.
	ops, resp := mutate(t, h, "deployment-shell")
	const before = "pip list >/dev/null && exec vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 131072 --gpu-memory-utilization="
	var script string
	for _, op := range ops {
		if op.Path == "/spec/template/spec/containers/0/args/0" && op.Op == "replace" {
			script, _ = op.Value.(string)
		}
	}
	util, ok := strings.CutPrefix(script, before)
	util, ok2 := strings.CutSuffix(util, " 2>&1 | tee /tmp/log")
	if u, err := strconv.ParseFloat(util, 64); !ok || !ok2 || err != nil || u <= 0 || u >= 1 {
		t.Errorf("script patched to %q; ops %+v", script, ops)
	}
	l, _, err := readLaunch(corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{script}}, nil)
	if err != nil || !l.settings.Set[vllm.FlagGPUMemoryUtilization] || l.settings.MaxModelLen != 131072 {
		t.Errorf("patched script reads back as %+v, %v", l.settings, err)
	}
	if !contains(resp.Warnings, "autofix added [--gpu-memory-utilization=") || !contains(resp.Warnings, "to the vllm command of its script") {
		t.Errorf("warnings %q", resp.Warnings)
	}

	// A Workspace gets only the plan annotation; its flags live in a
	// ConfigMap.
	ops, _ = mutate(t, h, "workspace-phi4-a100")
	if len(ops) != 1 || ops[0].Path != "/metadata/annotations/headroom.dev~1plan" || !strings.Contains(ops[0].Value.(string), "microsoft/phi-4 on 1 × A100-80GB") {
		t.Errorf("workspace patch: %+v", ops)
	}
}

func TestPointer(t *testing.T) {
	tests := []struct {
		tokens []string
		want   string
	}{
		{[]string{"metadata", "annotations", "headroom.dev/plan"}, "/metadata/annotations/headroom.dev~1plan"},
		// "~" is escaped first, so "~1" in a key does not read as "/".
		{[]string{"a~1b"}, "/a~01b"},
		{[]string{"x/~y"}, "/x~1~0y"},
		{[]string{""}, "/"},
	}
	for _, tc := range tests {
		if got := pointer(tc.tokens...); got != tc.want {
			t.Errorf("pointer(%q) = %q, want %q", tc.tokens, got, tc.want)
		}
	}
}

// TestConcurrentReviews runs every fixture through one Handler from many
// goroutines at once (run with -race): the verdicts must match a serial
// run, so the shared catalog cache and Specs are safe to share.
func TestConcurrentReviews(t *testing.T) {
	h := newTestHandler(t)
	type answer struct {
		allowed bool
		patch   string
	}
	reqs := map[string]*admissionv1.AdmissionRequest{}
	want := map[string]answer{}
	for _, name := range fixtureNames(t) {
		reqs[name] = fixture(t, name).Request
		want[name] = answer{h.Validate(context.Background(), reqs[name]).Allowed, string(h.Mutate(context.Background(), reqs[name]).Patch)}
	}
	fresh := newTestHandler(t)
	errs := make(chan string, 8*len(reqs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name, req := range reqs {
				got := answer{fresh.Validate(context.Background(), req).Allowed, string(fresh.Mutate(context.Background(), req).Patch)}
				if got != want[name] {
					errs <- name
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: a concurrent review differs from the serial one", name)
	}
}
