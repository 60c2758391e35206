package audit

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/vllm"
)

// metricsEdited serves a real vLLM exposition with its cache_config_info
// labels edited: the blocks a stand-in reports, and its simulated mark.
type metricsEdited map[string]string

func (m metricsEdited) PodMetrics(_ context.Context, namespace, pod string, _ int) (io.ReadCloser, error) {
	edit, ok := m[namespace+"/"+pod]
	if !ok {
		return nil, fmt.Errorf("503 Service Unavailable")
	}
	// vLLM 0.11.0's exposition (num_gpu_blocks="29751").
	body, err := os.ReadFile("../telemetry/testdata/vllm/vllm-0.11.0-v1.txt")
	if err != nil {
		return nil, err
	}
	return io.NopCloser(strings.NewReader(strings.Replace(string(body), `num_gpu_blocks="29751"`, edit, 1))), nil
}

// TestAuditKVBelowPlan: a server reporting far fewer KV blocks than its
// plan is a finding naming the pod, its share and a cause; the pods are
// ranked by share; a simulated stand-in is compared but never learnable.
func TestAuditKVBelowPlan(t *testing.T) {
	m := metricsEdited{
		"llm/hot":             `num_gpu_blocks="500"`,
		"llm/seqs-7d9f-abcde": `num_gpu_blocks="400",simulated="true"`,
	}
	r, err := Run(context.Background(), fakeClient(readAll(t)), Options{Namespace: "llm", Live: true, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.KVVsPlan) != 2 {
		t.Fatalf("compared %d pods: %+v", len(r.KVVsPlan), r.KVVsPlan)
	}
	if r.KVVsPlan[0].Gap.Share > r.KVVsPlan[1].Gap.Share {
		t.Errorf("not ranked by share: %.3f then %.3f", r.KVVsPlan[0].Gap.Share, r.KVVsPlan[1].Gap.Share)
	}
	for _, k := range r.KVVsPlan {
		// 500 or 400 blocks of 16 tokens: the share is the actual tokens
		// over the plan's, computed from the blocks both sides count.
		if k.Gap.ActualBlocks != 500 && k.Gap.ActualBlocks != 400 || !k.Gap.Far || k.Gap.Cause == "" || k.Gap.Fix == "" {
			t.Errorf("%s: %+v", k.Pod, k.Gap)
		}
		want := float64(k.Gap.ActualBlocks*16) / float64(k.Gap.PredictedTokens)
		if k.Gap.Share != want {
			t.Errorf("%s: share %v, want %v", k.Pod, k.Gap.Share, want)
		}
		sim := k.Pod == "seqs-7d9f-abcde"
		if k.Simulated != sim || k.Learnable == sim {
			t.Errorf("%s: simulated %t learnable %t", k.Pod, k.Simulated, k.Learnable)
		}
		if k.Learnable && (k.Record.NumGPUBlocks != k.Gap.ActualBlocks || k.Record.KVTokens != k.Gap.ActualTokens || k.Record.Source != "live server "+k.Pod || k.Record.Measured() == nil) {
			t.Errorf("%s: record %+v", k.Pod, k.Record)
		}
	}
	got := byName(r)
	hot := got["Pod/hot"]
	if !slices.Contains(codes(hot), CodeKVBelowPlan) || !strings.Contains(findingsText(hot), "pod hot: gets ") || !strings.Contains(findingsText(hot), "cause: ") {
		t.Errorf("hot:\n%s", findingsText(hot))
	}
	if !strings.Contains(findingsText(got["Deployment/seqs"]), "(a simulated stand-in)") {
		t.Errorf("seqs:\n%s", findingsText(got["Deployment/seqs"]))
	}
}

// TestLiveRecordCorrectsPlan: the record --learn writes from a server
// with 31% of the planned blocks matches the plan's key, and a plan that
// takes it gives the blocks the server got: the cluster's own pods
// correct later plans.
func TestLiveRecordCorrectsPlan(t *testing.T) {
	spec, ok := catalog.Lookup("Qwen/Qwen3-14B")
	if !ok {
		t.Fatal("Qwen/Qwen3-14B is not in the catalog")
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	set, err := vllm.ParseFlags([]string{"--gpu-memory-utilization", "0.9", "--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = vllm.MustVersion("0.21.0")
	in := memory.Input{Model: spec, Device: sel.Device, Count: 1, Settings: set}
	b, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := memory.CompareKV(in, b, memory.EngineCache{NumGPUBlocks: b.NumBlocks * 31 / 100, BlockSize: 16, GPUMemoryUtilization: 0.9})
	if !ok || !g.Far {
		t.Fatalf("%+v", g)
	}
	rec := liveRecord("p", b, g, 0.9, time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC))
	if _, ok := probe.LatestMatch([]probe.Record{rec}, probe.KeyFor(spec, sel.Device, set)); !ok {
		t.Fatalf("the record %+v does not match the plan's key", rec)
	}
	in.Measured = rec.Measured()
	if in.Measured == nil {
		t.Fatal("the record measures nothing")
	}
	again, err := memory.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if again.NumBlocks != g.ActualBlocks || again.KVTokens != g.ActualTokens {
		t.Errorf("the corrected plan: %d blocks, %d tokens; the server got %d, %d", again.NumBlocks, again.KVTokens, g.ActualBlocks, g.ActualTokens)
	}
}
