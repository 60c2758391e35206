package audit

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"headroom.dev/headroom/internal/kubetest"
)

// readGroups reads testdata/groups: LeaderWorkerSets, with the StatefulSets
// and pods LWS makes of one, and a KServe InferenceService, one object a
// file. They are apart from testdata/cluster.yaml, which other packages'
// tests create in API servers without these projects' CRDs.
func readGroups(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "groups", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/groups: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		out = append(out, kubetest.ReadObject(t, f))
	}
	return out
}

// readAll is the audit's test cluster: testdata/cluster.yaml and
// testdata/groups.
func readAll(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	return append(readCluster(t), readGroups(t)...)
}
