package telemetry

import (
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"

	dto "github.com/prometheus/client_model/go"

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
	// SpecDecode are the speculative-decoding counters since the server
	// started; nil when it exports none (no --speculative-config).
	SpecDecode *vllm.SpecDecodeCounts `json:"spec_decode,omitempty"`
	// Dropped says what the exposition held that was left out: a value
	// past what any server exports (1e308 preemptions, a bucket bound of
	// a year), each once.
	Dropped []string `json:"dropped,omitempty"`
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

// MarshalJSON writes a quantity the exposition did not carry, or carried
// as a value left out (NaN, negative, past any server's: Dropped), as
// null: a value a source did not give is null, never 0.
func (s VLLMSample) MarshalJSON() ([]byte, error) {
	type plain VLLMSample
	known := func(m vllm.Metric, v float64) *float64 {
		if !s.Has(m) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		KVCacheUsage     *float64 `json:"kv_cache_usage"`
		RequestsRunning  *float64 `json:"num_requests_running"`
		RequestsWaiting  *float64 `json:"num_requests_waiting"`
		PreemptionsTotal *float64 `json:"num_preemptions_total"`
		PromptTokens     *float64 `json:"prompt_tokens_total"`
		GenerationTokens *float64 `json:"generation_tokens_total"`
	}{plain: plain(s),
		KVCacheUsage:     known(vllm.MetricKVCacheUsage, s.KVCacheUsage),
		RequestsRunning:  known(vllm.MetricRequestsRunning, s.RequestsRunning),
		RequestsWaiting:  known(vllm.MetricRequestsWaiting, s.RequestsWaiting),
		PreemptionsTotal: known(vllm.MetricPreemptions, s.PreemptionsTotal),
		PromptTokens:     known(vllm.MetricPromptTokens, s.PromptTokens),
		GenerationTokens: known(vllm.MetricGenerationTokens, s.GenerationTokens),
	})
}

// processStartTime is the process collector's gauge of Python's
// prometheus_client (and Go's client_golang): the process's start as Unix
// seconds.
const processStartTime = "process_start_time_seconds"

// scalar reads a gauge, counter or untyped sample; NaN and ±Inf are no value.
func scalar(m *dto.Metric) (float64, bool) {
	v, typed := rawScalar(m)
	if !typed || math.IsNaN(v) || math.IsInf(v, 0) {
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

// cacheConfig reads cache_config_info's labels; a block count or size
// past what any server has is left out with a note.
func (f *fold) cacheConfig(name string, m *dto.Metric) CacheConfig {
	var c CacheConfig
	for _, l := range m.GetLabel() {
		v := l.GetValue()
		switch l.GetName() {
		case "block_size":
			if n, err := strconv.Atoi(v); err == nil && n > maxBlockSize {
				f.note("%s block_size=%d is more than any server's (at most %d): left out", name, n, maxBlockSize)
			} else if err == nil && n > 0 {
				c.BlockSize = n
			}
		case "num_gpu_blocks":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > maxBlocks {
				f.note("%s num_gpu_blocks=%d is more than any server's (at most %d): left out", name, n, int64(maxBlocks))
			} else if err == nil && n > 0 {
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
	if c.NumGPUBlocks > 0 && c.BlockSize > 0 && c.NumGPUBlocks*int64(c.BlockSize) > maxKVTokens {
		f.note("%s num_gpu_blocks=%d of %d tokens is more KV cache than any server's (at most %d tokens): left out", name, c.NumGPUBlocks, c.BlockSize, int64(maxKVTokens))
		c.NumGPUBlocks = 0
	}
	return c
}
