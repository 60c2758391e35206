package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"headroom.dev/headroom/gpu"
)

// gkeDeployment is Llama-3.1-8B at 32768 tokens on vLLM 0.10.1 with one
// GPU, its node chosen by select (a nodeSelector, an affinity or both).
func gkeDeployment(sel map[string]string, affinity *corev1.Affinity) Workload {
	spec := &corev1.PodSpec{NodeSelector: sel, Affinity: affinity, Containers: []corev1.Container{{
		Name: "vllm", Image: "vllm/vllm-openai:v0.10.1",
		Command:   []string{"vllm", "serve"},
		Args:      []string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=32768"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("32Gi")}},
	}}}
	return Workload{Kind: "Deployment", Namespace: "llm", Name: "llama8b", Meta: metav1.ObjectMeta{Name: "llama8b"}, Spec: spec}
}

// requiredIn is a required node affinity: key In values.
func requiredIn(key string, values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
}

// A GKE pod selects its GPU by cloud.google.com/gke-accelerator (GKE runs
// no GPU feature discovery by default). nvidia-l4 is the L4 that
// nvidia.com/gpu.product=NVIDIA-L4 names: the same plan to the token, and
// the message says where the GPU came from.
func TestGKEAcceleratorSelectsGPU(t *testing.T) {
	h := NewHandler(Deps{})
	ctx := context.Background()
	plan := func(w Workload) Engine {
		t.Helper()
		e := h.Evaluate(ctx, w)
		if len(e.Engines) != 1 || e.Engines[0].Budget == nil {
			t.Fatalf("not planned: %+v", e.Warnings)
		}
		return e.Engines[0]
	}
	gke := plan(gkeDeployment(map[string]string{gpu.LabelGKEAccelerator: "nvidia-l4"}, nil))
	gfd := plan(gkeDeployment(map[string]string{gpu.LabelProduct: "NVIDIA-L4"}, nil))
	if gke.Budget.KVTokens != gfd.Budget.KVTokens || gke.Input.Device.Name != "L4" || gke.Input.Count != 1 {
		t.Errorf("GKE's label planned %d KV tokens on %s, GPU feature discovery's %d on %s", gke.Budget.KVTokens, gke.Input.Device.Name, gfd.Budget.KVTokens, gfd.Input.Device.Name)
	}
	if gke.GPUFrom != "node label cloud.google.com/gke-accelerator=nvidia-l4" {
		t.Errorf("from %q", gke.GPUFrom)
	}
	// Required node affinity on the same key, as the other keys are read:
	// the pod may land on an L4 (22.03 GiB) or a T4 (14.75 GiB), so it is
	// planned on the T4.
	aff := plan(gkeDeployment(nil, requiredIn(gpu.LabelGKEAccelerator, "nvidia-l4", "nvidia-tesla-t4")))
	if aff.Input.Device.Name != "T4" || !strings.Contains(aff.GPUFrom, "the smallest of 2 allowed values") {
		t.Errorf("affinity: %s from %q", aff.Input.Device.Name, aff.GPUFrom)
	}
	// The audit knows the node a pod runs on: GKE's label on it names the GPU.
	w := gkeDeployment(nil, nil)
	w.Node = map[string]string{gpu.LabelGKEAccelerator: "nvidia-h100-80gb", labelInstanceType: "a3-highgpu-1g"}
	if e := plan(w); e.Input.Device.Name != "H100-80GB" || e.GPUFrom != "its node's label cloud.google.com/gke-accelerator=nvidia-h100-80gb" {
		t.Errorf("node: %s from %q", e.Input.Device.Name, e.GPUFrom)
	}
}

// A GKE MIG partition is what the pod's nvidia.com/gpu is: a 1g.5gb
// slice of the 40 GB A100 reports 4864 MiB = 4.75 GiB, and Llama-3.1-8B's
// 8.03 B parameters × 2 bytes = 14.96 GiB of weights do not fit in it.
// Planned on the whole A100-40GB (39.39 GiB) the pod would be admitted.
func TestGKEPartitionIsASlice(t *testing.T) {
	h := NewHandler(Deps{})
	e := h.Evaluate(context.Background(), gkeDeployment(map[string]string{gpu.LabelGKEAccelerator: "nvidia-tesla-a100", gpu.LabelGKEPartition: "1g.5gb"}, nil))
	if len(e.Denials) == 0 || !strings.Contains(e.Denials[0].Message, "on 1 × A100-40GB-MIG-1g.5gb (4.75 GiB estimated") ||
		!strings.Contains(e.Denials[0].Message, "partitioned cloud.google.com/gke-gpu-partition-size=1g.5gb") || e.Denials[0].Code != "weights_do_not_fit" {
		t.Fatalf("denials %+v", e.Denials)
	}
}

// GKE's time-sharing and MPS are shared GPUs, as GPU feature discovery's
// sharing labels are.
func TestGKESharedGPU(t *testing.T) {
	h := NewHandler(Deps{})
	e := h.Evaluate(context.Background(), gkeDeployment(map[string]string{gpu.LabelGKEAccelerator: "nvidia-l4", gpu.LabelGKESharing: "time-sharing"}, nil))
	found := false
	for _, w := range e.Warnings {
		found = found || w.Code == CodeSharedGPU && strings.Contains(w.Message, "GKE's cloud.google.com/gke-gpu-sharing-strategy=time-sharing")
	}
	if !found {
		t.Errorf("no shared-GPU warning: %+v", e.Warnings)
	}
}

// What cannot be resolved is said with advice a manifest can follow: the
// annotation (a name or a memory size) or a node selector; never a flag of
// the command line (--gpu-memory), which neither check nor the webhook has.
func TestGPUAdviceForManifests(t *testing.T) {
	h := NewHandler(Deps{})
	for _, tc := range []struct {
		name string
		sel  map[string]string
		want []string
	}{
		{"no selection", nil, []string{"no node selection on nvidia.com/gpu.product, cloud.google.com/gke-accelerator or node.kubernetes.io/instance-type",
			"name it with the annotation headroom.dev/gpu", "or its memory (24GiB)", "or select its nodes by"}},
		{"a product the catalog lacks", map[string]string{gpu.LabelProduct: "NVIDIA-L5"}, []string{`unknown GPU product "NVIDIA-L5" and no nvidia.com/gpu.memory label to size it by)`, "name it with the annotation headroom.dev/gpu"}},
		{"a misspelt instance type", map[string]string{labelInstanceType: "g5.2xlarg"}, []string{`unknown GPU "g5.2xlarg": did you mean g5.2xlarge`, "name it with the annotation headroom.dev/gpu"}},
		{"a GKE card the catalog lacks", map[string]string{gpu.LabelGKEAccelerator: "nvidia-tesla-p100"}, []string{"is a Tesla P100 (16 GB), which the GPU catalog does not hold", "or its memory (24GiB)"}},
	} {
		e := h.Evaluate(context.Background(), gkeDeployment(tc.sel, nil))
		var msg string
		for _, w := range e.Warnings {
			if w.Code == CodeNotChecked {
				msg = w.Message
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, want)
			}
		}
		if strings.Contains(msg, "--gpu") {
			t.Errorf("%s: advises a command-line flag: %q", tc.name, msg)
		}
	}
}
