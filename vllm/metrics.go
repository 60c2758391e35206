package vllm

// This file is the one place that knows vLLM's Prometheus metric names, by
// release. Source: docs/peers.md §5.2 (vLLM docs/design/metrics.md, PRs
// #13295, #15458, #18354, #18837, #29330, #32661). vLLM's policy (PR
// #13295): a metric deprecated in X.Y is hidden in X.Y+1 (shown again with
// --show-hidden-metrics-for-version=X.Y) and removed in X.Y+2.

// Metric is one quantity vLLM exports on /metrics, whatever it is called in
// a given release.
type Metric string

// The quantities headroom reads.
const (
	MetricRequestsRunning    Metric = "requests_running"
	MetricRequestsWaiting    Metric = "requests_waiting"
	MetricRequestsSwapped    Metric = "requests_swapped"
	MetricKVCacheUsage       Metric = "kv_cache_usage"
	MetricCPUCacheUsage      Metric = "cpu_cache_usage"
	MetricPrefixCacheQueries Metric = "prefix_cache_queries"
	MetricPrefixCacheHits    Metric = "prefix_cache_hits"
	MetricPrefixCacheHitRate Metric = "prefix_cache_hit_rate"
	MetricPreemptions        Metric = "preemptions"
	MetricPromptTokens       Metric = "prompt_tokens"
	MetricGenerationTokens   Metric = "generation_tokens"
	MetricTTFT               Metric = "time_to_first_token"
	MetricInterTokenLatency  Metric = "inter_token_latency"
	MetricE2ELatency         Metric = "e2e_request_latency"
	MetricQueueTime          Metric = "request_queue_time"
	MetricCacheConfig        Metric = "cache_config"
	// Speculative decoding's counters (specdecode.go).
	MetricSpecDrafts         Metric = "spec_decode_drafts"
	MetricSpecDraftTokens    Metric = "spec_decode_draft_tokens"
	MetricSpecAccepted       Metric = "spec_decode_accepted_tokens"
	MetricSpecAcceptedPerPos Metric = "spec_decode_accepted_tokens_per_pos"
)

// Prometheus metric types as vLLM declares them.
const (
	TypeGauge     = "gauge"
	TypeCounter   = "counter"
	TypeHistogram = "histogram"
)

// MetricName is one /metrics name of a Metric and the releases that export
// it. Zero versions mean "no such boundary": Since zero is every release we
// know; Removed zero is still present in the newest.
type MetricName struct {
	Metric Metric
	// Name is the family name on the wire. Counters carry "_total" there
	// (Python's prometheus_client adds it; vLLM's code names them without).
	Name string
	Type string
	// Since is the first release exporting the name.
	Since Version
	// Deprecated is the release whose help text marks it deprecated.
	Deprecated Version
	// Hidden is the first release that exports it only with
	// --show-hidden-metrics-for-version.
	Hidden Version
	// Removed is the first release without it.
	Removed Version
	// ReplacedBy is the name that takes over, if any.
	ReplacedBy string
	// Note says where the boundaries come from and what is uncertain.
	Note string
}

// Release boundaries of the metric table (Version{} literals are not
// constants in Go; these are never written).
var (
	v0_8_0  = Version{0, 8, 0, ""}
	v0_9_0  = Version{0, 9, 0, ""}
	v0_9_2  = Version{0, 9, 2, ""}
	v0_10_0 = Version{0, 10, 0, ""}
	v0_10_2 = Version{0, 10, 2, ""}
	v0_11_0 = Version{0, 11, 0, ""}
	v0_12_0 = Version{0, 12, 0, ""}
	v0_13_0 = Version{0, 13, 0, ""}
)

// metricNames lists every name; for a Metric, the newest name comes first.
func metricNames() []MetricName {
	const v1Gone = "V0 metric with no V1 equivalent: deprecated 0.8, hidden 0.9 (PR #15458), removed 0.10 by the policy"
	return []MetricName{
		{Metric: MetricRequestsRunning, Name: "vllm:num_requests_running", Type: TypeGauge, Note: "stable since V0"},
		{Metric: MetricRequestsWaiting, Name: "vllm:num_requests_waiting", Type: TypeGauge, Note: "stable since V0"},
		{Metric: MetricRequestsSwapped, Name: "vllm:num_requests_swapped", Type: TypeGauge,
			Deprecated: v0_8_0, Hidden: v0_9_0, Removed: v0_10_0, Note: v1Gone},

		// KV usage is a fraction 0..1 under both names despite "perc": V0's
		// gauge was set to 1 - free_blocks/total_blocks (vllm/engine/metrics.py),
		// V1's to the block pool's usage (vllm/v1/metrics/loggers.py).
		{Metric: MetricKVCacheUsage, Name: "vllm:kv_cache_usage_perc", Type: TypeGauge, Since: v0_9_2,
			Note: "added in 0.9.2 by PR #18354"},
		{Metric: MetricKVCacheUsage, Name: "vllm:gpu_cache_usage_perc", Type: TypeGauge,
			Deprecated: v0_9_2, Hidden: v0_11_0, Removed: v0_12_0, ReplacedBy: "vllm:kv_cache_usage_perc",
			Note: "deprecated in 0.9.2 (counted as 0.10 by the policy), hidden in 0.11, removed in 0.12 by PR #29330"},
		{Metric: MetricCPUCacheUsage, Name: "vllm:cpu_cache_usage_perc", Type: TypeGauge,
			Deprecated: v0_8_0, Hidden: v0_9_0, Removed: v0_10_0, Note: v1Gone},

		{Metric: MetricPrefixCacheQueries, Name: "vllm:prefix_cache_queries_total", Type: TypeCounter, Since: v0_9_2,
			Note: "renamed from gpu_prefix_cache_queries with the KV usage rename (PR #18354)"},
		{Metric: MetricPrefixCacheQueries, Name: "vllm:gpu_prefix_cache_queries_total", Type: TypeCounter, Since: v0_8_0,
			Deprecated: v0_9_2, Hidden: v0_11_0, Removed: v0_12_0, ReplacedBy: "vllm:prefix_cache_queries_total",
			Note: "a V1 counter; Since 0.8 (V1 on by default) is assumed, not verified"},
		{Metric: MetricPrefixCacheHits, Name: "vllm:prefix_cache_hits_total", Type: TypeCounter, Since: v0_9_2,
			Note: "renamed from gpu_prefix_cache_hits with the KV usage rename (PR #18354)"},
		{Metric: MetricPrefixCacheHits, Name: "vllm:gpu_prefix_cache_hits_total", Type: TypeCounter, Since: v0_8_0,
			Deprecated: v0_9_2, Hidden: v0_11_0, Removed: v0_12_0, ReplacedBy: "vllm:prefix_cache_hits_total",
			Note: "a V1 counter; Since 0.8 (V1 on by default) is assumed, not verified"},
		{Metric: MetricPrefixCacheHitRate, Name: "vllm:gpu_prefix_cache_hit_rate", Type: TypeGauge,
			Deprecated: v0_8_0, Hidden: v0_9_0, Removed: v0_10_0,
			Note: "V0 gauge: deprecated 0.8, hidden 0.9 (PR #15458), removed by PR #18837"},
		{Metric: MetricPrefixCacheHitRate, Name: "vllm:cpu_prefix_cache_hit_rate", Type: TypeGauge,
			Deprecated: v0_8_0, Hidden: v0_9_0, Removed: v0_10_0, Note: v1Gone},

		{Metric: MetricPreemptions, Name: "vllm:num_preemptions_total", Type: TypeCounter,
			Note: "stable; vLLM's code calls it vllm:num_preemptions"},
		{Metric: MetricPromptTokens, Name: "vllm:prompt_tokens_total", Type: TypeCounter, Note: "stable"},
		{Metric: MetricGenerationTokens, Name: "vllm:generation_tokens_total", Type: TypeCounter, Note: "stable"},
		{Metric: MetricTTFT, Name: "vllm:time_to_first_token_seconds", Type: TypeHistogram, Note: "stable"},

		{Metric: MetricInterTokenLatency, Name: "vllm:inter_token_latency_seconds", Type: TypeHistogram, Since: v0_10_2,
			Note: "the old name's help says DEPRECATED from 0.10.2 (a third-party tag diff), so the new one is taken to exist from then"},
		{Metric: MetricInterTokenLatency, Name: "vllm:time_per_output_token_seconds", Type: TypeHistogram,
			Deprecated: v0_11_0, Hidden: v0_12_0, Removed: v0_13_0, ReplacedBy: "vllm:inter_token_latency_seconds",
			Note: "removed in 0.13 by PR #32661"},

		{Metric: MetricE2ELatency, Name: "vllm:e2e_request_latency_seconds", Type: TypeHistogram, Note: "stable"},
		{Metric: MetricQueueTime, Name: "vllm:request_queue_time_seconds", Type: TypeHistogram, Note: "stable"},
		{Metric: MetricCacheConfig, Name: "vllm:cache_config_info", Type: TypeGauge,
			Note: "always 1; the labels carry block_size, cache_dtype, gpu_memory_utilization, num_gpu_blocks"},

		{Metric: MetricSpecDrafts, Name: "vllm:spec_decode_num_drafts_total", Type: TypeCounter, Note: specV1},
		{Metric: MetricSpecDraftTokens, Name: "vllm:spec_decode_num_draft_tokens_total", Type: TypeCounter, Note: specV1},
		{Metric: MetricSpecAccepted, Name: "vllm:spec_decode_num_accepted_tokens_total", Type: TypeCounter, Note: specV1},
		{Metric: MetricSpecAcceptedPerPos, Name: "vllm:spec_decode_num_accepted_tokens_per_pos_total", Type: TypeCounter,
			Note: specV1 + "; one series per position, label position=\"0\" … \"k−1\""},
	}
}

// specV1 is where the speculative-decoding counters come from: V1's
// SpecDecodingProm (vllm/v1/spec_decode/metrics.py @ 016a8587, the 0.10
// era; the names are stable since). Only servers with
// --speculative-config export them; the first release is not verified.
const specV1 = "V1's spec-decode counters (vllm/v1/spec_decode/metrics.py @ 016a8587), exported with --speculative-config"

// MetricNames returns every known name of every Metric, the newest name of
// each Metric first. The slice is the caller's.
func MetricNames() []MetricName { return metricNames() }

// MetricWireNames returns the names m has had, newest first: the order in
// which a reader should look for it.
func MetricWireNames(m Metric) []string {
	var out []string
	for _, n := range metricNames() {
		if n.Metric == m {
			out = append(out, n.Name)
		}
	}
	return out
}

// LookupMetricName finds the entry of a wire name such as
// "vllm:gpu_cache_usage_perc".
func LookupMetricName(name string) (MetricName, bool) {
	for _, n := range metricNames() {
		if n.Name == name {
			return n, true
		}
	}
	return MetricName{}, false
}

// ExportedBy reports whether release v exports the name by default. A
// hidden name (Hidden <= v < Removed) is exported only when the server runs
// with --show-hidden-metrics-for-version; that is showHidden.
func (n MetricName) ExportedBy(v Version, showHidden bool) bool {
	v = orNewest(v)
	if !n.Since.IsZero() && !v.AtLeast(n.Since) {
		return false
	}
	if !n.Removed.IsZero() && v.AtLeast(n.Removed) {
		return false
	}
	if !n.Hidden.IsZero() && v.AtLeast(n.Hidden) && !showHidden {
		return false
	}
	return true
}

// MetricNameAt returns the name release v exports m under by default (the
// newest when v exports two, as 0.9.2 to 0.10 do for KV usage); ok is false
// when v has no such metric.
func MetricNameAt(m Metric, v Version) (name string, ok bool) {
	for _, n := range metricNames() {
		if n.Metric == m && n.ExportedBy(v, false) {
			return n.Name, true
		}
	}
	return "", false
}
