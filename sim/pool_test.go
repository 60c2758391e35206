package sim

import (
	"math/rand/v2"
	"testing"
)

// refPool is the block pool as it was before it held only the blocks in
// use: vLLM's free queue of every block, a doubly linked list over all n
// (kv_cache_utils.FreeKVCacheBlockQueue). TestPoolMatchesVLLMQueue checks
// the pool against it.
type refPool struct {
	next, prev []int32
	ref        []int32
	key        []uint64 // 0: no hash
	cache      map[uint64]int32
	free       int
	n          int
}

func newRefPool(n int, caching bool) refPool {
	p := refPool{next: make([]int32, n+1), prev: make([]int32, n+1), ref: make([]int32, n), n: n}
	if caching {
		p.key = make([]uint64, n)
		p.cache = map[uint64]int32{}
	}
	s := int32(n)
	p.next[s], p.prev[s] = s, s
	for b := range int32(n) {
		p.pushTail(b)
	}
	return p
}

func (p *refPool) pushTail(b int32) {
	s := int32(p.n)
	last := p.prev[s]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[s] = s, b
	p.free++
}

func (p *refPool) unlink(b int32) {
	n, pr := p.next[b], p.prev[b]
	p.next[pr], p.prev[n] = n, pr
	p.free--
}

// take pops the head of the free queue, evicting its hash.
func (p *refPool) take() int32 {
	b := p.next[p.n]
	p.unlink(b)
	if p.key != nil && p.key[b] != 0 {
		if p.key[b]&sharedKey != 0 {
			delete(p.cache, p.key[b])
		}
		p.key[b] = 0
	}
	p.ref[b] = 1
	return b
}

// touch takes a cached block for one more holder, reviving it from the
// free queue if nobody held it.
func (p *refPool) touch(b int32) {
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// release drops one holder; a block nobody holds goes to the tail of the
// free queue, keeping its hash.
func (p *refPool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		p.pushTail(b)
	}
}

// register hashes a full block unless it has a hash or, for a shared
// block, another block already has the hash (vLLM keeps the first).
func (p *refPool) register(b int32, k uint64) {
	if p.key == nil || p.key[b] != 0 {
		return
	}
	if k&sharedKey != 0 {
		if _, ok := p.cache[k]; ok {
			return
		}
		p.cache[k] = b
	}
	p.key[b] = k
}

func (p *refPool) lookup(k uint64) (int32, bool) {
	if p.cache == nil {
		return 0, false
	}
	b, ok := p.cache[k]
	return b, ok
}

// poolHolder is a request of TestPoolMatchesVLLMQueue: its blocks in both
// pools, and those its preemption freed.
type poolHolder struct {
	chain       uint64
	prefix      uint64
	blocks      [][2]int32 // (pool id, refPool id)
	freed       [][2]int32
	preempted   bool
	prefixBlock int
}

func (h *poolHolder) key(i int) uint64 {
	if h.prefix != 0 && i < h.prefixBlock {
		return blockKey(h.prefix<<1|1, i) | sharedKey
	}
	return blockKey(h.chain<<1, i)
}

// The pool that holds only the blocks in use evicts the same hashes at
// the same moments as vLLM's queue of every block: random requests take
// blocks, share prefixes, are preempted and find their own blocks again,
// finish; after every step both pools have the same free count and the
// same cached hashes on corresponding blocks, and every lookup agrees.
func TestPoolMatchesVLLMQueue(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 8 + rng.IntN(120)
		np, op := newPool(n, true), newRefPool(n, true)
		ids := map[int32]int32{} // pool id -> refPool id
		var live []*poolHolder
		chain := uint64(0)
		check := func(step int, what string) {
			t.Helper()
			if np.free != op.free || np.usage() != 1-float64(op.free)/float64(op.n) {
				t.Fatalf("seed %d step %d (%s): free %d, vLLM's queue %d", seed, step, what, np.free, op.free)
			}
			if len(np.cache) != len(op.cache) {
				t.Fatalf("seed %d step %d (%s): %d cached hashes, vLLM's queue %d", seed, step, what, len(np.cache), len(op.cache))
			}
			for k, b := range np.cache {
				if ob, ok := op.cache[k]; !ok || ids[b] != ob {
					t.Fatalf("seed %d step %d (%s): hash %x on block %d (ref %d), vLLM's queue has it %v on %d", seed, step, what, k, b, ids[b], ok, ob)
				}
			}
		}
		take := func() [2]int32 {
			b, o := np.take(), op.take()
			ids[b] = o
			return [2]int32{b, o}
		}
		// acquire gives h blocks from start to want: cached ones where
		// both pools find them (they must agree), new ones after.
		acquire := func(h *poolHolder, start, want int, step int) bool {
			hits := 0
			for i := start; i < want; i++ {
				k := h.key(i)
				var b, o int32
				var okN, okO bool
				if k&sharedKey != 0 {
					b, okN = np.lookup(k)
					o, okO = op.lookup(k)
				} else if i < len(h.freed) {
					b, o = h.freed[i][0], h.freed[i][1]
					okN, okO = np.key[b] == k, op.key[o] == k
				}
				if okN != okO || (okN && ids[b] != o) {
					t.Fatalf("seed %d step %d: block %d of chain %d found %v (%d), vLLM's queue %v (%d)", seed, step, i, h.chain, okN, ids[b], okO, o)
				}
				if !okN || i != start+hits {
					break
				}
				hits++
			}
			need := want - start - hits
			// Taking may evict a hit: count free hits as vLLM does.
			freeHits := 0
			for i := start; i < start+hits; i++ {
				b, _ := np.lookup(h.key(i))
				if h.key(i)&sharedKey == 0 {
					b = h.freed[i][0]
				}
				if np.ref[b] == 0 {
					freeHits++
				}
			}
			if need+freeHits > np.free {
				return false
			}
			for i := start; i < start+hits; i++ {
				k := h.key(i)
				var pair [2]int32
				if k&sharedKey != 0 {
					pair[0], _ = np.lookup(k)
					pair[1], _ = op.lookup(k)
				} else {
					pair = h.freed[i]
				}
				np.touch(pair[0])
				op.touch(pair[1])
				h.blocks = append(h.blocks, pair)
			}
			for i := start + hits; i < want; i++ {
				pair := take()
				k := h.key(i)
				np.register(pair[0], k)
				op.register(pair[1], k)
				h.blocks = append(h.blocks, pair)
			}
			return true
		}
		release := func(h *poolHolder, gone bool) {
			if !gone || h.preempted {
				// dropFreed: the blocks a preemption freed that h did not
				// take back.
				for i, pair := range h.freed {
					if k := np.key[pair[0]]; np.ref[pair[0]] == 0 && k&sharedKey == 0 && k == h.key(i) {
						np.anonymize(pair[0])
					}
				}
				h.freed = h.freed[:0]
			}
			if !gone {
				h.freed = append(h.freed, h.blocks...)
			}
			for i := len(h.blocks) - 1; i >= 0; i-- {
				if gone {
					np.forget(h.blocks[i][0])
				}
				np.release(h.blocks[i][0])
				op.release(h.blocks[i][1])
			}
			h.blocks = h.blocks[:0]
		}
		for step := range 3000 {
			switch r := rng.IntN(10); {
			case r < 4 || len(live) == 0:
				chain++
				h := &poolHolder{chain: chain}
				if rng.IntN(2) == 0 {
					h.prefix, h.prefixBlock = 1+rng.Uint64N(4), 1+rng.IntN(3)
				}
				if acquire(h, 0, 1+rng.IntN(6), step) {
					live = append(live, h)
				}
				check(step, "admit")
			case r < 6:
				h := live[rng.IntN(len(live))]
				if len(h.blocks) > 0 {
					acquire(h, len(h.blocks), len(h.blocks)+1+rng.IntN(2), step)
				} else {
					// A preempted request comes back: its own blocks and
					// the shared prefix found where both pools still have
					// them.
					want := len(h.freed) + rng.IntN(2)
					if acquire(h, 0, max(want, 1), step) {
						h.preempted = true
					}
				}
				check(step, "grow")
			case r < 8:
				i := rng.IntN(len(live))
				h := live[i]
				release(h, true)
				live = append(live[:i], live[i+1:]...)
				check(step, "finish")
			default:
				h := live[rng.IntN(len(live))]
				if len(h.blocks) > 0 {
					release(h, false)
					h.preempted = true
				}
				check(step, "preempt")
			}
		}
		if held := len(np.ref); held > n+1 {
			t.Fatalf("seed %d: %d ids for a pool of %d", seed, held, n)
		}
	}
}

// A pool of a billion blocks costs what it holds: taking and returning a
// few blocks allocates a few ids, not the nominal pool.
func TestPoolMemoryFollowsUse(t *testing.T) {
	p := newPool(1_000_000_000, true)
	var held []int32
	for i := range 10_000 {
		b := p.take()
		p.register(b, blockKey(uint64(i)<<1, 0))
		held = append(held, b)
		if len(held) == 100 {
			for _, b := range held {
				p.forget(b)
				p.release(b)
			}
			held = held[:0]
		}
	}
	// 100 blocks held at once: ids 1..100 (id 0 is the sentinel).
	if len(p.ref) != 101 || p.free != 1_000_000_000 {
		t.Fatalf("%d ids, %d free; want 101 ids and every block free", len(p.ref), p.free)
	}
}
