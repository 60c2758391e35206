package vllm

import (
	"math"
)

// This file is what vLLM's speculative-decoding counters mean, and the
// one model of acceptance headroom reads them with and simulates by
// (docs/speculative.md).
//
// A step of a request with drafts verifies its k proposed tokens and the
// position after them in one forward pass and emits accepted + 1 tokens:
// the target keeps drafts in order up to the first it rejects, then adds
// its own token (vllm/v1/spec_decode/metrics.py @ 016a8587,
// SpecDecodingStats.observe_draft: num_drafts += 1, num_draft_tokens +=
// k, num_accepted_tokens += accepted, and positions 0 … accepted−1 each
// add one to num_accepted_tokens_per_pos).
//
// headroom reads acceptance as a per-token probability α: a draft is
// accepted with probability α when the drafts before it were. Position i
// (from 0) is then accepted in a share α^(i+1) of the drafts, the decay
// vLLM's per-position counters show, and what vLLM reports as the draft
// acceptance rate, accepted ÷ draft tokens, is (α + α² + … + α^k) ÷ k: it
// falls as k grows while α stays. The measurement behind this: one L4,
// vLLM 0.27.1, Qwen2.5-0.5B-Instruct drafting for Qwen2.5-7B-Instruct on
// ShareGPT reported 71.4% at k = 1, 53.2% at k = 3 and 41.4% at k = 5
// (sim/testdata/speculative/README.md, rows 205–207); α = 0.714 gives
// 71.4%, 52.9% and 40.7%.

// ExpectedAccepted is the mean of drafts accepted per step at per-token
// acceptance alpha with k drafts: α + α² + … + α^k. Tokens per step are
// one more.
func ExpectedAccepted(alpha float64, k int) float64 {
	if k < 1 || !(alpha > 0) {
		return 0
	}
	if alpha >= 1 {
		return float64(k)
	}
	return alpha * (1 - math.Pow(alpha, float64(k))) / (1 - alpha)
}

// DraftAcceptanceRate is what vLLM reports as the draft acceptance rate,
// accepted ÷ draft tokens, at per-token acceptance alpha with k drafts.
func DraftAcceptanceRate(alpha float64, k int) float64 {
	if k < 1 {
		return 0
	}
	return ExpectedAccepted(alpha, k) / float64(k)
}

// TokenAcceptance is the per-token acceptance α at which k drafts have
// accepted drafts accepted on average (ExpectedAccepted inverted); ok is
// false when k < 1 or accepted is not within [0, k].
func TokenAcceptance(accepted float64, k int) (alpha float64, ok bool) {
	if k < 1 || !(accepted >= 0 && accepted <= float64(k)) {
		return 0, false
	}
	lo, hi := 0.0, 1.0
	// ExpectedAccepted rises with α; 60 halvings leave under 1e-15.
	for range 60 {
		mid := (lo + hi) / 2
		if ExpectedAccepted(mid, k) < accepted {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, true
}

// SpecDecodeCounts are vLLM's speculative-decoding counters
// (vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens
// and _num_accepted_tokens_per_pos, summed over engines), or their
// increase over a window (Since).
type SpecDecodeCounts struct {
	// Drafts counts the steps a request verified drafts in; DraftTokens
	// the drafts proposed, Accepted those the target kept.
	Drafts      float64 `json:"drafts"`
	DraftTokens float64 `json:"draft_tokens"`
	Accepted    float64 `json:"accepted_tokens"`
	// AcceptedPerPos are the drafts accepted at each position, from 0;
	// nil when the server does not export them.
	AcceptedPerPos []float64 `json:"accepted_tokens_per_pos,omitempty"`
}

// Since is the counters' increase from earlier (a reading taken before):
// what a window of traffic did. A counter that fell (the server started
// anew) counts from zero.
func (c SpecDecodeCounts) Since(earlier SpecDecodeCounts) SpecDecodeCounts {
	d := func(now, then float64) float64 {
		if now < then {
			return now
		}
		return now - then
	}
	out := SpecDecodeCounts{Drafts: d(c.Drafts, earlier.Drafts), DraftTokens: d(c.DraftTokens, earlier.DraftTokens), Accepted: d(c.Accepted, earlier.Accepted)}
	if c.AcceptedPerPos != nil {
		out.AcceptedPerPos = make([]float64, len(c.AcceptedPerPos))
		for i, v := range c.AcceptedPerPos {
			then := 0.0
			if i < len(earlier.AcceptedPerPos) {
				then = earlier.AcceptedPerPos[i]
			}
			out.AcceptedPerPos[i] = d(v, then)
		}
	}
	return out
}

// Add is the counts of c and d together (two windows, two servers).
func (c SpecDecodeCounts) Add(d SpecDecodeCounts) SpecDecodeCounts {
	out := SpecDecodeCounts{Drafts: c.Drafts + d.Drafts, DraftTokens: c.DraftTokens + d.DraftTokens, Accepted: c.Accepted + d.Accepted}
	if c.AcceptedPerPos != nil || d.AcceptedPerPos != nil {
		out.AcceptedPerPos = make([]float64, max(len(c.AcceptedPerPos), len(d.AcceptedPerPos)))
		for i := range out.AcceptedPerPos {
			if i < len(c.AcceptedPerPos) {
				out.AcceptedPerPos[i] += c.AcceptedPerPos[i]
			}
			if i < len(d.AcceptedPerPos) {
				out.AcceptedPerPos[i] += d.AcceptedPerPos[i]
			}
		}
	}
	return out
}

// SpecAcceptance is what a server's counters say of its drafts, in the
// terms vLLM logs them and in headroom's per-token acceptance.
type SpecAcceptance struct {
	// Drafts, DraftTokens and AcceptedTokens are the counts it stands on.
	Drafts         float64 `json:"drafts"`
	DraftTokens    float64 `json:"draft_tokens"`
	AcceptedTokens float64 `json:"accepted_tokens"`
	// DraftAcceptanceRate is accepted ÷ draft tokens (vLLM's "Avg Draft
	// acceptance rate"); MeanAcceptanceLength 1 + accepted ÷ drafts, the
	// tokens a step of a request with drafts emits (vLLM's "Mean
	// acceptance length").
	DraftAcceptanceRate  float64 `json:"draft_acceptance_rate"`
	MeanAcceptanceLength float64 `json:"mean_acceptance_length"`
	// ProposedPerDraft is draft tokens ÷ drafts: k, or less where a
	// proposer (n-gram) found fewer tokens to propose.
	ProposedPerDraft float64 `json:"proposed_per_draft"`
	// PerPosition is each position's share of drafts accepted (vLLM's
	// "Per-position acceptance rate").
	PerPosition []float64 `json:"per_position,omitempty"`
	// TokenAcceptance is the per-token acceptance α these counts imply:
	// what `headroom simulate --acceptance-rate` takes.
	TokenAcceptance float64 `json:"token_acceptance"`
}

// Acceptance reads the counters, its shares and lengths rounded to four
// decimals as a report shows them; ok is false before any draft was
// verified.
//
// α comes from the per-position counters where the server exports them:
// position i was tried in every draft whose positions before it were all
// accepted (drafts at position 0, the accepted at i−1 after), so α is the
// accepted over the tries, Σ per_pos ÷ (drafts + Σ per_pos[0 … k−2]),
// the maximum-likelihood estimate. Without them it is TokenAcceptance of
// accepted ÷ drafts at k = draft tokens ÷ drafts, rounded. Both take a
// draft's length to be k; an n-gram proposer's shorter drafts make α read
// low.
func (c SpecDecodeCounts) Acceptance() (SpecAcceptance, bool) {
	if !(c.Drafts > 0) || !(c.DraftTokens > 0) || math.IsInf(c.Drafts+c.DraftTokens+c.Accepted, 0) {
		return SpecAcceptance{}, false
	}
	a := SpecAcceptance{Drafts: c.Drafts, DraftTokens: c.DraftTokens, AcceptedTokens: c.Accepted,
		DraftAcceptanceRate:  c.Accepted / c.DraftTokens,
		MeanAcceptanceLength: 1 + c.Accepted/c.Drafts,
		ProposedPerDraft:     c.DraftTokens / c.Drafts}
	k := len(c.AcceptedPerPos)
	if k > 0 {
		a.PerPosition = make([]float64, k)
		accepted, tries := 0.0, c.Drafts
		for i, v := range c.AcceptedPerPos {
			a.PerPosition[i] = round4(v / c.Drafts)
			accepted += v
			if i < k-1 {
				tries += v
			}
		}
		if tries > 0 {
			a.TokenAcceptance = min(accepted/tries, 1)
		}
	} else if alpha, ok := TokenAcceptance(min(c.Accepted/c.Drafts, math.Max(math.Round(a.ProposedPerDraft), 1)), max(int(math.Round(a.ProposedPerDraft)), 1)); ok {
		a.TokenAcceptance = alpha
	}
	a.DraftAcceptanceRate, a.MeanAcceptanceLength = round4(a.DraftAcceptanceRate), round4(a.MeanAcceptanceLength)
	a.ProposedPerDraft, a.TokenAcceptance = round4(a.ProposedPerDraft), round4(a.TokenAcceptance)
	return a, true
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
