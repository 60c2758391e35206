// Package slo reads the --slo bounds that simulate and loadtest judge a run
// by: "ttft_p99=2s,tpot_p99=100ms,error_rate=1%". The statistic names are
// vllm bench serve's (TTFT, TPOT, ITL, E2E; mean and percentiles).
package slo

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bound is one bound of --slo: "ttft_p99=2s" bounds the 99th percentile of
// TTFT by 2 s; "error_rate=1%" bounds the failed share of the requests.
type Bound struct {
	// Metric is ttft, tpot, itl, e2e or error_rate; Stat is mean, p50,
	// p90, p95, p99 or max (empty for error_rate).
	Metric, Stat string
	// Limit bounds a latency; Rate bounds error_rate (0..1).
	Limit time.Duration
	Rate  float64
}

// Name is the SLO as written: "ttft_p99".
func (s Bound) Name() string {
	if s.Stat == "" {
		return s.Metric
	}
	return s.Metric + "_" + s.Stat
}

var sloStats = map[string]float64{"mean": -1, "p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "max": 1}

// Parse reads "ttft_p99=2s,tpot_p99=100ms,error_rate=1%".
func Parse(s string) ([]Bound, error) {
	var out []Bound
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("SLO %q: write NAME=VALUE, e.g. ttft_p99=2s", part)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "error_rate" {
			pct := strings.HasSuffix(v, "%")
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if pct {
				f /= 100
			}
			if err != nil || f < 0 || f > 1 {
				return nil, fmt.Errorf("SLO %q: error_rate is a fraction or a percentage, e.g. 0.01 or 1%%", part)
			}
			out = append(out, Bound{Metric: k, Rate: f})
			continue
		}
		metric, stat, _ := strings.Cut(k, "_")
		if _, ok := sloStats[stat]; !ok || (metric != "ttft" && metric != "tpot" && metric != "itl" && metric != "e2e") {
			return nil, fmt.Errorf("SLO %q: the name is METRIC_STAT with METRIC ttft, tpot, itl or e2e and STAT mean, p50, p90, p95, p99 or max (or error_rate)", part)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("SLO %q: the bound must be a positive duration like 2s or 100ms", part)
		}
		out = append(out, Bound{Metric: metric, Stat: stat, Limit: d})
	}
	return out, nil
}

// Pick returns the statistic b bounds, of a latency summary given as its
// mean, p50, p90, p95, p99 and max (error_rate bounds none: 0).
func (b Bound) Pick(mean, p50, p90, p95, p99, max float64) float64 {
	switch b.Stat {
	case "mean":
		return mean
	case "p50":
		return p50
	case "p90":
		return p90
	case "p95":
		return p95
	case "p99":
		return p99
	case "max":
		return max
	}
	return 0
}
