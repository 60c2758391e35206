package workload

import "math/bits"

// pyRandom is CPython's random.Random: the Mersenne Twister MT19937
// (Matsumoto and Nishimura's mt19937ar.c, which CPython's _randommodule.c
// copies) seeded from an integer as random.seed(n) does, with the few
// methods vllm bench serve's datasets call. It exists so that a dataset
// replayed here is shuffled and oversampled exactly as `vllm bench serve
// --seed N` does it: the same N picks the same prompts in the same order.
type pyRandom struct {
	mt  [mtN]uint32
	mti int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// newPyRandom is random.seed(seed) for a non-negative int seed: CPython
// (random_seed in _randommodule.c) takes the absolute value's 32-bit
// words, least significant first, as init_by_array's key; 0 is the key
// [0].
func newPyRandom(seed uint64) *pyRandom {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// uint32 is genrand_uint32.
func (r *pyRandom) uint32() uint32 {
	if r.mti >= mtN {
		var kk int
		for ; kk < mtN-mtM; kk++ {
			y := (r.mt[kk] & mtUpperMask) | (r.mt[kk+1] & mtLowerMask)
			r.mt[kk] = r.mt[kk+mtM] ^ (y >> 1) ^ (y&1)*mtMatrixA
		}
		for ; kk < mtN-1; kk++ {
			y := (r.mt[kk] & mtUpperMask) | (r.mt[kk+1] & mtLowerMask)
			r.mt[kk] = r.mt[kk+(mtM-mtN)] ^ (y >> 1) ^ (y&1)*mtMatrixA
		}
		y := (r.mt[mtN-1] & mtUpperMask) | (r.mt[0] & mtLowerMask)
		r.mt[mtN-1] = r.mt[mtM-1] ^ (y >> 1) ^ (y&1)*mtMatrixA
		r.mti = 0
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// random is random.random(): 53 random bits from two draws
// (genrand_res53).
func (r *pyRandom) random() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}

// getrandbits is random.getrandbits(k) for 0 < k <= 32, the only widths
// the lists here need (fewer than 2^32 entries).
func (r *pyRandom) getrandbits(k int) uint32 {
	return r.uint32() >> (32 - k)
}

// randbelow is Random._randbelow_with_getrandbits(n), n > 0: draws of
// n.bit_length() bits until one is below n.
func (r *pyRandom) randbelow(n int) int {
	k := bits.Len32(uint32(n))
	v := r.getrandbits(k)
	for int(v) >= n {
		v = r.getrandbits(k)
	}
	return int(v)
}

// shuffle is random.shuffle(x) for a list of n: for i in reversed(range(1,
// n)), swap x[i] with x[randbelow(i+1)].
func (r *pyRandom) shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.randbelow(i+1))
	}
}

// choice is random.choice(seq) for a sequence of n > 0: seq[randbelow(n)].
func (r *pyRandom) choice(n int) int { return r.randbelow(n) }
