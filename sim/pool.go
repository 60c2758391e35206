package sim

// pool is vLLM's block pool: usable blocks 0..n−1 (the null block is not
// among them), a free queue whose head is the least recently freed block,
// and the hashes of full blocks, which a freed block keeps until it is
// taken from the queue again (evicted). The queue is a doubly linked list
// over block indices with a sentinel at n, so taking, returning and
// reviving a cached block are O(1) and allocate nothing.
type pool struct {
	next, prev []int32
	ref        []int32
	key        []uint64 // 0: no hash
	cache      map[uint64]int32
	free       int
	n          int
}

func newPool(n int, caching bool) pool {
	p := pool{next: make([]int32, n+1), prev: make([]int32, n+1), ref: make([]int32, n), n: n}
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

func (p *pool) pushTail(b int32) {
	s := int32(p.n)
	last := p.prev[s]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[s] = s, b
	p.free++
}

func (p *pool) unlink(b int32) {
	n, pr := p.next[b], p.prev[b]
	p.next[pr], p.prev[n] = n, pr
	p.free--
}

// take pops the head of the free queue, evicting its hash.
func (p *pool) take() int32 {
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
