package kubetest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// ReadObjects reads a file of Kubernetes objects (YAML or JSON) separated
// by "---" lines; documents without a kind (comments) are skipped.
func ReadObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m["kind"] != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// Create creates objs in the API server behind cfg, whatever their kind
// (the server's discovery maps each to its resource), with the namespaces
// they name. The API server drops status on create; a pod's is written
// through the status subresource, as the kubelet writes it.
func Create(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	namespaces := map[string]bool{}
	for _, o := range objs {
		ns := o.GetNamespace()
		if ns == "" || namespaces[ns] {
			continue
		}
		namespaces[ns] = true
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		ri := dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		created, err := ri.Create(ctx, o, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
		if status, ok := o.Object["status"]; ok && gvk.Group == "" && gvk.Kind == "Pod" {
			created.Object["status"] = status
			if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("status of pod %s: %v", o.GetName(), err)
			}
		}
	}
}

// AdminKubeconfig writes a kubeconfig of an administrator of env's
// (started) API server to a file of the test's and returns its path, for
// commands that take --kubeconfig.
func AdminKubeconfig(t *testing.T, env *envtest.Environment) string {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
