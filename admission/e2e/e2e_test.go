// Package e2e runs headroom's admission webhook against a real
// kube-apiserver and etcd (controller-runtime's envtest), registered with
// the webhook configurations of deploy/headroom.yaml (rendered from
// charts/headroom), and checks what the API server
// stores. It needs KUBEBUILDER_ASSETS: the directory hack/e2e-assets.sh
// prints.
package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/internal/kubetest"
)

const (
	optedIn  = "llm"   // labelled headroom.dev/webhook=enabled
	optedOut = "other" // not labelled: the webhook never sees it
	llama8   = "meta-llama/Llama-3.1-8B-Instruct"
)

// warnings collects the API server's warning headers for one client.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns and clears the warnings seen so far.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// webhookConfigs reads the webhook configurations of deploy/headroom.yaml
// (the chart's default rendering) and points every webhook at
// the local server: the selectors, rules and match conditions under test
// are the ones deployed.
func webhookConfigs(t *testing.T, base string) ([]*admissionregv1.MutatingWebhookConfiguration, []*admissionregv1.ValidatingWebhookConfiguration) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "headroom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mut []*admissionregv1.MutatingWebhookConfiguration
	var val []*admissionregv1.ValidatingWebhookConfiguration
	point := func(cc *admissionregv1.WebhookClientConfig) {
		if cc.Service == nil || cc.Service.Path == nil {
			t.Fatalf("webhook without a service path: %+v", cc)
		}
		url := base + *cc.Service.Path
		cc.URL, cc.Service = &url, nil
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var c admissionregv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
			}
			mut = append(mut, &c)
		case "ValidatingWebhookConfiguration":
			var c admissionregv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
				t.Fatal(err)
			}
			for i := range c.Webhooks {
				point(&c.Webhooks[i].ClientConfig)
			}
			val = append(val, &c)
		}
	}
	if len(mut) != 1 || len(val) != 1 {
		t.Fatalf("deploy/headroom.yaml holds %d mutating and %d validating configurations, want 1 each", len(mut), len(val))
	}
	return mut, val
}

func vllmDeployment(name string, args []string, nodeSelector, annotations map[string]string, gpus int) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Containers: []corev1.Container{{
						Name: "vllm", Image: "vllm/vllm-openai:v0.19.0", Args: args,
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{admission.ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}},
					}},
				},
			},
		},
	}
}

func TestWebhookE2E(t *testing.T) {
	ln, _, mut, val := localWebhook(t)
	port := ln.Addr().(*net.TCPAddr).Port
	env := &envtest.Environment{
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{kubetest.WorkspaceCRD()},
		ErrorIfCRDPathMissing: false,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost: "127.0.0.1", LocalServingPort: port,
			MutatingWebhooks: mut, ValidatingWebhooks: val,
		},
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		ln.Close()
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	t.Logf("kube-apiserver and etcd up in %v", time.Since(start).Round(time.Millisecond))

	// The webhook, with the real client-go lookups and the certificate
	// envtest generated and registered as the caBundle.
	seen := &warnings{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = seen
	cs := kubernetes.NewForConfigOrDie(wcfg)
	cluster := admission.Cluster{Client: dynamic.NewForConfigOrDie(cfg)}
	metrics := admission.NewMetrics()
	ctx := serveWebhook(t, ln, env.WebhookInstallOptions.LocalServingCertDir,
		admission.Deps{ConfigMaps: cluster, HPAs: cluster, PodTemplates: cluster, Metrics: metrics})

	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: optedIn, Labels: map[string]string{"headroom.dev/webhook": "enabled"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: optedOut}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mixtral, err := os.ReadFile(filepath.Join("..", "testdata", "mixtral-8x7b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "acme-moe-config"}, Data: map[string]string{"config.json": string(mixtral)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "phi4-inference"}, Data: map[string]string{"inference_config.yaml": "vllm:\n  max-model-len: 16384\n"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "vllm-flags"}, Data: map[string]string{"flags.yaml": "max-model-len: 8192\n"}},
	} {
		if _, err := cs.CoreV1().ConfigMaps(optedIn).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen.take()

	l4 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}
	h100 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	deployments := cs.AppsV1().Deployments(optedIn)
	denied := func(t *testing.T, err error, subs ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("created, want a denial")
		}
		if !apierrors.IsForbidden(err) {
			t.Fatalf("error %v, want 403 Forbidden", err)
		}
		for _, s := range subs {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("denial %q\nlacks %q", err, s)
			}
		}
	}
	hasWarning := func(t *testing.T, ws []string, sub string) {
		t.Helper()
		if !slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(w, sub) }) {
			t.Errorf("no warning contains %q: %q", sub, ws)
		}
	}

	t.Run("rejected", func(t *testing.T) {
		// Llama 3.1 8B's full 131072-token context needs 16 GiB of KV
		// cache (128 KiB a token); an L4 has 22 GiB in all.
		d := vllmDeployment("llama-full-context", []string{"--model", llama8, "--max-model-len", "131072"}, l4, nil, 1)
		_, err := deployments.Create(ctx, d, metav1.CreateOptions{})
		denied(t, err, `admission webhook "workloads.validate.headroom.dev" denied the request`, "needs 16.00 GiB of KV cache", "the largest context that fits is")
		if _, err := deployments.Get(ctx, d.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a denied Deployment is stored: %v", err)
		}
	})

	t.Run("mutated", func(t *testing.T) {
		// The same server with autofix and no --max-model-len: the
		// mutating webhook fills it, and validation then admits it.
		d := vllmDeployment("llama-autofix", []string{"--model", llama8}, l4, map[string]string{admission.AnnotationAutofix: "true"}, 1)
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasWarning(t, seen.take(), "autofix added [--max-model-len=")
		got, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := got.Spec.Template.Spec.Containers[0]
		var maxLen, util string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--max-model-len="); ok {
				maxLen = v
			}
			if v, ok := strings.CutPrefix(a, "--gpu-memory-utilization="); ok {
				util = v
			}
		}
		if maxLen == "" || util == "" || c.Args[0] != "--model" || c.Args[1] != llama8 {
			t.Errorf("stored args %q: want the user's args followed by the filled flags", c.Args)
		}
		if len(c.Env) != 1 || c.Env[0].Name != "PYTORCH_CUDA_ALLOC_CONF" || c.Env[0].Value != "expandable_segments:True" {
			t.Errorf("stored env %+v", c.Env)
		}
		plan := got.Annotations[admission.AnnotationPlan]
		if !strings.Contains(plan, "meta-llama/Llama-3.1-8B-Instruct on 1 × L4") || !strings.Contains(plan, "--gpu-memory-utilization "+util) || !strings.HasSuffix(plan, "; fits") {
			t.Errorf("stored plan annotation %q", plan)
		}
	})

	t.Run("accepted", func(t *testing.T) {
		// The calibration set has Qwen2.5-7B-Instruct starting on an
		// H100-80GB at max-model-len 8192. Without autofix only the
		// allocator setting is added.
		d := vllmDeployment("qwen", []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"}, h100, nil, 1)
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ws := seen.take(); len(ws) != 0 {
			t.Errorf("warnings on a plan that fits: %q", ws)
		}
		got, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := got.Spec.Template.Spec.Containers[0]
		if !slices.Equal(c.Args, d.Spec.Template.Spec.Containers[0].Args) {
			t.Errorf("args changed without autofix: %q", c.Args)
		}
		if len(c.Env) != 1 || c.Env[0].Name != "PYTORCH_CUDA_ALLOC_CONF" {
			t.Errorf("stored env %+v", c.Env)
		}
		if _, ok := got.Annotations[admission.AnnotationPlan]; ok {
			t.Error("plan annotation written without autofix")
		}

		// An update that asks for the full 131072-token context on an L4
		// is refused too.
		got.Spec.Template.Spec.NodeSelector = l4
		got.Spec.Template.Spec.Containers[0].Args = []string{"--model", llama8}
		_, err = deployments.Update(ctx, got, metav1.UpdateOptions{})
		denied(t, err, "the largest context that fits is")
	})

	t.Run("image upgrade priced", func(t *testing.T) {
		// Llama-3.1-8B on an H100 at 0.9 from vLLM 0.20.0 to 0.21.0 with
		// the same flags: 0.21.0 holds the CUDA-graph estimate inside the
		// budget, and the plan loses 443,552 - 436,752 = 6,800 KV tokens
		// (headroom plan --upgrade-to 0.21.0 on the same deployment).
		d := vllmDeployment("llama-upgrade", []string{"--model", llama8, "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"}, h100, nil, 1)
		d.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.20.0"
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ws := seen.take(); len(ws) != 0 {
			t.Errorf("warnings on a plan that fits: %q", ws)
		}
		got, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.21.0"
		if _, err := deployments.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ws := seen.take()
		hasWarning(t, ws, "the image moves vLLM 0.20.0 -> 0.21.0 with the same flags: KV cache 443552 -> 436752 tokens (6800 lost")
		hasWarning(t, ws, "the CUDA-graph estimate is inside the budget (0.21.0, PR #38284)")
	})

	t.Run("tensor parallel", func(t *testing.T) {
		d := vllmDeployment("llama-tp3", []string{"--model", llama8, "--tensor-parallel-size", "3", "--max-model-len", "8192"}, h100, nil, 3)
		_, err := deployments.Create(ctx, d, metav1.CreateOptions{})
		denied(t, err, "--tensor-parallel-size 3 does not divide the model's 32 attention heads")
	})

	t.Run("model from a ConfigMap", func(t *testing.T) {
		// Mixtral 8x7B: 46.7 B parameters × 2 bytes = 87 GiB, read from
		// the ConfigMap through the API server.
		d := vllmDeployment("acme-moe", []string{"--model", "/models/acme-moe"}, l4, map[string]string{admission.AnnotationModelConfig: "acme-moe-config"}, 1)
		_, err := deployments.Create(ctx, d, metav1.CreateOptions{})
		denied(t, err, "/models/acme-moe on 1 × L4", "weights take 87.")
	})

	t.Run("flags from a --config file in a ConfigMap", func(t *testing.T) {
		// Llama-3.1-8B on an L4: its 131072-token context needs 16 GiB of
		// KV and is denied; the ConfigMap's flags.yaml, mounted as
		// /etc/vllm/serve.yaml and read through the API server, sets 8192
		// tokens (1 GiB), which fits.
		withFile := func(name, configMap string) *appsv1.Deployment {
			d := vllmDeployment(name, []string{"--model", llama8, "--config", "/etc/vllm/serve.yaml"}, l4, nil, 1)
			spec := &d.Spec.Template.Spec
			spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "flags", MountPath: "/etc/vllm"}}
			spec.Volumes = []corev1.Volume{{Name: "flags", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Items: []corev1.KeyToPath{{Key: "flags.yaml", Path: "serve.yaml"}}}}}}
			return d
		}
		if _, err := deployments.Create(ctx, withFile("llama-config-file", "vllm-flags"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("the file's max-model-len was not read: %v", err)
		}
		seen.take()
		_, err := deployments.Create(ctx, withFile("llama-config-missing", "no-such-flags"), metav1.CreateOptions{})
		denied(t, err, "16.00 GiB")
		hasWarning(t, seen.take(), "the flags of its --config file are not read (--config /etc/vllm/serve.yaml: ConfigMap llm/no-such-flags: not found)")
	})

	t.Run("bypass and fail-open", func(t *testing.T) {
		d := vllmDeployment("llama-bypass", []string{"--model", llama8}, l4, map[string]string{admission.AnnotationBypass: "true"}, 1)
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasWarning(t, seen.take(), "bypassed by annotation, would be denied")

		d = vllmDeployment("custom-model", []string{"--model", "/models/acme-chat"}, l4, nil, 1)
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasWarning(t, seen.take(), `model "/models/acme-chat" is not in headroom's catalog`)
	})

	t.Run("scoping", func(t *testing.T) {
		// Not opted in: the namespace selector keeps the webhook out.
		d := vllmDeployment("llama-elsewhere", []string{"--model", llama8}, l4, nil, 1)
		if _, err := cs.AppsV1().Deployments(optedOut).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the webhook reached a namespace that did not opt in: %v", err)
		}
		// Opted out by the object's own label.
		d = vllmDeployment("llama-skip", []string{"--model", llama8}, l4, nil, 1)
		d.Labels = map[string]string{"headroom.dev/webhook": "skip"}
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the object selector did not exclude the object: %v", err)
		}
		got, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Template.Spec.Containers[0].Env) != 0 {
			t.Error("a skipped object was mutated")
		}
	})

	t.Run("pods", func(t *testing.T) {
		d := vllmDeployment("p", []string{"--model", llama8}, l4, nil, 1)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: d.Spec.Template.Spec}
		_, err := cs.CoreV1().Pods(optedIn).Create(ctx, pod, metav1.CreateOptions{})
		denied(t, err, `admission webhook "pods.validate.headroom.dev" denied the request`)

		// A pod with a controller is left to its owner's check (the
		// configurations' match condition; the handler skips it too).
		owned := pod.DeepCopy()
		owned.Name = "owned"
		yes := true
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "6b1c", Controller: &yes}}
		if _, err := cs.CoreV1().Pods(optedIn).Create(ctx, owned, metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod with a controller: %v", err)
		}
	})

	t.Run("cpu-only autoscaler", func(t *testing.T) {
		util := int32(70)
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "qwen"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "qwen"},
				MaxReplicas:    4,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &util}}}},
			},
		}
		if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(optedIn).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasWarning(t, seen.take(), `HorizontalPodAutoscaler "qwen" scales the vLLM server Deployment "qwen" on cpu alone`)

		// And the other way round: updating the Deployment lists the HPA.
		got, err := deployments.Get(ctx, "qwen", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Labels = map[string]string{"touched": "yes"}
		if _, err := deployments.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		hasWarning(t, seen.take(), `HorizontalPodAutoscaler "qwen" scales the vLLM server`)
	})

	t.Run("KAITO workspace", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(wcfg)
		gvr := schema.GroupVersionResource{Group: "kaito.sh", Version: "v1beta1", Resource: "workspaces"}
		ws := func(name, instance string, annotations map[string]any) *unstructured.Unstructured {
			meta := map[string]any{"name": name}
			if annotations != nil {
				meta["annotations"] = annotations
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kaito.sh/v1beta1", "kind": "Workspace", "metadata": meta,
				"resource":  map[string]any{"instanceType": instance, "labelSelector": map[string]any{"matchLabels": map[string]any{"apps": name}}},
				"inference": map[string]any{"preset": map[string]any{"name": "phi-4"}, "config": "phi4-inference"},
			}}
		}
		// phi-4's 27.31 GiB of weights (KAITO's own catalog) on a 24 GB A10.
		_, err := dyn.Resource(gvr).Namespace(optedIn).Create(ctx, ws("phi4-a10", "Standard_NV36ads_A10_v5", map[string]any{"kaito.sh/bypass-resource-checks": "false"}), metav1.CreateOptions{})
		denied(t, err, "workspace: microsoft/phi-4 on 1 × A10", "weights take 27.31 GiB")

		if _, err := dyn.Resource(gvr).Namespace(optedIn).Create(ctx, ws("phi4-a100", "Standard_NC24ads_A100_v4", map[string]any{admission.AnnotationAutofix: "true"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(gvr).Namespace(optedIn).Get(ctx, "phi4-a100", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if plan := got.GetAnnotations()[admission.AnnotationPlan]; !strings.Contains(plan, "microsoft/phi-4 on 1 × A100-80GB") || !strings.Contains(plan, "16384-token requests") {
			t.Errorf("stored plan annotation %q (the inference ConfigMap's max-model-len is 16384)", plan)
		}
	})

	// The webhook answered every call itself: nothing got through on
	// failurePolicy Ignore because of an error.
	families, err := metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var errorsSeen, answered float64
	for _, f := range families {
		if f.GetName() != "headroom_admission_reviews_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			answered += m.GetCounter().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == "verdict" && (l.GetValue() == admission.VerdictError || l.GetValue() == admission.VerdictInvalid) {
					errorsSeen += m.GetCounter().GetValue()
				}
			}
		}
	}
	if answered == 0 || errorsSeen != 0 {
		t.Errorf("the webhook answered %v reviews, %v of them errors", answered, errorsSeen)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Error("the server stopped early")
	}
}
