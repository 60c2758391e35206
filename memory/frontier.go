package memory

import (
	"math"
	"sort"
)

// FrontierPoint is one context length and how many requests of that length
// the KV cache holds at once.
type FrontierPoint struct {
	ContextTokens int     `json:"context_tokens"`
	Concurrency   float64 `json:"concurrency"`
}

// frontierStart is the shortest context the frontier shows: shorter
// requests are bounded by --max-num-seqs long before the KV cache.
const frontierStart = 512

// Frontier is the concurrency × context frontier of the budget: for context
// lengths from 512 tokens doubling up to the model's maximum (and the
// max-model-len in use and the longest that fits, where those fall between),
// the requests of that length the KV cache holds at once (ConcurrencyAt,
// rounded to hundredths). The scheduler's own limit, --max-num-seqs, is a
// separate ceiling the caller shows beside it.
func (b Budget) Frontier() []FrontierPoint {
	top := max(b.Model.MaxPositions, b.MaxModelLen)
	lens := map[int]bool{}
	for l := frontierStart; l < top; l *= 2 {
		lens[l] = true
	}
	for _, l := range []int{top, b.MaxModelLen, b.MaxFitLen} {
		if l > 0 {
			lens[l] = true
		}
	}
	out := make([]FrontierPoint, 0, len(lens))
	for l := range lens {
		out = append(out, FrontierPoint{ContextTokens: l, Concurrency: math.Round(b.ConcurrencyAt(l)*100) / 100})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ContextTokens < out[j].ContextTokens })
	return out
}
