package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hungMetrics never answers: the read ends when its context does.
type hungMetrics struct{ inFlight, most atomic.Int32 }

func (m *hungMetrics) PodMetrics(ctx context.Context, _, _ string, _ int) (io.ReadCloser, error) {
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for old := m.most.Load(); n > old && !m.most.CompareAndSwap(old, n); old = m.most.Load() {
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Twenty running pods whose /metrics never answer are read LiveReads at
// a time, each within MetricsTimeout, and each is named: read one after
// the other they took twenty timeouts.
func TestLiveReadsInParallel(t *testing.T) {
	var objs []*unstructured.Unstructured
	for i := range 20 {
		var u unstructured.Unstructured
		pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hung-%02d","namespace":"llm"},`+
			`"spec":{"containers":[{"name":"vllm","image":"vllm/vllm-openai:v0.19.0","args":["meta-llama/Llama-3.1-8B-Instruct"],`+
			`"resources":{"limits":{"nvidia.com/gpu":"1"}}}],"nodeSelector":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}},"status":{"phase":"Running"}}`, i)
		if err := json.Unmarshal([]byte(pod), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &u)
	}
	m := &hungMetrics{}
	var reported atomic.Int32
	begin := time.Now()
	r, err := Run(context.Background(), fakeClient(objs), Options{Namespace: "llm", Live: true, Metrics: m, MetricsTimeout: 300 * time.Millisecond,
		MetricsProgress: func(done, total int) { reported.Store(int32(done*100 + total)) }})
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if took > 3*time.Second || m.most.Load() != LiveReads {
		t.Errorf("20 hung pods took %s, %d at most at once; want 2 rounds of 300 ms, %d at once", took, m.most.Load(), LiveReads)
	}
	if reported.Load() != 20*100+20 {
		t.Errorf("the last progress said %d", reported.Load())
	}
	named := 0
	for _, w := range r.Workloads {
		for _, f := range w.Findings {
			if f.Code == CodeMetricsUnread && f.Unread() && strings.Contains(f.Message, "pod "+w.Name+": metrics not read: no answer within 300ms") {
				named++
			}
		}
	}
	if named != 20 {
		t.Errorf("%d of 20 pods named as not read: %+v", named, r.Workloads)
	}
}
