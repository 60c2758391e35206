package kubetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRDModule is a Go module that carries another project's CRDs as YAML,
// at a pinned version: the tests install the real schemas, so the API
// server validates every field of the chart's objects of those kinds.
type CRDModule struct {
	Module, Version string
	// Files are the CRD files, relative to the module's root.
	Files []string
}

// The CRDs of the kinds the chart renders, each at the version written
// beside it.
var (
	// CertManager: cert-manager v1.18.2 (Issuer, Certificate). deploy/crds
	// holds the CRDs as Helm templates of cert-manager's chart: the
	// template text is in comments and in labels, which are dropped.
	CertManager = CRDModule{Module: "github.com/cert-manager/cert-manager", Version: "v1.18.2",
		Files: []string{"deploy/crds/crd-issuers.yaml", "deploy/crds/crd-certificates.yaml"}}
	// PrometheusOperator: Prometheus Operator v0.85.0 (ServiceMonitor,
	// PrometheusRule), the one release of its root module the Go module
	// proxy lists (its pkg/apis/monitoring module goes to v0.95.2; both
	// kinds are monitoring.coreos.com/v1 there too), whose
	// example/prometheus-operator-crd holds the CRDs controller-gen made.
	PrometheusOperator = CRDModule{Module: "github.com/prometheus-operator/prometheus-operator", Version: "v0.85.0",
		Files: []string{"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
			"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"}}
	// KEDA: KEDA v2.21.0 (ScaledObject), config/crd/bases as controller-gen
	// made it.
	KEDA = CRDModule{Module: "github.com/kedacore/keda/v2", Version: "v2.21.0",
		Files: []string{"config/crd/bases/keda.sh_scaledobjects.yaml"}}
)

// moduleDirs caches go mod download's answers within a test binary.
var moduleDirs sync.Map

// dir downloads the module through the Go module proxy into the module
// cache (once; later runs read the cache, offline too) and returns where
// it is. It runs outside this module, so no go.mod is read or changed.
func (m CRDModule) dir(t *testing.T) string {
	t.Helper()
	key := m.Module + "@" + m.Version
	if d, ok := moduleDirs.Load(key); ok {
		return d.(string)
	}
	cmd := exec.Command("go", "mod", "download", "-json", key)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %v %s%s", key, err, info.Error, stderr.Bytes())
	}
	moduleDirs.Store(key, info.Dir)
	return info.Dir
}

// CRDs reads the module's CRD files.
func (m CRDModule) CRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dir := m.dir(t)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s@%s: %v", m.Module, m.Version, err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(doc, crd); err != nil {
				t.Fatalf("%s@%s %s: %v", m.Module, m.Version, f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			// Labels and annotations are the other project's install
			// metadata (in cert-manager's files, unrendered templates).
			crd.Labels, crd.Annotations = nil, nil
			out = append(out, crd)
		}
	}
	if len(out) != len(m.Files) {
		t.Fatalf("%s@%s: %d CRDs in %d files", m.Module, m.Version, len(out), len(m.Files))
	}
	return out
}
