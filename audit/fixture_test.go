package audit

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"headroom.dev/headroom/internal/kubetest"
)

// readCluster reads testdata/cluster.yaml.
func readCluster(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	return kubetest.ReadObjects(t, "testdata/cluster.yaml")
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
