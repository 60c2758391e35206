package sim

import (
	"errors"
	"fmt"

	"headroom.dev/headroom/model"
)

// Request is one request as the engine receives it.
type Request struct {
	ID string
	// Arrival is when the request reaches the engine, in seconds of
	// simulated time.
	Arrival float64
	// PromptTokens and OutputTokens are the request's prompt and the
	// tokens it generates before it stops.
	PromptTokens, OutputTokens int
	// PrefixID, when not 0, names a prompt prefix of PrefixTokens tokens
	// that every request with the same id shares (a system prompt): its
	// full blocks are found in the prefix cache once computed.
	PrefixID     uint64
	PrefixTokens int
	// Sent is when the client sent the request, before the API server
	// processed it (Run sets it; the engine carries it to the Event).
	Sent float64
	// Endpoint is the API the request called, where it says
	// (workload.EndpointChat or EndpointCompletions; a logged request's
	// own); "" is the traffic's, FrontEnd.Request.
	Endpoint string
}

// Rejection reasons, counted per request as vLLM rejects them.
const (
	// RejectPromptTooLong: the prompt leaves no room for one output token
	// within max-model-len (vLLM answers 400).
	RejectPromptTooLong = "prompt_too_long"
	// RejectNeverFits: the request at its full length needs more blocks
	// than the pool has; vLLM would preempt it forever.
	RejectNeverFits = "never_fits"
	// RejectEmptyPrompt: a prompt of no tokens.
	RejectEmptyPrompt = "empty_prompt"
	// RejectExceedsContext: prompt + output (max_tokens) past
	// max-model-len, which vLLM's OpenAI server answers with 400 ("This
	// model's maximum context length is N tokens. However, you requested
	// M tokens ..."; serving_engine.py _validate_input) instead of cutting
	// the output short.
	RejectExceedsContext = "exceeds_max_model_len"
)

// Rejection is the error Add returns for a request the engine refuses.
type Rejection struct {
	ID, Reason, Detail string
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("request %s rejected (%s): %s", r.ID, r.Reason, r.Detail)
}

// ErrUnsorted is returned by Add for a request that arrives before the
// previous one.
var ErrUnsorted = errors.New("arrivals out of order")

// Event is what one step did to one request: it produced a token (First
// for the first; only with Config.TokenEvents), finished, or was
// preempted.
type Event struct {
	// Handle is what Add returned for the request.
	Handle uint64
	ID     string
	// Generated is the number of output tokens produced so far.
	Generated int
	First     bool
	Done      bool
	Preempted bool
	// Set when Done: the request's life, in simulated seconds.
	Arrival, FirstToken, Finish, Sent float64
	Prompt, Output                    int
	Preemptions                       int
}

// StepResult is one step of the engine. Events is reused by the next
// Step: copy what you keep.
type StepResult struct {
	// Idle is true when there was nothing to run and nothing pending.
	Idle       bool
	Start, End float64
	Batch      Batch
	Events     []Event
	// Preempted counts this step's preemptions; Sampled the tokens the
	// step sampled, First how many of them were first tokens; Outputs the
	// requests that sampled (one streamed chunk each: with speculative
	// decoding a request may take several tokens in a step).
	Preempted      int
	Sampled, First int
	Outputs        int
	// Parts is where the step's time went, when the timer says
	// (HasParts: a PartsTimer, the roofline).
	Parts    StepParts
	HasParts bool
	// NoBatch marks a pipelined engine's wait for a batch in flight
	// (Config.PipelineStages): it ran no batch of its own, and a run does
	// not count it as a step.
	NoBatch bool
}

// Gauges are the engine's state, as vLLM's /metrics shows it.
type Gauges struct {
	Now float64
	// Running and Waiting are the requests in the batch and those that
	// have arrived and wait for admission (preempted ones included).
	Running, Waiting int
	// KVUsage is the share of the pool's usable blocks in use, 0..1.
	KVUsage     float64
	Preemptions int64
	Finished    int64
	Rejected    int64
	Aborted     int64
	// PromptTokens and GenerationTokens count computed prompt tokens of
	// admitted requests and sampled tokens, as vLLM's counters do.
	PromptTokens, GenerationTokens int64
	// PrefixQueries and PrefixHits count prompt tokens looked up in, and
	// found in, the prefix cache.
	PrefixQueries, PrefixHits int64
	// SpecDrafts, SpecDraftTokens and SpecAccepted are vLLM's
	// spec_decode counters: steps a request verified drafts in, the
	// drafts, and those accepted (Engine.SpecCounts has the positions).
	SpecDrafts, SpecDraftTokens, SpecAccepted int64
}

type req struct {
	Request
	handle    uint64
	computed  int
	generated int
	blocks    [][]int32 // per group; −1 for a block freed out of the window
	// freed is each group's blocks as the last preemption freed them (−1
	// where a block had left the window), with prefix caching: they keep
	// their hashes until evicted. Nil until a preemption.
	freed [][]int32
	// firstAt is the time of the first token; < 0 before it.
	firstAt     float64
	preemptions int
	// sched is the tokens given in the current step; schedIdx its position
	// in the step's list, −1 when not scheduled.
	sched    int
	schedIdx int
	// spec is the drafts the request carries into its next step, verify
	// those scheduled in the current one; drafts whether the proposer
	// finds any for it (speculative.go).
	spec, verify int
	drafts       bool
	// epoch changes whenever the request's state is reset (preempted,
	// dropped, recycled): a pipelined batch in flight that holds an older
	// epoch's tokens of it is stale (pipeline.go).
	epoch uint32
	// hashed is how many of the request's leading blocks are full and
	// hold its own tokens' hash in vLLM (allocate_slots caches them as
	// they fill). Here a block of its own is hashed only when a
	// preemption frees it: until then only the request holds it, and
	// nobody looks its hash up (see allocate).
	hashed int
}

func (r *req) numTokens() int { return r.PromptTokens + r.generated }

// Engine is the simulated engine. It is not safe for concurrent use.
type Engine struct {
	cfg     Config
	pool    pool
	caching bool
	// fullOnly: one group of full-attention (or MLA) layers, the common
	// case allocate takes a short path for.
	fullOnly bool
	now      float64
	last     float64 // arrival of the last request added

	pending ring // added, not yet arrived
	waiting ring // arrived (and preempted), FCFS
	running []*req
	sched   []*req
	chunks  []Chunk // batch()'s scratch for Batch.Chunks
	free    []*req  // recycled request states

	seq    uint64
	gauges Gauges
	res    StepResult
	// parts is the timer when it says where a step's time goes.
	parts PartsTimer
	// spec is speculative decoding (nil without); lookahead its slots a
	// running request holds beyond its scheduled tokens.
	spec      *specState
	lookahead int
	// pipe is pipeline parallelism's batches in flight (pipeline.go).
	pipe pipeline
}

// New returns an idle engine at time 0.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	caching := !cfg.NoPrefixCaching && cacheable(cfg.Groups)
	e := &Engine{cfg: cfg, caching: caching, pool: newPool(cfg.NumGPUBlocks-1, caching)}
	e.fullOnly = len(cfg.Groups) == 1 && (cfg.Groups[0].Kind == model.Full || cfg.Groups[0].Kind == model.MLA)
	e.parts, _ = cfg.Timer.(PartsTimer)
	if cfg.Speculation != nil {
		e.spec = newSpecState(cfg.Speculation)
		e.lookahead = cfg.Speculation.Lookahead
	}
	return e, nil
}

// Config returns the engine's configuration, defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// Now is the engine's clock: the end of the last step.
func (e *Engine) Now() float64 { return e.now }

// Add queues a request; it returns the handle its events carry. A request
// that arrives before the previous one is an error (ErrUnsorted); one the
// engine refuses returns a *Rejection and is counted.
func (e *Engine) Add(r Request) (uint64, error) {
	if r.Arrival < e.last {
		return 0, fmt.Errorf("%w: request %s arrives at %.6fs, before the previous one (%.6fs)", ErrUnsorted, r.ID, r.Arrival, e.last)
	}
	e.last = r.Arrival
	reject := func(reason, detail string) (uint64, error) {
		e.gauges.Rejected++
		return 0, &Rejection{ID: r.ID, Reason: reason, Detail: detail}
	}
	if r.PromptTokens <= 0 {
		return reject(RejectEmptyPrompt, "the prompt has no tokens")
	}
	if r.PromptTokens >= e.cfg.MaxModelLen {
		return reject(RejectPromptTooLong, fmt.Sprintf("%d prompt tokens leave no room for output within max-model-len %d", r.PromptTokens, e.cfg.MaxModelLen))
	}
	r.OutputTokens = max(r.OutputTokens, 1)
	if r.OutputTokens > e.cfg.MaxModelLen-r.PromptTokens {
		return reject(RejectExceedsContext, fmt.Sprintf("max-model-len is %d tokens; %d prompt + %d output tokens ask for %d (vLLM answers 400)",
			e.cfg.MaxModelLen, r.PromptTokens, r.OutputTokens, r.PromptTokens+r.OutputTokens))
	}
	r.PrefixTokens = min(max(r.PrefixTokens, 0), r.PromptTokens)
	if need := e.cfg.peakBlocks(min(r.PromptTokens+r.OutputTokens-1+e.lookahead, e.cfg.MaxModelLen)); need > e.pool.n {
		return reject(RejectNeverFits, fmt.Sprintf("%d tokens need %d KV blocks, the pool has %d", r.PromptTokens+r.OutputTokens, need, e.pool.n))
	}
	q := e.newReq()
	q.Request = r
	e.seq++
	q.handle = e.seq
	q.drafts = e.spec != nil && e.spec.drafts(q.handle)
	e.pending.pushBack(q)
	return q.handle, nil
}

func (e *Engine) newReq() *req {
	var q *req
	if n := len(e.free); n > 0 {
		q = e.free[n-1]
		e.free = e.free[:n-1]
		blocks := q.blocks
		for i := range blocks {
			blocks[i] = blocks[i][:0]
		}
		freed := q.freed
		for i := range freed {
			freed[i] = freed[i][:0]
		}
		*q = req{blocks: blocks, freed: freed, epoch: q.epoch + 1}
	} else {
		q = &req{blocks: make([][]int32, len(e.cfg.Groups))}
	}
	q.firstAt = -1
	q.schedIdx = -1
	return q
}

// Gauges returns the engine's state now.
func (e *Engine) Gauges() Gauges {
	g := e.gauges
	g.Now = e.now
	g.Running = len(e.running)
	g.Waiting = e.waiting.len()
	for i := range e.pending.len() {
		if e.pending.at(i).Arrival > e.now {
			break
		}
		g.Waiting++
	}
	g.KVUsage = e.pool.usage()
	return g
}

// Busy reports whether a request is running or waiting.
func (e *Engine) Busy() bool { return len(e.running) > 0 || e.waiting.len() > 0 }

// NextEventTime is when the next step would start: now when requests are
// running or waiting, else the next arrival; ok is false when nothing is
// queued at all.
func (e *Engine) NextEventTime() (float64, bool) {
	if e.Busy() {
		return e.now, true
	}
	if e.pending.len() > 0 {
		return max(e.now, e.pending.front().Arrival), true
	}
	return e.now, false
}

// Step runs one scheduler step and its batch. An idle engine jumps to the
// next arrival first; with nothing queued it returns Idle.
func (e *Engine) Step() StepResult {
	if e.cfg.PipelineStages > 1 {
		return e.stepPipelined()
	}
	res := &e.res
	*res = StepResult{Events: res.Events[:0]}
	if !e.Busy() {
		if e.pending.len() == 0 {
			res.Idle, res.Start, res.End = true, e.now, e.now
			return *res
		}
		e.now = max(e.now, e.pending.front().Arrival)
	}
	b := e.begin()
	return e.end(e.price(b))
}

// begin schedules a step at the engine's time: the requests that have
// arrived join the queue, the scheduler picks the batch.
func (e *Engine) begin() Batch {
	res := &e.res
	for e.pending.len() > 0 && e.pending.front().Arrival <= e.now {
		e.waiting.pushBack(e.pending.popFront())
	}
	res.Start = e.now
	e.schedule(res)
	res.Batch = e.batch()
	return res.Batch
}

// price is what the step of batch b takes, in seconds, and where it went
// when the timer says.
func (e *Engine) price(b Batch) float64 {
	res := &e.res
	if e.parts != nil {
		res.Parts, res.HasParts = e.parts.Parts(b), true
		res.Parts.Draft = e.draftTime(b)
		return res.Parts.Total()
	}
	return e.cfg.Timer.StepTime(b) + e.draftTime(b)
}

// end runs the step begun for seconds and applies its batch.
func (e *Engine) end(seconds float64) StepResult {
	res := &e.res
	e.now += seconds
	res.End = e.now
	e.finishStep(res)
	return *res
}

// beginAt begins a step of a data-parallel group at t (the group's
// engines step together: fleet.stepGroup). An engine with nothing to run
// schedules an empty batch, vLLM's dummy step.
func (e *Engine) beginAt(t float64) Batch {
	e.res = StepResult{Events: e.res.Events[:0]}
	e.now = max(e.now, t)
	return e.begin()
}

// schedule is one call of vLLM's Scheduler.schedule (docs/vllm-scheduler.md).
func (e *Engine) schedule(res *StepResult) {
	budget := e.cfg.MaxNumBatchedTokens
	e.sched = e.sched[:0]
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		r := e.running[i]
		// A request's drafts are scheduled with it (num_tokens_with_spec).
		n := r.numTokens() + r.spec - r.computed
		if t := e.cfg.LongPrefillTokenThreshold; t > 0 {
			n = min(n, t)
		}
		n = min(n, budget)
		if n <= 0 {
			continue
		}
		ok := true
		for !e.allocate(r, n, e.lookahead) {
			// Preempt the newest running request (running.pop()).
			last := len(e.running) - 1
			v := e.running[last]
			e.running = e.running[:last]
			if v.schedIdx >= 0 {
				budget += v.sched
				e.unschedule(v)
			}
			e.preempt(v, res)
			preempted = true
			if v == r {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		r.sched = n
		// A budget that cuts the drafts short verifies the ones it holds.
		r.verify = max(r.computed+n-r.numTokens(), 0)
		r.schedIdx = len(e.sched)
		e.sched = append(e.sched, r)
		budget -= n
	}
	if preempted {
		return
	}
	for budget > 0 && len(e.running) < e.cfg.MaxNumSeqs && e.waiting.len() > 0 {
		r := e.waiting.front()
		hits := 0
		var hitFree int
		if e.caching && r.computed == 0 {
			hits, hitFree = e.cacheHits(r)
			e.gauges.PrefixQueries += int64(r.numTokens())
		}
		n := r.numTokens() - hits*e.cfg.BlockSize
		if t := e.cfg.LongPrefillTokenThreshold; t > 0 {
			n = min(n, t)
		}
		if e.cfg.NoChunkedPrefill && n > budget {
			break
		}
		n = min(n, budget)
		if hits > 0 && len(e.cfg.Groups)*(cdiv(hits*e.cfg.BlockSize+n, e.cfg.BlockSize)-hits)+hitFree > e.pool.free {
			break
		}
		if hits > 0 {
			e.gauges.PrefixHits += int64(hits * e.cfg.BlockSize)
			for g := range e.cfg.Groups {
				lo := e.hitStart(g, hits)
				blocks := r.blocks[g]
				for i := range hits {
					if i < lo {
						blocks = append(blocks, -1) // left the window
						continue
					}
					b, _ := e.cached(r, g, i)
					e.pool.touch(b)
					blocks = append(blocks, b)
				}
				r.blocks[g] = blocks
			}
			r.computed = hits * e.cfg.BlockSize
		}
		if !e.allocate(r, n, 0) {
			// Cannot happen after the check above; stay safe.
			e.freeBlocks(r, false)
			r.computed = 0
			break
		}
		e.waiting.popFront()
		e.running = append(e.running, r)
		r.sched = n
		r.schedIdx = len(e.sched)
		e.sched = append(e.sched, r)
		budget -= n
	}
}

// cacheHits is the blocks of r found in the prefix cache, at most
// (num_tokens − 1) / block_size (the last token is always computed), as
// vLLM's KV-cache coordinator finds them (find_longest_cache_hit): the
// leading run of cached blocks in every full-attention group, and in
// every sliding-window group a run of cdiv(window − 1, block_size)
// cached blocks ending at the hit (the blocks before it have left the
// window and need not be there), the hit shortened until every group
// agrees. free is how many of the blocks it takes are free (they leave
// the free queue when taken).
func (e *Engine) cacheHits(r *req) (hits, free int) {
	if r.preemptions == 0 && r.PrefixID == 0 {
		return 0, 0 // nothing of its own freed, no shared prefix to find
	}
	hits = (r.numTokens() - 1) / e.cfg.BlockSize
	for changed := true; changed && hits > 0; {
		changed = false
		for g, grp := range e.cfg.Groups {
			h := hits
			if grp.Kind == model.Sliding {
				h = e.slidingHit(r, g, hits)
			} else {
				for n := 0; n < h; n++ {
					if _, ok := e.cached(r, g, n); !ok {
						h = n
					}
				}
			}
			if h < hits {
				hits, changed = h, true
			}
		}
	}
	for g := range e.cfg.Groups {
		for i := e.hitStart(g, hits); i < hits; i++ {
			if b, _ := e.cached(r, g, i); e.pool.ref[b] == 0 {
				free++
			}
		}
	}
	return hits, free
}

// slidingHit is the longest hit of at most most blocks in sliding-window
// group g (SlidingWindowManager.find_longest_cache_hit): searching down
// from the last block for contiguous cached blocks enough to cover the
// window before the hit, else the leading run of cached blocks.
func (e *Engine) slidingHit(r *req, g, most int) int {
	need := cdiv(e.cfg.Groups[g].Window-1, e.cfg.BlockSize)
	run := 0
	for i := most - 1; i >= 0; i-- {
		if _, ok := e.cached(r, g, i); !ok {
			run = 0
			continue
		}
		if run++; run >= need {
			return i + run
		}
	}
	return run
}

// hitStart is the first block a hit of hits blocks takes in group g: a
// sliding-window group takes only the blocks its window still needs.
func (e *Engine) hitStart(g, hits int) int {
	if e.cfg.Groups[g].Kind != model.Sliding {
		return 0
	}
	return max(hits-cdiv(e.cfg.Groups[g].Window-1, e.cfg.BlockSize), 0)
}

// cached finds r's block i of group g in the cache: a shared-prefix block
// in the map, r's own in the blocks its preemption freed, if the block
// still holds the hash.
func (e *Engine) cached(r *req, g, i int) (int32, bool) {
	k := e.key(r, g, i)
	if k&sharedKey != 0 {
		return e.pool.lookup(k)
	}
	if g < len(r.freed) && i < len(r.freed[g]) {
		if b := r.freed[g][i]; b >= 0 && e.pool.key[b] == k {
			return b, true
		}
	}
	return 0, false
}

// key is the hash of r's block i of group g: the shared prefix's chain
// for blocks wholly inside it, r's own chain after, each group's its own
// (vLLM hashes a block with its group's id).
func (e *Engine) key(r *req, g, i int) uint64 {
	shared := r.PrefixID != 0 && (i+1)*e.cfg.BlockSize <= r.PrefixTokens
	k := blockKey(r.handle<<1, i)
	if shared {
		k = blockKey(r.PrefixID<<1|1, i)
	}
	if g > 0 {
		// an even salt keeps the low bit (never 0) and leaves sharedKey clear
		k ^= (uint64(g) * 0x9e3779b97f4a7c15 << 1) &^ sharedKey
	}
	if shared {
		k |= sharedKey
	}
	return k
}

// allocate gives r the slots for n more tokens and ahead lookahead
// slots (at most max-model-len in all) in every group, or returns false
// and changes nothing but the out-of-window blocks it frees
// (KVCacheManager.allocate_slots). Blocks are cached up to the request's
// own tokens, never its drafts'.
func (e *Engine) allocate(r *req, n, ahead int) bool {
	bs := e.cfg.BlockSize
	total := r.computed + n
	slots := total
	if ahead > 0 {
		slots = min(total+ahead, e.cfg.MaxModelLen)
	}
	if !e.fullOnly || slots > len(r.blocks[0])*bs {
		// Most decode steps stay inside the request's last block and skip
		// this: nothing to free out of a window, nothing to give. (Tested
		// without a division: this runs for every request of every step.)
		if !e.grow(r, slots) {
			return false
		}
	}
	if e.caching {
		// A shared prefix's blocks are hashed as they fill, since other
		// requests look them up now. The request's own blocks are hashed
		// when a preemption frees them (preempt): before that, only the
		// request holds them (their hash is found only by the request
		// itself, in the blocks a preemption freed), and a finished
		// request's hashes are forgotten. So the pool is vLLM's at every
		// point where a hash can be read, and a request that is never
		// preempted costs no hashing: a fifth of a long-prompt fleet's
		// time went to hashing blocks that were then forgotten.
		filled := min(total, r.numTokens())
		if r.PrefixID != 0 {
			for g, blocks := range r.blocks {
				for i := r.computed / bs; i < min(filled/bs, r.PrefixTokens/bs, len(blocks)); i++ {
					if blocks[i] >= 0 {
						e.pool.register(blocks[i], e.key(r, g, i))
					}
				}
			}
		}
		for (r.hashed+1)*bs <= filled {
			r.hashed++
		}
	}
	return true
}

// grow frees r's blocks that left its windows and gives it the blocks of
// total tokens in every group, or returns false and gives none.
func (e *Engine) grow(r *req, total int) bool {
	bs := e.cfg.BlockSize
	if e.fullOnly {
		// One group of full attention: nothing leaves a window.
		blocks := r.blocks[0]
		want := cdiv(total, bs)
		if want-len(blocks) > e.pool.free {
			return false
		}
		r.blocks[0] = e.pool.takeN(blocks, want-len(blocks))
		return true
	}
	need := 0
	for g, grp := range e.cfg.Groups {
		if skip := e.cfg.skippedBlocks(grp, r.computed); skip > 0 {
			blocks := r.blocks[g]
			for i := 0; i < skip && i < len(blocks); i++ {
				if blocks[i] >= 0 {
					e.pool.release(blocks[i])
					blocks[i] = -1
				}
			}
		}
		want := cdiv(total, bs)
		if grp.Kind == model.Linear {
			want = e.cfg.stateBlocks(total)
		}
		need += max(want-len(r.blocks[g]), 0)
	}
	if need > e.pool.free {
		return false
	}
	for g, grp := range e.cfg.Groups {
		want := cdiv(total, bs)
		if grp.Kind == model.Linear {
			want = e.cfg.stateBlocks(total)
		}
		blocks := r.blocks[g]
		for len(blocks) < want {
			blocks = append(blocks, e.pool.take())
		}
		r.blocks[g] = blocks
	}
	return true
}

// freeBlocks returns r's blocks to the pool, last block first, so the
// tail of a request is evicted before its prefix (vLLM frees in reverse).
// A request that is gone (finished, aborted) leaves no hash of its own
// behind: nobody can find those blocks again (see pool.forget).
func (e *Engine) freeBlocks(r *req, gone bool) {
	// A request never preempted and without a shared prefix has no block
	// with a hash (its own are hashed only by a preemption): nothing to
	// forget.
	if gone && r.preemptions == 0 && r.PrefixID == 0 {
		if e.fullOnly {
			// And it alone holds them: they go back anonymous, at once.
			e.pool.releaseOwn(r.blocks[0])
			r.blocks[0] = r.blocks[0][:0]
			return
		}
		gone = false
	}
	for g := range r.blocks {
		blocks := r.blocks[g]
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i] >= 0 {
				if gone {
					e.pool.forget(blocks[i])
				}
				e.pool.release(blocks[i])
			}
		}
		r.blocks[g] = blocks[:0]
	}
	if gone {
		e.dropFreed(r)
	}
}

// dropFreed makes anonymous the blocks an earlier preemption of r freed
// that r did not take back and that still hold r's own hashes: r is gone,
// or about to list the blocks it frees anew, so nobody finds them again.
func (e *Engine) dropFreed(r *req) {
	if !e.caching {
		return
	}
	for g, freed := range r.freed {
		for i, b := range freed {
			if b < 0 {
				continue
			}
			if k := e.pool.key[b]; e.pool.ref[b] == 0 && k&sharedKey == 0 && k == e.key(r, g, i) {
				e.pool.anonymize(b)
			}
		}
		r.freed[g] = freed[:0]
	}
}

func (e *Engine) preempt(v *req, res *StepResult) {
	if e.caching {
		e.dropFreed(v)
		// The full blocks keep their hashes in the free queue (allocate
		// left them unhashed while v held them), in every group.
		if v.freed == nil {
			v.freed = make([][]int32, len(e.cfg.Groups))
		}
		for g, blocks := range v.blocks {
			for i := range min(v.hashed, len(blocks)) {
				if blocks[i] >= 0 {
					e.pool.register(blocks[i], e.key(v, g, i))
				}
			}
			v.freed[g] = append(v.freed[g], blocks...)
		}
		v.hashed = 0
	}
	e.freeBlocks(v, false)
	v.computed = 0
	v.spec, v.verify = 0, 0
	v.epoch++
	v.preemptions++
	e.gauges.Preemptions++
	res.Preempted++
	e.waiting.pushFront(v)
	res.Events = append(res.Events, Event{Handle: v.handle, ID: v.ID, Generated: v.generated, Preempted: true})
}

// unschedule takes v out of this step's list.
func (e *Engine) unschedule(v *req) {
	i := v.schedIdx
	copy(e.sched[i:], e.sched[i+1:])
	e.sched = e.sched[:len(e.sched)-1]
	for j := i; j < len(e.sched); j++ {
		e.sched[j].schedIdx = j
	}
	v.schedIdx, v.sched, v.verify = -1, 0, 0
}

// batch sums what the step's forward pass reads and computes.
func (e *Engine) batch() Batch {
	var b Batch
	e.chunks = e.chunks[:0]
	for _, r := range e.sched {
		n := int64(r.sched)
		c := int64(r.computed)
		v := int64(r.verify)
		e.chunks = append(e.chunks, Chunk{New: n, Computed: c, Drafts: v})
		b.Requests++
		b.Tokens += n
		b.ContextTokens += c + n
		pairs := n*c + n*(n+1)/2
		b.AttentionPairs += pairs
		if n == 1+v {
			// A decode, or the verification of drafts: its few queries
			// read the cache once, as a decode does.
			b.Decodes++
			b.DecodeContext += c + n
			b.Drafts += v
		} else {
			b.PrefillPairs += pairs
		}
		if r.computed < r.PromptTokens {
			b.PrefillTokens += min(n, int64(r.PromptTokens-r.computed))
		}
	}
	b.Chunks = e.chunks
	return b
}

// finishStep applies the batch: computed tokens advance, requests that
// caught up sample a token, finished ones leave and free their blocks.
func (e *Engine) finishStep(res *StepResult) {
	done := false
	for _, r := range e.sched {
		r.computed += r.sched
		r.sched, r.schedIdx = 0, -1
		if r.computed < r.numTokens() {
			continue
		}
		if e.sample(r, res) {
			done = true
		}
	}
	e.sched = e.sched[:0]
	if done {
		e.removeFinished()
	}
}

// sample gives a request that caught up its next token (and the drafts
// the target accepted), with the events a run reads; it reports whether
// the request finished.
func (e *Engine) sample(r *req, res *StepResult) bool {
	emit := 1
	if v := r.verify; v > 0 {
		a := e.spec.accept(v)
		// The rejected drafts' KV is no longer the request's.
		r.computed -= v - a
		emit += a
		e.gauges.SpecDrafts++
		e.gauges.SpecDraftTokens += int64(v)
		e.gauges.SpecAccepted += int64(a)
		r.verify = 0
	}
	emit = min(emit, r.OutputTokens-r.generated)
	r.generated += emit
	e.gauges.GenerationTokens += int64(emit)
	res.Sampled += emit
	res.Outputs++
	if r.drafts {
		// The proposer drafts up to K tokens, no further than the
		// request's last (vLLM caps the scheduled tokens at prompt +
		// max_tokens and max-model-len).
		r.spec = max(min(e.spec.K, r.PromptTokens+r.OutputTokens-1-r.numTokens()), 0)
	}
	first := r.firstAt < 0
	if first {
		r.firstAt = e.now
		e.gauges.PromptTokens += int64(r.PromptTokens)
		res.First++
	}
	finished := r.generated >= r.OutputTokens
	if !finished && !e.cfg.TokenEvents && !(first && e.cfg.FirstEvents) {
		return false
	}
	ev := Event{Handle: r.handle, ID: r.ID, Generated: r.generated, First: first}
	if finished {
		ev.Done = true
		ev.Arrival, ev.FirstToken, ev.Finish, ev.Sent = r.Arrival, r.firstAt, e.now, r.Sent
		ev.Prompt, ev.Output, ev.Preemptions = r.PromptTokens, r.OutputTokens, r.preemptions
	}
	res.Events = append(res.Events, ev)
	return finished
}

// removeFinished takes the finished requests out of the running list and
// frees their blocks.
func (e *Engine) removeFinished() {
	kept := e.running[:0]
	for _, r := range e.running {
		if r.generated >= r.OutputTokens {
			e.freeBlocks(r, true)
			e.gauges.Finished++
			e.free = append(e.free, r)
			continue
		}
		kept = append(kept, r)
	}
	clear(e.running[len(kept):])
	e.running = kept
}

// Abort drops a request wherever it is (a client that went away, as
// vLLM aborts it): its blocks go back to the pool. It reports whether the
// request was still there. An aborted request is not counted as finished.
func (e *Engine) Abort(handle uint64) bool {
	for i, r := range e.running {
		if r.handle == handle {
			e.running = append(e.running[:i], e.running[i+1:]...)
			e.running = e.running[:len(e.running):cap(e.running)]
			e.drop(r)
			return true
		}
	}
	for _, q := range []*ring{&e.waiting, &e.pending} {
		if r := q.remove(handle); r != nil {
			e.drop(r)
			return true
		}
	}
	return false
}

func (e *Engine) drop(r *req) {
	r.epoch++
	e.freeBlocks(r, true)
	e.gauges.Aborted++
	e.free = append(e.free, r)
}

// ring is a FIFO with a cheap push at the front (preempted requests).
type ring struct {
	buf        []*req
	head, size int
}

func (q *ring) len() int      { return q.size }
func (q *ring) front() *req   { return q.buf[q.head] }
func (q *ring) at(i int) *req { return q.buf[(q.head+i)%len(q.buf)] }

func (q *ring) grow() {
	if q.size < len(q.buf) {
		return
	}
	nb := make([]*req, max(2*len(q.buf), 16))
	for i := range q.size {
		nb[i] = q.at(i)
	}
	q.buf, q.head = nb, 0
}

func (q *ring) pushBack(r *req) {
	q.grow()
	q.buf[(q.head+q.size)%len(q.buf)] = r
	q.size++
}

func (q *ring) pushFront(r *req) {
	q.grow()
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = r
	q.size++
}

// remove takes the request with the handle out of the queue, keeping the
// order of the others.
func (q *ring) remove(handle uint64) *req {
	for i := range q.size {
		r := q.at(i)
		if r.handle != handle {
			continue
		}
		for j := i; j < q.size-1; j++ {
			q.buf[(q.head+j)%len(q.buf)] = q.at(j + 1)
		}
		q.buf[(q.head+q.size-1)%len(q.buf)] = nil
		q.size--
		return r
	}
	return nil
}

func (q *ring) popFront() *req {
	r := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return r
}

// cacheable reports whether vLLM's prefix cache serves these KV-cache
// groups as the engine models it: full attention, MLA and sliding windows;
// not a linear-attention (Mamba) state, nor chunked local attention, whose
// hits follow other rules.
func cacheable(groups []Group) bool {
	for _, g := range groups {
		if g.Kind == model.Linear || (g.Kind == model.Sliding && g.Chunked) {
			return false
		}
	}
	return len(groups) > 0
}
