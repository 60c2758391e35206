package audit

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fleet is n copies of the planned workloads of testdata/cluster.yaml
// (Deployments, StatefulSets, Pods, Workspaces, in their proportions),
// renamed, with the nodes and the HPA.
func fleet(b *testing.B, n int) []*unstructured.Unstructured {
	base := readCluster(b)
	var out, workloads []*unstructured.Unstructured
	for _, o := range base {
		switch o.GetKind() {
		case "Node", "HorizontalPodAutoscaler":
			out = append(out, o)
		case "Deployment", "StatefulSet", "Workspace":
			workloads = append(workloads, o)
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

// BenchmarkAudit500 audits 500 workloads read from a fake API client;
// BenchmarkList500 only lists the same objects, the floor an audit cannot
// go under. `go test ./audit -run ^$ -bench 500` prints both.
func BenchmarkAudit500(b *testing.B) {
	objs := fleet(b, 500)
	b.ResetTimer()
	for b.Loop() {
		r, err := Run(context.Background(), fakeClient(objs), Options{Namespace: "llm"})
		if err != nil || len(r.Workloads) < 450 {
			b.Fatalf("%d workloads, %v", len(r.Workloads), err)
		}
	}
}

func BenchmarkList500(b *testing.B) {
	objs := fleet(b, 500)
	b.ResetTimer()
	for b.Loop() {
		c := fakeClient(objs)
		n := 0
		for _, r := range []schema.GroupVersionResource{deploymentsResource, statefulSetsResource, podsResource, workspaceResources[0]} {
			l, err := c.Resource(r).Namespace("llm").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			n += len(l.Items)
		}
		if n < 500 {
			b.Fatalf("listed %d", n)
		}
	}
}
