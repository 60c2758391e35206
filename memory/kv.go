package memory

import (
	"math"
	"sort"

	"headroom.dev/headroom/model"
)

// layerSpec is the KV-cache specification of one decoder layer on one GPU,
// the Go counterpart of vLLM V1's KVCacheSpec (vllm/v1/kv_cache_interface.py).
type layerSpec struct {
	kind model.AttentionKind
	// window is the sliding window in tokens (sliding layers), or the
	// chunk size of chunked local attention.
	window  int
	chunked bool
	// pageBytes is one block of this layer: block_size tokens.
	pageBytes int64
	// stateBytes is the per-sequence state of a linear-attention layer.
	stateBytes int64
}

// key groups layers the way vLLM does: layers with an identical spec
// share a KV-cache group.
func (l layerSpec) key() layerSpec { return l }

// kvLayout is the KV-cache layout of one GPU worker (one PP stage, one TP rank).
type kvLayout struct {
	layers    []layerSpec
	blockSize int
	// groupSize is the number of layers per KV-cache group; groups share
	// one pool of groupSize tensors (vLLM's uniform-page-size grouping).
	groupSize int
	// numGroups is the number of KV-cache groups (padding included).
	numGroups int
	// pageBytes is the unified page size of one block of one layer.
	pageBytes int64
	// blockSum, when set, is one block of a group of full-attention layers
	// of different page sizes: the sum of their pages (uniformType).
	blockSum int64

	// The per-request need, summed once per kind so the max-length search
	// costs O(kinds), not O(layers): pages of layers holding every token,
	// sliding layers by window, and fixed linear states.
	fullPages   int64
	slidingSums []slidingSum
	linearBytes int64
	// stateBlocks is how many state blocks a request of a length keeps
	// in each linear layer (vllm.Settings.MambaStateBlocks); nil: one.
	stateBlocks func(length int) int64
}

// linearBlocks is the state blocks a request of length tokens keeps in
// each linear layer.
func (l kvLayout) linearBlocks(length int) int64 {
	if l.stateBlocks == nil {
		return 1
	}
	return l.stateBlocks(length)
}

// slidingSum is the pages of all sliding layers sharing one window.
type slidingSum struct {
	window  int
	chunked bool
	pages   int64
}

// tokenBytesPerLayer is the KV bytes one token costs in one layer of the
// given kind on one TP rank.
//
// Source: vllm-memory.md §3.1. Standard attention stores K and V for
// max(1, kv_heads // tp) heads (KV heads are replicated when TP exceeds
// them); MLA stores one latent of kv_lora_rank + qk_rope_head_dim elements,
// not split by TP.
func tokenBytesPerLayer(s model.Spec, tp int, kvBytes int) int64 {
	if s.MLA != nil && s.MLA.KVLoraRank > 0 {
		return int64(s.MLA.KVLoraRank+s.MLA.QKRopeHeadDim) * int64(kvBytes)
	}
	heads := s.KVHeads / tp
	if heads < 1 {
		heads = 1
	}
	v := s.VHeadDim
	if v == 0 {
		v = s.HeadDim
	}
	return int64(heads) * int64(s.HeadDim+v) * int64(kvBytes)
}

// newKVLayout builds the layout for decoder layers [first, last).
func newKVLayout(s model.Spec, first, last, tp, kvBytes, blockSize int) kvLayout {
	return layoutOf(layerSpecs(s, first, last, tp, kvBytes, blockSize), blockSize)
}

// layoutOf groups layers (a stage's, and a drafter's beside them) into
// one worker's layout.
func layoutOf(layers []layerSpec, blockSize int) kvLayout {
	l := kvLayout{blockSize: blockSize, layers: layers}
	l.group()
	l.sum()
	return l
}

// layerSpecs are the KV specs of decoder layers [first, last).
func layerSpecs(s model.Spec, first, last, tp, kvBytes, blockSize int) []layerSpec {
	perToken := tokenBytesPerLayer(s, tp, kvBytes)
	layers := make([]layerSpec, 0, last-first)
	for i := first; i < last; i++ {
		k := s.LayerKind(i)
		if k.Kind == model.NoMixer {
			continue // MLP-only layers keep no KV state
		}
		ls := layerSpec{kind: k.Kind, pageBytes: perToken * int64(blockSize)}
		switch k.Kind {
		case model.Sliding:
			ls.window, ls.chunked = k.Window, k.Chunked
		case model.Linear:
			state, _ := k.StateAt(tp)
			ls.pageBytes, ls.stateBytes = state, state
		}
		layers = append(layers, ls)
	}
	return layers
}

// sum aggregates the layers for requestBytes.
func (l *kvLayout) sum() {
	for _, ls := range l.layers {
		switch ls.kind {
		case model.Sliding:
			found := false
			for i := range l.slidingSums {
				if g := &l.slidingSums[i]; g.window == ls.window && g.chunked == ls.chunked {
					g.pages += ls.pageBytes
					found = true
				}
			}
			if !found {
				l.slidingSums = append(l.slidingSums, slidingSum{window: ls.window, chunked: ls.chunked, pages: ls.pageBytes})
			}
		case model.Linear:
			// vLLM pads a Mamba page to the groups' one page size
			// (mamba_page_size_padded): a request's state block costs it.
			l.linearBytes += max(ls.stateBytes, l.pageBytes)
		default:
			l.fullPages += ls.pageBytes
		}
	}
}

// group reproduces vLLM's grouping of hybrid models
// (vllm/v1/core/kv_cache_utils.py, uniform page size): layers of one spec
// form one group when the model has one kind; otherwise every kind is cut
// into groups of groupSize layers, where groupSize is the smallest kind's
// layer count, or the largest when all counts are within 1.5x of each other
// (vllm-memory.md §3.3). Padding layers fill the last group of a kind.
// Verified on v0.19.0 logs: Gemma-3-27B (10 full + 52 sliding) gives
// groups of 10, 7 groups; Gemma-2-9B (21 + 21) gives 2 groups of 21.
func (l *kvLayout) group() {
	if len(l.layers) == 0 {
		return
	}
	counts := countSpecs(l.layers)
	l.pageBytes = 0
	for _, k := range counts {
		if k.spec.pageBytes > l.pageBytes {
			l.pageBytes = k.spec.pageBytes
		}
	}
	if len(counts) == 1 {
		l.groupSize = len(l.layers)
		l.numGroups = 1
		return
	}
	if uniformType(counts) {
		// Full-attention layers of different page sizes (a draft model
		// beside its target) share one group whose block holds a page of
		// each: blocks = available // Σ pages (UniformTypeKVCacheSpecs,
		// vllm/v1/kv_cache_interface.py).
		l.groupSize, l.numGroups, l.blockSum = len(l.layers), 1, 0
		for _, c := range counts {
			l.blockSum += c.spec.pageBytes * int64(c.count)
		}
		return
	}
	vals := make([]int, 0, len(counts))
	for _, c := range counts {
		vals = append(vals, c.count)
	}
	sort.Ints(vals)
	lo, hi := vals[0], vals[len(vals)-1]
	l.groupSize = lo
	if float64(hi) < 1.5*float64(lo) {
		l.groupSize = hi
	}
	l.numGroups = 0
	for _, c := range vals {
		l.numGroups += (c + l.groupSize - 1) / l.groupSize
	}
}

// kindCount is how many layers share one spec.
type kindCount struct {
	spec  layerSpec
	count int
}

// countSpecs counts the layers of each distinct spec, in first-seen order.
// Few distinct specs: a linear scan beats a map here.
func countSpecs(layers []layerSpec) []kindCount {
	var counts []kindCount
	for _, ls := range layers {
		found := false
		for i := range counts {
			if counts[i].spec == ls.key() {
				counts[i].count++
				found = true
				break
			}
		}
		if !found {
			counts = append(counts, kindCount{ls.key(), 1})
		}
	}
	return counts
}

// blockBytes is the memory one block costs across the pool: one page in
// each of the groupSize shared tensors.
func (l kvLayout) blockBytes() int64 {
	if l.blockSum > 0 {
		return l.blockSum
	}
	return l.pageBytes * int64(l.groupSize)
}

// uniformType reports specs that differ only in their page size, all
// full attention or all MLA: vLLM keeps them in one group.
func uniformType(counts []kindCount) bool {
	kind := counts[0].spec.kind
	if kind != model.Full && kind != model.MLA {
		return false
	}
	for _, c := range counts {
		if c.spec.kind != kind {
			return false
		}
	}
	return true
}

// blocks is how many blocks fit in avail bytes (vLLM: available //
// (page_size × group_size), §3.3).
func (l kvLayout) blocks(avail int64) int64 {
	bb := l.blockBytes()
	if avail <= 0 || bb <= 0 {
		return 0
	}
	return avail / bb
}

// tokens is the "GPU KV cache size: N tokens" figure vLLM logs for a block
// count: blocks per group times the block size (v0.19.0: num_blocks //
// num_groups × block_size; checked against Gemma-2/3 logs).
func (l kvLayout) tokens(blocks int64) int64 {
	if l.numGroups == 0 {
		return 0
	}
	return blocks / int64(l.numGroups) * int64(l.blockSize)
}

// bytesForTokens is the range of KV bytes for which tokens reports the
// given count: whole blocks per group times the block size, so a count
// names numGroups block counts.
func (l kvLayout) bytesForTokens(tokens int64) (lo, hi int64) {
	if l.blockSize <= 0 || l.numGroups == 0 {
		return 0, math.MaxInt64
	}
	perGroup := tokens / int64(l.blockSize)
	g, bb := int64(l.numGroups), l.blockBytes()
	return perGroup * g * bb, (perGroup+1)*g*bb - 1
}

func cdiv(a, b int64) int64 { return (a + b - 1) / b }

// requestBytes is the KV memory one request of length tokens needs,
// summed over the layers (vLLM's max_memory_usage_bytes per spec, §4):
// full and MLA layers hold every token; sliding layers at most
// window − 1 + max_num_batched_tokens tokens plus one block (chunked local
// layers chunk + max_num_batched_tokens; slidingBlocks); linear layers one
// state (or as many as --mamba-cache-mode keeps).
func (l kvLayout) requestBytes(length int, batchedTokens int) int64 {
	bs := int64(l.blockSize)
	full := cdiv(int64(length), bs)
	n := full*l.fullPages + l.linearBytes*l.linearBlocks(length)
	for _, g := range l.slidingSums {
		n += slidingBlocks(g.window, g.chunked, length, batchedTokens, bs) * g.pages
	}
	return n
}

// slidingBlocks is the blocks one request of length tokens holds in one
// sliding-window layer (vLLM's SlidingWindowSpec.max_memory_usage_bytes:
// cdiv(min(window − 1 + max_num_batched_tokens, max_model_len), block) + 1,
// the +1 because the window need not start on a block boundary) or one
// chunked local attention layer (ChunkedLocalAttentionSpec:
// cdiv(min(chunk + max_num_batched_tokens, max_model_len), block)).
func slidingBlocks(window int, chunked bool, length, batchedTokens int, bs int64) int64 {
	if chunked {
		return cdiv(int64(min(window+batchedTokens, length)), bs)
	}
	return cdiv(int64(min(window-1+batchedTokens, length)), bs) + 1
}

// requestBlocks is how many blocks of the shared pool one request of
// length tokens needs, as vLLM's "Maximum concurrency" line counts them
// (get_max_concurrency_for_kv_cache_config, vllm/v1/core/kv_cache_utils.py):
// every KV-cache group, padding groups included, holds its own blocks, a
// full or MLA group cdiv(length, block), a sliding or chunked local one
// only its window's, a linear-attention (Mamba) group one state block.
// The line divides the pool's blocks by this.
func (l kvLayout) requestBlocks(length, batchedTokens int) int64 {
	bs := int64(l.blockSize)
	if l.groupSize <= 0 || bs <= 0 {
		return 0
	}
	full := cdiv(int64(length), bs)
	if l.blockSum > 0 {
		return full // one group of full-attention layers (uniformType)
	}
	var n int64
	for _, c := range countSpecs(l.layers) {
		groups := int64((c.count + l.groupSize - 1) / l.groupSize)
		switch c.spec.kind {
		case model.Sliding:
			n += groups * slidingBlocks(c.spec.window, c.spec.chunked, length, batchedTokens, bs)
		case model.Linear:
			n += groups * l.linearBlocks(length)
		default:
			n += groups * full
		}
	}
	return n
}

// maxLen is the largest request length whose KV fits in avail bytes, found
// by binary search as vLLM's estimate_max_model_len does; 0 if even one
// token does not fit. limit caps the search.
func (l kvLayout) maxLen(avail int64, batchedTokens, limit int) int {
	if avail <= 0 || l.requestBytes(1, batchedTokens) > avail {
		return 0
	}
	lo, hi := 1, limit
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if l.requestBytes(mid, batchedTokens) <= avail {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// perTokenBytes is the KV bytes one more token of context costs across
// this worker's full-attention and MLA layers (sliding and linear layers
// stop growing).
func (l kvLayout) perTokenBytes() int64 {
	var n int64
	for _, ls := range l.layers {
		if ls.kind == model.Full || ls.kind == model.MLA {
			n += ls.pageBytes / int64(l.blockSize)
		}
	}
	return n
}
