package sim

import "math"

// MaxBlocks is the largest pool the engine simulates: vLLM's block tables
// hold int32 block ids (the null block is id 0).
const MaxBlocks = math.MaxInt32

// pool is vLLM's block pool: n usable blocks (the null block is not among
// them), a free queue whose head is the least recently freed block, and
// the hashes of full blocks, which a freed block keeps until it is taken
// from the queue again (evicted).
//
// Its memory follows the blocks the simulation holds, not n: a block in
// use, or free with a hash someone may still find (a shared prefix, a
// preempted request's own blocks), has an id and a node; every other free
// block is anonymous. Anonymous blocks are interchangeable (nothing can
// find them), so the queue keeps only how many sit before each hashed
// block (anon) and after the last (tailAnon), and their ids come from a
// stack of recycled ids, or from hw, the ids never handed out. A fresh
// pool is n anonymous blocks: vLLM's queue of blocks 1..n−1 in order,
// which are taken before any freed block, as here. So the order of
// evictions (which hashes are lost, and when) is vLLM's, while the pool
// costs about 32 bytes per block held (TestPoolMatchesVLLMQueue compares
// it with a queue of all n blocks).
type pool struct {
	// next, prev link the hashed free blocks, with a sentinel at id 0 (the
	// null block, which is never handed out); anon[b] is the anonymous
	// blocks queued just before b.
	next, prev []int32
	anon       []int64
	tailAnon   int64
	ref        []int32
	key        []uint64 // 0: no hash
	cache      map[uint64]int32
	// recycled are ids of anonymous free blocks; hw is the next id never
	// handed out (ids run 1..n).
	recycled []int32
	hw       int64
	free     int
	n        int
}

func newPool(n int, caching bool) pool {
	p := pool{next: []int32{0}, prev: []int32{0}, anon: []int64{0}, ref: []int32{0}, n: n, free: n, tailAnon: int64(n), hw: 1}
	if caching {
		p.key = []uint64{0}
		p.cache = map[uint64]int32{}
	}
	return p
}

// newID hands out an anonymous block's id: a recycled one, else a new one.
func (p *pool) newID() int32 {
	if k := len(p.recycled); k > 0 {
		b := p.recycled[k-1]
		p.recycled = p.recycled[:k-1]
		return b
	}
	b := int32(p.hw)
	p.hw++
	p.next = append(p.next, 0)
	p.prev = append(p.prev, 0)
	p.anon = append(p.anon, 0)
	p.ref = append(p.ref, 0)
	if p.key != nil {
		p.key = append(p.key, 0)
	}
	return b
}

// pushTail queues a freed block: with a hash, as a node; without, as one
// more anonymous block.
func (p *pool) pushTail(b int32) {
	p.free++
	if p.key == nil || p.key[b] == 0 {
		p.tailAnon++
		p.recycled = append(p.recycled, b)
		return
	}
	last := p.prev[0]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[0] = 0, b
	p.anon[b], p.tailAnon = p.tailAnon, 0
}

// unlink takes a hashed block out of the queue; the anonymous blocks
// before it stay where they were, before its successor.
func (p *pool) unlink(b int32) {
	n, pr := p.next[b], p.prev[b]
	p.next[pr], p.prev[n] = n, pr
	if n == 0 {
		p.tailAnon += p.anon[b]
	} else {
		p.anon[n] += p.anon[b]
	}
	p.anon[b] = 0
	p.free--
}

// take pops the head of the free queue, evicting its hash.
func (p *pool) take() int32 {
	var b int32
	switch h := p.next[0]; {
	case h != 0 && p.anon[h] > 0:
		p.anon[h]--
		p.free--
		b = p.newID()
	case h != 0:
		b = h
		p.unlink(b)
	default:
		p.tailAnon--
		p.free--
		b = p.newID()
	}
	if p.key != nil && p.key[b] != 0 {
		if p.key[b]&sharedKey != 0 {
			delete(p.cache, p.key[b])
		}
		p.key[b] = 0
	}
	p.ref[b] = 1
	return b
}

// takeN appends n blocks taken from the head of the free queue to dst:
// a run of anonymous blocks at the head is taken at once, each a fresh
// holder's (take's work without its per-block tests), a hashed block as
// take takes it. A request's blocks are taken and released a block at a
// time in every step that crosses a block; with long prompts that was a
// sixth of a fleet's time.
func (p *pool) takeN(dst []int32, n int) []int32 {
	for n > 0 {
		h := p.next[0]
		avail := p.tailAnon
		if h != 0 {
			avail = p.anon[h]
		}
		if avail == 0 {
			dst = append(dst, p.take())
			n--
			continue
		}
		k := int(min(int64(n), avail))
		if h == 0 {
			p.tailAnon -= int64(k)
		} else {
			p.anon[h] -= int64(k)
		}
		p.free -= k
		for range k {
			b := p.newID()
			p.ref[b] = 1
			dst = append(dst, b)
		}
		n -= k
	}
	return dst
}

// releaseOwn frees, last first as release would, blocks without a hash
// that one holder held: all go to the tail of the queue, anonymous.
func (p *pool) releaseOwn(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		p.ref[b] = 0
		p.recycled = append(p.recycled, b)
	}
	p.free += len(blocks)
	p.tailAnon += int64(len(blocks))
}

// touch takes a cached block for one more holder, reviving it from the
// free queue if nobody held it.
func (p *pool) touch(b int32) {
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// release drops one holder; a block nobody holds goes to the tail of the
// free queue, keeping its hash.
func (p *pool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		p.pushTail(b)
	}
}

// forget drops the hash of a block of a request that is gone (finished or
// aborted) unless it is a shared prefix's: nobody can look it up again
// (only its own request finds an unshared block, after a preemption), so
// it is freed as an anonymous block, and its eviction changes nothing.
func (p *pool) forget(b int32) {
	if p.key != nil && p.key[b]&sharedKey == 0 {
		p.key[b] = 0
	}
}

// anonymize turns a free block with an unshared hash nobody will look up
// again into an anonymous one, in its place in the queue.
func (p *pool) anonymize(b int32) {
	n := p.next[b]
	p.unlink(b)
	if n == 0 {
		p.tailAnon++
	} else {
		p.anon[n]++
	}
	p.free++
	p.key[b] = 0
	p.recycled = append(p.recycled, b)
}

// sharedKey marks the hash of a shared-prefix block: only those are
// found by other requests, so only those go into the map. A request's own
// blocks are found again only by itself after a preemption, through the
// list of blocks it freed (req.freed) and the hash each block still holds.
const sharedKey = 1 << 63

// register hashes a full block unless it has a hash or, for a shared
// block, another block already has the hash (vLLM keeps the first).
func (p *pool) register(b int32, k uint64) {
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

func (p *pool) lookup(k uint64) (int32, bool) {
	if p.cache == nil {
		return 0, false
	}
	b, ok := p.cache[k]
	return b, ok
}

// usage is vLLM's KV-cache usage: the share of usable blocks not free
// (BlockPool.get_usage).
func (p *pool) usage() float64 { return 1 - float64(p.free)/float64(p.n) }

// blockKey is the hash of block i of a chain: splitmix64 of the chain id
// and the index, never 0, without the sharedKey bit (Engine.key sets it
// for shared prefixes).
func blockKey(chain uint64, i int) uint64 {
	z := chain*0x9e3779b97f4a7c15 + uint64(i)*0xbf58476d1ce4e5b9 + 1
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return z&^sharedKey | 1
}
