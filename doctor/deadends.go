package doctor

import (
	"fmt"

	"headroom.dev/headroom/vllm"
)

// Dead-end codes: fixes the evidence invites that will not work (the
// seed's "dead ends", and what vLLM's own accounting rules out).
const (
	DeadEmptyCache     = "empty_cache"
	DeadMoreGPUs       = "more_gpus_same_settings"
	DeadBlameWeights   = "blame_the_weights"
	DeadSMIFull        = "nvidia_smi_shows_full"
	DeadRaiseUtilRetry = "raise_utilization"
)

func (g *diag) deadEnd(code, msg string) {
	g.dead = append(g.dead, DeadEnd{Code: code, Message: msg})
}

func (g *diag) deadEnds() {
	kv := g.has(CodeKVCachePressure)
	if len(g.ev.OOMs) > 0 {
		g.deadEnd(DeadEmptyCache, "torch.cuda.empty_cache() does nothing here: vLLM allocates its KV cache once at start-up and manages the blocks itself; nothing it holds goes back to PyTorch's cache")
	}
	if kv {
		msg := "adding GPUs (tensor parallel) without lowering --max-num-seqs or --max-model-len: the KV cache is per GPU, and each GPU must still hold its share of every running request"
		if g.base != nil && g.typical > 0 {
			b := g.base
			tp := b.Settings.TensorParallelSize * 2
			if nb, ok := g.with(func(s *vllm.Settings) { s.TensorParallelSize = tp }); ok {
				need := int64(b.Settings.MaxNumSeqs) * int64(g.typical)
				if need > nb.KVTokens {
					msg += fmt.Sprintf(": at --tensor-parallel-size %d the cache holds %s tokens, but %d requests of %s tokens need %s", tp, vllm.Thousands(nb.KVTokens), b.Settings.MaxNumSeqs, vllm.Thousands(int64(g.typical)), vllm.Thousands(need))
				}
			}
		}
		g.deadEnd(DeadMoreGPUs, msg)
	}
	if kv && !g.has(CodeWeightsTooLarge) {
		w, budget := g.weightsAndBudget()
		if w > 0 && budget > 0 && 2*w < budget {
			g.deadEnd(DeadBlameWeights, fmt.Sprintf("a smaller or quantized model: the weights are %s of the %s budget (%.0f%%); the memory runs out in the KV cache and the runtime peak, which a smaller model's traffic fills just the same", gib(w), gib(budget), 100*float64(w)/float64(budget)))
		} else if w == 0 {
			g.deadEnd(DeadBlameWeights, "a smaller or quantized model: the KV cache, not the weights, runs out under long contexts × concurrency; quantized weights leave the KV pressure as it is")
		}
	}
	if share, ok := g.smiFull(); ok {
		g.deadEnd(DeadSMIFull, fmt.Sprintf("reading nvidia-smi's %.0f%% used as \"the model is too big\": vLLM takes total × --gpu-memory-utilization (%.2f) at start-up for its KV cache, so a full card is normal while it runs", 100*share, g.util()))
	}
	if g.has(CodeOutsideBudget) || (g.has(CodeUtilizationEdge) && g.oomIn(PhaseServing, PhaseCapture, PhaseSampler)) {
		g.deadEnd(DeadRaiseUtilRetry, "raising --gpu-memory-utilization to make room: the memory that ran out lies outside vLLM's budget (CUDA graphs, sampler warm-up, runtime peaks), and a larger budget leaves it less")
	}
}

// weightsAndBudget are the per-GPU weights and budget: measured when a
// log shows them, else planned.
func (g *diag) weightsAndBudget() (int64, int64) {
	for _, l := range g.ev.Logs {
		if r := l.Report; r.WeightsBytes > 0 && r.RequestedBytes > 0 {
			return r.WeightsBytes, r.RequestedBytes
		}
	}
	if g.base != nil {
		return g.base.PerGPU.Weights, g.base.PerGPU.Requested
	}
	return 0, 0
}

// smiFull returns the share of the first GPU nvidia-smi shows 80% or more
// used.
func (g *diag) smiFull() (float64, bool) {
	for _, gf := range g.ev.GPUs {
		for _, x := range gf.GPUs {
			if x.TotalBytes <= 0 || x.UsedBytes < 0 {
				continue
			}
			if share := float64(x.UsedBytes) / float64(x.TotalBytes); share >= 0.8 {
				return share, true
			}
		}
	}
	return 0, false
}
