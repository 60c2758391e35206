package sim

import (
	"context"
	"math"
	"testing"

	"headroom.dev/headroom/vllm"
)

// Two stages on a fixed 10 ms pass (5 ms a stage, no engine CPU), a
// budget of 16 tokens a batch: requests A and B (16 prompt tokens, 3
// outputs each) arrive at 0.
//
//	t=0   batch 1 {A's prompt}: the core hands it to stage 1 and, with
//	      one batch in flight of two, schedules again at once: batch 2
//	      {B's prompt} (A has nothing left to schedule); stage 1 takes it
//	      at 5, out at max(5 + 10, 10 + 5) = 15. Two in flight: the core
//	      waits for the oldest.
//	t=10  batch 1 out: A's first token; batch 3 {A}, out at 20
//	t=15  batch 2 out: B's first token; batch 4 {B}, out at 25
//	...   A's tokens at 10, 20, 30; B's at 15, 25, 35
//
// One batch at a time (no stages): {A} 0-10, {A, 15 of B's} 10-20, {A,
// B's last} 20-30, {B} 30-40, 40-50: A done at 30, B's first token at 30
// and its end at 50.
//
// With B arriving at 2 ms, while the core waits for batch 1 (it waits on
// the oldest batch when it has nothing to schedule, and reads no new
// request meanwhile), B joins at 10: batch 3 {A, 15 of B's} out at 20,
// and at once batch 4 {B's last token}, its prompt's next chunk, which
// stage 1 takes at 15, out at max(15 + 10, 20 + 5) = 25: B's first token
// at 25, then 35, 45; A's at 10, 20, 30.
func TestPipelineBatchesInFlight(t *testing.T) {
	run := func(stages int, bAt float64) map[string]Event {
		e, err := New(Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 16, MaxModelLen: 64,
			Timer: Fixed(0.010), PipelineStages: stages, FirstEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		src := &sliceSource{{ID: "A", PromptTokens: 16, OutputTokens: 3}, {ID: "B", Arrival: bAt, PromptTokens: 16, OutputTokens: 3}}
		got := map[string]Event{}
		if _, err := Run(context.Background(), e, src, RunOptions{OnFinish: func(ev Event) { got[ev.ID] = ev }}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		stages                            int
		bAt, aFirst, aDone, bFirst, bDone float64
	}{
		{2, 0, 0.010, 0.030, 0.015, 0.035},
		{1, 0, 0.010, 0.030, 0.030, 0.050},
		{2, 0.002, 0.010, 0.030, 0.025, 0.045},
	} {
		got := run(c.stages, c.bAt)
		a, b := got["A"], got["B"]
		for _, x := range []struct {
			name      string
			got, want float64
		}{{"A's first token", a.FirstToken, c.aFirst}, {"A's end", a.Finish, c.aDone}, {"B's first token", b.FirstToken, c.bFirst}, {"B's end", b.Finish, c.bDone}} {
			if math.Abs(x.got-x.want) > 1e-9 {
				t.Errorf("%d stages, B at %.3f s: %s at %.4f s, want %.4f", c.stages, c.bAt, x.name, x.got, x.want)
			}
		}
	}
}

// Llama-3.1-70B on 4 L40S as TP 2 × PP 2, against the same GPUs running
// each batch a stage at a time (what the clock did before). A stage holds
// half the layers; two batches in flight keep both stages busy. Where a
// batch's time grows with its tokens (a prefill, compute-bound), two
// half-size batches in flight take the time of one half-size pass for
// both, and the throughput nearly doubles; where a decode's pass is the
// weights' read, the same whatever the batch, two half batches read the
// weights twice in that time and the throughput barely moves.
func TestPipelineThroughput(t *testing.T) {
	set := vllm.Settings{Version: vllm.Version{Minor: 11}, TensorParallelSize: 2, PipelineParallelSize: 2, MaxModelLen: 4096}
	b := plan(t, "meta-llama/Llama-3.1-70B-Instruct", "L40S", 4, set)
	c, _ := CalibrationFor(b.Device)
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	run := func(stages int, src Source, conc int) *Report {
		cfg := ConfigFor(b, m)
		cfg.PipelineStages = stages
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), e, src, RunOptions{Concurrency: conc})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	prefill := func() Source { return &benchSource{n: 64, prompt: 3000, output: 2} }
	decode := func() Source { return &benchSource{n: 256, prompt: 64, output: 400} }
	p1, p2 := run(1, prefill(), 0), run(2, prefill(), 0)
	d1, d2 := run(1, decode(), 64), run(2, decode(), 64)
	t.Logf("prefill-bound: %.3f -> %.3f req/s; decode-bound: %.3f -> %.3f req/s, TPOT %.1f -> %.1f ms",
		p1.RequestsPerS, p2.RequestsPerS, d1.RequestsPerS, d2.RequestsPerS, d1.TPOT.Mean, d2.TPOT.Mean)
	if r := p2.RequestsPerS / p1.RequestsPerS; r < 1.6 || r > 2.05 {
		t.Errorf("prefill-bound: two stages in flight give %.2f times the throughput, want nearly 2", r)
	}
	if r := d2.RequestsPerS / d1.RequestsPerS; r < 0.9 || r > 1.3 {
		t.Errorf("decode-bound: two stages in flight give %.2f times the throughput, want about 1", r)
	}
}

// The slowest stage's share of a pass, as vLLM splits the layers
// (get_pp_indices) and puts the LM head on the last stage. Qwen3-14B: 40
// layers of 13.21 B parameters and a 151,936 × 5,120 = 0.778 B head (h =
// 0.778 / 13.99 = 0.0556); at 3 stages 13, 14 and 13 layers, the last
// 13/40 × 0.9444 + 0.0556 = 0.3625 of a pass (the middle 0.3306). At 2
// stages 20 and 20: the last 0.4722 + 0.0556 = 0.5278.
func TestPipelineShare(t *testing.T) {
	b := plan(t, "Qwen/Qwen3-14B", "H100-80GB", 1, vllm.Settings{Version: vllm.Version{Minor: 11}})
	c, _ := CalibrationFor(b.Device)
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	if h := m.HeadParams / (m.LinearParams + m.HeadParams); math.Abs(h-0.0556) > 0.0005 {
		t.Fatalf("the head is %.4f of the parameters a token passes, want 0.0556", h)
	}
	for stages, want := range map[int]float64{1: 1, 2: 0.5278, 3: 0.3625} {
		if got := m.PipelineShare(stages); math.Abs(got-want) > 0.0005 {
			t.Errorf("%d stages: the slowest runs %.4f of a pass, want %.4f", stages, got, want)
		}
	}
}
