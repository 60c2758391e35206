package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// The exporter's metric names. Package monitoring's alert rules and
// dashboard name them from here.
const (
	MetricUp                   = "headroom_up"
	MetricKVCacheUsage         = "headroom_kv_cache_usage"
	MetricQueueDepth           = "headroom_queue_depth"
	MetricRequestsRunning      = "headroom_requests_running"
	MetricPreemptionsPerMinute = "headroom_preemptions_per_minute"
	MetricTTFTP99              = "headroom_ttft_p99_seconds"
	MetricOOMRisk              = "headroom_oom_risk"
	MetricGPUUsed              = "headroom_gpu_memory_used_bytes"
	MetricGPUTotal             = "headroom_gpu_memory_total_bytes"
	MetricGPUHeadroom          = "headroom_gpu_memory_headroom_bytes"
	MetricGPURequiredFree      = "headroom_gpu_memory_required_free_bytes"
	// MetricVLLMRestarts counts the times the exporter saw vLLM start
	// anew: its process start time changed or its counters fell back. A
	// CUDA out-of-memory error kills the engine, so it shows here.
	MetricVLLMRestarts = "headroom_vllm_restarts_total"
	// MetricVLLMNumGPUBlocks and MetricVLLMUtilization are what vLLM says
	// of itself in vllm:cache_config_info's labels, as numbers.
	MetricVLLMNumGPUBlocks = "headroom_vllm_num_gpu_blocks"
	MetricVLLMUtilization  = "headroom_vllm_gpu_memory_utilization"
	MetricPlanMemory       = "headroom_plan_memory_bytes"
	MetricPlanTotal        = "headroom_plan_gpu_total_bytes"
	MetricPlanFootprint    = "headroom_plan_footprint_bytes"
	MetricPlanNumGPUBlocks = "headroom_plan_num_gpu_blocks"
	MetricPlanUtilization  = "headroom_plan_gpu_memory_utilization"
)

// The values of headroom_plan_memory_bytes' part label: one GPU's share of
// the plan, as `headroom plan` draws the card.
const (
	PartWeights    = "weights"
	PartActivation = "activation"
	PartNonTorch   = "non_torch"
	PartCUDAGraphs = "cuda_graphs"
	PartKVCache    = "kv_cache"
	PartContext    = "cuda_context"
)

// ExporterOptions configure an Exporter.
type ExporterOptions struct {
	// Scraper reads the vLLM server; each Prometheus scrape of the
	// exporter scrapes vLLM once (bounded by the scraper's timeout), so the
	// numbers are never older than the request that asks for them.
	Scraper *Scraper
	// GPUs reads GPU memory; nil serves no GPU gauges.
	GPUs GPUReader
	// RequiredFreeBytes is the free memory each GPU must keep (the plan's
	// margin or --min-free); it is subtracted from free memory to give
	// headroom, and feeds the risk's G term. 0 when unknown.
	RequiredFreeBytes int64
	// Plan is the plan of the server the exporter watches, when the model
	// was given: its parts are served as the headroom_plan_* gauges, so a
	// dashboard puts them beside what the GPU reports and an alert can
	// compare vLLM's own cache configuration with them. Nil serves none.
	Plan *memory.Budget
	// Window is the span of rates; 0 is DefaultWindow.
	Window time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Log receives scrape failures; nil discards them.
	Log *slog.Logger
}

// Exporter is a prometheus.Collector serving headroom's gauges for
// autoscalers (HPA through prometheus-adapter, KEDA's prometheus scaler).
type Exporter struct {
	opt ExporterOptions
	reg *prometheus.Registry

	// scraping lets one Collect at a time read vLLM: a scrape holds up to
	// MaxExpositionBytes of reading buffers and chunks, and concurrent
	// scrapers of the exporter (an HA pair of Prometheus, a probe, a
	// person with curl) would multiply it past the chart's limit.
	scraping sync.Mutex
	mu       sync.Mutex
	monitor  *Monitor
	// loggedBlocks is the block count whose gap from the plan was last
	// logged, so that a server far below the plan is logged once, not at
	// every scrape.
	loggedBlocks int64
	// loggedDropped is the last list of left-out values logged, so that
	// the same ones are logged once.
	loggedDropped string

	up, kv, waiting, running, preemptions, ttft, risk *prometheus.Desc
	used, total, headroom, required                   *prometheus.Desc
	restarts, vllmBlocks, vllmUtil                    *prometheus.Desc
	planMem, planTotal, planFootprint                 *prometheus.Desc
	planBlocks, planUtil                              *prometheus.Desc
}

// NewExporter returns an exporter with its own registry (not the global
// one, so tests and embedders get only these gauges).
func NewExporter(opt ExporterOptions) *Exporter {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	gpuLabels := []string{"gpu", "uuid"}
	e := &Exporter{
		opt:     opt,
		monitor: NewMonitor(AlertRules{RequiredFreeBytes: opt.RequiredFreeBytes}, opt.Window),
		up: prometheus.NewDesc(MetricUp,
			"1 when the last scrape of vLLM's /metrics succeeded, else 0.", nil, nil),
		kv: prometheus.NewDesc(MetricKVCacheUsage,
			"Fraction (0..1) of vLLM's KV-cache blocks in use; the fullest engine's.", nil, nil),
		waiting: prometheus.NewDesc(MetricQueueDepth,
			"Requests waiting for admission (vllm:num_requests_waiting).", nil, nil),
		running: prometheus.NewDesc(MetricRequestsRunning,
			"Requests in the running batch (vllm:num_requests_running).", nil, nil),
		preemptions: prometheus.NewDesc(MetricPreemptionsPerMinute,
			"Preemptions per minute over the exporter's window.", nil, nil),
		ttft: prometheus.NewDesc(MetricTTFTP99,
			"99th percentile of time to first token over the window, or since vLLM started before the window has data.", nil, nil),
		risk: prometheus.NewDesc(MetricOOMRisk,
			"Memory-pressure risk 0..1 combining KV usage, waiting share, preemption rate and GPU headroom (see telemetry.OOMRisk).", nil, nil),
		used: prometheus.NewDesc(MetricGPUUsed,
			"GPU memory in use, as the driver reports it.", gpuLabels, nil),
		total: prometheus.NewDesc(MetricGPUTotal,
			"GPU memory in all, as the driver reports it.", gpuLabels, nil),
		headroom: prometheus.NewDesc(MetricGPUHeadroom,
			"Free GPU memory beyond the required margin (free - required); negative when the margin is eaten.", gpuLabels, nil),
		required: prometheus.NewDesc(MetricGPURequiredFree,
			"Free memory each GPU must keep: the plan's margin or --min-free.", nil, nil),
		restarts: prometheus.NewDesc(MetricVLLMRestarts,
			"Times the exporter saw vLLM start anew (its start time changed or its counters fell back): a crash, e.g. a CUDA out-of-memory error, or a restart.", nil, nil),
		vllmBlocks: prometheus.NewDesc(MetricVLLMNumGPUBlocks,
			"KV-cache blocks vLLM allocated (vllm:cache_config_info's num_gpu_blocks).", nil, nil),
		vllmUtil: prometheus.NewDesc(MetricVLLMUtilization,
			"--gpu-memory-utilization vLLM runs with (vllm:cache_config_info's gpu_memory_utilization).", nil, nil),
		planMem: prometheus.NewDesc(MetricPlanMemory,
			"One GPU's share of the plan, by part, as headroom plan computes it.", []string{"part"}, nil),
		planTotal: prometheus.NewDesc(MetricPlanTotal,
			"The GPU memory the plan assumed (what CUDA reports as total).", nil, nil),
		planFootprint: prometheus.NewDesc(MetricPlanFootprint,
			"What the plan says one GPU holds once vLLM serves: CUDA context, the budget and what is outside it.", nil, nil),
		planBlocks: prometheus.NewDesc(MetricPlanNumGPUBlocks,
			"KV-cache blocks the plan predicts.", nil, nil),
		planUtil: prometheus.NewDesc(MetricPlanUtilization,
			"--gpu-memory-utilization the plan was made for.", nil, nil),
	}
	e.reg = prometheus.NewRegistry()
	e.reg.MustRegister(e)
	return e
}

// Describe sends the descriptors of every gauge.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{e.up, e.kv, e.waiting, e.running, e.preemptions, e.ttft, e.risk,
		e.used, e.total, e.headroom, e.required, e.restarts, e.vllmBlocks, e.vllmUtil,
		e.planMem, e.planTotal, e.planFootprint, e.planBlocks, e.planUtil} {
		ch <- d
	}
}

// Collect scrapes vLLM and reads the GPUs, then sends the gauges. A part
// that cannot be read is left out (and headroom_up says so for vLLM)
// rather than sent stale.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	var sample *VLLMSample
	e.scraping.Lock()
	defer e.scraping.Unlock()
	if e.opt.Scraper != nil {
		s, err := e.opt.Scraper.Scrape(ctx)
		if err != nil {
			e.opt.Log.Warn("vLLM scrape failed", "err", err)
		} else {
			sample = &s
		}
	}
	var gpus []GPU
	if e.opt.GPUs != nil {
		g, err := e.opt.GPUs.GPUs(ctx)
		if err != nil {
			e.opt.Log.Warn("GPU reading failed", "source", e.opt.GPUs.Source(), "err", err)
		} else {
			gpus = g
		}
	}
	e.mu.Lock()
	r, _ := e.monitor.Observe(e.opt.Now(), sample, gpus)
	restarts := e.monitor.Restarts()
	e.logKVGap(sample)
	e.logDropped(sample)
	e.mu.Unlock()

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if e.opt.Scraper != nil {
		if sample != nil {
			gauge(e.up, 1)
		} else {
			gauge(e.up, 0)
		}
	}
	if sample != nil {
		// A quantity the server did not export, or exported as NaN, a
		// negative or an impossible count (VLLMSample.Dropped), has no
		// gauge: absent, never 0, so an autoscaler or an alert reads
		// "unknown", not "idle".
		if sample.Has(vllm.MetricKVCacheUsage) {
			gauge(e.kv, sample.KVCacheUsage)
			// The risk rests on the KV usage; without it, it would read
			// as no pressure.
			gauge(e.risk, r.OOMRisk)
		}
		if sample.Has(vllm.MetricRequestsWaiting) {
			gauge(e.waiting, sample.RequestsWaiting)
		}
		if sample.Has(vllm.MetricRequestsRunning) {
			gauge(e.running, sample.RequestsRunning)
		}
		if sample.Has(vllm.MetricPreemptions) {
			gauge(e.preemptions, r.Delta.PreemptionsPerMinute)
		}
		if r.TTFTKnown {
			gauge(e.ttft, r.TTFTP99Seconds)
		}
		if c := sample.CacheConfig; c.NumGPUBlocks > 0 {
			gauge(e.vllmBlocks, float64(c.NumGPUBlocks))
		}
		if c := sample.CacheConfig; c.GPUMemoryUtilization > 0 {
			gauge(e.vllmUtil, c.GPUMemoryUtilization)
		}
	}
	if e.opt.Scraper != nil {
		ch <- prometheus.MustNewConstMetric(e.restarts, prometheus.CounterValue, float64(restarts))
	}
	if b := e.opt.Plan; b != nil {
		p := b.PerGPU
		for _, part := range []struct {
			name  string
			bytes int64
		}{{PartWeights, p.Weights}, {PartActivation, p.Activation}, {PartNonTorch, p.NonTorch},
			{PartCUDAGraphs, p.CUDAGraph}, {PartKVCache, p.KVCache}, {PartContext, p.Context}} {
			gauge(e.planMem, float64(part.bytes), part.name)
		}
		gauge(e.planTotal, float64(p.Total))
		gauge(e.planFootprint, float64(b.Footprint))
		gauge(e.planBlocks, float64(b.NumBlocks))
		gauge(e.planUtil, b.Settings.GPUMemoryUtilization)
	}
	if e.opt.RequiredFreeBytes > 0 {
		gauge(e.required, float64(e.opt.RequiredFreeBytes))
	}
	for _, g := range gpus {
		idx := strconv.Itoa(g.Index)
		if g.UsedBytes != Unknown {
			gauge(e.used, float64(g.UsedBytes), idx, g.UUID)
		}
		if g.TotalBytes != Unknown {
			gauge(e.total, float64(g.TotalBytes), idx, g.UUID)
		}
		if g.FreeBytes != Unknown {
			gauge(e.headroom, float64(g.FreeBytes-e.opt.RequiredFreeBytes), idx, g.UUID)
		}
	}
}

// maxExporterScrapes bounds the scrapes of the exporter in flight (they
// wait on one another for vLLM: Collect); past it promhttp answers 503.
const maxExporterScrapes = 8

// Handler serves the exporter's registry at /metrics, and a short page at /.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(e.opt.Log.Handler(), slog.LevelError),
		MaxRequestsInFlight: maxExporterScrapes}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("headroom exporter: gauges at /metrics\n"))
	})
	return mux
}

// Serve serves h on ln until ctx is cancelled, then shuts down gracefully:
// requests in flight get up to 5 seconds to finish. A clean shutdown
// returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	return graceful.Serve(ctx, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln)
}

// logDropped logs, once per new list, the values of vLLM's exposition
// left out of the gauges (VLLMSample.Dropped): the gauge is absent, and
// the log says why. Called with e.mu held.
func (e *Exporter) logDropped(sample *VLLMSample) {
	if sample == nil {
		return
	}
	list := strings.Join(sample.Dropped, "; ")
	if list == e.loggedDropped {
		return
	}
	e.loggedDropped = list
	if list != "" {
		e.opt.Log.Warn("vLLM's /metrics held values no server exports; their gauges are not served", "left_out", list)
	}
}

// logKVGap compares the blocks vLLM reports with the plan's
// (memory.CompareKV) and logs, once per new count, a server far below
// the plan with the cause and the fix: the gauges carry the numbers, the
// log why. A simulated stand-in is logged as such. Called with e.mu held.
func (e *Exporter) logKVGap(sample *VLLMSample) {
	b := e.opt.Plan
	if sample == nil || b == nil {
		return
	}
	c := sample.CacheConfig
	if c.NumGPUBlocks == e.loggedBlocks {
		return
	}
	in := memory.Input{Model: b.Model, Device: b.Device, Count: b.Count, Settings: b.Settings}
	g, ok := memory.CompareKV(in, *b, memory.EngineCache{NumGPUBlocks: c.NumGPUBlocks, BlockSize: c.BlockSize, GPUMemoryUtilization: c.GPUMemoryUtilization})
	if !ok {
		return
	}
	e.loggedBlocks = c.NumGPUBlocks
	if g.Far {
		e.opt.Log.Warn("vLLM's KV cache is far below the plan", "share", strconv.FormatFloat(g.Share, 'f', 3, 64),
			"blocks", g.ActualBlocks, "planned_blocks", g.PredictedBlocks, "simulated", c.Simulated, "cause", g.Cause, "fix", g.Fix)
	}
}
