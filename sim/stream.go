package sim

import (
	"math"

	"headroom.dev/headroom/traffic"
)

// maxStreamRing bounds the deliveries a chunker remembers: a request
// whose chunks lie further apart than this many steps (an interval past
// 4,096 tokens) has its gaps timed over the last 4,096 steps.
const maxStreamRing = 4096

// chunker times what a client receives when the API server sends a
// request's tokens every interval of them (--stream-interval): vLLM's
// output processor (vllm/v1/engine/output_processor.py, RequestState.
// make_request_output) sends a request's first token at once, its last
// with whatever is left, and the others when interval tokens have gathered
// since the last sent. vllm bench serve times each chunk as one gap, so
// the median gap between chunks is interval steps where it was one; TTFT,
// TPOT and E2E do not move. The engine reports only first and last tokens
// (for speed), so the requests continuing in a step are taken at evenly
// spread phases: each sends a chunk every m = ⌈interval / t⌉ steps, t the
// tokens a request sampled in the step (more than one with accepted
// drafts), so n of them send n/m chunks, each the gap since the delivery m
// back, and a finishing request sends its rest ⌈m/2⌉ deliveries after its
// last chunk, the mean of an even phase.
type chunker struct {
	interval int
	times    []float64 // ring of the latest deliveries
	n        int       // deliveries recorded
	carry    float64   // chunks owed, less than one
}

func newChunker(interval int) *chunker {
	if interval <= 1 {
		return nil
	}
	return &chunker{interval: interval, times: make([]float64, min(interval, maxStreamRing))}
}

// back is the time of the delivery k before the next, k ≥ 1: the oldest
// remembered when fewer were.
func (c *chunker) back(k int) float64 {
	k = min(k, c.n, len(c.times))
	return c.times[(c.n-k)%len(c.times)]
}

// add counts delivery d's chunks at time at: n requests that had sent
// their first token sampled in it, done of them finished.
func (c *chunker) add(itl *traffic.Histogram, d *delivery, n, done int, at float64) {
	done = min(done, n)
	if c.n > 0 && n > 0 {
		t := float64(d.tokens) / float64(max(d.outputs, 1))
		m := max(int(math.Ceil(float64(c.interval)/max(t, 1))), 1)
		if done > 0 {
			itl.AddN(micros(at-c.back((m+1)/2)), int64(done))
		}
		if k := c.carry + float64(n-done)/float64(m); k >= 1-1e-9 {
			whole := math.Floor(k + 1e-9)
			itl.AddN(micros(at-c.back(m)), int64(whole))
			c.carry = max(k-whole, 0)
		} else {
			c.carry = k
		}
	}
	c.times[c.n%len(c.times)] = at
	c.n++
}
