package audit

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzAuditObject audits one object of any shape as a Deployment,
// StatefulSet, Pod, Workspace, LeaderWorkerSet or InferenceService, beside
// the nodes of the test cluster: whatever the cluster returns, the audit
// reports and never panics. Seeds: every object of the test cluster
// (readAll).
func FuzzAuditObject(f *testing.F) {
	base := readAll(f)
	var nodes []*unstructured.Unstructured
	for _, o := range base {
		if o.GetKind() == "Node" {
			nodes = append(nodes, o)
			continue
		}
		data, err := o.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
	}
	kinds := []struct{ apiVersion, kind string }{{"apps/v1", "Deployment"}, {"apps/v1", "StatefulSet"}, {"v1", "Pod"}, {"kaito.sh/v1beta1", "Workspace"},
		{"leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"}, {"serving.kserve.io/v1beta1", "InferenceService"}}
	f.Fuzz(func(t *testing.T, data []byte, k uint8) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		o := &unstructured.Unstructured{Object: m}
		kind := kinds[int(k)%len(kinds)]
		o.SetAPIVersion(kind.apiVersion)
		o.SetKind(kind.kind)
		o.SetNamespace("llm")
		if o.GetName() == "" {
			o.SetName("fuzz")
		}
		objs := append([]*unstructured.Unstructured{o}, nodes...)
		r, err := Run(context.Background(), fakeClient(objs), Options{Namespace: "llm"})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range r.Workloads {
			if w.Status == "" || w.Findings == nil {
				t.Fatalf("workload %+v", w)
			}
		}
	})
}
