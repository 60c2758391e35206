package memory

import (
	"fmt"
	"math"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// DefaultMaxKVLoss is the share of the planned KV cache a server may lack
// before headroom calls it far below the plan: the upgrade preflight's
// default --max-kv-loss, the audit's and the alert's threshold. A fifth of
// the cache is lost concurrency an operator notices, five times the
// planner's largest error on its calibration start-ups (2.75%: 50 of the 57 vLLM 0.19.0 start-ups on H100-80GB that started), and less
// than the release steps the version rules know (the CUDA-graph estimate
// of 0.21.0 took two thirds of one MoE model's cache, vllm #45178).
const DefaultMaxKVLoss = 0.20

// EngineCache is what a running vLLM says of its KV cache
// (vllm:cache_config_info's labels): zero where it says nothing.
type EngineCache struct {
	NumGPUBlocks         int64
	BlockSize            int
	GPUMemoryUtilization float64
}

// KVGap compares the KV cache a running server got with the plan for its
// model, flags, GPU and release.
type KVGap struct {
	PredictedBlocks int64 `json:"predicted_blocks"`
	ActualBlocks    int64 `json:"actual_blocks"`
	PredictedTokens int64 `json:"predicted_tokens"`
	ActualTokens    int64 `json:"actual_tokens"`
	// Share is the actual tokens over the predicted: 0.31 gets 31% of the
	// KV cache the plan gives.
	Share float64 `json:"share"`
	// Far is true when Share is below 1 − DefaultMaxKVLoss.
	Far bool `json:"far_below_plan"`
	// Cause and Fix say why, when Far, as far as the rules tell.
	Cause string `json:"cause,omitempty"`
	Fix   string `json:"fix,omitempty"`
}

// boundary is the release boundary of a rule, for causes that name it.
func boundary(rule string) (vllm.Boundary, bool) {
	for _, b := range vllm.Boundaries() {
		if b.Rule == rule {
			return b, true
		}
	}
	return vllm.Boundary{}, false
}

// CompareKV sets what a server got (got) against its plan b (of in). ok is
// false when there is nothing to compare (no blocks reported or planned).
// The cause is found by the mechanism: a utilization other than the
// planned is re-planned and, when that plan holds the blocks, named; else
// the rules of the release that take KV memory the plan may undercount
// are named (the CUDA-graph estimate inside the budget, the hybrid GDN
// transient), and failing those, memory the plan does not see.
func CompareKV(in Input, b Budget, got EngineCache) (KVGap, bool) {
	if got.NumGPUBlocks <= 0 || b.NumBlocks <= 0 {
		return KVGap{}, false
	}
	bs := got.BlockSize
	if bs <= 0 {
		bs = b.Settings.BlockSize
	}
	g := KVGap{PredictedBlocks: b.NumBlocks, ActualBlocks: got.NumGPUBlocks,
		PredictedTokens: b.KVTokens, ActualTokens: got.NumGPUBlocks * int64(bs)}
	if g.PredictedTokens <= 0 {
		g.PredictedTokens = b.NumBlocks * int64(bs)
	}
	if g.PredictedTokens <= 0 || g.ActualTokens <= 0 {
		return KVGap{}, false
	}
	g.Share = float64(g.ActualTokens) / float64(g.PredictedTokens)
	g.Far = g.Share < 1-DefaultMaxKVLoss
	if !g.Far {
		return g, true
	}
	missing := float64(g.PredictedTokens-g.ActualTokens) * float64(b.KVBytesPerToken)
	if u := got.GPUMemoryUtilization; u > 0 && math.Abs(u-b.Settings.GPUMemoryUtilization) > 0.0005 {
		at := in
		at.Settings.GPUMemoryUtilization = u
		if ab, err := Plan(at); err == nil && ab.KVTokens > 0 {
			if r := float64(g.ActualTokens) / float64(ab.KVTokens); r >= 1-DriftShare && r <= 1+DriftShare {
				g.Cause = fmt.Sprintf("vLLM runs at --gpu-memory-utilization %g, the plan at %g: at %g the plan gives %d tokens, what it got", u, b.Settings.GPUMemoryUtilization, u, ab.KVTokens)
				g.Fix = fmt.Sprintf("give the server --gpu-memory-utilization %g (a value in a --config file or the release's default may have won)", b.Settings.GPUMemoryUtilization)
				return g, true
			}
		}
	}
	switch {
	case b.GraphsReserved():
		cb, _ := boundary("CUDAGraphsInBudget")
		g.Cause = fmt.Sprintf("%s (%s, %s): vLLM's estimate can take far more than the %s planned for CUDA graphs on some models (vllm #45178: 3.1× less KV on one MoE model); %s of KV memory per GPU is missing",
			cb.What, cb.Since, cb.Source, GiB(b.PerGPU.CUDAGraph), GiB(int64(missing)))
		g.Fix = fmt.Sprintf("pin the pool: --%s %d (headroom plan --pin-kv), or set %s=0 and plan the utilization without the estimate", vllm.FlagKVCacheMemory, b.PerGPU.KVCache, vllm.EnvEstimateCUDAGraphs)
	case b.Model.CountKind()[model.Linear] > 0 && vllm.HybridGDNGraphTransient(b.Settings.Version):
		hb, _ := boundary("HybridGDNGraphTransient")
		g.Cause = fmt.Sprintf("%s (%s, %s): %s of KV memory per GPU is missing", hb.What, hb.Since, hb.Source, GiB(int64(missing)))
		g.Fix = fmt.Sprintf("lower --max-num-batched-tokens (the transient grows with it), or pin the pool: --%s %d", vllm.FlagKVCacheMemory, b.PerGPU.KVCache)
	default:
		g.Cause = fmt.Sprintf("memory the plan does not count: %s per GPU held by something else when vLLM started (another process on the GPU), or this model, GPU or release outside the planner's calibration", GiB(int64(missing)))
		g.Fix = "run headroom snapshot on the node for other processes on the GPU; headroom probe (or audit --live --learn) records this server's numbers so later plans use them"
	}
	return g, true
}

// DriftShare is how far a plan may be from a server's KV tokens and still
// describe it: the planner's largest error over its calibration start-ups
// is 2.75% of the KV tokens, so 5% is beyond it.
const DriftShare = 0.05
