package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/internal/kubetest"
)

// monitoringAPI is what a cluster with the Prometheus operator answers;
// with it the chart renders its alert rules and its dashboard.
var monitoringAPI = []string{"--api-versions", "monitoring.coreos.com/v1"}

// clusterPage turns on `headroom serve --cluster`'s Deployment.
var clusterPage = []string{"--set", "clusterPage.enabled=true"}

// fleetOptions are this file's options, applied in TestDryRunApply's
// rendering with every option.
var fleetOptions = append(append([]string{}, monitoringAPI...), clusterPage...)

// The cluster page's Deployment runs serve --cluster as the audit's role,
// non-root on a read-only root file system, and lints; it refuses to
// render without the role.
func TestClusterPageRendered(t *testing.T) {
	helm(t, append([]string{"lint", "--strict", chart}, clusterPage...)...)
	all := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops"}, clusterPage...)...)))
	var dep *appsv1.Deployment
	for _, o := range all["Deployment"] {
		if o.GetName() == "hr-cluster-page" {
			dep = &appsv1.Deployment{}
			fromU(t, o, dep)
		}
	}
	if dep == nil {
		t.Fatal("no hr-cluster-page Deployment")
	}
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	if strings.Join(c.Args, " ") != "serve --listen=:8080 --cluster --offline" || spec.ServiceAccountName != "hr-cluster-page" {
		t.Errorf("args %v, service account %q", c.Args, spec.ServiceAccountName)
	}
	if sc := c.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("security context %+v", sc)
	}
	var crb rbacv1.ClusterRoleBinding
	fromU(t, all["ClusterRoleBinding"][0], &crb)
	if crb.RoleRef.Name != "hr-audit" || crb.Subjects[0].Name != "hr-cluster-page" || crb.Subjects[0].Namespace != "ops" {
		t.Errorf("binding %+v", crb)
	}
	if len(all["Service"]) == 0 {
		t.Error("no Service")
	}
	cmd := exec.Command(helmBin(t), append([]string{"template", "hr", chart, "--set", "audit.clusterRole=false"}, clusterPage...)...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "needs audit.clusterRole") {
		t.Errorf("rendered without the audit's role: %v %s", err, out)
	}
}

// realCRDs are the CRDs of the kinds the chart renders, from the modules
// of the projects that define them (internal/kubetest: cert-manager,
// Prometheus Operator and KEDA, each at its version).
func realCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, m := range []kubetest.CRDModule{kubetest.CertManager, kubetest.PrometheusOperator, kubetest.KEDA} {
		crds = append(crds, m.CRDs(t)...)
	}
	return crds
}

// The PrometheusRule and the dashboard's ConfigMap are rendered where the
// Prometheus operator's API exists, and not without it or with their
// values off; they carry the generated files verbatim.
func TestMonitoringRendered(t *testing.T) {
	none := byKind(objects(t, helm(t, "template", "hr", chart, "-n", "ops")))
	if len(none["PrometheusRule"]) != 0 || len(none["ConfigMap"]) != 0 {
		t.Error("PrometheusRule or dashboard rendered without the monitoring.coreos.com/v1 API")
	}
	off := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops", "--set", "alerts.enabled=false", "--set", "dashboard.enabled=false"}, monitoringAPI...)...)))
	if len(off["PrometheusRule"]) != 0 || len(off["ConfigMap"]) != 0 {
		t.Error("PrometheusRule or dashboard rendered with alerts.enabled=false and dashboard.enabled=false")
	}

	all := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops", "--set", "alerts.labels.release=prom",
		"--set", "dashboard.namespace=grafana"}, monitoringAPI...)...)))
	if len(all["PrometheusRule"]) != 1 || len(all["ConfigMap"]) != 1 {
		t.Fatalf("%d PrometheusRules, %d ConfigMaps", len(all["PrometheusRule"]), len(all["ConfigMap"]))
	}
	rule := all["PrometheusRule"][0]
	if rule.GetLabels()["release"] != "prom" || rule.GetNamespace() != "ops" {
		t.Errorf("PrometheusRule labels %v, namespace %s", rule.GetLabels(), rule.GetNamespace())
	}
	shipped, err := os.ReadFile(filepath.Join("headroom", "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(shipped, &want); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(rule.Object["spec"]); !bytes.Equal(got, mustJSON(t, want)) {
		t.Error("the PrometheusRule's spec is not files/prometheus-rules.yaml")
	}

	cm := all["ConfigMap"][0]
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != "grafana" {
		t.Errorf("dashboard ConfigMap labels %v, namespace %s", cm.GetLabels(), cm.GetNamespace())
	}
	dash, _, _ := unstructured.NestedString(cm.Object, "data", "headroom-vllm.json")
	file, err := os.ReadFile(filepath.Join("headroom", "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if dash != strings.TrimSuffix(string(file), "\n") {
		t.Error("the ConfigMap's dashboard is not files/grafana-dashboard.json")
	}
	var d struct{ UID string }
	if err := json.Unmarshal([]byte(dash), &d); err != nil || d.UID != "headroom-vllm" {
		t.Errorf("the dashboard does not parse as JSON with its uid: %v %q", err, d.UID)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// promtool check rules on the rules as the chart renders them.
func TestRenderedRulesCheck(t *testing.T) {
	promtool := os.Getenv("HEADROOM_PROMTOOL")
	if promtool == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HEADROOM_PROMTOOL is not set: run HEADROOM_PROMTOOL=$(bash hack/promtool.sh) go test ./charts/")
		}
		t.Skip("needs promtool: run HEADROOM_PROMTOOL=$(bash hack/promtool.sh) go test ./charts/")
	}
	all := byKind(objects(t, helm(t, append([]string{"template", "hr", chart, "-n", "ops"}, monitoringAPI...)...)))
	if len(all["PrometheusRule"]) != 1 {
		t.Fatalf("%d PrometheusRules rendered", len(all["PrometheusRule"]))
	}
	spec, err := yaml.Marshal(all["PrometheusRule"][0].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rendered-rules.yaml")
	if err := os.WriteFile(f, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the rendered PrometheusRule: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// misspelled applies, with a server-side dry run and strict field
// validation, each kind of the other projects' CRDs with one field
// misspelled: the real schemas must refuse every one (the stand-in CRDs
// they replace took anything).
func misspelled(t *testing.T, ctx context.Context, mapper meta.RESTMapper, dyn dynamic.Interface, rendered []*unstructured.Unstructured) {
	t.Helper()
	typos := map[string][]string{
		"Certificate":    {"spec", "dnsNamez"},
		"Issuer":         {"spec", "selfSignd"},
		"ServiceMonitor": {"spec", "endpointz"},
		"PrometheusRule": {"spec", "groupz"},
		"ScaledObject":   {"spec", "maxReplicaCont"},
	}
	seen := map[string]bool{}
	for _, o := range rendered {
		path, ok := typos[o.GetKind()]
		if !ok || seen[o.GetKind()] {
			continue
		}
		seen[o.GetKind()] = true
		bad := o.DeepCopy()
		if err := unstructured.SetNestedField(bad.Object, "x", path...); err != nil {
			t.Fatal(err)
		}
		gvk := bad.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		data, err := bad.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(m.Resource).Namespace(bad.GetNamespace()).Patch(ctx, bad.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "headroom-chart-test", Force: new(true), FieldValidation: "Strict"})
		field := strings.Join(path, ".")
		if err == nil || !strings.Contains(err.Error(), path[len(path)-1]) {
			t.Errorf("%s with .%s: the API server accepted it or gave another error: %v", gvk.Kind, field, err)
		} else {
			t.Logf("%s with .%s refused: %v", gvk.Kind, field, err)
		}
	}
	for k := range typos {
		if !seen[k] {
			t.Errorf("no %s rendered to misspell", k)
		}
	}
}
