package loadtest

import (
	"math"
	"testing"
	"time"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// A load test of `simulate --serve` decoding speculatively (3 drafts a
// step, per-token acceptance 0.6): the run's spec_decode is what the
// server's counters gained during it, and the acceptance it reads back
// is the one the server drew by. 40 requests of 64 output tokens make
// about 40 × 63 / 2.18 ≈ 1,160 drafts (1 + 0.6 + 0.36 + 0.216 = 2.18
// tokens a step): the estimate's standard error is about 0.015, the bound
// 0.05. Near a request's end its drafts are shorter than 3, which reads
// α a little low.
func TestSpeculativeServerAcceptance(t *testing.T) {
	ts := serveSim(t, sim.Config{NumGPUBlocks: 4000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 4096,
		Timer: sim.Fixed(0.010), Speculation: &sim.Speculation{K: 3, Acceptance: 0.6, Lookahead: 3, Seed: 3}}, 10)

	c := &Client{Target: Target{BaseURL: ts.URL, Model: "sim-model", Endpoint: EndpointCompletions, IgnoreEOS: true,
		Timeout: 10 * time.Second, StallTimeout: 2 * time.Second}, HTTP: ts.Client(), Clock: RealClock{}}
	spec := workload.Spec{Concurrency: 4, NumRequests: 40, Prompt: workload.Fixed(100), Output: workload.Fixed(64)}
	r := run(t, Config{Client: c, Concurrency: 4, Stream: stream(t, spec), Scraper: &telemetry.Scraper{URL: ts.URL + "/metrics", Client: ts.Client()}})
	if r.Completed != 40 {
		t.Fatalf("completed %d of 40: %v", r.Completed, r.ErrorExamples)
	}
	a := r.SpecDecode
	if a == nil {
		t.Fatal("no spec_decode measured")
	}
	t.Logf("%+v", *a)
	if a.Drafts < 1000 || a.ProposedPerDraft > 3 || math.Abs(a.TokenAcceptance-0.6) > 0.05 || len(a.PerPosition) != 3 {
		t.Errorf("measured %+v, want α 0.6 ± 0.05 over about 1,160 drafts of at most 3", *a)
	}
	// The tokens a request emits in a step arrive as one chunk: fewer
	// gaps than tokens.
	if got := r.ITL.Count; got >= 40*63 {
		t.Errorf("%d inter-token gaps for 40 × 63 tokens after the first: the steps' tokens came one chunk each", got)
	}
}
