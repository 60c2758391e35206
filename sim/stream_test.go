package sim

import (
	"context"
	"testing"
)

// One request of 101 output tokens on steps of 1 s (newEngine's fixed
// clock): its first token ends step 1 and each later step adds a token.
// Streamed token by token, a client sees 100 gaps of 1 s. With
// --stream-interval 10 vLLM sends tokens 11, 21, …, 101: 10 chunks 10 s
// apart. The chunker sends a continuing request's chunk every
// ⌈10 / 1⌉ = 10 steps, at steps 11, 21, …, 91 (9 chunks of 10 s, steps
// 92–100 owing 0.9 of one), and the finishing step sends the rest
// ⌈10/2⌉ = 5 deliveries back, the mean of an even phase: 5 s. Mean
// 95 / 10 = 9.5 s, the median 10 s; TTFT and TPOT do not move.
func TestStreamInterval(t *testing.T) {
	run := func(interval int) *Report {
		t.Helper()
		e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxModelLen: 256})
		src := sliceSource{{ID: "A", PromptTokens: 4, OutputTokens: 101}}
		rep, err := Run(context.Background(), e, &src, RunOptions{FrontEnd: FrontEnd{StreamInterval: interval}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	every, ten := run(1), run(10)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"every token: ITL mean", every.ITL.Mean, 1000}, {"every token: ITL p50", every.ITL.P50, 1000},
		{"interval 10: ITL mean", ten.ITL.Mean, 9500}, {"interval 10: ITL p50", ten.ITL.P50, 10000},
		{"interval 10: TTFT", ten.TTFT.Mean, every.TTFT.Mean}, {"interval 10: TPOT", ten.TPOT.Mean, every.TPOT.Mean},
		{"interval 10: E2E", ten.E2E.Mean, 101000},
	} {
		if !near(c.got, c.want, 0.004) {
			t.Errorf("%s: %.2f ms, want %.2f", c.name, c.got, c.want)
		}
	}
}

// A burst of 40 requests of 41 tokens at --stream-interval 4, speculative
// decoding aside: each continuing request sends every 4 steps, so the
// median gap is 4 steps of the run's own median gap token by token.
func TestStreamIntervalBurst(t *testing.T) {
	run := func(interval int) *Report {
		t.Helper()
		e := newEngine(t, Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 64, MaxNumBatchedTokens: 2048, MaxModelLen: 256})
		var src sliceSource
		for range 40 {
			src = append(src, Request{PromptTokens: 8, OutputTokens: 41})
		}
		rep, err := Run(context.Background(), e, &src, RunOptions{FrontEnd: FrontEnd{StreamInterval: interval}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	every, four := run(1), run(4)
	if !near(four.ITL.P50, 4*every.ITL.P50, 0.004) {
		t.Errorf("median gap: %.2f ms at interval 4, %.2f token by token; want 4 times", four.ITL.P50, every.ITL.P50)
	}
	if four.TPOT.Mean != every.TPOT.Mean || four.TTFT.Mean != every.TTFT.Mean {
		t.Errorf("TPOT %.3f/%.3f or TTFT %.3f/%.3f moved", four.TPOT.Mean, every.TPOT.Mean, four.TTFT.Mean, every.TTFT.Mean)
	}
}
