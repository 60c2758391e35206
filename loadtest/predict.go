package loadtest

import (
	"sort"

	"headroom.dev/headroom/sim"
)

// Simulated is `headroom simulate`'s prediction for the traffic a run
// sent, to read beside the measurement.
type Simulated struct {
	Model    string `json:"model"`
	GPU      string `json:"gpu"`
	StepTime string `json:"step_time"`
	// Requests finished in the simulation; Rejected were refused (too long
	// for max-model-len or the KV pool).
	Requests int64   `json:"requests"`
	Rejected int64   `json:"rejected"`
	TTFT     Latency `json:"ttft_ms"`
	TPOT     Latency `json:"tpot_ms"`
	// ITL is the gaps between a request's tokens: its max is the longest
	// step a request waited out.
	ITL          Latency `json:"itl_ms"`
	E2E          Latency `json:"e2e_ms"`
	MaxKVUsage   float64 `json:"max_kv_usage"`
	Preemptions  int64   `json:"preemptions"`
	RequestsPerS float64 `json:"requests_per_s"`
}

// NewSimulated converts a simulation report.
func NewSimulated(rep *sim.Report) Simulated {
	lat := func(l sim.Latency) Latency {
		return Latency{Count: rep.Requests, Mean: l.Mean, P50: l.P50, P90: l.P90, P95: l.P95, P99: l.P99, Max: l.Max}
	}
	return Simulated{Requests: rep.Requests, Rejected: rep.Rejected, TTFT: lat(rep.TTFT), TPOT: lat(rep.TPOT),
		ITL: lat(rep.ITL), E2E: lat(rep.E2E), MaxKVUsage: rep.MaxKVUsage, Preemptions: rep.Preemptions, RequestsPerS: rep.RequestsPerS}
}

// StepSamples turns a run into a measured decode step for sim.Fit: the
// median gap between content chunks (ITL p50) is one decode step of the
// server, since each streamed chunk is one step's token and the steps that
// also prefill new prompts are longer and the minority; its batch is the
// server's median running count (over the readings with any: the median
// step is a step of the usual batch, not of the ramps at the start and
// the end), each request attending over the mean prompt the server counted
// plus half the mean output (a request is on average half-way through it).
// One sample of one size. None without ITL or a running count.
func StepSamples(r *Result) []sim.Sample {
	var running []float64
	for _, p := range r.Series {
		if p.Running != nil && *p.Running >= 1 {
			running = append(running, *p.Running)
		}
	}
	if len(running) == 0 || r.ITL.Count == 0 {
		return nil
	}
	sort.Float64s(running)
	n := len(running)
	med := running[n/2]
	if n%2 == 0 {
		med = (running[n/2-1] + running[n/2]) / 2
	}
	reqs := int(med + 0.5)
	ctxTokens := int64(float64(reqs) * (r.PromptTokens.Served.Mean + r.OutputTokens.Mean/2))
	return []sim.Sample{{
		Batch:   sim.Batch{Requests: reqs, Tokens: int64(reqs), ContextTokens: ctxTokens, AttentionPairs: ctxTokens, Decodes: reqs, DecodeContext: ctxTokens},
		Seconds: r.ITL.P50 / 1000,
	}}
}
