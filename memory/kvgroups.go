package memory

import "headroom.dev/headroom/model"

// KVGroup is one KV-cache group of a plan's layout, as vLLM V1's KV-cache
// manager sees it: every group allocates its own blocks for each request
// from the one shared pool. The scheduler simulation (package sim) sizes
// requests with these.
type KVGroup struct {
	// Kind is full, mla, sliding or linear.
	Kind model.AttentionKind `json:"kind"`
	// Window is the sliding window (or the chunk of chunked local
	// attention) in tokens; 0 for full, MLA and linear groups.
	Window  int  `json:"window,omitempty"`
	Chunked bool `json:"chunked,omitempty"`
}

// KVGroups lists the KV-cache groups of the worker the plan sized the pool
// by (the one with the fewest blocks), padding groups included: a kind of
// n layers fills ceil(n / group size) groups (vLLM-memory.md §3.3).
func (b Budget) KVGroups() []KVGroup {
	l := b.layout
	if l.groupSize <= 0 {
		return nil
	}
	counts := countSpecs(l.layers)
	if l.blockSum > 0 {
		return []KVGroup{{Kind: counts[0].spec.kind}}
	}
	var out []KVGroup
	for _, c := range counts {
		g := KVGroup{Kind: c.spec.kind}
		if c.spec.kind == model.Sliding {
			g.Window, g.Chunked = c.spec.window, c.spec.chunked
		}
		for range (c.count + l.groupSize - 1) / l.groupSize {
			out = append(out, g)
		}
	}
	return out
}

// SlidingKV is the KV one token costs across the sliding-window (or
// chunked local) layers that share one window, for the whole model.
type SlidingKV struct {
	Window        int
	Chunked       bool
	BytesPerToken int64
}

// ModelSlidingKV lists the model's sliding-window layers by window, with
// what a token of context costs in them (every layer, no tensor-parallel
// split, like ModelKVBytesPerToken, which leaves them out): a step's
// attention reads at most a window of it per request.
func (b Budget) ModelSlidingKV() []SlidingKV {
	bs := max(b.Settings.BlockSize, 1)
	l := newKVLayout(b.Model, 0, b.Model.Layers, 1, max(b.KVDtypeBytes, 1), bs)
	out := make([]SlidingKV, 0, len(l.slidingSums))
	for _, g := range l.slidingSums {
		out = append(out, SlidingKV{Window: g.window, Chunked: g.chunked, BytesPerToken: g.pages / int64(bs)})
	}
	return out
}
