package sim

import (
	"errors"
	"math"
	"testing"

	"headroom.dev/headroom/model"
)

// life is a finished request's times.
type life struct {
	first, finish float64
	preemptions   int
}

// drain steps e until it is idle and returns each finished request's
// life, the steps, and the batches in order.
func drain(t *testing.T, e *Engine) (map[string]life, []Batch) {
	t.Helper()
	out := map[string]life{}
	var batches []Batch
	for range 10000 {
		res := e.Step()
		if res.Idle {
			return out, batches
		}
		batches = append(batches, res.Batch)
		for _, ev := range res.Events {
			if ev.Done {
				out[ev.ID] = life{ev.FirstToken, ev.Finish, ev.Preemptions}
			}
		}
	}
	t.Fatal("engine did not go idle in 10000 steps")
	return nil, nil
}

func mustAdd(t *testing.T, e *Engine, r Request) {
	t.Helper()
	if _, err := e.Add(r); err != nil {
		t.Fatal(err)
	}
}

func newEngine(t *testing.T, c Config) *Engine {
	t.Helper()
	if c.Timer == nil {
		c.Timer = Fixed(1)
	}
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A pool of 5 usable blocks of 4 tokens; A and B each 6 prompt + 6
// output tokens, both at t=0; every step takes 1 s.
//
//	step 1 (t=0→1): admit A (6 tokens, 2 blocks, free 3) and B (2 blocks, free 1);
//	                both sample token 1 (first token at t=1). num_tokens 7.
//	step 2, 3:      one token each; 7 and 8 tokens fit in 2 blocks. num_tokens 9.
//	step 4 (t=3→4): A needs a 3rd block (9 tokens): free 1 → 0. B needs one,
//	                none free: preempt the newest running request, B itself;
//	                its 2 blocks are freed (free 2), B keeps its 3 tokens and
//	                goes to the front of the queue; no admission this step.
//	                A samples token 4.
//	step 5, 6:      A runs (10, 11 tokens: 3 blocks). B needs ceil(9/4) = 3
//	                blocks to recompute prompt 6 + output 3; only 2 free: waits.
//	                A samples token 6 at t=6 and finishes (free 5).
//	step 7 (t=6→7): B recomputes 9 tokens (6 of them prompt), samples token 4.
//	step 8, 9:      tokens 5 and 6; B finishes at t=9.
func TestTightPoolPreemptsNewest(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 6, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64, NoPrefixCaching: true})
	mustAdd(t, e, Request{ID: "A", PromptTokens: 6, OutputTokens: 6})
	mustAdd(t, e, Request{ID: "B", PromptTokens: 6, OutputTokens: 6})
	got, batches := drain(t, e)
	want := map[string]life{"A": {1, 6, 0}, "B": {1, 9, 1}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, got[id], w)
		}
	}
	if len(batches) != 9 {
		t.Fatalf("steps: got %d, want 9", len(batches))
	}
	// Step 4 runs A alone; step 7 recomputes B's prompt 6 + output 3.
	if b := batches[3]; b.Requests != 1 || b.Tokens != 1 {
		t.Errorf("step 4: got %+v, want A alone with 1 token", b)
	}
	if b := batches[6]; b.Tokens != 9 || b.PrefillTokens != 6 {
		t.Errorf("step 7: got %+v, want 9 tokens recomputed, 6 of them prompt", b)
	}
	if g := e.Gauges(); g.Preemptions != 1 || g.Finished != 2 || g.KVUsage != 0 {
		t.Errorf("gauges: %+v", g)
	}
}

// The same trace with prefix caching (vLLM V1's default): B's freed
// blocks keep their hashes. At step 7 B has 9 tokens; blocks 0 and 1
// (tokens 0-7) are full and cached, at most (9−1)/4 = 2 blocks may hit, so
// B computes 1 token instead of 9.
func TestPreemptedRequestHitsItsOwnBlocks(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 6, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	mustAdd(t, e, Request{ID: "A", PromptTokens: 6, OutputTokens: 6})
	mustAdd(t, e, Request{ID: "B", PromptTokens: 6, OutputTokens: 6})
	got, batches := drain(t, e)
	if got["B"] != (life{1, 9, 1}) {
		t.Errorf("B: got %+v", got["B"])
	}
	if b := batches[6]; b.Tokens != 1 || b.ContextTokens != 9 {
		t.Errorf("step 7: got %+v, want 1 new token over 9 of context", b)
	}
	if g := e.Gauges(); g.PrefixHits != 8 {
		t.Errorf("prefix hits: got %d tokens, want 8", g.PrefixHits)
	}
}

// The same trace on a model of two KV-cache groups, one of full attention
// and one of a sliding window of 4 tokens (gpt-oss's and Gemma's layout),
// 8 usable blocks of 4 tokens. Each request holds its blocks in both
// groups: 4 blocks a request at step 1 (2 + 2), none free. At step 3 each
// releases its sliding block 0 (the window of position 8 starts at 5): 2
// free. At step 4 A takes a 3rd block in each group (2); B needs 2, none
// are free: B is preempted, its full blocks 0-1 and its sliding block 1
// keep their hashes (3 free). At step 5 B's hit is 2 blocks (tokens 0-7:
// the full group's leading run, and in the sliding group the
// cdiv(4 − 1, 4) = 1 block before the hit, found searching down from it,
// SlidingWindowManager.find_longest_cache_hit); it needs those 3 blocks
// and 1 new one a group, 5 of 3 free: it waits. A finishes at step 6 (8
// free); at step 7 B computes 1 token instead of 9, as with one group.
func TestPreemptedHybridRequestHitsItsOwnBlocks(t *testing.T) {
	for _, c := range []struct {
		noCaching bool
		recompute int64
		hits      int64
	}{{false, 1, 8}, {true, 9, 0}} {
		e := newEngine(t, Config{NumGPUBlocks: 9, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64, NoPrefixCaching: c.noCaching,
			Groups: []Group{{Kind: model.Full}, {Kind: model.Sliding, Window: 4}}})
		mustAdd(t, e, Request{ID: "A", PromptTokens: 6, OutputTokens: 6})
		mustAdd(t, e, Request{ID: "B", PromptTokens: 6, OutputTokens: 6})
		got, batches := drain(t, e)
		if got["A"] != (life{1, 6, 0}) || got["B"] != (life{1, 9, 1}) || len(batches) != 9 {
			t.Fatalf("caching off %v: %+v in %d steps", c.noCaching, got, len(batches))
		}
		if b := batches[6]; b.Tokens != c.recompute {
			t.Errorf("caching off %v: step 7 computes %d tokens, want %d", c.noCaching, b.Tokens, c.recompute)
		}
		if g := e.Gauges(); g.PrefixHits != c.hits || g.Preemptions != 1 {
			t.Errorf("caching off %v: %d prefix hits, %d preemptions; want %d and 1", c.noCaching, g.PrefixHits, g.Preemptions, c.hits)
		}
	}
}

// The sliding-window search of a cache hit, on a window of 9 tokens in
// blocks of 4: a hit needs the cdiv(9 − 1, 4) = 2 blocks before it cached;
// blocks 0-5 freed by a preemption, block 2 had left the window (−1).
// Searching down from block 5: all cached, blocks 4-5 end a run of 2: a hit
// of 6 blocks. Block 5 evicted: blocks 3-4, a hit of 5. Block 3 evicted
// too: the runs are 4 alone and then 0-1, a hit of 2. Only block 0
// cached: no run of 2, so the leading run, 1 block.
func TestSlidingWindowCacheHit(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 20, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64,
		Groups: []Group{{Kind: model.Sliding, Window: 9}}})
	r := e.newReq()
	r.handle, r.preemptions = 7, 1
	blocks := make([]int32, 6)
	for i := range blocks {
		blocks[i] = e.pool.take()
		e.pool.ref[blocks[i]] = 1
		e.pool.register(blocks[i], e.key(r, 0, i))
		e.pool.release(blocks[i])
	}
	blocks[2] = -1
	r.freed = [][]int32{blocks}
	for _, c := range []struct {
		evict []int
		want  int
	}{{nil, 6}, {[]int{5}, 5}, {[]int{3}, 2}, {[]int{1, 4}, 1}} {
		for _, i := range c.evict {
			e.pool.anonymize(blocks[i])
		}
		if got := e.slidingHit(r, 0, 6); got != c.want {
			t.Errorf("evicted %v as well: a hit of %d blocks, want %d", c.evict, got, c.want)
		}
	}
}

// max-num-seqs 2, three requests of 4 prompt + 2 output tokens at t=0:
// A and B run in steps 1-2 (first token at 1, done at 2); C is admitted
// at step 3 (t=2), first token at 3, done at 4.
func TestMaxNumSeqsBinds(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	for _, id := range []string{"A", "B", "C"} {
		mustAdd(t, e, Request{ID: id, PromptTokens: 4, OutputTokens: 2})
	}
	got, batches := drain(t, e)
	want := map[string]life{"A": {1, 2, 0}, "B": {1, 2, 0}, "C": {3, 4, 0}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, got[id], w)
		}
	}
	for i, b := range batches {
		if b.Requests > 2 {
			t.Errorf("step %d ran %d requests, max-num-seqs is 2", i+1, b.Requests)
		}
	}
}

// A budget of 8 tokens per step; A has a 20-token prompt and 2 output
// tokens at t=0, B 3 + 1 at t=0.5.
//
//	step 1 (t=0→1): A 8 tokens (computed 8).
//	step 2 (t=1→2): A 8 (16); the budget is spent, B (arrived) waits.
//	step 3 (t=2→3): A 4 (20 = prompt: first token at 3); 4 left: B 3
//	                tokens, first token and done at 3.
//	step 4 (t=3→4): A 1 token, done at 4.
func TestLongPromptChunked(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 8, MaxModelLen: 64})
	mustAdd(t, e, Request{ID: "A", PromptTokens: 20, OutputTokens: 2})
	mustAdd(t, e, Request{ID: "B", Arrival: 0.5, PromptTokens: 3, OutputTokens: 1})
	got, batches := drain(t, e)
	want := map[string]life{"A": {3, 4, 0}, "B": {3, 3, 0}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, got[id], w)
		}
	}
	tokens := []int64{8, 8, 7, 1}
	if len(batches) != len(tokens) {
		t.Fatalf("steps: got %d, want %d", len(batches), len(tokens))
	}
	for i, n := range tokens {
		if batches[i].Tokens != n {
			t.Errorf("step %d: %d tokens, want %d", i+1, batches[i].Tokens, n)
		}
	}
}

// An idle engine starts its next step at the next arrival: A (4 + 1) at
// t=10 finishes at 11 with fixed 1 s steps.
func TestIdleJumpsToArrival(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	mustAdd(t, e, Request{ID: "A", Arrival: 10, PromptTokens: 4, OutputTokens: 1})
	if at, ok := e.NextEventTime(); !ok || at != 10 {
		t.Fatalf("next event: %v %v, want 10", at, ok)
	}
	got, _ := drain(t, e)
	if got["A"] != (life{11, 11, 0}) {
		t.Errorf("A: %+v", got["A"])
	}
}

// Two requests share a 8-token system prompt (2 blocks of 4). A (10
// tokens) computes it at step 1; B arrives at 1.5 and at step 3 (t=2)
// finds both prefix blocks: it computes 10 − 8 = 2 tokens beside A's 1.
// The same with a second group, a sliding window of 4 tokens: A holds the
// full group's prefix blocks, and in the sliding group has released
// block 0 at step 2 and block 1 at step 3 (the window of position 11
// starts at 8), both still cached; B's hit needs the cdiv(4 − 1, 4) = 1
// sliding block before it, block 1: the same 2 blocks.
func TestSharedPrefixHits(t *testing.T) {
	for _, groups := range [][]Group{nil, {{Kind: model.Full}, {Kind: model.Sliding, Window: 4}}} {
		e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64, Groups: groups})
		mustAdd(t, e, Request{ID: "A", PromptTokens: 10, OutputTokens: 5, PrefixID: 7, PrefixTokens: 8})
		mustAdd(t, e, Request{ID: "B", Arrival: 1.5, PromptTokens: 10, OutputTokens: 1, PrefixID: 7, PrefixTokens: 8})
		_, batches := drain(t, e)
		if b := batches[2]; b.Tokens != 3 || b.Requests != 2 {
			t.Errorf("%d groups, step 3: got %+v, want A 1 token + B 2 tokens", max(len(groups), 1), b)
		}
	}
}

// A sliding-window group of 8 tokens, blocks of 4, 10 usable blocks. A
// 16-token prompt takes 4 blocks at step 1. At step 2 the next token is
// position 16; its window starts at 16 − 8 + 1 = 9, so blocks 0 and 1
// (tokens 0-7) are freed, and a 5th block is given: 3 held, usage 0.3.
func TestSlidingWindowFreesOldBlocks(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 11, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64,
		Groups: []Group{{Kind: model.Sliding, Window: 8}}})
	mustAdd(t, e, Request{ID: "A", PromptTokens: 16, OutputTokens: 5})
	e.Step()
	if u := e.Gauges().KVUsage; math.Abs(u-0.4) > 1e-12 {
		t.Errorf("after step 1: usage %v, want 0.4 (4 of 10 blocks)", u)
	}
	e.Step()
	if u := e.Gauges().KVUsage; math.Abs(u-0.3) > 1e-12 {
		t.Errorf("after step 2: usage %v, want 0.3 (3 of 10 blocks)", u)
	}
}

func TestRejections(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 5, BlockSize: 4, MaxNumSeqs: 8, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	var rej *Rejection
	// 64 prompt tokens leave no room for output within max-model-len 64.
	if _, err := e.Add(Request{ID: "long", PromptTokens: 64, OutputTokens: 1}); !errors.As(err, &rej) || rej.Reason != RejectPromptTooLong {
		t.Errorf("prompt of max-model-len: %v", err)
	}
	// 4 usable blocks hold 16 tokens; 10 + 8 − 1 = 17 need 5 blocks.
	if _, err := e.Add(Request{ID: "big", PromptTokens: 10, OutputTokens: 8}); !errors.As(err, &rej) || rej.Reason != RejectNeverFits {
		t.Errorf("never fits: %v", err)
	}
	// 10 + 7 − 1 = 16 tokens: 4 blocks, fits exactly.
	mustAdd(t, e, Request{ID: "fits", Arrival: 1, PromptTokens: 10, OutputTokens: 7})
	if _, err := e.Add(Request{ID: "early", Arrival: 0.5, PromptTokens: 1, OutputTokens: 1}); !errors.Is(err, ErrUnsorted) {
		t.Errorf("unsorted: %v", err)
	}
	if g := e.Gauges(); g.Rejected != 2 {
		t.Errorf("rejected: %d, want 2", g.Rejected)
	}
	got, _ := drain(t, e)
	// Arrives at 1; prompt at step 1 (t=1→2), then 6 more tokens: done at 8.
	if got["fits"] != (life{2, 8, 0}) {
		t.Errorf("fits: %+v", got["fits"])
	}
}

// Aborting the running request of a pool of 10 usable blocks returns
// its 2 blocks (ceil(20 / 16) = 2: usage 0.2 before, 0 after); a waiting
// one leaves the queue; a handle already gone is reported.
func TestAbort(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 11, BlockSize: 16, MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	a, _ := e.Add(Request{ID: "A", PromptTokens: 20, OutputTokens: 5})
	b, _ := e.Add(Request{ID: "B", PromptTokens: 4, OutputTokens: 5})
	e.Step()
	if g := e.Gauges(); g.Running != 1 || g.Waiting != 1 || math.Abs(g.KVUsage-0.2) > 1e-12 {
		t.Fatalf("before: %+v", g)
	}
	if !e.Abort(a) || !e.Abort(b) || e.Abort(a) {
		t.Fatal("abort results")
	}
	if g := e.Gauges(); g.Running != 0 || g.Waiting != 0 || g.KVUsage != 0 || g.Aborted != 2 || g.Finished != 0 {
		t.Errorf("after: %+v", g)
	}
	if res := e.Step(); !res.Idle {
		t.Errorf("engine not idle after aborting everything: %+v", res)
	}
}
