package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"headroom.dev/headroom/internal/kubetest"
)

// fleet is n copies of the planned workloads of the test cluster (readAll)
// (Deployments, StatefulSets, Pods, Workspaces, LeaderWorkerSets,
// InferenceServices, in their proportions), renamed, with the nodes and
// the HPA.
func fleet(b *testing.B, n int) []*unstructured.Unstructured {
	base := readAll(b)
	var out, workloads []*unstructured.Unstructured
	for _, o := range base {
		switch o.GetKind() {
		case "Node", "HorizontalPodAutoscaler":
			out = append(out, o)
		case "Deployment", "StatefulSet", "Workspace", "LeaderWorkerSet", "InferenceService":
			if !ownedByAudited(o.GetOwnerReferences()) {
				workloads = append(workloads, o)
			}
		case "Pod":
			if len(o.GetOwnerReferences()) == 0 {
				workloads = append(workloads, o)
			}
		}
	}
	for i := 0; i < n; i++ {
		o := workloads[i%len(workloads)].DeepCopy()
		o.SetName(fmt.Sprintf("%s-%d", o.GetName(), i))
		out = append(out, o)
	}
	return out
}

// listServer serves objs as the API server lists them: GET of a
// resource's collection, cluster-wide or in a namespace, answers a JSON
// list; the rest (a ConfigMap, a version not served) 404. Its lists are
// encoded once, so the server's own time is a copy.
func listServer(b *testing.B, objs []*unstructured.Unstructured) dynamic.Interface {
	plural := map[string]schema.GroupVersionResource{}
	for r := range listKinds {
		plural[strings.TrimSuffix(listKinds[r], "List")+"/"+r.GroupVersion().String()] = r
	}
	items := map[string][]map[string]any{}
	for _, o := range objs {
		r, ok := plural[o.GetKind()+"/"+o.GetAPIVersion()]
		if !ok {
			b.Fatalf("no resource for %s %s", o.GetAPIVersion(), o.GetKind())
		}
		p := resourcePath(r, o.GetNamespace())
		items[p] = append(items[p], o.Object)
		if o.GetNamespace() != "" {
			all := resourcePath(r, "")
			items[all] = append(items[all], o.Object)
		}
	}
	bodies := map[string][]byte{}
	for r, kind := range listKinds {
		for _, ns := range []string{"", "llm"} {
			p := resourcePath(r, ns)
			list := map[string]any{"apiVersion": r.GroupVersion().String(), "kind": kind, "metadata": map[string]any{"resourceVersion": "1"}, "items": items[p]}
			if items[p] == nil {
				list["items"] = []any{}
			}
			data, err := json.Marshal(list)
			if err != nil {
				b.Fatal(err)
			}
			bodies[p] = data
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok || r.Method != http.MethodGet || strings.Contains(r.URL.Path, "workspaces") && strings.Contains(r.URL.Path, "v1alpha1") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	client, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	return client
}

// resourcePath is the API path of a resource's collection.
func resourcePath(r schema.GroupVersionResource, namespace string) string {
	p := "/api/" + r.Version
	if r.Group != "" {
		p = "/apis/" + r.Group + "/" + r.Version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return p + "/" + r.Resource
}

// listAll lists what an audit of namespace llm lists, and nothing more.
func listAll(b *testing.B, c dynamic.Interface) int {
	n := 0
	for _, r := range []schema.GroupVersionResource{nodesResource, podsResource, deploymentsResource, statefulSetsResource, workspaceResources[0], lwsResource, isvcResource} {
		ns := "llm"
		if r == nodesResource {
			ns = ""
		}
		l, err := c.Resource(r).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n += len(l.Items)
	}
	return n
}

// BenchmarkAudit500 audits 500 workloads listed over HTTP from a server
// that answers as the API server does, and in the same loop only lists
// them: the floor an audit cannot go under. It reports the audit's time
// (ns/op), the listing's (list-ns/op) and their ratio (audit/list); the
// two alternate, so a busy machine slows both alike.
// `go test ./audit -run '^$' -bench 500` runs it.
func BenchmarkAudit500(b *testing.B) {
	listThenAudit(b, listServer(b, fleet(b, 500)))
}

// listThenAudit lists, then audits, in turn, and reports the listing's
// time (list-ns/op) and the audit's to it (audit/list).
func listThenAudit(b *testing.B, client dynamic.Interface) {
	var list, audit time.Duration
	for b.Loop() {
		t0 := time.Now()
		if n := listAll(b, client); n < 500 {
			b.Fatalf("listed %d", n)
		}
		t1 := time.Now()
		r, err := Run(context.Background(), client, Options{Namespace: "llm"})
		if err != nil || len(r.Workloads) < 450 {
			b.Fatalf("%d workloads, %v", len(r.Workloads), err)
		}
		list += t1.Sub(t0)
		audit += time.Since(t1)
	}
	b.ReportMetric(float64(list.Nanoseconds())/float64(b.N), "list-ns/op")
	b.ReportMetric(float64(audit)/float64(list), "audit/list")
}

// BenchmarkAudit500Cluster is BenchmarkAudit500 against a real
// kube-apiserver and etcd (KUBEBUILDER_ASSETS), with the LWS and KServe
// CRDs: the same 500 workloads, created once, then listed and audited in
// turn.
func BenchmarkAudit500Cluster(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs a kube-apiserver and etcd: KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh)")
	}
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{kubetest.WorkspaceCRD(), kubetest.LeaderWorkerSetCRD(b), kubetest.InferenceServiceCRD(b)}}
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	cfg.QPS, cfg.Burst = -1, 0
	client := dynamic.NewForConfigOrDie(cfg)
	create(b, client, fleet(b, 500))
	listThenAudit(b, client)
}

// create makes objs in the API server, pods' statuses through their
// subresource.
func create(b *testing.B, c dynamic.Interface, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, ns := range []string{"llm"} {
		nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if _, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	plural := map[string]schema.GroupVersionResource{}
	for r, kind := range listKinds {
		plural[strings.TrimSuffix(kind, "List")+"/"+r.GroupVersion().String()] = r
	}
	for _, o := range objs {
		r := plural[o.GetKind()+"/"+o.GetAPIVersion()]
		created, err := c.Resource(r).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if status, ok := o.Object["status"]; ok && o.GetKind() == "Pod" {
			created.Object["status"] = status
			if _, err := c.Resource(r).Namespace(o.GetNamespace()).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
