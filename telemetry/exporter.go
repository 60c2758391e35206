package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"headroom.dev/headroom/graceful"
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

	mu      sync.Mutex
	monitor *Monitor

	up, kv, waiting, running, preemptions, ttft, risk *prometheus.Desc
	used, total, headroom, required                   *prometheus.Desc
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
		up: prometheus.NewDesc("headroom_up",
			"1 when the last scrape of vLLM's /metrics succeeded, else 0.", nil, nil),
		kv: prometheus.NewDesc("headroom_kv_cache_usage",
			"Fraction (0..1) of vLLM's KV-cache blocks in use; the fullest engine's.", nil, nil),
		waiting: prometheus.NewDesc("headroom_queue_depth",
			"Requests waiting for admission (vllm:num_requests_waiting).", nil, nil),
		running: prometheus.NewDesc("headroom_requests_running",
			"Requests in the running batch (vllm:num_requests_running).", nil, nil),
		preemptions: prometheus.NewDesc("headroom_preemptions_per_minute",
			"Preemptions per minute over the exporter's window.", nil, nil),
		ttft: prometheus.NewDesc("headroom_ttft_p99_seconds",
			"99th percentile of time to first token over the window, or since vLLM started before the window has data.", nil, nil),
		risk: prometheus.NewDesc("headroom_oom_risk",
			"Memory-pressure risk 0..1 combining KV usage, waiting share, preemption rate and GPU headroom (see telemetry.OOMRisk).", nil, nil),
		used: prometheus.NewDesc("headroom_gpu_memory_used_bytes",
			"GPU memory in use, as the driver reports it.", gpuLabels, nil),
		total: prometheus.NewDesc("headroom_gpu_memory_total_bytes",
			"GPU memory in all, as the driver reports it.", gpuLabels, nil),
		headroom: prometheus.NewDesc("headroom_gpu_memory_headroom_bytes",
			"Free GPU memory beyond the required margin (free - required); negative when the margin is eaten.", gpuLabels, nil),
		required: prometheus.NewDesc("headroom_gpu_memory_required_free_bytes",
			"Free memory each GPU must keep: the plan's margin or --min-free.", nil, nil),
	}
	e.reg = prometheus.NewRegistry()
	e.reg.MustRegister(e)
	return e
}

// Describe sends the descriptors of every gauge.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{e.up, e.kv, e.waiting, e.running, e.preemptions, e.ttft, e.risk,
		e.used, e.total, e.headroom, e.required} {
		ch <- d
	}
}

// Collect scrapes vLLM and reads the GPUs, then sends the gauges. A part
// that cannot be read is left out (and headroom_up says so for vLLM)
// rather than sent stale.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	var sample *VLLMSample
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
		gauge(e.kv, sample.KVCacheUsage)
		gauge(e.waiting, sample.RequestsWaiting)
		gauge(e.running, sample.RequestsRunning)
		gauge(e.preemptions, r.Delta.PreemptionsPerMinute)
		if r.TTFTKnown {
			gauge(e.ttft, r.TTFTP99Seconds)
		}
		gauge(e.risk, r.OOMRisk)
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

// Handler serves the exporter's registry at /metrics, and a short page at /.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(e.opt.Log.Handler(), slog.LevelError)}))
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
