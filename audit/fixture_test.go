package audit

import (
	"bytes"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"
)

// readCluster reads testdata/cluster.yaml.
func readCluster(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("testdata/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// listKinds are the resources the audit lists, for the fake client.
var listKinds = map[schema.GroupVersionResource]string{
	deploymentsResource:   "DeploymentList",
	statefulSetsResource:  "StatefulSetList",
	podsResource:          "PodList",
	nodesResource:         "NodeList",
	workspaceResources[0]: "WorkspaceList",
	workspaceResources[1]: "WorkspaceList",
	lwsResource:           "LeaderWorkerSetList",
	isvcResource:          "InferenceServiceList",
	{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}: "HorizontalPodAutoscalerList",
	{Version: "v1", Resource: "configmaps"}:                                     "ConfigMapList",
}

func fakeClient(objs []*unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, ro...)
}
