package loadtest

import "headroom.dev/headroom/slo"

// meets reports whether one successful request meets the per-request
// bounds of slos, for goodput: its TTFT, TPOT and E2E within every bound
// on them (vllm bench serve's --goodput takes the same three). ITL and
// error-rate bounds are about the run, not one request.
func meets(slos []slo.Bound, o *Outcome) bool {
	for _, s := range slos {
		switch s.Metric {
		case "ttft":
			if o.TTFT > s.Limit {
				return false
			}
		case "e2e":
			if o.E2E > s.Limit {
				return false
			}
		case "tpot":
			if t, ok := o.TPOT(); ok && t > s.Limit {
				return false
			}
		}
	}
	return true
}
