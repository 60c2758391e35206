package vllm

import (
	"strings"
	"testing"
)

func TestMetricNameAt(t *testing.T) {
	tests := []struct {
		m       Metric
		version string
		want    string // "" = not exported
	}{
		// docs/peers.md §5.2: kv_cache_usage_perc from 0.9.2; the old name
		// alone before; both in 0.9.2..0.10 (the new one is preferred).
		{MetricKVCacheUsage, "0.6.3", "vllm:gpu_cache_usage_perc"},
		{MetricKVCacheUsage, "0.9.1", "vllm:gpu_cache_usage_perc"},
		{MetricKVCacheUsage, "0.9.2", "vllm:kv_cache_usage_perc"},
		{MetricKVCacheUsage, "0.12.0", "vllm:kv_cache_usage_perc"},
		{MetricPrefixCacheQueries, "0.8.5", "vllm:gpu_prefix_cache_queries_total"},
		{MetricPrefixCacheQueries, "0.10.0", "vllm:prefix_cache_queries_total"},
		{MetricPrefixCacheQueries, "0.6.3", ""},
		// ITL: time_per_output_token until its removal in 0.13.
		{MetricInterTokenLatency, "0.10.1", "vllm:time_per_output_token_seconds"},
		{MetricInterTokenLatency, "0.11.0", "vllm:inter_token_latency_seconds"},
		// V0-only gauges: hidden in 0.9, removed in 0.10.
		{MetricRequestsSwapped, "0.6.3", "vllm:num_requests_swapped"},
		{MetricRequestsSwapped, "0.8.5", "vllm:num_requests_swapped"},
		{MetricRequestsSwapped, "0.9.0", ""},
		// Stable names.
		{MetricPreemptions, "0.6.3", "vllm:num_preemptions_total"},
		{MetricPreemptions, "0.32.0", "vllm:num_preemptions_total"},
		{MetricTTFT, "0.19.0", "vllm:time_to_first_token_seconds"},
		{MetricRequestsWaiting, "0.4.0", "vllm:num_requests_waiting"},
		{MetricCacheConfig, "0.11.0", "vllm:cache_config_info"},
	}
	for _, tt := range tests {
		got, ok := MetricNameAt(tt.m, MustVersion(tt.version))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("MetricNameAt(%s, %s) = %q, %v; want %q", tt.m, tt.version, got, ok, tt.want)
		}
	}
	// A zero version is the newest known.
	if got, _ := MetricNameAt(MetricKVCacheUsage, Version{}); got != "vllm:kv_cache_usage_perc" {
		t.Errorf("newest KV name = %q", got)
	}
}

func TestExportedByHidden(t *testing.T) {
	old, ok := LookupMetricName("vllm:gpu_cache_usage_perc")
	if !ok {
		t.Fatal("old KV name unknown")
	}
	tests := []struct {
		version    string
		showHidden bool
		want       bool
	}{
		{"0.10.2", false, true},  // deprecated, still shown
		{"0.11.0", false, false}, // hidden
		{"0.11.0", true, true},   // --show-hidden-metrics-for-version=0.10
		{"0.12.0", true, false},  // removed by PR #29330
	}
	for _, tt := range tests {
		if got := old.ExportedBy(MustVersion(tt.version), tt.showHidden); got != tt.want {
			t.Errorf("ExportedBy(%s, hidden=%v) = %v, want %v", tt.version, tt.showHidden, got, tt.want)
		}
	}
}

func TestMetricWireNamesNewestFirst(t *testing.T) {
	got := strings.Join(MetricWireNames(MetricKVCacheUsage), ",")
	if got != "vllm:kv_cache_usage_perc,vllm:gpu_cache_usage_perc" {
		t.Errorf("KV names = %s", got)
	}
	if n := MetricWireNames(Metric("nope")); len(n) != 0 {
		t.Errorf("unknown metric has names %v", n)
	}
}

// The table itself: unique names, "vllm:" prefix, counters ending in
// _total, replacements that exist for the same quantity, boundaries in order.
func TestMetricTableConsistent(t *testing.T) {
	seen := map[string]MetricName{}
	for _, n := range MetricNames() {
		if _, dup := seen[n.Name]; dup {
			t.Errorf("%s listed twice", n.Name)
		}
		seen[n.Name] = n
		if !strings.HasPrefix(n.Name, "vllm:") {
			t.Errorf("%s lacks the vllm: prefix", n.Name)
		}
		if n.Type == TypeCounter && !strings.HasSuffix(n.Name, "_total") {
			t.Errorf("counter %s must carry _total on the wire", n.Name)
		}
		if n.Type != TypeCounter && n.Type != TypeGauge && n.Type != TypeHistogram {
			t.Errorf("%s has type %q", n.Name, n.Type)
		}
		order := []Version{n.Since, n.Deprecated, n.Hidden, n.Removed}
		last := Version{}
		for _, v := range order {
			if !v.IsZero() {
				if v.Compare(last) < 0 {
					t.Errorf("%s: boundaries out of order %v", n.Name, order)
				}
				last = v
			}
		}
		if n.Note == "" {
			t.Errorf("%s has no source note", n.Name)
		}
	}
	for _, n := range seen {
		if n.ReplacedBy == "" {
			continue
		}
		r, ok := seen[n.ReplacedBy]
		if !ok || r.Metric != n.Metric {
			t.Errorf("%s is replaced by %q, which is not a name of %s", n.Name, n.ReplacedBy, n.Metric)
		}
	}
}
