package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Speculation is speculative decoding as the engine runs it (vLLM's
// --speculative-config; docs/speculative.md): a request that has sampled
// a token gets up to K drafts from the proposer; its next step schedules
// them with the token after, 1 + K tokens of the step's budget, and the
// target verifies them in one forward pass. The drafts are accepted in
// order, each with probability Acceptance when the ones before it were
// (vllm.ExpectedAccepted), and the step emits the accepted ones and one
// token more; the KV of the rejected ones is given back to the request's
// slots (num_computed_tokens falls by them, scheduler.py
// update_from_output). A running request holds Lookahead more slots than
// its scheduled tokens for the drafter's KV (num_lookahead_tokens).
//
// The drafter's own work runs on the GPU after the verification (the
// proposer runs inside the same execute_model): a first pass over every
// token the step scheduled (the draft keeps its own KV of the prompt and
// the accepted tokens), then K − 1 passes of one token for each request
// that sampled, each priced by Drafter as that network's forward pass
// (draft_model: the draft model; EAGLE and MTP: their head, one layer and
// the LM head). A proposer on the host (n-gram, suffix) has no Drafter.
type Speculation struct {
	// Method is vLLM's name of the method, for reports.
	Method string
	// K is num_speculative_tokens.
	K int
	// Acceptance is the per-token acceptance α, 0 < α ≤ 1.
	Acceptance float64
	// Matching is the share of requests the proposer finds drafts for:
	// a network drafts for every request (0 reads as 1), n-gram and
	// suffix matching only where the output repeats the context. A
	// request finds drafts in every step or in none: whether an answer
	// copies from its prompt is a property of the request.
	Matching float64
	// Lookahead is the KV slots a running request holds beyond its
	// scheduled tokens (vllm.SpeculativeConfig.LookaheadTokens).
	Lookahead int
	// Drafter prices one forward pass of the drafting network on a batch;
	// nil when the proposer runs on the host. A PartsTimer's GPU part is
	// taken: the passes run back to back inside the step, whose CPU work
	// the target's timer prices once.
	Drafter StepTimer
	// Parallel proposes all K drafts in one pass of the drafter (DFlash,
	// DSpark, Medusa and MLP speculators, parallel_drafting).
	Parallel bool
	// Seed fixes the acceptance draws, so that a run is repeatable.
	Seed uint64
}

// MaxSpeculativeTokens bounds K (vLLM's bound, vllm.MaxSpeculativeTokens).
const MaxSpeculativeTokens = vllm.MaxSpeculativeTokens

func (s *Speculation) validate() error {
	switch {
	case s.K < 1 || s.K > MaxSpeculativeTokens:
		return fmt.Errorf("num_speculative_tokens %d: give 1 to %d", s.K, MaxSpeculativeTokens)
	case !(s.Acceptance > 0 && s.Acceptance <= 1):
		return errors.New("the acceptance rate must be above 0 and at most 1")
	case !(s.Matching >= 0 && s.Matching <= 1):
		return errors.New("the share of requests with drafts must be within 0 and 1")
	case s.Lookahead < 0 || s.Lookahead > s.K+1:
		return fmt.Errorf("lookahead %d: vLLM reserves 0 to k + 1 slots (k = %d)", s.Lookahead, s.K)
	}
	return nil
}

// TokensPerStep is the tokens a request with drafts emits per step on
// average, K drafts at the acceptance (vllm.ExpectedAccepted plus the
// target's own), far from its end.
func (s *Speculation) TokensPerStep() float64 {
	return 1 + vllm.ExpectedAccepted(s.Acceptance, s.K)
}

// specState is an engine's speculative decoding: the configuration, its
// draws and its counters.
type specState struct {
	Speculation
	rng rand.PCG
	// thresholds[i] is α^(i+1): a draw u below it accepts position i.
	thresholds []float64
	// match is the share of requests with drafts scaled to 2^64.
	match uint64
	all   bool
	// perPos counts the accepted drafts by position.
	perPos []int64
}

func newSpecState(s *Speculation) *specState {
	st := &specState{Speculation: *s, rng: *rand.NewPCG(s.Seed, 0x5eed5eed5eed5eed)}
	st.thresholds = make([]float64, s.K)
	p := 1.0
	for i := range st.thresholds {
		p *= s.Acceptance
		st.thresholds[i] = p
	}
	st.perPos = make([]int64, s.K)
	st.all = s.Matching == 0 || s.Matching >= 1
	st.match = uint64(s.Matching * (1 << 63) * 2)
	return st
}

// drafts reports whether the proposer finds drafts for the request of
// this handle: a hash of the handle and the seed, so that the same
// request keeps its answer across preemptions.
func (st *specState) drafts(handle uint64) bool {
	if st.all {
		return true
	}
	return splitmix(handle^st.Seed) < st.match
}

// accept draws how many of v drafts the target keeps: positions are
// accepted in order while the draw stays under α^(i+1).
func (st *specState) accept(v int) int {
	u := float64(st.rng.Uint64()>>11) * (1.0 / (1 << 53))
	a := 0
	for a < v && u < st.thresholds[a] {
		st.perPos[a]++
		a++
	}
	return a
}

// splitmix is SplitMix64's finalizer: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// draftTime prices the drafter's passes of a step whose target batch is
// b: the first over b's tokens, then K − 1 of one token for each request
// that sampled and has drafts. A step with no proposing request still
// runs the first pass when it computed tokens (the draft's KV of the
// prompt).
func (e *Engine) draftTime(b Batch) float64 {
	st := e.spec
	if st == nil || st.Drafter == nil || b.Tokens == 0 {
		return 0
	}
	first := b
	// The draft computes logits at each request's last position only.
	first.Drafts = 0
	t := passTime(st.Drafter, first)
	var proposing, context int64
	for _, r := range e.sched {
		if r.computed+r.sched >= r.numTokens() && r.drafts {
			proposing++
			context += int64(r.computed + r.sched)
		}
	}
	if proposing == 0 || st.K == 1 || st.Parallel {
		return t
	}
	for i := int64(1); i < int64(st.K); i++ {
		// Each pass reads the context so far: one token more per request.
		ctx := context + i*proposing
		t += passTime(st.Drafter, Batch{Requests: int(proposing), Tokens: proposing, ContextTokens: ctx, AttentionPairs: ctx, Decodes: int(proposing), DecodeContext: ctx})
	}
	return t
}

// passTime is one drafter pass: a PartsTimer's forward pass, else the
// timer's step.
func passTime(t StepTimer, b Batch) float64 {
	if p, ok := t.(PartsTimer); ok {
		return p.Parts(b).GPU()
	}
	return t.StepTime(b)
}

// SpecCounts are the engine's speculative-decoding counters, as vLLM's
// /metrics exports them (vllm.SpecDecodeCounts); zero without
// speculative decoding.
func (e *Engine) SpecCounts() vllm.SpecDecodeCounts {
	if e.spec == nil {
		return vllm.SpecDecodeCounts{}
	}
	g := e.gauges
	c := vllm.SpecDecodeCounts{Drafts: float64(g.SpecDrafts), DraftTokens: float64(g.SpecDraftTokens), Accepted: float64(g.SpecAccepted)}
	c.AcceptedPerPos = make([]float64, len(e.spec.perPos))
	for i, v := range e.spec.perPos {
		c.AcceptedPerPos[i] = float64(v)
	}
	return c
}

// SpecDefault is the acceptance the simulator assumes for a method when
// none is given (--acceptance-rate), with the measurement it comes from
// (testdata/speculative). Acceptance depends on the traffic as much as
// on the drafter: the rows behind each default span a wide range, and a
// simulation on a default says so (Confidence).
type SpecDefault struct {
	// Acceptance is the per-token acceptance; Matching the share of
	// requests the proposer finds drafts for (Speculation.Matching).
	Acceptance, Matching float64
	Source               string
}

// DefaultAcceptance is the assumed acceptance of method m:
//   - a draft model 0.71: Qwen2.5-0.5B drafting for Qwen2.5-7B on
//     ShareGPT reported 71.4%, 53.2% and 41.4% at k = 1, 3, 5 (rows
//     205–207), per token 0.714, 0.716 and 0.719; the methods headroom
//     knows no measurement of (Medusa, MLP speculators, DFlash, DSpark,
//     custom classes) take it too;
//   - EAGLE and EAGLE-3 heads 0.77: an EAGLE-3 head for Qwen3-8B accepted
//     2.5–3.1 tokens a step at k = 3 (row 209), per token 0.69–0.83;
//   - MTP 0.82: per token 0.82 (row 202: positions 0.848 and 0.674 at
//     k = 2), 0.81 (row 227) and 0.81–0.82 (row 228, k = 1);
//   - n-gram and suffix matching 0.57 for 30% of the requests: vLLM's
//     draft acceptance rate was 35.6% at k = 3 on ShareGPT (row 204, per
//     token 0.566) while the median TPOT did not move and throughput rose
//     18% at concurrency 1. A request with matches then emits 1 + 0.566 +
//     0.320 + 0.181 = 2.07 tokens a step, about as fast a step (no
//     drafter, four tokens to verify on a memory-bound decode), so its
//     time per token falls to 0.484; if a share q of the requests match,
//     1 / (1 − q × 0.516) = 1.18 gives q = 0.30, and with q below one
//     half the median request matches nothing, as measured.
func DefaultAcceptance(m vllm.SpecMethod) SpecDefault {
	switch m {
	case vllm.SpecEagle, vllm.SpecEagle3:
		return SpecDefault{Acceptance: 0.77, Matching: 1, Source: "an EAGLE-3 head for Qwen3-8B on an RTX 5070 Ti, vLLM 0.30.0: 2.5-3.1 tokens a step at k=3"}
	case vllm.SpecMTP:
		return SpecDefault{Acceptance: 0.82, Matching: 1, Source: "MTP on Qwen3.6-27B, a Qwen 27B and DeepSeek-R1 (vllm-project/vllm#12755): 0.81-0.82 per token"}
	case vllm.SpecNgram, vllm.SpecNgramGPU, vllm.SpecSuffix:
		return SpecDefault{Acceptance: 0.57, Matching: 0.3, Source: "n-gram matching on ShareGPT, one L4, vLLM 0.27.1 (ddiiwoong/newblog): 35.6% of drafts accepted at k=3, throughput +18%, median TPOT unchanged"}
	}
	return SpecDefault{Acceptance: 0.71, Matching: 1, Source: "Qwen2.5-0.5B drafting for Qwen2.5-7B on ShareGPT, one L4, vLLM 0.27.1 (ddiiwoong/newblog): 71.4/53.2/41.4% of drafts accepted at k=1/3/5"}
}

// DrafterRoofline prices the drafter's forward passes: draft (a draft
// model, an EAGLE head, the target's MTP layers as a model of their own)
// planned as a model on the target's GPU at tp ranks, in quantization
// ("" its checkpoint's), at the target's release and dtypes, and priced
// with the target's calibration (the same kernels on the same GPU). An
// EAGLE or MTP head that shares the target's LM head computes it in every
// pass, so the head's own copy is priced; its embedding, which a pass only
// gathers rows of, is read as weights too, an overcount of about its
// vocabulary × hidden bytes a pass.
func DrafterRoofline(target memory.Budget, draft model.Spec, tp int, quantization string, c Calibration) (*Roofline, error) {
	t := target.Settings
	// The draft's own settings: the target's release, dtypes, batch and
	// graphs, none of the target's features (LoRA, offload, pinned pool).
	set := vllm.Settings{TensorParallelSize: max(tp, 1), Version: t.Version, Install: t.Install, Env: t.Env,
		Dtype: t.Dtype, KVCacheDtype: t.KVCacheDtype, Quantization: quantization, GPUMemoryUtilization: t.GPUMemoryUtilization,
		MaxModelLen: target.MaxModelLen, MaxNumSeqs: t.MaxNumSeqs, MaxNumBatchedTokens: t.MaxNumBatchedTokens, BlockSize: t.BlockSize,
		EnforceEager: t.EnforceEager, MaxCudagraphCaptureSize: t.MaxCudagraphCaptureSize}
	if draft.MaxPositions > 0 && set.MaxModelLen > draft.MaxPositions {
		set.MaxModelLen = draft.MaxPositions
	}
	b, err := memory.Plan(memory.Input{Model: draft, Device: target.Device, Count: set.TensorParallelSize, Settings: set})
	if err != nil {
		return nil, fmt.Errorf("the drafter %s: %v", draft.ID, err)
	}
	return RooflineFor(b, c)
}

// withSpeculation is c for a run with speculative decoding: no training
// row drafts, so the figures are extrapolated, at least by the
// extrapolated band. What stands behind them is rows 203–207 (a 0.5B
// draft on one L4, TestSpeculationL4Rows): the median TPOT within 10% at
// concurrency 1, up to a quarter short at concurrency 64, and the
// acceptance of the traffic, which a default only guesses.
func withSpeculation(c Confidence, method string) Confidence {
	c.Evidence = evidenceExtrapolated
	c.Outside = append(c.Outside, fmt.Sprintf("speculative decoding (%s): no training row drafts; the drafter's passes and the acceptance are modelled, checked on one L4's 0.5B draft (TPOT within 10%% at concurrency 1, up to a quarter short at 64)", method))
	c.ThroughputPct = max(c.ThroughputPct, extrapolatedBand.Throughput)
	c.TTFTPct = max(c.TTFTPct, extrapolatedBand.TTFT)
	c.TPOTPct = max(c.TPOTPct, extrapolatedBand.TPOT)
	c.E2EPct = max(c.E2EPct, extrapolatedBand.E2E)
	return c
}

// specReport is a run's counters as vLLM reads them; nil before any
// draft was verified.
func specReport(c vllm.SpecDecodeCounts) *vllm.SpecAcceptance {
	a, ok := c.Acceptance()
	if !ok {
		return nil
	}
	return &a
}
