package charts

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/internal/kubetest"
	"headroom.dev/headroom/internal/report"
)

const chart = "headroom"

// helmBin is HEADROOM_HELM; without it the test skips, but not in CI.
func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HEADROOM_HELM")
	if h == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HEADROOM_HELM is not set: run HEADROOM_HELM=$(bash hack/helm.sh) go test ./charts/")
		}
		t.Skip("needs Helm: run HEADROOM_HELM=$(bash hack/helm.sh) go test ./charts/")
	}
	return h
}

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// objects splits a rendering into objects.
func objects(t *testing.T, rendered []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// everything turns every option on: cert-manager with an issuer of the
// user's, the ServiceMonitor, the KEDA ScaledObject.
var everything = []string{"--set", "exporter.serviceMonitor.enabled=true", "--set", "keda.enabled=true",
	"--set", "certs.certManager.issuerRef.name=cluster-ca", "--set", "certs.certManager.issuerRef.kind=ClusterIssuer",
	"--set", "webhook.failurePolicy=Fail", "--set", "webhook.replicas=3"}

// ownCA uses a certificate of the user's instead of cert-manager.
var ownCA = []string{"--set", "certs.certManager.enabled=false", "--set", "certs.caBundle=Q0EK"}

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chart)
	helm(t, append([]string{"lint", "--strict", chart}, everything...)...)
	helm(t, append([]string{"lint", "--strict", chart}, ownCA...)...)
}

// deploy/headroom.yaml is the chart's rendering with the default values.
func TestDeployIsRendered(t *testing.T) {
	want := helm(t, "template", "headroom", chart, "--namespace", "headroom-system", "--set", "createNamespace=true")
	got, err := os.ReadFile(filepath.Join("..", "deploy", "headroom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(got, []byte("\n"))
	if !bytes.Equal(body, want) {
		t.Error("deploy/headroom.yaml differs from the chart's rendering: run bash hack/deploy.sh")
	}
}

func byKind(objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	m := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()] = append(m[o.GetKind()], o)
	}
	return m
}

// The values reach the objects; every container runs as non-root on a
// read-only root file system.
func TestTemplateValues(t *testing.T) {
	all := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops"}, everything...)...)))
	for _, k := range []string{"Deployment", "DaemonSet", "PodDisruptionBudget", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ServiceMonitor", "ScaledObject", "Certificate"} {
		if len(all[k]) == 0 {
			t.Errorf("no %s rendered", k)
		}
	}
	if n := len(all["Issuer"]); n != 0 {
		t.Errorf("%d Issuers rendered with the user's issuer", n)
	}
	var dep appsv1.Deployment
	fromU(t, all["Deployment"][0], &dep)
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas %d", *dep.Spec.Replicas)
	}
	var ds appsv1.DaemonSet
	fromU(t, all["DaemonSet"][0], &ds)
	if ds.Spec.Template.Spec.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("exporter node selector %v", ds.Spec.Template.Spec.NodeSelector)
	}
	for _, spec := range []corev1.PodSpec{dep.Spec.Template.Spec, ds.Spec.Template.Spec} {
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("pod security context %+v", sc)
		}
		for _, c := range spec.Containers {
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
				t.Errorf("container %s security context %+v", c.Name, sc)
			}
			if c.Image != "ghcr.io/headroom-dev/headroom:0.1.0" {
				t.Errorf("container %s image %s", c.Name, c.Image)
			}
		}
	}
	for _, k := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		o := all[k][0]
		if o.GetAnnotations()["cert-manager.io/inject-ca-from"] != "ops/hr-webhook" {
			t.Errorf("%s annotations %v", k, o.GetAnnotations())
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if fp := h.(map[string]any)["failurePolicy"]; fp != "Fail" {
				t.Errorf("%s failurePolicy %v", k, fp)
			}
		}
	}

	own := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops"}, ownCA...)...)))
	if len(own["Certificate"]) != 0 || len(own["Issuer"]) != 0 {
		t.Error("cert-manager objects rendered without cert-manager")
	}
	hooks, _, _ := unstructured.NestedSlice(own["ValidatingWebhookConfiguration"][0].Object, "webhooks")
	if cb, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle"); cb != "Q0EK" {
		t.Errorf("caBundle %q", cb)
	}
}

func fromU(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// TestDryRunApply applies the default rendering (deploy/headroom.yaml),
// the one with every option and the one with a CA of the user's to a real
// API server with a server-side dry run.
func TestDryRunApply(t *testing.T) {
	helmBin(t)
	env := &envtest.Environment{CRDs: realCRDs(t)}
	cfg := kubetest.Start(t, env, "./charts/")
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	// A dry run creates nothing, so the namespaces objects land in exist.
	for _, ns := range []string{"headroom-system", "llm"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	dyn := dynamic.NewForConfigOrDie(cfg)

	deployYAML, err := os.ReadFile(filepath.Join("..", "deploy", "headroom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	renderings := map[string][]byte{
		"deploy/headroom.yaml": deployYAML,
		"every option":         helm(t, append(append([]string{"template", "headroom", chart, "-n", "headroom-system"}, everything...), fleetOptions...)...),
		"own CA":               helm(t, append([]string{"template", "headroom", chart, "-n", "headroom-system"}, ownCA...)...),
		// What `headroom capacity -o keda` and `-o hpa` write.
		"capacity -o keda": capacityManifest(t, report.KEDAScaledObject),
		"capacity -o hpa":  capacityManifest(t, report.HPAObject),
	}
	for name, r := range renderings {
		n := 0
		for _, o := range objects(t, r) {
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %s %s: %v", name, gvk, o.GetName(), err)
				continue
			}
			data, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			_, err = dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, data,
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "headroom-chart-test", Force: new(true), FieldValidation: "Strict"})
			if err != nil {
				t.Errorf("%s: server-side dry-run apply of %s %s/%s: %v", name, gvk.Kind, o.GetNamespace(), o.GetName(), err)
			}
			n++
		}
		t.Logf("%s: %d objects accepted by the API server (dry run)", name, n)
	}
	misspelled(t, ctx, mapper, dyn, append(objects(t, renderings["every option"]), objects(t, deployYAML)...))
}

// capacityManifest renders an autoscaler of `headroom capacity` (the
// thresholds of its Llama-3.1-8B on H100-80GB run in docs/capacity.md)
// for a Deployment in the namespace llm.
func capacityManifest(t *testing.T, render func(*report.Autoscaler, report.ScaleTarget) map[string]any) []byte {
	t.Helper()
	a := &report.Autoscaler{TargetRatePerS: 15.3, TargetWaiting: 24, TargetKV: 0.124, CoolDownS: 300, IntervalS: 15, MinReplicas: 1, MaxReplicas: 6,
		WaitingMetric: "vllm:num_requests_waiting", KVMetric: "vllm:kv_cache_usage_perc", RateMetric: "vllm:e2e_request_latency_seconds_count"}
	out, err := yaml.Marshal(render(a, report.ScaleTarget{Name: "llama-8b", Namespace: "llm", Model: "meta-llama/Llama-3.1-8B-Instruct",
		Prometheus: "http://prometheus-operated.monitoring.svc:9090"}))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
