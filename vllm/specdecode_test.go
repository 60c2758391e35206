package vllm

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// α = 0.7 with 5 drafts: 0.7 + 0.49 + 0.343 + 0.2401 + 0.16807 =
// 1.94117 drafts accepted a step, and with the target's own token
// 2.94117 = (1 − 0.7⁶) / 0.3 tokens a step.
func TestExpectedAccepted(t *testing.T) {
	if got := ExpectedAccepted(0.7, 5); !near(got, 1.94117, 1e-9) {
		t.Errorf("ExpectedAccepted(0.7, 5) = %v, want 1.94117", got)
	}
	if got := 1 + ExpectedAccepted(0.7, 5); !near(got, (1-math.Pow(0.7, 6))/0.3, 1e-12) {
		t.Errorf("tokens a step %v, want (1 − 0.7⁶) / 0.3", got)
	}
	for _, c := range []struct {
		alpha float64
		k     int
		want  float64
	}{{1, 4, 4}, {0, 3, 0}, {0.5, 0, 0}, {0.5, 1, 0.5}} {
		if got := ExpectedAccepted(c.alpha, c.k); got != c.want {
			t.Errorf("ExpectedAccepted(%v, %d) = %v, want %v", c.alpha, c.k, got, c.want)
		}
	}
}

// One L4, vLLM 0.27.1, Qwen2.5-0.5B drafting for Qwen2.5-7B on ShareGPT
// at concurrency 1 (rows 205–207 of the features data): vLLM's draft
// acceptance rate was 71.4% at k = 1, 53.2% at k = 3, 41.4% at k = 5. One
// per-token α = 0.714 gives 0.714, (0.714 + 0.509796 + 0.363994) / 3 =
// 0.52926 and (0.714 + 0.509796 + 0.363994 + 0.259892 + 0.185563) / 5 =
// 0.40665: within 0.01 of each, which is what reading
// acceptance per token rests on.
func TestDraftAcceptanceRateFallsWithK(t *testing.T) {
	for _, c := range []struct {
		k              int
		measured, want float64
	}{{1, 0.714, 0.714}, {3, 0.532, 0.52926}, {5, 0.414, 0.40665}} {
		got := DraftAcceptanceRate(0.714, c.k)
		if !near(got, c.want, 5e-5) || !near(got, c.measured, 0.01) {
			t.Errorf("k=%d: rate %.5f, want %.5f (measured %.3f)", c.k, got, c.want, c.measured)
		}
	}
}

func TestTokenAcceptanceInverts(t *testing.T) {
	for _, k := range []int{1, 2, 5, 24} {
		for _, alpha := range []float64{0.05, 0.36, 0.714, 0.95, 1} {
			got, ok := TokenAcceptance(ExpectedAccepted(alpha, k), k)
			if !ok || !near(got, alpha, 1e-9) {
				t.Errorf("k=%d α=%v: got %v, %v", k, alpha, got, ok)
			}
		}
	}
	for _, c := range []struct {
		accepted float64
		k        int
	}{{-0.1, 3}, {3.5, 3}, {1, 0}, {math.NaN(), 2}} {
		if _, ok := TokenAcceptance(c.accepted, c.k); ok {
			t.Errorf("TokenAcceptance(%v, %d) accepted", c.accepted, c.k)
		}
	}
}

// 100 drafts of k = 3 with positions accepted 70, 49 and 34 times: 153
// accepted of 300 drafted (51%), 2.53 tokens a step; position 0 was tried
// 100 times, position 1 after the 70 that kept position 0, position 2
// after the 49: α = 153 / (100 + 70 + 49) = 0.69863.
func TestAcceptanceFromCounters(t *testing.T) {
	c := SpecDecodeCounts{Drafts: 100, DraftTokens: 300, Accepted: 153, AcceptedPerPos: []float64{70, 49, 34}}
	a, ok := c.Acceptance()
	if !ok {
		t.Fatal("no acceptance")
	}
	if !near(a.DraftAcceptanceRate, 0.51, 1e-12) || !near(a.MeanAcceptanceLength, 2.53, 1e-12) || a.ProposedPerDraft != 3 {
		t.Errorf("rate %v, length %v, proposed %v", a.DraftAcceptanceRate, a.MeanAcceptanceLength, a.ProposedPerDraft)
	}
	if !near(a.TokenAcceptance, 0.6986, 1e-12) { // 153 / 219 = 0.698630
		t.Errorf("α %v, want 153/219", a.TokenAcceptance)
	}
	if len(a.PerPosition) != 3 || a.PerPosition[0] != 0.7 || a.PerPosition[2] != 0.34 {
		t.Errorf("per position %v", a.PerPosition)
	}
	// Without the positions α solves α + α² + α³ = 1.53: at 0.699 the sum
	// is 0.699 + 0.488601 + 0.341532 = 1.529133, at 0.7 it is 1.533, so
	// the root is 0.699 + 0.001 × 0.867 / 3.867 = 0.69922.
	c.AcceptedPerPos = nil
	a, _ = c.Acceptance()
	if got := ExpectedAccepted(a.TokenAcceptance, 3); !near(got, 1.53, 5e-4) || a.TokenAcceptance != 0.6992 {
		t.Errorf("α without positions %v (accepts %v a draft)", a.TokenAcceptance, got)
	}
	if _, ok := (SpecDecodeCounts{}).Acceptance(); ok {
		t.Error("acceptance of no drafts")
	}
	if _, ok := (SpecDecodeCounts{Drafts: math.Inf(1), DraftTokens: 1}).Acceptance(); ok {
		t.Error("acceptance of infinite counts")
	}
}

func TestSpecCountsSince(t *testing.T) {
	then := SpecDecodeCounts{Drafts: 10, DraftTokens: 30, Accepted: 12, AcceptedPerPos: []float64{6, 4, 2}}
	now := SpecDecodeCounts{Drafts: 15, DraftTokens: 45, Accepted: 20, AcceptedPerPos: []float64{9, 7, 4}}
	d := now.Since(then)
	if d.Drafts != 5 || d.DraftTokens != 15 || d.Accepted != 8 || d.AcceptedPerPos[1] != 3 {
		t.Errorf("since: %+v", d)
	}
	if sum := d.Add(then); sum.Drafts != 15 || sum.Accepted != 20 || len(sum.AcceptedPerPos) != 3 || sum.AcceptedPerPos[2] != 4 {
		t.Errorf("add: %+v", sum)
	}
	// A server that started anew counts from zero.
	if d := (SpecDecodeCounts{Drafts: 2, DraftTokens: 6, Accepted: 1}).Since(then); d.Drafts != 2 || d.Accepted != 1 {
		t.Errorf("after a restart: %+v", d)
	}
}
