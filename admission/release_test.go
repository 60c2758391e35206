package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An in-house image names no vLLM release in its tag; the workload
// declares it with headroom.dev/vllm-version and the webhook plans for it:
// at 0.11.0 the default utilization is 0.90, from 0.21.0 on 0.92
// (vllm/rules.go), so the declared release shows in the plan itself.
func TestReleaseAnnotation(t *testing.T) {
	pod := func(image string, ann map[string]string) Workload {
		spec := &corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm", Image: image,
			Command:   []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}},
		}}}
		meta := metav1.ObjectMeta{Name: "llm", Annotations: map[string]string{AnnotationGPU: "H100-80GB"}}
		for k, v := range ann {
			meta.Annotations[k] = v
		}
		return Workload{Kind: "Pod", Namespace: "default", Name: "llm", Meta: meta, Spec: spec}
	}
	h := NewHandler(Deps{})
	for _, tc := range []struct {
		name, image, annotation string
		version, from           string
		util                    float64
		warns                   string
	}{
		{"in-house image, declared", "registry.corp.example/llm/serving:2024-11", "0.11.0", "0.11.0", ReleaseFromAnnotation, 0.9, ""},
		{"in-house image, undeclared", "registry.corp.example/llm/serving:2024-11", "", "", ReleaseAssumed, 0.92, ""},
		{"official image tag", "vllm/vllm-openai:v0.11.0", "", "0.11.0", ReleaseFromImage, 0.9, ""},
		{"annotation wins over the tag", "vllm/vllm-openai:v0.11.0", "0.21.0", "0.21.0", ReleaseFromAnnotation, 0.92, ""},
		{"not a release", "vllm/vllm-openai:v0.11.0", "eleven", "0.11.0", ReleaseFromImage, 0.9, "annotation headroom.dev/vllm-version"},
	} {
		ann := map[string]string{}
		if tc.annotation != "" {
			ann[AnnotationVLLMVersion] = tc.annotation
		}
		e := h.Evaluate(context.Background(), pod(tc.image, ann))
		if len(e.Engines) != 1 || e.Engines[0].Budget == nil {
			t.Fatalf("%s: not planned: %+v", tc.name, e.Warnings)
		}
		v, from := e.Engines[0].Release()
		want := tc.version
		if want == "" {
			want = orNewest(v).String()
		}
		if v.String() != want || from != tc.from {
			t.Errorf("%s: planned for %s (%s), want %s (%s)", tc.name, v, from, want, tc.from)
		}
		if u := e.Engines[0].Budget.Settings.GPUMemoryUtilization; u != tc.util {
			t.Errorf("%s: utilization %.2f, want %.2f", tc.name, u, tc.util)
		}
		var warned []string
		for _, w := range e.Warnings {
			if w.Code == CodeVersionUnknown {
				warned = append(warned, w.Message)
			}
		}
		if got := strings.Join(warned, "; "); (tc.warns == "") != (got == "") || !strings.Contains(got, tc.warns) {
			t.Errorf("%s: version warnings %q, want %q", tc.name, got, tc.warns)
		}
	}
}

// A server that was not planned (no GPU named) still runs the release its
// image tag names: check says "would be planned for 0.10.1 (image tag)",
// not the newest release as assumed.
func TestReleaseOfUnplannedServer(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{
		Name: "vllm", Image: "vllm/vllm-openai:v0.10.1",
		Command:   []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1")}},
	}}}
	e := NewHandler(Deps{}).Evaluate(context.Background(), Workload{Kind: "Pod", Namespace: "default", Name: "llm", Spec: spec})
	if len(e.Engines) != 1 || e.Engines[0].Budget != nil {
		t.Fatalf("want one unplanned engine: %+v", e.Engines)
	}
	if v, from := e.Engines[0].Release(); v.String() != "0.10.1" || from != ReleaseFromImage {
		t.Errorf("release %s (%s), want 0.10.1 (%s)", v, from, ReleaseFromImage)
	}
}
