package traffic

import (
	"errors"
	"fmt"
	"math"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// longRoundTokens rounds the long pool's --max-model-len up to a multiple
// of 1024 tokens above its longest request: room for a request a little
// longer than any seen, and a number a person can read.
const longRoundTokens = 1024

// Concurrency is how many requests of one bucket the KV cache holds at once.
type Concurrency struct {
	Bucket string `json:"bucket"`
	// Tokens is the bucket's p90 total tokens: the length the concurrency
	// is computed for (a typical long request of the bucket, not its one
	// outlier).
	Tokens int64 `json:"p90_tokens"`
	// KVConcurrency is KV-cache tokens / Tokens; MaxNumSeqs caps what vLLM
	// admits, so Effective is the smaller of the two.
	KVConcurrency float64 `json:"kv_concurrency"`
	MaxNumSeqs    int     `json:"max_num_seqs"`
	Effective     float64 `json:"effective_concurrency"`
}

// BucketConcurrency sizes every non-empty bucket against a plan: KV tokens
// over the bucket's p90 total tokens.
func BucketConcurrency(p *Profile, b memory.Budget) []Concurrency {
	var out []Concurrency
	for _, bk := range p.Buckets() {
		if bk.Count == 0 || bk.Total.P90 <= 0 {
			continue
		}
		kv := math.Floor(b.ConcurrencyAt(int(bk.Total.P90))*100) / 100
		out = append(out, Concurrency{Bucket: bk.Name, Tokens: bk.Total.P90, KVConcurrency: kv,
			MaxNumSeqs: b.Settings.MaxNumSeqs, Effective: math.Min(kv, float64(b.Settings.MaxNumSeqs))})
	}
	return out
}

// Pool is one side of a short/long split, with the flags to serve it.
type Pool struct {
	Name string `json:"name"`
	// Buckets are the size classes routed here.
	Buckets []string `json:"buckets"`
	// MinTokens and MaxTokens bound the requests' total tokens; the long
	// pool's MaxTokens is its longest request rounded up to 1024.
	MinTokens int64   `json:"min_tokens"`
	MaxTokens int64   `json:"max_tokens"`
	Requests  int64   `json:"requests"`
	Share     float64 `json:"share"`
	P90Tokens int64   `json:"p90_tokens"`
	// The planner's settings for the pool.
	GPUMemoryUtilization float64  `json:"gpu_memory_utilization"`
	MaxModelLen          int      `json:"max_model_len"`
	MaxNumSeqs           int      `json:"max_num_seqs"`
	KVTokens             int64    `json:"kv_cache_tokens"`
	Fits                 bool     `json:"fits"`
	Args                 []string `json:"vllm_args"`
	Command              string   `json:"command"`
	Why                  []string `json:"why"`
}

// ErrNoTraffic is returned by Split for a profile without requests.
var ErrNoTraffic = errors.New("no requests to split")

// Split proposes a short pool (the lower half of the buckets: S and M) and
// a long pool (L and XL), each with its own --max-model-len (the short
// pool's bound, the long pool's longest request) and --max-num-seqs sized
// by memory.Recommend for the pool's p90 total tokens: the seed's
// "separate safe-parameter templates". A side without requests is left
// out. in is the deployment; its settings are the base of each pool's.
func Split(p *Profile, in memory.Input, opt memory.Options) ([]Pool, error) {
	return SplitWith(p, in, opt, nil)
}

// SeqsChooser replaces a pool's max-num-seqs: it gets the pool (its
// bounds set), the input it is planned with and memory.Recommend's
// recommendation, and changes the recommendation (MaxNumSeqs, Why,
// Budget). The CLI passes one that simulates the pool's traffic; this
// package does not simulate.
type SeqsChooser func(pool *Pool, in memory.Input, rec *memory.Recommendation) error

// SplitWith is Split with each pool's max-num-seqs chosen by choose
// (nil: the rule of memory.Recommend).
func SplitWith(p *Profile, in memory.Input, opt memory.Options, choose SeqsChooser) ([]Pool, error) {
	if p == nil || p.Requests() == 0 {
		return nil, ErrNoTraffic
	}
	first := p.firstLong()
	var out []Pool
	for side := 0; side < 2; side++ {
		lo, hi := 0, first
		name := "short"
		if side == 1 {
			lo, hi, name = first, len(p.buckets), "long"
		}
		var h Histogram
		pool := Pool{Name: name}
		for i := lo; i < hi; i++ {
			h.Merge(&p.buckets[i])
			pool.Buckets = append(pool.Buckets, bucketNames[i])
		}
		if h.Count() == 0 {
			continue
		}
		if lo > 0 {
			pool.MinTokens = p.bounds[lo-1] + 1
		}
		if side == 1 {
			pool.MaxTokens = roundUpTo(h.Max(), longRoundTokens)
		} else {
			pool.MaxTokens = p.bounds[hi-1]
		}
		pool.Requests = h.Count()
		pool.Share = round4(float64(h.Count()) / float64(p.requests))
		pool.P90Tokens = h.Quantile(0.90)
		if err := pool.plan(in, opt, choose); err != nil {
			return nil, err
		}
		out = append(out, pool)
	}
	return out, nil
}

func roundUpTo(n, step int64) int64 { return (n + step - 1) / step * step }

// plan asks memory.Recommend for the pool's settings.
func (pool *Pool) plan(in memory.Input, opt memory.Options, choose SeqsChooser) error {
	limit := pool.MaxTokens
	if m := in.Model.MaxPositions; m > 0 && limit > int64(m) {
		pool.Why = append(pool.Why, fmt.Sprintf("the longest requests (%d tokens) exceed the model's %d; the pool serves up to %d", limit, m, m))
		limit = int64(m)
	}
	// The pool's length is chosen, as a user's would be: Recommend keeps
	// it when it fits. A copy of Set, so the caller's stays as it was.
	in.Settings.MaxModelLen = int(limit)
	set := make(map[string]bool, len(in.Settings.Set)+1)
	for k, v := range in.Settings.Set {
		set[k] = v
	}
	set[vllm.FlagMaxModelLen] = true
	in.Settings.Set = set
	opt.TypicalContext = int(min(pool.P90Tokens, limit))
	opt.LengthWhose = "the pool's longest requests"
	r, err := memory.Recommend(in, opt)
	if err != nil {
		return err
	}
	if choose != nil && r.MaxModelLen > 0 && r.Budget.Fits {
		if err := choose(pool, in, &r); err != nil {
			return err
		}
	}
	pool.GPUMemoryUtilization, pool.MaxModelLen, pool.MaxNumSeqs = r.GPUMemoryUtilization, r.MaxModelLen, r.MaxNumSeqs
	pool.KVTokens, pool.Fits = r.Budget.KVTokens, r.Budget.Fits && r.MaxModelLen > 0
	pool.Why = append(pool.Why, r.Why...)
	if r.MaxModelLen > 0 && int64(r.MaxModelLen) < limit {
		pool.Why = append(pool.Why, fmt.Sprintf("only %d tokens fit: longer requests must go elsewhere", r.MaxModelLen))
	}
	s := in.Settings
	s.Version = vllm.Version{}
	if s.Model == "" {
		s.Model = in.Model.ID
	}
	s.GPUMemoryUtilization, s.MaxModelLen, s.MaxNumSeqs = r.GPUMemoryUtilization, r.MaxModelLen, r.MaxNumSeqs
	if r.MaxModelLen <= 0 {
		s.MaxModelLen = int(limit)
	}
	pool.Args = s.Args()
	pool.Command = s.CommandLine()
	return nil
}
