package sim

import (
	"time"

	"headroom.dev/headroom/slo"
)

// SLOResult is one --slo bound judged on a run.
type SLOResult struct {
	Name    string  `json:"name"`
	LimitMS float64 `json:"limit_ms,omitempty"`
	ValueMS float64 `json:"value_ms,omitempty"`
	// LimitRate and Rate are an error_rate bound and the share rejected.
	LimitRate float64 `json:"limit_rate,omitempty"`
	Rate      float64 `json:"rate,omitempty"`
	Met       bool    `json:"met"`
}

// CheckSLO judges a run. Latency bounds count every request the engine
// rejected as a miss (vLLM answered it with an error); error_rate is the
// share rejected. simulate, --compare and capacity judge by it, so a rate
// capacity calls met is one simulate calls met.
func CheckSLO(bounds []slo.Bound, r *Report) []SLOResult {
	out := make([]SLOResult, 0, len(bounds))
	for _, b := range bounds {
		if b.Metric == "error_rate" {
			rate := 0.0
			if n := r.Requests + r.Rejected; n > 0 {
				rate = float64(r.Rejected) / float64(n)
			}
			out = append(out, SLOResult{Name: b.Name(), LimitRate: b.Rate, Rate: rate, Met: rate <= b.Rate})
			continue
		}
		limit := float64(b.Limit) / float64(time.Millisecond)
		v := statOf(b, r)
		out = append(out, SLOResult{Name: b.Name(), LimitMS: limit, ValueMS: v, Met: v <= limit && r.Rejected == 0})
	}
	return out
}

func statOf(b slo.Bound, r *Report) float64 {
	var l Latency
	switch b.Metric {
	case "ttft":
		l = r.TTFT
	case "tpot":
		l = r.TPOT
	case "itl":
		l = r.ITL
	case "e2e":
		l = r.E2E
	}
	return b.Pick(l.Mean, l.P50, l.P90, l.P95, l.P99, l.Max)
}

// SLOMet is whether every result is met; nil without a bound.
func SLOMet(results []SLOResult) *bool {
	if len(results) == 0 {
		return nil
	}
	ok := true
	for _, s := range results {
		ok = ok && s.Met
	}
	return &ok
}
