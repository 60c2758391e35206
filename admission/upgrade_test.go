package admission

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

func mustSpec(t *testing.T, id string) model.Spec {
	t.Helper()
	s, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s is not in the catalog", id)
	}
	return s
}

func mustDevice(t *testing.T, name string) gpu.Device {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Device
}

// updateReview is the deployment-fits fixture as an UPDATE from oldImage
// to newImage, each with args, encoded as the API server sends it and read
// back through decodeReview (so the old object travels the HTTP path).
func updateReview(t *testing.T, oldImage, newImage string, oldArgs, newArgs []string) *admissionv1.AdmissionRequest {
	t.Helper()
	base := fixture(t, "deployment-fits").Request
	var d appsv1.Deployment
	if err := decodeObject(base.Object.Raw, &d); err != nil {
		t.Fatal(err)
	}
	encode := func(image string, args []string) runtime.RawExtension {
		o := d.DeepCopy()
		o.Spec.Template.Spec.Containers[0].Image = image
		o.Spec.Template.Spec.Containers[0].Args = args
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	req := *base
	req.Operation = admissionv1.Update
	req.Object, req.OldObject = encode(newImage, newArgs), encode(oldImage, oldArgs)
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: fixture(t, "deployment-fits").TypeMeta, Request: &req})
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeReview(body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Request
}

func warningWith(resp *admissionv1.AdmissionResponse, sub string) string {
	for _, w := range resp.Warnings {
		if strings.Contains(w, sub) {
			return w
		}
	}
	return ""
}

// TestUpdateUpgradeWarning: an UPDATE that moves the image from vLLM
// 0.20.0 to 0.21.0 with the same flags is planned on both releases, and
// the warning prices it: at --gpu-memory-utilization 0.9 the CUDA-graph
// estimate, now inside the budget, costs KV tokens. The tokens named are
// the planner's for both releases (memory.PlanUpgrade on the same input).
func TestUpdateUpgradeWarning(t *testing.T) {
	h := newTestHandler(t)
	args := []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"}
	resp := h.Validate(context.Background(), updateReview(t, "vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.21.0", args, args))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	w := warningWith(resp, "the image moves vLLM 0.20.0 -> 0.21.0")
	if w == "" {
		t.Fatalf("no upgrade warning in %q", resp.Warnings)
	}
	t.Log(w)
	for _, want := range []string{"the CUDA-graph estimate is inside the budget (0.21.0, PR #38284)", "lost", "KV cache", "CUDA graphs held back inside the budget false -> true"} {
		if !strings.Contains(w, want) {
			t.Errorf("the warning lacks %q: %s", want, w)
		}
	}
	// The same numbers as the planner's, not a second computation.
	set, err := vllm.ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	set.Version = vllm.MustVersion("0.20.0")
	in := memory.Input{Model: mustSpec(t, "Qwen/Qwen2.5-7B-Instruct"), Device: mustDevice(t, "H100-80GB"), Count: 1, Settings: set}
	u, err := memory.PlanUpgrade(in, vllm.MustVersion("0.21.0"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Before.KVTokens <= u.After.KVTokens {
		t.Fatalf("the plan gains KV across 0.21.0 at 0.9: %d -> %d", u.Before.KVTokens, u.After.KVTokens)
	}
	if want := "KV cache " + strconv.FormatInt(u.Before.KVTokens, 10) + " -> " + strconv.FormatInt(u.After.KVTokens, 10) + " tokens"; !strings.Contains(w, want) {
		t.Errorf("the warning lacks %q: %s", want, w)
	}

	// Same release, or other flags too: no upgrade warning.
	for _, tc := range []struct {
		name               string
		oldImage, newImage string
		oldArgs            []string
	}{
		{"same release", "vllm/vllm-openai:v0.21.0", "vllm/vllm-openai:v0.21.0-cu129", args},
		{"flags change too", "vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.21.0", append(args[:4:4], "--gpu-memory-utilization", "0.8")},
	} {
		resp := h.Validate(context.Background(), updateReview(t, tc.oldImage, tc.newImage, tc.oldArgs, args))
		if w := warningWith(resp, "the image moves"); w != "" {
			t.Errorf("%s: %s", tc.name, w)
		}
	}
	// A CREATE has no old object: no upgrade warning.
	resp = h.Validate(context.Background(), fixture(t, "deployment-fits").Request)
	if w := warningWith(resp, "the image moves"); w != "" {
		t.Errorf("create: %s", w)
	}
}

// TestUnknownImageTag: a vLLM image whose tag names no release says so,
// and is planned with the newest rules.
func TestUnknownImageTag(t *testing.T) {
	h := newTestHandler(t)
	args := []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"}
	req := updateReview(t, "vllm/vllm-openai:latest", "vllm/vllm-openai:latest", args, args)
	resp := h.Validate(context.Background(), req)
	w := warningWith(resp, "names no vLLM release")
	if w == "" || !strings.Contains(w, vllm.Newest().String()) || !strings.Contains(w, `container "vllm"`) {
		t.Errorf("warnings %q", resp.Warnings)
	}
}

// TestPodImageUpdate: a bare Pod whose image is updated in place is priced
// as the Deployment is.
func TestPodImageUpdate(t *testing.T) {
	var d appsv1.Deployment
	if err := decodeObject(fixture(t, "deployment-fits").Request.Object.Raw, &d); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"}
	pod := func(image string) runtime.RawExtension {
		p := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "llm"}, Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Spec.Containers[0].Image, p.Spec.Containers[0].Args = image, args
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	req := &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Name: "p", Namespace: "llm",
		Operation: admissionv1.Update, Object: pod("vllm/vllm-openai:v0.21.0"), OldObject: pod("vllm/vllm-openai:v0.20.0")}
	resp := newTestHandler(t).Validate(context.Background(), req)
	if w := warningWith(resp, "the image moves vLLM 0.20.0 -> 0.21.0"); w == "" {
		t.Errorf("warnings %q", resp.Warnings)
	}
}
