package loadtest

import (
	"context"
	"fmt"
	"io"
	"time"

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
	Requests     int64   `json:"requests"`
	Rejected     int64   `json:"rejected"`
	TTFT         Latency `json:"ttft_ms"`
	TPOT         Latency `json:"tpot_ms"`
	E2E          Latency `json:"e2e_ms"`
	MaxKVUsage   float64 `json:"max_kv_usage"`
	Preemptions  int64   `json:"preemptions"`
	RequestsPerS float64 `json:"requests_per_s"`
}

// source feeds a schedule's items to the simulation, bounded as the run
// was: Count items, none due after Duration.
type source struct {
	sched    Schedule
	count    int
	duration time.Duration
	n        int
}

func (s *source) Next() (sim.Request, error) {
	if s.count > 0 && s.n >= s.count {
		return sim.Request{}, io.EOF
	}
	it, ok, err := s.sched.Next()
	if err != nil {
		return sim.Request{}, err
	}
	if !ok || (s.duration > 0 && it.Due > s.duration) {
		return sim.Request{}, io.EOF
	}
	s.n++
	return sim.Request{ID: fmt.Sprint(s.n), Arrival: it.Due.Seconds(), PromptTokens: int(it.Prompt), OutputTokens: int(it.Output)}, nil
}

// Predict runs the engine over sched's items as an open loop sent them
// (at their due times, bounded by count and duration like the run). The
// prompts are the token counts asked for: the calibrated prompts are
// served at those counts (Result.PromptTokens shows how close).
func Predict(ctx context.Context, e *sim.Engine, sched Schedule, count int, duration time.Duration) (*sim.Report, error) {
	return sim.Run(ctx, e, &source{sched: sched, count: count, duration: duration}, sim.RunOptions{})
}

// NewSimulated converts a simulation report.
func NewSimulated(rep *sim.Report) Simulated {
	lat := func(l sim.Latency) Latency {
		return Latency{Count: rep.Requests, Mean: l.Mean, P50: l.P50, P90: l.P90, P99: l.P99, Max: l.Max}
	}
	return Simulated{Requests: rep.Requests, Rejected: rep.Rejected, TTFT: lat(rep.TTFT), TPOT: lat(rep.TPOT),
		E2E: lat(rep.E2E), MaxKVUsage: rep.MaxKVUsage, Preemptions: rep.Preemptions, RequestsPerS: rep.RequestsPerS}
}

// StepSamples turns a run into a measured decode step for sim.Fit: the
// median gap between content chunks (ITL p50) is one decode step of the
// server, since each streamed chunk is one step's token and the steps that
// also prefill new prompts are longer and the minority; its batch is the
// server's mean running count (over the readings with any), each request
// attending over the mean prompt the server counted plus half the mean
// output (a request is on average half-way through it). One sample of one
// size: Fit corrects the bandwidth efficiency and keeps the overhead. None
// without ITL or a running count.
func StepSamples(r *Result) []sim.Sample {
	var sum float64
	n := 0
	for _, p := range r.Series {
		if p.Running != nil && *p.Running >= 1 {
			sum += *p.Running
			n++
		}
	}
	if n == 0 || r.ITL.Count == 0 {
		return nil
	}
	running := sum / float64(n)
	ctxTokens := int64(running * (r.PromptTokens.Served.Mean + r.OutputTokens.Mean/2))
	reqs := int(running + 0.5)
	return []sim.Sample{{
		Batch:   sim.Batch{Requests: reqs, Tokens: int64(reqs), ContextTokens: ctxTokens, AttentionPairs: ctxTokens},
		Seconds: r.ITL.P50 / 1000,
	}}
}
