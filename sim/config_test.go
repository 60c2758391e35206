package sim

import (
	"context"
	"testing"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// --max-num-active-seqs caps the batch the scheduler runs, not the pool:
// 200 requests sent at once to Llama-3.1-8B on one H100 (the default
// --max-num-seqs 1024 would run them all together) run at most 8 at a
// time with --max-num-active-seqs 8, on the same KV blocks, and wait
// longer for their first token.
func TestMaxNumActiveSeqs(t *testing.T) {
	burst := workload.Spec{Rate: 1e6, NumRequests: 200, Prompt: workload.Fixed(512), Output: workload.Fixed(64), Seed: 1}
	run := func(active int) (Config, *Report) {
		cfg, fe := llama8BWith(t, "H100-80GB", vllm.Settings{Version: vllm.Newest(), MaxNumActiveSeqs: active})
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), e, source(t, burst), RunOptions{FrontEnd: fe})
		if err != nil {
			t.Fatal(err)
		}
		return cfg, rep
	}
	all, free := run(0)
	capped, held := run(8)
	if capped.MaxNumSeqs != 8 || all.MaxNumSeqs < 200 || capped.NumGPUBlocks != all.NumGPUBlocks {
		t.Fatalf("running cap %d (pool %d blocks) against %d (pool %d)", capped.MaxNumSeqs, capped.NumGPUBlocks, all.MaxNumSeqs, all.NumGPUBlocks)
	}
	if held.MaxRunning != 8 || free.MaxRunning != 200 || held.Requests != 200 {
		t.Errorf("at most %d running with the cap (%d completed), %d without", held.MaxRunning, held.Requests, free.MaxRunning)
	}
	if held.TTFT.Mean <= 2*free.TTFT.Mean {
		t.Errorf("TTFT mean %.1f ms with the cap, %.1f ms without: a queue of 192 should wait", held.TTFT.Mean, free.TTFT.Mean)
	}
	if RunningCap(vllm.Settings{MaxNumSeqs: 16, MaxNumActiveSeqs: 64}) != 16 {
		t.Error("a cap above --max-num-seqs raised the batch")
	}
}

// A hybrid engine of one full-attention group and one linear-state group,
// blocks of 16: a request of 100 tokens holds 7 full blocks and 1 state
// block (vLLM's default), or with --mamba-cache-mode all a state block
// every 16 tokens, 7 more. A pool of 13 usable blocks admits it in the
// first case and refuses it in the second (it can never fit).
func TestMambaStateBlocks(t *testing.T) {
	all := func(length int) int { return cdiv(length, 16) }
	for _, c := range []struct {
		blocks   func(int) int
		peak     int
		rejected int64
	}{{nil, 8, 0}, {all, 14, 1}} {
		cfg := Config{NumGPUBlocks: 14, BlockSize: 16, MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxModelLen: 200,
			Groups: []Group{{Kind: model.Full}, {Kind: model.Linear}}, StateBlocks: c.blocks, Timer: Fixed(0.01)}
		if got := cfg.peakBlocks(100); got != c.peak {
			t.Errorf("peak blocks %d, want %d", got, c.peak)
		}
		rep, err := Run(context.Background(), newEngine(t, cfg), &sliceSource{{ID: "a", PromptTokens: 90, OutputTokens: 10}}, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rejected != c.rejected {
			t.Errorf("state blocks %v: %d rejected, want %d", c.blocks != nil, rep.Rejected, c.rejected)
		}
	}
}
