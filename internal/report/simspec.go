package report

import (
	"errors"
	"fmt"
	"math"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/vllm"
)

// SpecSim is how a simulation ran speculative decoding: `speculative` in
// simulate -o json.
type SpecSim struct {
	// Method is vLLM's name; NumSpeculativeTokens k as planned.
	Method               string `json:"method"`
	NumSpeculativeTokens int    `json:"num_speculative_tokens"`
	// TokenAcceptance is the per-token acceptance simulated, and
	// AcceptanceSource where it comes from: --acceptance-rate, a
	// loadtest's measurement, or the method's default and its rows.
	TokenAcceptance  float64 `json:"token_acceptance"`
	AcceptanceSource string  `json:"acceptance_source"`
	// RequestsWithDrafts is the share of requests the proposer finds
	// drafts for (n-gram and suffix matching: those whose output repeats
	// the context; 1 for a drafting network).
	RequestsWithDrafts float64 `json:"requests_with_drafts"`
	// TokensPerStep is what a request with drafts emits per step on
	// average far from its end: 1 + α + … + α^k.
	TokensPerStep float64 `json:"tokens_per_step"`
	// Drafter is the network whose passes were priced ("" when the
	// proposer runs on the host, or none could be priced: see the notes).
	Drafter string `json:"drafter,omitempty"`
}

// ErrAcceptanceRate is an --acceptance-rate out of range.
var ErrAcceptanceRate = errors.New("--acceptance-rate must be above 0 and at most 1: the share of drafts the target accepts, each given that the ones before it were (what loadtest reports as token_acceptance)")

// speculate gives the engine its plan's speculative decoding
// (speculation) at the acceptance it was given.
func (e *Engine) speculate(b memory.Budget) error {
	sp, info, notes, err := speculation(b, e.Timer, e.Calibration, e.acceptance, e.acceptanceSource)
	e.Config.Speculation, e.Spec, e.specNotes = sp, info, notes
	return err
}

// speculation is plan b's speculative decoding as the simulator runs it
// (nil without --speculative-config): k as planned, the lookahead vLLM
// reserves, the acceptance given (acceptance > 0, from source) or the
// method's default, and the drafter priced as its own network when the
// step time is the roofline (timer, with calibration cal). A method
// headroom cannot price or draw from (a custom class,
// extract_hidden_states) is simulated without speculation, and a note
// says so. The notes say what was simulated.
func speculation(b memory.Budget, timer sim.StepTimer, cal sim.Calibration, acceptance float64, source string) (*sim.Speculation, *SpecSim, []string, error) {
	c := b.Settings.Speculative
	if c == nil {
		return nil, nil, nil, nil
	}
	if acceptance != 0 && !(acceptance > 0 && acceptance <= 1) {
		return nil, nil, nil, ErrAcceptanceRate
	}
	switch c.Method {
	case vllm.SpecCustomClass, vllm.SpecExtractHidden:
		return nil, nil, []string{fmt.Sprintf("speculative decoding (%s) is not simulated: headroom cannot tell what it proposes; the figures are the target's alone", c.Method)}, nil
	}
	k := b.SpeculativeTokens()
	if k < 1 {
		return nil, nil, nil, nil
	}
	var notes []string
	d := sim.DefaultAcceptance(c.Method)
	sp := &sim.Speculation{Method: string(c.Method), K: k, Acceptance: d.Acceptance, Matching: d.Matching,
		Lookahead: c.LookaheadTokens(k), Seed: 1,
		Parallel: c.ParallelDrafting || c.Method == vllm.SpecDFlash || c.Method == vllm.SpecDSpark || c.Method == vllm.SpecMedusa || c.Method == vllm.SpecMLPSpeculator}
	info := &SpecSim{Method: string(c.Method), NumSpeculativeTokens: k, AcceptanceSource: "default for " + string(c.Method) + ": " + d.Source, RequestsWithDrafts: d.Matching}
	if acceptance > 0 {
		sp.Acceptance, info.AcceptanceSource = acceptance, source
	}
	info.TokenAcceptance = sp.Acceptance
	info.TokensPerStep = math.Round(sp.TokensPerStep()*1000) / 1000
	roof, _ := timer.(*sim.Roofline)
	if roof == nil && c.ProposesOnGPU() {
		notes = append(notes, "the drafter's passes are not priced: a fixed step time prices the target's steps alone")
	}
	if roof != nil && c.ProposesOnGPU() {
		if draft, tp, ok := b.DrafterNetwork(); ok {
			q := c.Quantization
			if q == "" && c.Model == "" {
				// MTP from the target's checkpoint inherits its
				// quantization (vllm/config/speculative.py).
				q = b.Settings.Quantization
			}
			m, err := sim.DrafterRoofline(b, draft, tp, q, cal)
			if err != nil {
				return nil, nil, nil, err
			}
			sp.Drafter = m
			info.Drafter = draft.ID
			if c.Model == "" {
				info.Drafter = fmt.Sprintf("%s's %d MTP layer(s)", b.Model.ID, draft.Layers)
			}
		} else {
			notes = append(notes, fmt.Sprintf("the drafter's passes are not priced: its checkpoint %q was not read (offline, or not in the catalog)", c.Model))
		}
	}
	what := fmt.Sprintf("%.2f tokens a step for a request with drafts", info.TokensPerStep)
	if sp.Matching > 0 && sp.Matching < 1 {
		what += fmt.Sprintf(", for the %.0f%% of requests whose output repeats their context", 100*sp.Matching)
	}
	notes = append(notes, fmt.Sprintf("speculative decoding: %s, k = %d, per-token acceptance %.2f (%s): %s", c.Method, k, sp.Acceptance, info.AcceptanceSource, what))
	return sp, info, notes, nil
}
