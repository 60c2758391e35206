package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/vllm"
)

// addAcceptanceFlag registers --acceptance-rate, one spelling for every
// command that simulates speculative decoding (simulate, capacity,
// loadtest's prediction): the per-token acceptance, what loadtest and
// watch report as token acceptance from vLLM's counters.
func addAcceptanceFlag(fl *pflag.FlagSet, p *float64) {
	fl.Float64Var(p, "acceptance-rate", 0, "speculative decoding: the share of drafts the target accepts, each given the ones before it were (0-1; loadtest and watch measure it as token acceptance); default: the method's, from published runs")
}

// specLine is speculative decoding as simulated, in one line: what was
// assumed and what vLLM's counters would read after the run.
func specLine(s *report.SpecSim, got *vllm.SpecAcceptance) string {
	if s == nil {
		return ""
	}
	line := "speculative decoding: " + s.Method
	if s.Drafter != "" {
		line += " (" + s.Drafter + ")"
	}
	line += fmt.Sprintf(", k = %d", s.NumSpeculativeTokens)
	src := "--acceptance-rate"
	if !strings.HasPrefix(s.AcceptanceSource, src) {
		src = "the method's default; give --acceptance-rate"
	}
	line += fmt.Sprintf(", per-token acceptance %.2f (%s): %.2f tokens a step", s.TokenAcceptance, src, s.TokensPerStep)
	if s.RequestsWithDrafts > 0 && s.RequestsWithDrafts < 1 {
		line += fmt.Sprintf(" for the %.0f%% of requests with drafts", 100*s.RequestsWithDrafts)
	}
	if got != nil {
		line += fmt.Sprintf("; vLLM would log %.1f%% of drafts accepted, a mean acceptance length of %.2f", 100*got.DraftAcceptanceRate, got.MeanAcceptanceLength)
	}
	return line
}

// acceptanceLine is what a server's spec_decode counters measured, in one
// line: vLLM's own figures, then the per-token acceptance to simulate
// with.
func acceptanceLine(a vllm.SpecAcceptance) string {
	line := fmt.Sprintf("%s verified, %.1f%% of their %s tokens accepted, mean acceptance length %.2f",
		humanFloat(a.Drafts), 100*a.DraftAcceptanceRate, humanFloat(a.DraftTokens), a.MeanAcceptanceLength)
	if len(a.PerPosition) > 0 {
		pos := make([]string, len(a.PerPosition))
		for i, v := range a.PerPosition {
			pos[i] = fmt.Sprintf("%.2f", v)
		}
		line += " (by position " + strings.Join(pos, " ") + ")"
	}
	return line + fmt.Sprintf("; per token %.2f: simulate with --acceptance-rate %.2f", a.TokenAcceptance, a.TokenAcceptance)
}
