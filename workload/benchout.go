package workload

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// BenchOutput is what a result in vllm bench serve's layout prints beside
// the traffic: --goodput, --percentile-metrics and --metric-percentiles.
// They change no request; they are read with the traffic so that a pasted
// bench command prints what bench would.
type BenchOutput struct {
	// Goodput is --goodput's targets; none when empty.
	Goodput Goodput
	// Metrics are the latencies printed, of ttft, tpot, itl and e2el, in
	// bench's order; Percentiles the percentiles printed of each (after
	// the mean and the median).
	Metrics     []string
	Percentiles []float64
}

// bench's defaults (vllm/benchmarks/serve.py): --percentile-metrics
// "ttft,tpot,itl" for a generating model, --metric-percentiles "99".
var (
	defaultMetrics     = []string{"ttft", "tpot", "itl"}
	defaultPercentiles = []float64{99}
	benchMetrics       = []string{"ttft", "tpot", "itl", "e2el"}
)

// DefaultBenchOutput is bench's output without its output flags.
func DefaultBenchOutput() BenchOutput {
	return BenchOutput{Metrics: slices.Clone(defaultMetrics), Percentiles: slices.Clone(defaultPercentiles)}
}

// Extra are the percentiles a latency summary does not already give (it
// gives p50, p90, p95, p99 and the max, p100): those a run must be asked
// for.
func (o BenchOutput) Extra() []float64 {
	var out []float64
	for _, p := range o.Percentiles {
		if p != 50 && p != 90 && p != 95 && p != 99 && p != 100 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Shows reports whether metric's block is printed.
func (o BenchOutput) Shows(metric string) bool { return slices.Contains(o.Metrics, metric) }

// ParsePercentileMetrics reads --percentile-metrics: a comma-separated
// list of ttft, tpot, itl and e2el.
func ParsePercentileMetrics(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !slices.Contains(benchMetrics, m) {
			return nil, fmt.Errorf("--percentile-metrics %q: the metrics are ttft, tpot, itl and e2el, comma-separated", s)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--percentile-metrics %q: name at least one of ttft, tpot, itl and e2el", s)
	}
	return out, nil
}

// ParseMetricPercentiles reads --metric-percentiles: comma-separated
// percentiles from 0 to 100, e.g. "25,50,99.9".
func ParseMetricPercentiles(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return nil, fmt.Errorf("--metric-percentiles %q: want percentiles from 0 to 100, comma-separated, e.g. 50,90,99", s)
		}
		out = append(out, v)
	}
	if len(out) == 0 || len(out) > 32 {
		return nil, fmt.Errorf("--metric-percentiles %q: give 1 to 32 percentiles, e.g. 50,90,99", s)
	}
	return out, nil
}

// PercentileLabel is a percentile as bench prints it: "P99", "P99.9".
func PercentileLabel(p float64) string {
	if p == math.Trunc(p) {
		return "P" + strconv.Itoa(int(p))
	}
	return "P" + strconv.FormatFloat(p, 'f', -1, 64)
}

// Goodput is vllm bench serve's --goodput: per-request targets in
// milliseconds. A request is good when it meets every target given: TTFT,
// TPOT ((E2E − TTFT) / (output − 1), 0 for one output token) and E2E
// latency each at most its target; request goodput is the good requests
// per second of the benchmark's duration (serve.py, calculate_metrics).
type Goodput []Target

// Target is one --goodput target: "ttft:2000".
type Target struct {
	Metric string  `json:"metric"`
	MS     float64 `json:"ms"`
}

// ParseGoodput reads --goodput's words, each KEY:VALUE with KEY ttft, tpot
// or e2el and VALUE milliseconds (bench takes them space-separated; commas
// are read too). A key given twice keeps its last value, as bench's dict.
func ParseGoodput(words []string) (Goodput, error) {
	var g Goodput
	for _, w := range words {
		for _, item := range strings.FieldsFunc(w, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			k, v, ok := strings.Cut(item, ":")
			ms, err := strconv.ParseFloat(v, 64)
			switch {
			case !ok || err != nil || math.IsNaN(ms) || math.IsInf(ms, 0):
				return nil, fmt.Errorf("--goodput %q: write KEY:VALUE with VALUE in milliseconds, e.g. ttft:2000 tpot:50", item)
			case k != "ttft" && k != "tpot" && k != "e2el":
				return nil, fmt.Errorf("--goodput %q: the targets are ttft, tpot and e2el", item)
			case ms < 0:
				return nil, fmt.Errorf("--goodput %q: a target is not negative", item)
			}
			if i := slices.IndexFunc(g, func(t Target) bool { return t.Metric == k }); i >= 0 {
				g[i].MS = ms
			} else {
				g = append(g, Target{Metric: k, MS: ms})
			}
		}
	}
	if len(g) == 0 && len(words) > 0 {
		return nil, fmt.Errorf("--goodput: give targets, e.g. ttft:2000 tpot:50")
	}
	return g, nil
}

// Meets reports whether one successful request meets every target, its
// latencies in milliseconds (tpot 0 for a single output token).
func (g Goodput) Meets(ttft, tpot, e2el float64) bool {
	for _, t := range g {
		v := e2el
		switch t.Metric {
		case "ttft":
			v = ttft
		case "tpot":
			v = tpot
		}
		if v > t.MS {
			return false
		}
	}
	return true
}

func (g Goodput) String() string {
	var parts []string
	for _, t := range g {
		parts = append(parts, t.Metric+":"+strconv.FormatFloat(t.MS, 'f', -1, 64))
	}
	return strings.Join(parts, " ")
}
