package sim

import (
	"context"
	"testing"

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
