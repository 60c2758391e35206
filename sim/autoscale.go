package sim

import "math"

// HPA is the HorizontalPodAutoscaler's algorithm (Kubernetes
// pkg/controller/podautoscaler, as KEDA's Prometheus triggers drive it)
// on three AverageValue metrics: the fleet's answered requests per second,
// and the sums of vllm:num_requests_waiting and of
// vllm:kv_cache_usage_perc over the ready replicas, each divided by its
// per-replica target, rounded up. A metric
// within Tolerance of its target (the controller's default 0.1) keeps the
// current count; the count is the larger of the two metrics'; a scale-down
// takes the highest count asked for over the last CoolDownS seconds (the
// scale-down stabilization window, 300 s by default in both the HPA and
// KEDA). Scale-up is immediate; the HPA's rate limits on it (double or +4
// pods per 15 s) are not modelled.
type HPA struct {
	// TargetRate, TargetWaiting and TargetKV are the per-replica targets;
	// 0 leaves a metric out.
	TargetRate, TargetWaiting, TargetKV float64
	Tolerance                           float64
	CoolDownS                           float64
	Min, Max                            int
	// history holds the recent recommendations, oldest first.
	history []recommendation
}

type recommendation struct {
	at float64
	n  int
}

// Desired is the count the HPA asks for at m.
func (h *HPA) Desired(m FleetMetrics) int {
	cur := max(m.Replicas, 1)
	want := 0
	for _, metric := range []struct{ total, target float64 }{
		{m.RequestsPerS, h.TargetRate},
		{float64(m.Waiting), h.TargetWaiting},
		{m.KVUsage * float64(m.Ready), h.TargetKV},
	} {
		if metric.target <= 0 {
			continue
		}
		ratio := metric.total / (metric.target * float64(cur))
		n := cur
		if math.Abs(ratio-1) > h.Tolerance {
			// Rounded up, past the float error of an exact multiple.
			n = int(math.Ceil(metric.total/metric.target - 1e-9))
		}
		want = max(want, n)
	}
	want = min(max(want, h.Min, 1), max(h.Max, 1))
	// The stabilization window: the highest recommendation within it.
	keep := h.history[:0]
	for _, r := range h.history {
		if r.at > m.Now-h.CoolDownS {
			keep = append(keep, r)
		}
	}
	h.history = append(keep, recommendation{m.Now, want})
	if want >= cur {
		return want
	}
	// Down no lower than the highest recommendation in the window (nor
	// up to it: an old recommendation never adds a replica).
	out := want
	for _, r := range h.history {
		out = max(out, r.n)
	}
	return min(out, cur)
}
