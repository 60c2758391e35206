package audit

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// want is what the audit must say about one workload of the test cluster
// (readAll).
type want struct {
	status string
	codes  []string // codes that must be among its findings
	gpu    string   // the first engine's GPU, when planned
}

// wantCluster is the expected audit of the test cluster (readAll), by
// kind/name, and why:
var wantCluster = map[string]want{
	// Llama-3.1-8B keeps 2 (K,V) × 8 KV heads × 128 × 32 layers × 2 bytes
	// = 128 KiB of KV per token: 131072 tokens need 16 GiB, and an L4
	// (22 GiB usable) holds 15 GiB of bf16 weights.
	"Deployment/too-long": {LevelWillNotStart, []string{"max_model_len_does_not_fit"}, ""},
	// No node selection: the GPU is its pod's node's (H100, 79 GiB). At
	// 0.85 that leaves ~50 GiB of KV, ~400k tokens: 12 requests of 32768
	// at once, and it admits 512. Without the traffic max-num-seqs is kept
	// (plan's one rule), so that is information, not a risk.
	"Deployment/seqs": {StatusOK, []string{CodeSeqsBeyondCache}, "H100-80GB"},
	// 16 requests of 2048 tokens fit; an HPA scales it on CPU alone.
	"Deployment/cpu-hpa": {LevelRisk, []string{"cpu_only_hpa"}, "H100-80GB"},
	"Deployment/fine":    {StatusOK, nil, "H100-80GB"},
	// A liveness probe with Kubernetes' defaults restarts it after 30 s;
	// Llama-3.1-8B is expected to start in 106 s (docs/startup.md), so a
	// probe should allow 212 s; the default liveness probe allows 30 s.
	"Deployment/probe": {LevelRisk, []string{"probe_kills_loading_server"}, "H100-80GB"},
	// Its pod runs on a time-sliced L4.
	"StatefulSet/shared": {LevelRisk, []string{"shared_gpu"}, "L4"},
	"Pod/unknown-gpu":    {LevelNotChecked, []string{"not_checked"}, ""},
	"Pod/no-gpu-info":    {LevelNotChecked, []string{"not_checked"}, ""},
	// Restarted twice, last time OOMKilled (its status).
	"Pod/hot": {LevelRisk, []string{CodeOOMKilled}, "H100-80GB"},
	// resource is a string, not an object.
	"Workspace/ws-bad": {LevelNotChecked, []string{"cannot_read"}, ""},
	// One A100-80GB, KAITO's --max-model-len auto at 0.84: the whole
	// 131072 tokens fit, but ~50 GiB of KV at 128 KiB a token are ~400k
	// tokens, 3 requests of 131072, and vLLM admits 256: information.
	"Workspace/ws-a100": {StatusOK, []string{"max_model_len_auto", CodeSeqsBeyondCache}, "A100-80GB"},
	// vLLM's LeaderWorkerSet example: Llama-3.1-405B at tp 8 × pp 2 on 2
	// pods × 8 H100 at 32768 tokens fits (admission's TestLeaderWorkerSet),
	// and vLLM's default --max-num-seqs 1024 is past what its KV cache
	// (~650k tokens) holds of requests of 32768 (about 20): information,
	// as the traffic decides max-num-seqs. The StatefulSets LWS made of it
	// and its pods are its own.
	"LeaderWorkerSet/lws-405b": {StatusOK, []string{CodeSeqsBeyondCache}, "H100-80GB"},
	// The same at tp 8 in one pod: 94.53 GiB of weights a GPU (memory's
	// TestAlternativesMultiNode works it out).
	"LeaderWorkerSet/lws-one-pod": {LevelWillNotStart, []string{"weights_do_not_fit"}, "H100-80GB"},
	// tp 8 × pp 2 in 3 pods of 8: it starts on 16 of its 24 GPUs.
	"LeaderWorkerSet/lws-idle": {LevelRisk, []string{"idle_group_gpus"}, "H100-80GB"},
	// Llama-3.1-70B on one A100-80GB through KServe's Hugging Face
	// runtime: 131.45 GiB of weights (admission's TestInferenceService).
	"InferenceService/llama-70b": {LevelWillNotStart, []string{"weights_do_not_fit"}, "A100-80GB"},
}

func byName(r Report) map[string]Workload {
	m := map[string]Workload{}
	for _, w := range r.Workloads {
		m[w.Kind+"/"+w.Name] = w
	}
	return m
}

func codes(w Workload) []string {
	var out []string
	for _, f := range w.Findings {
		out = append(out, f.Code)
	}
	return out
}

// CheckCluster compares an audit of the test cluster with wantCluster;
// the end-to-end test calls it on the audit of a real API server.
func checkCluster(t *testing.T, r Report) {
	t.Helper()
	got := byName(r)
	for name, w := range wantCluster {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: not in the audit", name)
			continue
		}
		if g.Status != w.status {
			t.Errorf("%s: status %s, want %s; findings:\n%s", name, g.Status, w.status, findingsText(g))
		}
		for _, c := range w.codes {
			if !slices.Contains(codes(g), c) {
				t.Errorf("%s: no %s finding; findings:\n%s", name, c, findingsText(g))
			}
		}
		if w.gpu != "" && (len(g.Engines) == 0 || g.Engines[0].GPU != w.gpu) {
			t.Errorf("%s: engines %+v, want GPU %s", name, g.Engines, w.gpu)
		}
	}
	for name := range got {
		if _, ok := wantCluster[name]; !ok {
			t.Errorf("%s is audited but runs no vLLM (or belongs to another workload)", name)
		}
	}
	if r.Workloads[0].Status != LevelWillNotStart {
		t.Errorf("ranked first: %s/%s %s", r.Workloads[0].Kind, r.Workloads[0].Name, r.Workloads[0].Status)
	}
	if !r.AtRisk() {
		t.Error("AtRisk is false")
	}
	if s := r.Summary; s.Workloads != len(wantCluster) || s.WillNotStart != 3 || s.NotChecked != 3 || s.OK != 4 || s.AtRisk != 5 {
		t.Errorf("summary %+v", s)
	}
}

func findingsText(w Workload) string {
	var b strings.Builder
	for _, f := range w.Findings {
		fmt.Fprintf(&b, "  %s %s: %s\n", f.Level, f.Code, f.Message)
	}
	return b.String()
}

func TestAuditCluster(t *testing.T) {
	r, err := Run(context.Background(), fakeClient(readAll(t)), Options{Namespace: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	checkCluster(t, r)
	if g := byName(r)["Deployment/seqs"]; len(g.Engines) == 0 || !strings.HasPrefix(g.Engines[0].GPUFrom, "its node's label") {
		t.Errorf("seqs: GPU from %+v, want its pod's node", g.Engines)
	}
	// A group's pods are its leader's and its workers', by LWS's label; as
	// vLLM's example, it selects no node: the GPU is its leader pod's node's.
	if g := byName(r)["LeaderWorkerSet/lws-405b"]; len(g.Pods) != 2 || g.Pods[0].Name != "lws-405b-0" || g.Pods[1].Name != "lws-405b-0-1" ||
		g.Engines[0].GPUCount != 16 || !strings.HasPrefix(g.Engines[0].GPUFrom, "its node's label") {
		t.Errorf("lws-405b: pods %+v, engines %+v", g.Pods, g.Engines)
	}
}

func TestAuditSelector(t *testing.T) {
	r, err := Run(context.Background(), fakeClient(readAll(t)), Options{AllNamespaces: true, Selector: "app in (fine,hot)"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range r.Workloads {
		names = append(names, w.Kind+"/"+w.Name)
	}
	if !slices.Equal(names, []string{"Pod/hot", "Deployment/fine"}) {
		t.Errorf("audited %v", names)
	}
	if _, err := Run(context.Background(), fakeClient(nil), Options{Selector: "app in (("}); err == nil {
		t.Error("a selector that does not parse is not an error")
	}
}

// A namespace the user may not list is a finding, not an error; the rest
// is audited.
func TestAuditForbidden(t *testing.T) {
	c := fakeClient(readAll(t))
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", fmt.Errorf(`User "dev" cannot list resource "statefulsets" in API group "apps" in the namespace "llm"`))
	})
	c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", fmt.Errorf("no"))
	})
	r, err := Run(context.Background(), c, Options{Namespace: "llm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cluster) != 2 || !strings.Contains(r.Cluster[0].Message, "cannot list nodes") || !strings.Contains(r.Cluster[1].Message, "cannot list statefulsets in namespace llm") {
		t.Errorf("cluster findings %+v", r.Cluster)
	}
	got := byName(r)
	if _, ok := got["StatefulSet/shared"]; ok {
		t.Error("a forbidden StatefulSet was audited")
	}
	// Without nodes, seqs' GPU is unknown.
	if g := got["Deployment/seqs"]; g.Status != LevelNotChecked {
		t.Errorf("seqs without node labels: %s", g.Status)
	}
	if g := got["Deployment/too-long"]; g.Status != LevelWillNotStart {
		t.Errorf("too-long: %s", g.Status)
	}
}

// metricsFiles serves each pod's /metrics from a real vLLM exposition.
type metricsFiles map[string]string

func (m metricsFiles) PodMetrics(_ context.Context, namespace, pod string, port int) (io.ReadCloser, error) {
	if port != 8000 {
		return nil, fmt.Errorf("port %d", port)
	}
	f, ok := m[namespace+"/"+pod]
	if !ok {
		return nil, fmt.Errorf("503 Service Unavailable")
	}
	return os.Open(f)
}

func TestAuditLive(t *testing.T) {
	// hot: vLLM 0.11.0 under load, KV 94.12% used, 17 waiting, 231
	// preemptions. seqs: 0.10.2, KV 35%, nothing waiting, no preemption.
	m := metricsFiles{
		"llm/hot":             "../telemetry/testdata/vllm/vllm-0.11.0-v1.txt",
		"llm/seqs-7d9f-abcde": "../telemetry/testdata/vllm/vllm-0.10.2-both-names.txt",
	}
	r, err := Run(context.Background(), fakeClient(readAll(t)), Options{Namespace: "llm", Live: true, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(r)
	hot := got["Pod/hot"]
	for _, c := range []string{CodeOOMKilled, CodeKVFull, CodeWaiting, CodePreemptions} {
		if !slices.Contains(codes(hot), c) {
			t.Errorf("hot: no %s:\n%s", c, findingsText(hot))
		}
	}
	if len(hot.Pods) != 1 || hot.Pods[0].Metrics == nil || hot.Pods[0].Metrics.RequestsWaiting != 17 || hot.Pods[0].Restarts != 2 || hot.Pods[0].LastTermination != "OOMKilled" {
		t.Errorf("hot pods %+v", hot.Pods)
	}
	seqs := got["Deployment/seqs"]
	if len(seqs.Pods) != 1 || seqs.Pods[0].Metrics == nil || seqs.Pods[0].Metrics.KVCacheUsage != 0.35 {
		t.Errorf("seqs pods %+v", seqs.Pods)
	}
	for _, c := range []string{CodeKVFull, CodeWaiting, CodePreemptions, CodeRestarts} {
		if slices.Contains(codes(seqs), c) {
			t.Errorf("seqs at 35%% KV: %s", c)
		}
	}
	// shared-0 has no metrics: an info finding, not a failure.
	shared := got["StatefulSet/shared"]
	if !slices.Contains(codes(shared), CodeMetricsUnread) || shared.Status != LevelRisk {
		t.Errorf("shared:\n%s", findingsText(shared))
	}
}
