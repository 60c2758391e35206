package telemetry

import "math"

// Constants of the OOM-risk formula (see OOMRisk).
const (
	// RiskKVStart is the KV-cache usage where KV pressure begins to count.
	// vLLM runs its cache nearly full on purpose; below 80% it has room to
	// admit a new long request without preempting (vllm #18115 reports
	// generation "dramatically breaks" at ~91%).
	RiskKVStart = 0.80
	// RiskPreemptionsPerMinute is the preemption rate counted as certain
	// pressure: ten a minute means the scheduler evicts running requests
	// every few seconds.
	RiskPreemptionsPerMinute = 10.0
)

// RiskInput is what OOMRisk combines.
type RiskInput struct {
	KVCacheUsage         float64
	RequestsRunning      float64
	RequestsWaiting      float64
	PreemptionsPerMinute float64
	// FreeBytes is the least free memory of the server's GPUs; Unknown
	// when there is no GPU reading.
	FreeBytes int64
	// RequiredFreeBytes is the free memory the card must keep (the plan's
	// margin, or the user's --min-free); 0 when not known.
	RequiredFreeBytes int64
}

// OOMRisk is a number from 0 (no memory pressure) to 1 (out of memory or
// about to be), made of four signals, each from 0 to 1:
//
//	K = clamp((kv_usage - 0.80) / 0.20)        KV cache close to full
//	Q = waiting / (waiting + running)          share of requests not admitted
//	P = min(1, preemptions_per_minute / 10)    the scheduler evicting requests
//	G = clamp(1 - free / required_free)        GPU margin eaten (0 without a requirement)
//
//	risk = 1 - (1 - K·(1+Q)/2) · (1 - P) · (1 - G)
//
// Signals combine like independent chances, so any one at 1 makes the risk 1
// and several moderate ones add up. A full KV cache alone is 0.5: vLLM
// keeps its cache full on purpose; it becomes 1 only when every request
// is waiting for it. For example KV 0.95 with 15 running and 5 waiting is
// K = 0.75, Q = 0.25, risk 0.469; two preemptions a minute on top make it
// 0.575.
func OOMRisk(in RiskInput) float64 {
	k := clamp01((in.KVCacheUsage - RiskKVStart) / (1 - RiskKVStart))
	q := 0.0
	if d := in.RequestsWaiting + in.RequestsRunning; d > 0 && in.RequestsWaiting > 0 {
		q = clamp01(in.RequestsWaiting / d)
	}
	p := clamp01(in.PreemptionsPerMinute / RiskPreemptionsPerMinute)
	g := 0.0
	if in.RequiredFreeBytes > 0 && in.FreeBytes != Unknown {
		g = clamp01(1 - float64(in.FreeBytes)/float64(in.RequiredFreeBytes))
	}
	return clamp01(1 - (1-k*(1+q)/2)*(1-p)*(1-g))
}

func clamp01(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return math.Min(v, 1)
}
