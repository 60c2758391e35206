package telemetry

import "testing"

func TestOOMRisk(t *testing.T) {
	tests := []struct {
		name string
		in   RiskInput
		want float64
	}{
		{"idle", RiskInput{FreeBytes: Unknown}, 0},
		// K = (0.9-0.8)/0.2 = 0.5, Q = 0: risk = 0.5*(1+0)/2 = 0.25.
		{"kv 0.9, nothing waiting", RiskInput{KVCacheUsage: 0.9, RequestsRunning: 10, FreeBytes: Unknown}, 0.25},
		// K = 1, Q = 0: a full cache alone is half the scale.
		{"kv full, nothing waiting", RiskInput{KVCacheUsage: 1, RequestsRunning: 10, FreeBytes: Unknown}, 0.5},
		// K = 1, Q = 1 (nothing runs, all wait): 1.
		{"kv full, all waiting", RiskInput{KVCacheUsage: 1, RequestsWaiting: 4, FreeBytes: Unknown}, 1},
		// K = 0.75, Q = 5/20 = 0.25: 0.75*1.25/2 = 0.46875.
		{"kv 0.95, a quarter waiting", RiskInput{KVCacheUsage: 0.95, RequestsRunning: 15, RequestsWaiting: 5, FreeBytes: Unknown}, 0.46875},
		// As above with P = 2/10 = 0.2: 1 - 0.53125*0.8 = 0.575.
		{"plus 2 preemptions a minute", RiskInput{KVCacheUsage: 0.95, RequestsRunning: 15, RequestsWaiting: 5,
			PreemptionsPerMinute: 2, FreeBytes: Unknown}, 0.575},
		// G = 1 - 1/4 = 0.75: 1 - 0.53125*0.8*0.25 = 0.89375.
		{"plus GPU margin three quarters gone", RiskInput{KVCacheUsage: 0.95, RequestsRunning: 15, RequestsWaiting: 5,
			PreemptionsPerMinute: 2, FreeBytes: 1 << 30, RequiredFreeBytes: 4 << 30}, 0.89375},
		// Preemptions past 10 a minute saturate P.
		{"preemption storm", RiskInput{PreemptionsPerMinute: 50, FreeBytes: Unknown}, 1},
		// More free than required: G = 0.
		{"margin intact", RiskInput{FreeBytes: 8 << 30, RequiredFreeBytes: 4 << 30}, 0},
		// No requirement known: free memory does not count.
		{"no requirement", RiskInput{FreeBytes: 0}, 0},
		// Below 80% KV nothing counts, even with a queue.
		{"kv 0.5 with a queue", RiskInput{KVCacheUsage: 0.5, RequestsWaiting: 9, FreeBytes: Unknown}, 0},
	}
	for _, tt := range tests {
		if got := OOMRisk(tt.in); !near(got, tt.want) {
			t.Errorf("%s: OOMRisk = %v, want %v", tt.name, got, tt.want)
		}
	}
}
