package report

import (
	"math"

	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// BenchResult is a run as vllm bench serve's "Serving Benchmark Result"
// reports it (vllm/benchmarks/serve.py): a simulated run and a measured
// one fill the same fields, so one printer shows both and they read side
// by side, line by line.
type BenchResult struct {
	Completed, Failed int64
	// MaxConcurrency is --max-concurrency (0: none).
	MaxConcurrency int
	DurationS      float64
	// InputTokens and OutputTokens are the successful requests' prompt
	// tokens asked for and tokens generated.
	InputTokens, OutputTokens                       int64
	RequestsPerS, OutputTokensPerS, TotalTokensPerS float64
	// GoodputPerS is set with --goodput.
	GoodputPerS *float64
	// Latencies in milliseconds, by bench's metric names.
	TTFT, TPOT, ITL, E2EL sim.Latency
	// Output says which latencies and percentiles print.
	Output workload.BenchOutput
}

// Latency is the metric's latency (ttft, tpot, itl or e2el).
func (b BenchResult) Latency(metric string) sim.Latency {
	switch metric {
	case "ttft":
		return b.TTFT
	case "tpot":
		return b.TPOT
	case "itl":
		return b.ITL
	}
	return b.E2EL
}

// PercentileOf is the p-th percentile (0–100) of l: one the run was asked
// for, else one of the fixed set (p50, p90, p95, p99, max); NaN when
// neither has it.
func PercentileOf(l sim.Latency, p float64) float64 {
	for _, v := range l.Percentiles {
		if v.P == p {
			return v.Value
		}
	}
	switch p {
	case 50:
		return l.P50
	case 90:
		return l.P90
	case 95:
		return l.P95
	case 99:
		return l.P99
	case 100:
		return l.Max
	}
	return math.NaN()
}

// BenchOfSim is a simulated run in bench's terms. A request the engine
// rejected is a failed one, as vLLM answers it with an error.
func BenchOfSim(r *SimReport, spec workload.Spec, out workload.BenchOutput) BenchResult {
	return BenchResult{Completed: r.Requests, Failed: r.Rejected, MaxConcurrency: spec.Concurrency, DurationS: r.DurationS,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, RequestsPerS: r.RequestsPerS, OutputTokensPerS: r.OutputTokensPerS,
		TotalTokensPerS: r.TotalTokensPerS, GoodputPerS: r.GoodputPerS, TTFT: r.TTFT, TPOT: r.TPOT, ITL: r.ITL, E2EL: r.E2E, Output: out}
}

// BenchOfLoadtest is a measured run in bench's terms.
func BenchOfLoadtest(r *loadtest.Result, spec workload.Spec, out workload.BenchOutput) BenchResult {
	b := BenchResult{Completed: r.Completed, Failed: r.Failed, MaxConcurrency: spec.Concurrency, DurationS: r.DurationS,
		InputTokens: r.TotalPromptTokens, OutputTokens: r.TotalOutputTokens, RequestsPerS: r.Throughput.RequestsPerS,
		OutputTokensPerS: r.Throughput.OutputTokensPerS, TotalTokensPerS: r.Throughput.TotalTokensPerS,
		TTFT: latencyOf(r.TTFT), TPOT: latencyOf(r.TPOT), ITL: latencyOf(r.ITL), E2EL: latencyOf(r.E2E), Output: out}
	if len(r.Goodput) > 0 {
		g := r.Throughput.GoodputPerS
		b.GoodputPerS = &g
	}
	return b
}

func latencyOf(l loadtest.Latency) sim.Latency {
	return sim.Latency{Mean: l.Mean, P50: l.P50, P90: l.P90, P95: l.P95, P99: l.P99, Max: l.Max, Percentiles: l.Percentiles}
}
