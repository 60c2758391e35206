// Package kubetest starts the real kube-apiserver and etcd of the
// end-to-end tests (controller-runtime's envtest, with the binaries
// hack/e2e-assets.sh builds) and holds the stand-in CRDs they install. Only
// tests import it.
package kubetest

import (
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Start starts env (its CRDs installed) and stops it when the test ends.
// It skips the test when KUBEBUILDER_ASSETS is not set; pkg is the
// package to name in the message.
func Start(t *testing.T, env *envtest.Environment, pkg string) *rest.Config {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skipf("needs a kube-apiserver and etcd: run KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh) go test %s", pkg)
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	t.Logf("kube-apiserver and etcd up in %v", time.Since(start).Round(time.Millisecond))
	return cfg
}

// StubCRD is a namespaced CRD with another project's group, version and
// kind and a schema that accepts any fields: the API server routes and
// names such objects but does not validate their fields.
func StubCRD(group, version, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
}

// WorkspaceCRD stands in for KAITO's Workspace CRD (kaito.sh/v1beta1).
func WorkspaceCRD() *apiextensionsv1.CustomResourceDefinition {
	return StubCRD("kaito.sh", "v1beta1", "Workspace", "workspaces")
}
