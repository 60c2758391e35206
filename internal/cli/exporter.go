package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/telemetry"
)

type exporterFlags struct {
	listen        string
	metricsURL    string
	nvidiaSMI     string
	noGPU         bool
	minFree       string
	window        time.Duration
	scrapeTimeout time.Duration
	plan          planFlags
}

func newExporterCmd(env Env) *cobra.Command {
	f := exporterFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "exporter --listen :9400 --url URL [-- vllm serve ...]",
		Short: "Serve gauges an HPA or KEDA can scale on: KV usage, queue, GPU headroom, OOM risk",
		Long: `Serves Prometheus gauges at /metrics. Each scrape of the exporter scrapes vLLM's
/metrics once (bounded by --scrape-timeout) and reads GPU memory, so no value is
older than the scrape that asks for it:

  headroom_up                              1 when vLLM's /metrics answered
  headroom_kv_cache_usage                  KV-cache blocks in use, 0..1
  headroom_queue_depth                     requests waiting
  headroom_requests_running                requests running
  headroom_preemptions_per_minute          over --window
  headroom_ttft_p99_seconds                over --window (since start until it has data)
  headroom_oom_risk                        0..1, see below
  headroom_gpu_memory_used_bytes{gpu,uuid}
  headroom_gpu_memory_total_bytes{gpu,uuid}
  headroom_gpu_memory_headroom_bytes{gpu,uuid}   free minus what must stay free
  headroom_gpu_memory_required_free_bytes  --min-free, or the plan's margin
  headroom_vllm_restarts_total             times vLLM was seen starting anew (a crash, a CUDA OOM)
  headroom_vllm_num_gpu_blocks             KV blocks vLLM allocated (vllm:cache_config_info)
  headroom_vllm_gpu_memory_utilization     the utilization vLLM runs with (same source)

With the model given, the plan as well (for dashboards, and to see vLLM drift
from it):

  headroom_plan_memory_bytes{part}         weights, activation, non_torch, cuda_graphs, kv_cache, cuda_context
  headroom_plan_gpu_total_bytes            the GPU total the plan assumed
  headroom_plan_footprint_bytes            what the card holds once vLLM serves
  headroom_plan_num_gpu_blocks             KV blocks the plan predicts
  headroom_plan_gpu_memory_utilization     the utilization planned for

What must stay free is --min-free, or, when the model is given (--model, or the
vLLM command after --), the planner's margin: the GPU's total minus vLLM's
planned footprint.

headroom_oom_risk = 1 - (1 - K·(1+Q)/2)·(1 - P)·(1 - G), with
  K = clamp((kv_usage - 0.8) / 0.2)   Q = waiting / (waiting + running)
  P = min(1, preemptions per minute / 10)   G = clamp(1 - free / required_free)

Without GPU access (a sidecar with no device) only the vLLM gauges are served,
and the plan's only when --gpu names the GPU. A vLLM gauge whose value the
server did not export, or exported as NaN, a negative or an impossible count,
is left out (absent, never 0; the log says which); headroom_oom_risk is
served only with the KV usage it rests on.
SIGINT or SIGTERM shuts it down gracefully.`,
		Example: `  headroom exporter --listen :9400 --url http://localhost:8000/metrics
  headroom exporter --url localhost:8000 --min-free 2GiB
  headroom exporter --url localhost:8000 -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384`,
		RunE: func(cmd *cobra.Command, args []string) error { return runExporter(cmd, env, f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":9400", "address to serve /metrics on")
	fl.StringVar(&f.metricsURL, "url", "", "the vLLM server's URL or its metrics URL, e.g. http://localhost:8000/metrics (the flag watch and loadtest name the same)")
	// The old name stays, hidden: the chart and manifests written for it
	// keep working.
	fl.StringVar(&f.metricsURL, "metrics-url", "", "deprecated: use --url")
	_ = fl.MarkHidden("metrics-url")
	fl.StringVar(&f.nvidiaSMI, "nvidia-smi", "", "read GPUs through this nvidia-smi binary instead of NVML")
	fl.BoolVar(&f.noGPU, "no-gpu", false, "serve no GPU gauges")
	fl.StringVar(&f.minFree, "min-free", "", "free memory each GPU must keep, e.g. 2GiB (default: the plan's margin when the model is given)")
	fl.DurationVar(&f.window, "window", telemetry.DefaultWindow, "span of the preemption rate and the TTFT p99")
	fl.DurationVar(&f.scrapeTimeout, "scrape-timeout", telemetry.DefaultScrapeTimeout, "time limit of one scrape of vLLM")
	addTelemetryPlanFlags(cmd, &f.plan)
	return cmd
}

func runExporter(cmd *cobra.Command, env Env, f exporterFlags, args []string) error {
	if f.metricsURL == "" {
		return badInput("no --url: give the vLLM server's, e.g. http://localhost:8000/metrics")
	}
	url, err := telemetry.NormalizeMetricsURL(f.metricsURL)
	if err != nil {
		return badInput("%v", err)
	}
	if f.window <= 0 || f.scrapeTimeout <= 0 {
		return badInput("--window and --scrape-timeout must be positive")
	}
	if f.noGPU && f.nvidiaSMI != "" {
		return badInput("give either --no-gpu or --nvidia-smi, not both")
	}
	// main cancels the context on SIGINT and SIGTERM (how Kubernetes stops a pod).
	ctx := cmd.Context()
	log := slog.New(slog.NewTextHandler(env.Stderr, nil))

	var reader telemetry.GPUReader
	var gpus []telemetry.GPU
	var noGPU error
	if !f.noGPU {
		reader, gpus, err = telemetry.OpenAndRead(ctx, telemetry.OpenOptions{SMIPath: f.nvidiaSMI})
		switch {
		case err == nil:
			defer reader.Close()
			log.Info("reading GPUs", "source", reader.Source(), "via", telemetry.Via(reader), "count", len(gpus))
		case f.nvidiaSMI != "" || !errors.Is(err, telemetry.ErrNoGPU):
			return usageError{err}
		default:
			noGPU, reader = err, nil
		}
	}
	// Without a GPU to read and none named, the plan has no card to be
	// made for: a sidecar with no device serves the vLLM gauges, as the
	// help says, and one line says what is left out and how to get it.
	planned := f.plan.model != "" || cmd.ArgsLenAtDash() >= 0
	unplanned := reader == nil && planned && f.plan.gpuName == "" && f.plan.gpuMemory == "" && f.minFree == ""
	switch {
	case unplanned:
		msg := "serving the vLLM gauges only: no GPU gauges, and no plan gauges, as no GPU is visible or named (give --gpu to serve the plan's)"
		if noGPU != nil {
			log.Warn(msg, "reason", noGPU)
		} else {
			log.Warn(msg)
		}
	case noGPU != nil:
		log.Warn("serving no GPU gauges", "reason", noGPU)
	}
	var req report.RequiredFree
	if !unplanned {
		if req, err = planRequiredFree(cmd, env, f.plan, f.minFree, args, gpus); err != nil {
			return err
		}
	}
	for _, n := range req.Notes {
		log.Info("plan: " + n)
	}
	if req.Bytes > 0 {
		log.Info("GPU margin", "required_free", memory.GiB(req.Bytes), "why", req.Why)
	}
	scraper := &telemetry.Scraper{URL: url, Timeout: f.scrapeTimeout}
	if _, err := scraper.Scrape(ctx); err != nil {
		// vLLM often starts after its sidecar: serve anyway, headroom_up says 0.
		log.Warn("vLLM not readable yet", "err", err)
	}
	exp := telemetry.NewExporter(telemetry.ExporterOptions{Scraper: scraper, GPUs: reader,
		RequiredFreeBytes: req.Bytes, Plan: req.Plan, Window: f.window, Log: log})
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return badInput("cannot listen on %s: %v", f.listen, err)
	}
	log.Info("serving", "addr", "http://"+ln.Addr().String()+"/metrics", "vllm", telemetry.RedactURL(url))
	if err := telemetry.Serve(ctx, ln, exp.Handler()); err != nil {
		return fmt.Errorf("serving %s: %v", f.listen, err)
	}
	log.Info("stopped")
	return nil
}
