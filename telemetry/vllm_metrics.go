package telemetry

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"headroom.dev/headroom/vllm"
)

// ErrNoVLLMMetrics is wrapped when an exposition holds no vLLM metric: the
// URL is not a vLLM server's /metrics.
var ErrNoVLLMMetrics = errors.New("no vLLM metrics")

// VLLMSample is one reading of a vLLM server's /metrics, with the names of
// every release mapped to one set of quantities (vllm/metrics.go).
//
// A server with several engines (data parallel) or models exports one
// series per engine: counts and histograms are summed; KV usage is the
// highest of them, because the fullest engine is the one that preempts.
type VLLMSample struct {
	// KVCacheUsage is the fraction (0..1) of KV-cache blocks in use.
	KVCacheUsage     float64 `json:"kv_cache_usage"`
	RequestsRunning  float64 `json:"num_requests_running"`
	RequestsWaiting  float64 `json:"num_requests_waiting"`
	PreemptionsTotal float64 `json:"num_preemptions_total"`
	PromptTokens     float64 `json:"prompt_tokens_total"`
	GenerationTokens float64 `json:"generation_tokens_total"`
	// TTFT is the time-to-first-token histogram since the server started.
	TTFT Histogram `json:"ttft"`
	// TTFTP99Seconds is TTFT's 99th percentile since the server started;
	// 0 while no request has finished its first token (TTFT.Count == 0).
	TTFTP99Seconds float64     `json:"ttft_p99_seconds"`
	CacheConfig    CacheConfig `json:"cache_config"`
	// ProcessStartTimeSeconds is the server's process_start_time_seconds
	// (Python's prometheus_client exports it on Linux); 0 when absent. A
	// new value means a new process.
	ProcessStartTimeSeconds float64 `json:"process_start_time_seconds,omitempty"`
	// Models are the model_name label values seen, sorted.
	Models []string `json:"models,omitempty"`
	// Names maps each quantity found to the wire name it was read from,
	// e.g. MetricKVCacheUsage to "vllm:gpu_cache_usage_perc" on a server
	// older than 0.9.2.
	Names map[vllm.Metric]string `json:"names"`
}

// LabelSimulated is the label of vllm:cache_config_info with which
// headroom's simulated stand-in marks itself.
const LabelSimulated = "simulated"

// CacheConfig is what vllm:cache_config_info's labels say; zero values
// where a label is absent or "None".
type CacheConfig struct {
	BlockSize            int     `json:"block_size,omitempty"`
	NumGPUBlocks         int64   `json:"num_gpu_blocks,omitempty"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	CacheDtype           string  `json:"cache_dtype,omitempty"`
	// Simulated is true when the server is headroom's simulated stand-in
	// (simulate --serve labels its cache_config_info simulated="true"):
	// none of its numbers is a measurement.
	Simulated bool `json:"simulated,omitempty"`
}

// Has reports whether the exposition carried quantity m under any name.
func (s VLLMSample) Has(m vllm.Metric) bool {
	_, ok := s.Names[m]
	return ok
}

// maxExposition bounds what is read of one /metrics body. A vLLM server's
// exposition is 20–200 KiB; LoRA adapters and many engines add little.
const maxExposition = 32 << 20

// ParseVLLMMetrics reads Prometheus text exposition (format 0.0.4, what
// vLLM's /metrics serves) and returns the vLLM quantities in it, accepting
// the names of old and new releases. An exposition with no vllm: metric
// returns an error wrapping ErrNoVLLMMetrics.
func ParseVLLMMetrics(r io.Reader) (VLLMSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, maxExposition))
	if err != nil {
		return VLLMSample{}, fmt.Errorf("reading Prometheus metrics: %v", err)
	}
	return sampleFrom(fams)
}

func sampleFrom(fams map[string]*dto.MetricFamily) (VLLMSample, error) {
	s := VLLMSample{Names: map[vllm.Metric]string{}}
	models := map[string]bool{}
	anyVLLM := false
	for name, f := range fams {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		anyVLLM = true
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model_name" && l.GetValue() != "" {
					models[l.GetValue()] = true
				}
			}
		}
	}
	if !anyVLLM {
		return s, fmt.Errorf("%w: the exposition has no vllm: metric (is this a vLLM server's /metrics?)", ErrNoVLLMMetrics)
	}
	for m := range models {
		s.Models = append(s.Models, m)
	}
	sort.Strings(s.Models)

	sum := func(m vllm.Metric) float64 {
		f, name := find(fams, m)
		if f == nil {
			return 0
		}
		total, found := 0.0, false
		for _, x := range f.GetMetric() {
			if v, ok := scalar(x); ok && v >= 0 {
				total += v
				found = true
			}
		}
		// Sums past float64's range come only from garbage; drop them.
		if !found || math.IsInf(total, 0) {
			return 0
		}
		s.Names[m] = name
		return total
	}
	s.RequestsRunning = sum(vllm.MetricRequestsRunning)
	s.RequestsWaiting = sum(vllm.MetricRequestsWaiting)
	s.PreemptionsTotal = sum(vllm.MetricPreemptions)
	s.PromptTokens = sum(vllm.MetricPromptTokens)
	s.GenerationTokens = sum(vllm.MetricGenerationTokens)

	if f, name := find(fams, vllm.MetricKVCacheUsage); f != nil {
		usage, found := 0.0, false
		for _, x := range f.GetMetric() {
			if v, ok := scalar(x); ok && v >= 0 {
				usage = math.Max(usage, math.Min(v, 1))
				found = true
			}
		}
		if found {
			s.KVCacheUsage = usage
			s.Names[vllm.MetricKVCacheUsage] = name
		}
	}

	if f, name := find(fams, vllm.MetricTTFT); f != nil {
		for _, x := range f.GetMetric() {
			if h, ok := histogram(x); ok {
				s.TTFT = s.TTFT.add(h)
				s.Names[vllm.MetricTTFT] = name
			}
		}
		if math.IsInf(s.TTFT.Count, 0) || math.IsInf(s.TTFT.Sum, 0) {
			s.TTFT = Histogram{}
			delete(s.Names, vllm.MetricTTFT)
		}
		if p99, ok := s.TTFT.Quantile(0.99); ok {
			s.TTFTP99Seconds = p99
		}
	}

	if f, ok := fams[processStartTime]; ok && len(f.GetMetric()) > 0 {
		if v, ok := scalar(f.GetMetric()[0]); ok && v > 0 {
			s.ProcessStartTimeSeconds = v
		}
	}

	if f, name := find(fams, vllm.MetricCacheConfig); f != nil && len(f.GetMetric()) > 0 {
		s.CacheConfig = cacheConfig(f.GetMetric()[0])
		s.Names[vllm.MetricCacheConfig] = name
	}
	return s, nil
}

// processStartTime is the process collector's gauge of Python's
// prometheus_client (and Go's client_golang): the process's start as Unix
// seconds.
const processStartTime = "process_start_time_seconds"

// find returns the family of m under its newest name present.
func find(fams map[string]*dto.MetricFamily, m vllm.Metric) (*dto.MetricFamily, string) {
	for _, name := range vllm.MetricWireNames(m) {
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			return f, name
		}
	}
	return nil, ""
}

// scalar reads a gauge, counter or untyped sample; NaN and ±Inf are no value.
func scalar(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.GetGauge() != nil:
		v = m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		v = m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		v = m.GetUntyped().GetValue()
	default:
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func histogram(m *dto.Metric) (Histogram, bool) {
	dh := m.GetHistogram()
	if dh == nil {
		return Histogram{}, false
	}
	h := Histogram{Count: dh.GetSampleCountFloat(), Sum: dh.GetSampleSum()}
	if h.Count == 0 {
		h.Count = float64(dh.GetSampleCount())
	}
	for _, b := range dh.GetBucket() {
		c := b.GetCumulativeCountFloat()
		if c == 0 {
			c = float64(b.GetCumulativeCount())
		}
		ub := b.GetUpperBound()
		if math.IsNaN(ub) || math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			return Histogram{}, false
		}
		h.Buckets = append(h.Buckets, Bucket{UpperBound: ub, Count: c})
	}
	if math.IsNaN(h.Count) || math.IsInf(h.Count, 0) || h.Count < 0 || math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) {
		return Histogram{}, false
	}
	sort.SliceStable(h.Buckets, func(i, j int) bool { return h.Buckets[i].UpperBound < h.Buckets[j].UpperBound })
	// Cumulative counts never fall with the bound; where they do the text
	// was hand-edited or torn, and no quantile from it can be trusted.
	for i := 1; i < len(h.Buckets); i++ {
		if h.Buckets[i].Count < h.Buckets[i-1].Count {
			return Histogram{}, false
		}
	}
	return h, true
}

func cacheConfig(m *dto.Metric) CacheConfig {
	var c CacheConfig
	for _, l := range m.GetLabel() {
		v := l.GetValue()
		switch l.GetName() {
		case "block_size":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				c.BlockSize = n
			}
		case "num_gpu_blocks":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				c.NumGPUBlocks = n
			}
		case "gpu_memory_utilization":
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f <= 1 {
				c.GPUMemoryUtilization = f
			}
		case "cache_dtype":
			c.CacheDtype = v
		case LabelSimulated:
			c.Simulated = v == "true"
		}
	}
	return c
}
