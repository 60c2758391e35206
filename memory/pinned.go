package memory

import (
	"fmt"

	"headroom.dev/headroom/vllm"
)

// Pinned is a fixed KV pool (--kv-cache-memory-bytes) offered in place of
// a utilization: vLLM then allocates exactly that much KV cache per GPU on
// every release, node and co-tenant, instead of what a utilization leaves
// after its own profile (vllm #33263, #18121 ask for it; users pin it by
// hand when an upgrade moves their pool).
type Pinned struct {
	// Flag is the release's spelling of the flag.
	Flag  string `json:"flag"`
	Bytes int64  `json:"bytes"`
	// KVTokens and Fits are the plan again with the pool pinned.
	KVTokens int64 `json:"kv_cache_tokens"`
	Fits     bool  `json:"fits"`
	// Why says where the size comes from.
	Why string `json:"why"`
	// Budget is the plan with the pool pinned.
	Budget Budget `json:"-"`
}

// PinPool sizes a pinned KV pool for in from its plan b (the pool b's
// utilization gives, so the pin keeps today's cache on any release) or,
// when tokens > 0, from the traffic: tokens of KV cache (the concurrency
// × context the traffic needs, its preemption margin included), rounded
// up to whole blocks. The pool is planned again, pinned: the start-up
// check then asks for weights, activation, non-torch, CUDA graphs and the
// pool in the free memory. ok is false where the release has no such
// flag or b has no KV cache.
func PinPool(in Input, b Budget, tokens int64, why string) (Pinned, bool) {
	if !vllm.SupportsKVCacheMemory(b.Settings.Version) || b.NumBlocks <= 0 || b.PerGPU.KVCache <= 0 {
		return Pinned{}, false
	}
	p := Pinned{Flag: "--" + vllm.FlagKVCacheMemory, Bytes: b.PerGPU.KVCache,
		Why: fmt.Sprintf("the KV cache the plan gives at --gpu-memory-utilization %g (%s per GPU), fixed", b.Settings.GPUMemoryUtilization, GiB(b.PerGPU.KVCache))}
	if tokens > 0 {
		bs := int64(max(b.Settings.BlockSize, 1))
		blocks := (tokens + bs - 1) / bs
		perBlock := b.PerGPU.KVCache / b.NumBlocks
		p.Bytes = blocks * perBlock
		p.Why = why
	}
	at := in
	at.Settings.KVCacheMemoryBytes = p.Bytes
	if at.Settings.Set == nil {
		at.Settings.Set = map[string]bool{}
	} else {
		at.Settings.Set = cloneSet(at.Settings.Set)
	}
	at.Settings.Set[vllm.FlagKVCacheMemory] = true
	pb, err := Plan(at)
	if err != nil {
		return Pinned{}, false
	}
	p.KVTokens, p.Fits, p.Budget = pb.KVTokens, pb.Fits, pb
	return p, true
}

func cloneSet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
