package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/internal/kubetest"
)

// auditRules are the rules of the audit's ClusterRole as the chart renders
// it (deploy/headroom.yaml, which charts/ checks against the chart), the
// role README.md (headroom audit) lists; the test grants exactly these.
func auditRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "headroom.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" && role.Name == "headroom-audit" {
			return role.Rules
		}
	}
	t.Fatal("deploy/headroom.yaml has no ClusterRole headroom-audit")
	return nil
}

// TestAuditE2E creates the test cluster (readAll) in a real kube-apiserver
// and etcd, with LWS's and KServe's own CRDs, and audits it: as an administrator (the full expected audit), and
// as a user holding only the README's role in namespace llm (nodes and
// other namespaces are forbidden: findings, not errors).
func TestAuditE2E(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs a kube-apiserver and etcd: run KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh) go test ./audit/")
	}
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{kubetest.WorkspaceCRD(), kubetest.LeaderWorkerSetCRD(t), kubetest.InferenceServiceCRD(t)}}
	cfg := kubetest.Start(t, env, "./audit/")
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, ns := range []string{"llm", "other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resources := map[string]schema.GroupVersionResource{
		"Node": nodesResource, "Pod": podsResource, "Deployment": deploymentsResource, "StatefulSet": statefulSetsResource,
		"Workspace": workspaceResources[0], "HorizontalPodAutoscaler": {Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		"LeaderWorkerSet": lwsResource, "InferenceService": isvcResource,
	}
	for _, o := range readAll(t) {
		r, ok := resources[o.GetKind()]
		if !ok {
			t.Fatalf("testdata kind %s has no resource here", o.GetKind())
		}
		ri := dyn.Resource(r).Namespace(o.GetNamespace())
		created, err := ri.Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		// The API server drops status on create; pods get theirs
		// through the status subresource, as the kubelet writes it.
		if status, ok := o.Object["status"]; ok && o.GetKind() == "Pod" {
			created.Object["status"] = status
			if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("status of %s: %v", o.GetName(), err)
			}
		}
	}

	r, err := Run(ctx, dyn, Options{Namespace: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cluster) > 0 {
		t.Errorf("admin audit: %+v", r.Cluster)
	}
	checkCluster(t, r)

	// A user with the README's role in llm alone.
	user, err := env.AddUser(envtest.User{Name: "auditor"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles("llm").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "headroom-audit"}, Rules: auditRules(t)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings("llm").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "headroom-audit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "headroom-audit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "auditor"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	udyn := dynamic.NewForConfigOrDie(user.Config())
	r, err = Run(ctx, udyn, Options{Namespace: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cluster) != 1 || r.Cluster[0].Code != "cannot_list_nodes" {
		t.Errorf("namespace-only role: cluster findings %+v", r.Cluster)
	}
	if w := byName(r)["Deployment/too-long"]; w.Status != LevelWillNotStart {
		t.Errorf("namespace-only role: too-long %s", w.Status)
	}
	r, err = Run(ctx, udyn, Options{Namespace: "other"})
	if err != nil {
		t.Fatal(err)
	}
	forbidden := 0
	for _, f := range r.Cluster {
		if strings.Contains(f.Message, "forbidden") && strings.Contains(f.Message, "in namespace other") {
			forbidden++
		}
	}
	// pods, deployments, statefulsets, workspaces, leaderworkersets,
	// inferenceservices.
	if forbidden != 6 || len(r.Workloads) != 0 || r.AtRisk() {
		t.Errorf("forbidden namespace: %d forbidden lists, %d workloads; %+v", forbidden, len(r.Workloads), r.Cluster)
	}
}
