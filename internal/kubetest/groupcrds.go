package kubetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The CRDs of LeaderWorkerSet and KServe are the projects' own, read from
// their Go modules, so the API server validates the test objects as a
// cluster with them installed does. LWS is a dependency of headroom (its
// API types are imported), so its version is go.mod's. KServe's types are
// not imported (admission/kserve.go says why): its module is fetched by
// version, and its hash is checked against the one below, which is
// KServe v0.15.0's go.sum line (h1: of the module's files).
const (
	lwsModule     = "sigs.k8s.io/lws"
	lwsCRDFile    = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
	kserveModule  = "github.com/kserve/kserve"
	kserveVersion = "v0.15.0"
	kserveSum     = "h1:TK6lN8XVIzc/5KQ76GULEKYiJ2obkTRRI3Z2Iwuld5Y="
	kserveCRDFile = "config/crd/full/serving.kserve.io_inferenceservices.yaml"
)

// LeaderWorkerSetCRD is the LeaderWorkerSet CRD (leaderworkerset.x-k8s.io/v1)
// of the sigs.k8s.io/lws version in go.mod.
func LeaderWorkerSetCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	// Inside the main module: go.mod's version, verified by go.sum.
	dir := goModuleDir(t, "", lwsModule, "")
	return readCRD(t, filepath.Join(dir, lwsCRDFile))
}

// InferenceServiceCRD is KServe v0.15.0's InferenceService CRD
// (serving.kserve.io/v1beta1).
func InferenceServiceCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	// Outside the main module, so that go.mod and go.sum stay as they are.
	dir := goModuleDir(t, t.TempDir(), kserveModule+"@"+kserveVersion, kserveSum)
	return readCRD(t, filepath.Join(dir, kserveCRDFile))
}

// goModuleDir downloads a module through the Go command (the module proxy,
// then the module cache) and returns its directory. in is the directory
// the command runs in ("" for the test's own, inside the main module);
// sum, when set, is the hash the module must have.
func goModuleDir(t testing.TB, in, module, sum string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = in
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil || m.Error != "" {
		t.Fatalf("go mod download %s: %v %s %s", module, err, m.Error, stderr.String())
	}
	if sum != "" && m.Sum != sum {
		t.Fatalf("module %s has hash %s, want %s", module, m.Sum, sum)
	}
	return m.Dir
}

// readCRD reads one CRD from a YAML file.
func readCRD(t testing.TB, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.TrimPrefix(bytes.TrimSpace(data), []byte("---\n"))
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &crd
}
