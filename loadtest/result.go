package loadtest

import (
	"fmt"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// Result is a run's report; its JSON form is `headroom loadtest -o json`
// (snake_case; fields may be added, never renamed).
type Result struct {
	Target TargetInfo `json:"target"`
	Load   LoadInfo   `json:"load"`
	// Requests were sent; Completed succeeded; Failed did not, by kind in
	// Errors.
	Requests      int64            `json:"requests"`
	Completed     int64            `json:"completed"`
	Failed        int64            `json:"failed"`
	Errors        map[string]int64 `json:"errors"`
	ErrorExamples []ErrorExample   `json:"error_examples,omitempty"`
	// DurationS runs from the start to the last completion.
	DurationS  float64    `json:"duration_s"`
	SendRate   SendRate   `json:"send_rate"`
	SendLag    Latency    `json:"send_lag_ms"`
	TTFT       Latency    `json:"ttft_ms"`
	TPOT       Latency    `json:"tpot_ms"`
	ITL        Latency    `json:"itl_ms"`
	E2E        Latency    `json:"e2e_ms"`
	Throughput Throughput `json:"throughput"`
	// Good is the number of requests meeting every per-request SLO, or,
	// with Goodput (vllm bench serve's --goodput), every one of its
	// targets; Throughput.GoodputPerS is them per second.
	Good         int64            `json:"good_requests"`
	Goodput      workload.Goodput `json:"goodput,omitempty"`
	PromptTokens TokenStats       `json:"prompt_tokens"`
	// TotalPromptTokens sums the prompt tokens asked for, and
	// TotalOutputTokens the tokens generated, of the requests that
	// succeeded (vllm bench serve's total input and generated tokens).
	TotalPromptTokens int64           `json:"total_prompt_tokens"`
	TotalOutputTokens int64           `json:"total_output_tokens"`
	OutputTokens      traffic.Summary `json:"output_tokens"`
	// WithoutUsage counts successful streams that carried no usage: their
	// output tokens are their content chunks.
	WithoutUsage int64 `json:"without_usage,omitempty"`
	Calibration  struct {
		TokensPerWord float64 `json:"tokens_per_word"`
		FixedTokens   float64 `json:"fixed_tokens"`
	} `json:"calibration"`

	// From the server's /metrics (null when not read) and local GPUs.
	MaxKVUsage      *float64 `json:"max_kv_usage"`
	Preemptions     *float64 `json:"preemptions"`
	MaxRunning      *float64 `json:"max_running"`
	MaxWaiting      *float64 `json:"max_waiting"`
	GPUMaxUsedBytes *int64   `json:"gpu_max_used_bytes"`
	GPUTotalBytes   *int64   `json:"gpu_total_bytes"`
	MetricsURL      string   `json:"metrics_url,omitempty"`
	// SpecDecode is what the server's spec_decode counters say of the
	// drafts verified during the run (vllm.SpecAcceptance); absent when it
	// exports none or verified none.
	SpecDecode      *vllm.SpecAcceptance `json:"spec_decode,omitempty"`
	Series          []Point              `json:"series"`
	SeriesIntervalS float64              `json:"series_interval_s"`
	// Simulated is simulate's prediction of the same traffic (with
	// --gpu); StepCalibration the step-time calibration fitted from this
	// run, appended to StepCalibrationFile.
	Simulated           *Simulated       `json:"simulated,omitempty"`
	StepCalibration     *sim.Calibration `json:"step_calibration,omitempty"`
	StepCalibrationFile string           `json:"step_calibration_file,omitempty"`
	SLOs                []SLOResult      `json:"slo"`
	SLOsMet             bool             `json:"slo_met"`
	Notes               []string         `json:"notes,omitempty"`
}

// TargetInfo names the server.
type TargetInfo struct {
	URL      string `json:"url"`
	Model    string `json:"model"`
	Endpoint string `json:"endpoint"`
}

// LoadInfo says what was asked for.
type LoadInfo struct {
	// Mode is "open" (send at due times) or "closed" (Concurrency
	// requests in flight).
	Mode        string  `json:"mode"`
	Source      string  `json:"source"`
	Rate        float64 `json:"rate,omitempty"`
	Arrival     string  `json:"arrival,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Speedup     float64 `json:"speedup,omitempty"`
}

// SendRate compares the send rate asked for with the one achieved (open
// loop): (requests − 1) over the time from the first send to the last.
type SendRate struct {
	Requested float64 `json:"requested,omitempty"`
	Achieved  float64 `json:"achieved"`
}

// Throughput divides by the run's duration.
type Throughput struct {
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	TotalTokensPerS  float64 `json:"total_tokens_per_s"`
	GoodputPerS      float64 `json:"goodput_per_s"`
}

// TokenStats compares the prompt tokens asked for with usage.prompt_tokens.
type TokenStats struct {
	Requested traffic.Summary `json:"requested"`
	Served    traffic.Summary `json:"served"`
}

// ErrorExample is the first message seen of an error kind.
type ErrorExample struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// SLOResult is one --slo bound and what was measured.
type SLOResult struct {
	Name string `json:"name"`
	// Limit and Measured are milliseconds, or fractions for error_rate.
	Limit    float64 `json:"limit"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
}

// judge fills SLOs and SLOsMet. A bound on a latency no request measured
// (every request failed, or TPOT with one output token) is not met.
func (r *Result) judge(slos []slo.Bound) {
	r.SLOsMet = r.Completed > 0
	if r.Completed == 0 {
		r.Notes = append(r.Notes, "no request succeeded")
	}
	for _, s := range slos {
		var res SLOResult
		res.Name = s.Name()
		if s.Metric == "error_rate" {
			res.Limit = s.Rate
			if r.Requests > 0 {
				res.Measured = round3(float64(r.Failed) / float64(r.Requests))
			}
			res.Met = r.Requests > 0 && res.Measured <= s.Rate
		} else {
			l := map[string]Latency{"ttft": r.TTFT, "tpot": r.TPOT, "itl": r.ITL, "e2e": r.E2E}[s.Metric]
			res.Limit = float64(s.Limit.Microseconds()) / 1000
			res.Measured = s.Pick(l.Mean, l.P50, l.P90, l.P95, l.P99, l.Max)
			res.Met = l.Count > 0 && res.Measured <= res.Limit
			if l.Count == 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: nothing measured", res.Name))
			}
		}
		r.SLOs = append(r.SLOs, res)
		r.SLOsMet = r.SLOsMet && res.Met
	}
	if r.SLOs == nil {
		r.SLOs = []SLOResult{}
	}
}
