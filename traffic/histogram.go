package traffic

import (
	"math"
	"math/bits"
)

// Histogram layout: log-linear (HDR-style) buckets. Values below 2^8 = 256
// have a bucket each (exact). Above, every power of two is cut into 2^7 =
// 128 equal buckets, so a bucket spans at most 1/128 of its lower bound; a
// quantile is reported as the middle of its bucket, clamped to the largest
// value seen, and so lies within 1/256 ≈ 0.4% of the exact order statistic
// (and is exact below 256). Counts are bounded by maxDigits (< 2^40), so
// the table has 256 + 32 × 128 = 4352 buckets (34 KiB), whatever the
// number of rows.
const (
	subBits    = 7
	subCount   = 1 << subBits // buckets per power of two
	exactLimit = 2 * subCount // values below are exact
	maxShift   = 40 - subBits - 1
	numBuckets = exactLimit + maxShift*subCount
)

// Histogram counts non-negative integers in bounded memory. The zero
// value is empty and ready to use.
type Histogram struct {
	counts []uint64
	n      uint64
	sum    uint64
	max    int64
}

// bucketOf returns the bucket index of v (0 <= v < 2^40). With shift =
// max(bits.Len(v) − 8, 0), the index is shift × 128 + v >> shift: v itself
// below 256, and past it 128 buckets per power of two. It has no branch,
// since the values of a log come in no order a branch predictor could
// learn.
func bucketOf(v int64) int {
	shift := max(bits.Len64(uint64(v))-subBits-1, 0)
	return shift*subCount + int(v>>uint(shift))
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < exactLimit {
		return int64(i), int64(i)
	}
	shift := (i-exactLimit)/subCount + 1
	top := int64((i-exactLimit)%subCount + subCount)
	return top << shift, (top+1)<<shift - 1
}

// Add counts v; negative values count as 0 and values of 2^40 or more as
// 2^40 − 1 (ParseLine never yields either).
func (h *Histogram) Add(v int64) {
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	h.add(min(max(v, 0), 1<<40-1))
}

// AddN counts v n times (n > 0), as Add does once.
func (h *Histogram) AddN(v, n int64) {
	if n <= 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	v = min(max(v, 0), 1<<40-1)
	h.counts[bucketOf(v)] += uint64(n)
	h.n += uint64(n)
	h.sum += uint64(v) * uint64(n)
	h.max = max(h.max, v)
}

// add counts v, which must lie in [0, 2^40), on a histogram whose table
// is allocated (Profile's are): the hot path, small enough to inline.
func (h *Histogram) add(v int64) {
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += uint64(v)
	h.max = max(h.max, v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of values added.
func (h *Histogram) Count() int64 { return int64(h.n) }

// Max is the largest value added (exact); 0 when empty.
func (h *Histogram) Max() int64 { return h.max }

// Sum is the sum of the values added (exact).
func (h *Histogram) Sum() uint64 { return h.sum }

// Mean is the exact mean; 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Quantile returns the q-quantile (0 <= q <= 1) by nearest rank: the
// smallest value v such that at least ceil(q × n) values are <= v, read
// from its bucket as explained at the layout. 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			return min(mid, h.max)
		}
	}
	return h.max
}

// Summary is the distribution of one quantity, as JSON.
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	Max   int64   `json:"max"`
}

// Summary returns count, mean, p50/p90/p99 and max; the mean is rounded to
// one decimal.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count: h.Count(),
		Mean:  math.Round(h.Mean()*10) / 10,
		P50:   h.Quantile(0.50),
		P90:   h.Quantile(0.90),
		P99:   h.Quantile(0.99),
		Max:   h.Max(),
	}
}
