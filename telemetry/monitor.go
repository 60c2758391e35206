package telemetry

import (
	"fmt"
	"math"
	"time"

	"headroom.dev/headroom/memory"
)

// Alert codes.
const (
	// AlertKVPressure: KV usage at or above the threshold for K
	// consecutive readings while requests wait.
	AlertKVPressure = "kv_pressure"
	// AlertPreemptions: the preemption counter rose since the last reading.
	AlertPreemptions = "preemptions"
	// AlertGPUHeadroom: a GPU's free memory fell under the required margin.
	AlertGPUHeadroom = "gpu_headroom"
)

// Defaults of AlertRules.
const (
	DefaultKVThreshold = 0.9
	DefaultKVReadings  = 3
)

// AlertRules say when a Monitor raises alerts.
type AlertRules struct {
	// KVThreshold is the KV usage (0..1) counted as pressure; 0 is DefaultKVThreshold.
	KVThreshold float64
	// KVReadings is how many readings in a row it must last; 0 is DefaultKVReadings.
	KVReadings int
	// RequiredFreeBytes is the free memory each GPU must keep; 0 turns the
	// GPU alert off.
	RequiredFreeBytes int64
	// RequiredFreeWhy says where RequiredFreeBytes comes from, for messages.
	RequiredFreeWhy string
}

// Alert is one raised alert. A condition raises one alert when it starts
// and is armed again once it clears, so a long episode is not repeated on
// every reading.
type Alert struct {
	Time      time.Time `json:"time"`
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	// GPU is the device index for AlertGPUHeadroom.
	GPU *int `json:"gpu,omitempty"`
}

// Reading is one observation with everything derived from it.
type Reading struct {
	Time time.Time
	// VLLM is nil when the server could not be read.
	VLLM *VLLMSample
	// GPUs is nil without GPU readings.
	GPUs  []GPU
	Delta Delta
	// TTFTP99Seconds is the p99 over the window when the window saw first
	// tokens, else over the server's life; TTFTWindowSeconds is the span
	// it covers (0 = since the server started). TTFTKnown is false while
	// no request has had its first token.
	TTFTP99Seconds    float64
	TTFTWindowSeconds float64
	TTFTKnown         bool
	// MinFreeBytes is the least free memory over GPUs; Unknown without GPUs.
	MinFreeBytes int64
	// OOMRisk is OOMRisk of this reading (0 when vLLM was not read).
	OOMRisk float64
}

// Monitor turns readings into derived values and alerts. It is not safe
// for concurrent use.
type Monitor struct {
	rules    AlertRules
	window   Window
	kvStreak int
	active   map[string]bool
	// last is the newest sample read; restarts counts the samples that
	// showed a new vLLM process after it.
	last     *VLLMSample
	restarts int
}

// Restarts is how many times the readings showed vLLM started anew (see
// restarted): a process that died, e.g. of a CUDA out-of-memory error, and
// came back, whether or not a reading fell between.
func (m *Monitor) Restarts() int { return m.restarts }

// NewMonitor returns a monitor with rules; span is the rate window (0 is
// DefaultWindow).
func NewMonitor(rules AlertRules, span time.Duration) *Monitor {
	if rules.KVThreshold <= 0 {
		rules.KVThreshold = DefaultKVThreshold
	}
	if rules.KVReadings <= 0 {
		rules.KVReadings = DefaultKVReadings
	}
	return &Monitor{rules: rules, window: Window{Span: span}, active: map[string]bool{}}
}

// Observe takes one reading: v is nil when vLLM could not be read, gpus nil
// without GPU readings.
func (m *Monitor) Observe(t time.Time, v *VLLMSample, gpus []GPU) (Reading, []Alert) {
	r := Reading{Time: t, VLLM: v, GPUs: gpus, MinFreeBytes: Unknown}
	for _, g := range gpus {
		if g.FreeBytes != Unknown && (r.MinFreeBytes == Unknown || g.FreeBytes < r.MinFreeBytes) {
			r.MinFreeBytes = g.FreeBytes
		}
	}
	var alerts []Alert
	raise := func(key string, on bool, a Alert) {
		if on && !m.active[key] {
			a.Time = t
			alerts = append(alerts, a)
		}
		m.active[key] = on
	}
	if v != nil {
		if m.last != nil && restarted(*m.last, *v) {
			m.restarts++
		}
		last := *v
		m.last = &last
		r.Delta = m.window.Add(t, *v)
		if p, ok := r.Delta.TTFT.Quantile(0.99); ok && r.Delta.Seconds > 0 {
			r.TTFTP99Seconds, r.TTFTWindowSeconds, r.TTFTKnown = p, r.Delta.Seconds, true
		} else if v.TTFT.Count > 0 {
			r.TTFTP99Seconds, r.TTFTKnown = v.TTFTP99Seconds, true
		}
		r.OOMRisk = OOMRisk(RiskInput{KVCacheUsage: v.KVCacheUsage, RequestsRunning: v.RequestsRunning,
			RequestsWaiting: v.RequestsWaiting, PreemptionsPerMinute: r.Delta.PreemptionsPerMinute,
			FreeBytes: r.MinFreeBytes, RequiredFreeBytes: m.rules.RequiredFreeBytes})

		if v.KVCacheUsage >= m.rules.KVThreshold && v.RequestsWaiting > 0 {
			m.kvStreak++
		} else {
			m.kvStreak = 0
		}
		raise(AlertKVPressure, m.kvStreak >= m.rules.KVReadings, Alert{Code: AlertKVPressure,
			Message: fmt.Sprintf("KV cache %.0f%% full for %d readings with %s requests waiting: new requests queue and running ones get preempted (lower --max-num-seqs or --max-model-len, or add a replica)",
				v.KVCacheUsage*100, m.kvStreak, FormatCount(v.RequestsWaiting)),
			Value: v.KVCacheUsage, Threshold: m.rules.KVThreshold})
		raise(AlertPreemptions, r.Delta.NewPreemptions > 0, Alert{Code: AlertPreemptions,
			Message: fmt.Sprintf("vLLM preempted %s requests since the last reading (%.1f a minute, %s in all): the KV cache is exhausted and work is recomputed",
				FormatCount(r.Delta.NewPreemptions), r.Delta.PreemptionsPerMinute, FormatCount(v.PreemptionsTotal)),
			Value: r.Delta.NewPreemptions, Threshold: 0})
	} else {
		m.kvStreak = 0
	}
	if m.rules.RequiredFreeBytes > 0 {
		for _, g := range gpus {
			if g.FreeBytes == Unknown {
				continue
			}
			idx := g.Index
			why := ""
			if m.rules.RequiredFreeWhy != "" {
				why = " (" + m.rules.RequiredFreeWhy + ")"
			}
			raise(fmt.Sprintf("%s/%d", AlertGPUHeadroom, idx), g.FreeBytes < m.rules.RequiredFreeBytes, Alert{Code: AlertGPUHeadroom,
				Message: fmt.Sprintf("GPU %d has %s free, under the %s it must keep%s: another process or memory outside vLLM's budget is eating the margin",
					idx, memory.GiB(g.FreeBytes), memory.GiB(m.rules.RequiredFreeBytes), why),
				Value: float64(g.FreeBytes), Threshold: float64(m.rules.RequiredFreeBytes), GPU: &idx})
		}
	}
	return r, alerts
}

// FormatCount prints a count vLLM exports as a float (requests running
// or waiting, preemptions) as the whole number it is, or to one decimal
// where it is not (a rate, a sum over engines).
func FormatCount(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}
