package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

type watchFlags struct {
	metricsURL  string
	snapshot    bool
	nvidiaSMI   string
	count       int
	interval    time.Duration
	window      time.Duration
	output      string
	alerts      string
	kvThreshold float64
	kvReadings  int
	minFree     string
	plan        planFlags
}

func newWatchCmd(env Env) *cobra.Command {
	f := watchFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "watch --url URL [--snapshot] [--count N] [--interval 2s] [-o json] [--alerts FILE] [-- vllm serve ...]",
		Short: "Watch a vLLM server's KV cache, queue, preemptions, TTFT and GPU memory together",
		Long: `Scrapes a vLLM server's /metrics (the metric names of old and new releases) and,
with --snapshot, reads GPU memory, then prints one live line per reading: GPU
used/total, KV-cache usage, running and waiting requests, preemptions per minute,
TTFT p99 (over the last --window) and the OOM risk (0..1, see the exporter);
with speculative decoding, the share of drafts accepted over the window and the
per-token acceptance it implies (what simulate --acceptance-rate takes).

Alerts go to stderr and, with --alerts, to a JSON-lines file:
  kv_pressure   KV usage at or above --kv-threshold for --kv-readings readings
                in a row while requests wait
  preemptions   vLLM preempted requests since the last reading
  gpu_headroom  a GPU's free memory fell under what must stay free: --min-free,
                or the plan's margin (total minus vLLM's planned footprint) when
                the model is given (--model, or the vLLM command after --)
An alert is raised when its condition starts, and again only after it clears.

-o json prints one object per reading with kv_cache_usage (0..1),
num_requests_running, num_requests_waiting, num_preemptions_total,
preemptions_per_minute, ttft_p99_seconds (over the window; null when the window
saw no first token), oom_risk, gpu_used_bytes and
gpu_total_bytes (summed over GPUs), gpu_min_free_bytes, the GPUs, the
alerts it raised, and spec_decode (the window's drafts, docs/speculative.md)
when the server decodes speculatively; values not known are null.`,
		Example: `  headroom watch --url http://localhost:8000/metrics
  headroom watch --url vllm.llm.svc:8000 --snapshot --alerts alerts.jsonl
  headroom watch --url localhost:8000 --snapshot -- vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768
  headroom watch --url localhost:8000 --count 30 -o json > readings.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error { return runWatch(cmd, env, f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.metricsURL, "url", "", "the vLLM server's URL or its metrics URL, e.g. http://localhost:8000/metrics (the flag loadtest names the same)")
	// The old name stays, hidden and deprecated: scripts written for it
	// keep working, and a note on stderr names the new one.
	fl.StringVar(&f.metricsURL, "metrics-url", "", "deprecated: use --url")
	_ = fl.MarkHidden("metrics-url")
	fl.BoolVar(&f.snapshot, "snapshot", false, "read GPU memory too (NVML, or nvidia-smi)")
	fl.StringVar(&f.nvidiaSMI, "nvidia-smi", "", "read GPUs through this nvidia-smi binary (implies --snapshot)")
	fl.IntVar(&f.count, "count", 0, "stop after N readings; 0 runs until interrupted")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "time between readings")
	fl.DurationVar(&f.window, "window", telemetry.DefaultWindow, "span of the preemption rate and the TTFT p99")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table (a live line; also text), json (one object per line) or yaml (one document per reading)")
	fl.StringVar(&f.alerts, "alerts", "", "append alerts to this JSON-lines file")
	fl.Float64Var(&f.kvThreshold, "kv-threshold", telemetry.DefaultKVThreshold, "KV-cache usage (0..1) that counts as pressure")
	fl.IntVar(&f.kvReadings, "kv-readings", telemetry.DefaultKVReadings, "readings in a row above --kv-threshold before the alert")
	fl.StringVar(&f.minFree, "min-free", "", "free memory each GPU must keep, e.g. 2GiB (default: the plan's margin when the model is given)")
	addTelemetryPlanFlags(cmd, &f.plan)
	return cmd
}

// addTelemetryPlanFlags registers the deployment whose plan says how
// much memory must stay free.
func addTelemetryPlanFlags(cmd *cobra.Command, f *planFlags) {
	addDeploymentFlags(cmd.Flags(), f, "the served model, to ask the planner how much memory must stay free",
		"GPU for the plan (default: the name the GPU reports)", "the vLLM version whose rules the plan uses")
	cmd.Flags().BoolVar(&f.enforceEager, "enforce-eager", false, "vLLM --enforce-eager")
}

// planRequiredFree is the free memory each GPU must keep: --min-free, or
// the plan's margin when the model is given (the GPU, unless named, the
// one read); with neither, none.
func planRequiredFree(cmd *cobra.Command, env Env, f planFlags, minFree string, args []string, gpus []telemetry.GPU) (report.RequiredFree, error) {
	pasted := cmd.ArgsLenAtDash() >= 0
	switch {
	case minFree != "" && (f.model != "" || pasted):
		return report.RequiredFree{}, badInput("give either --min-free or the model (--model, -- vllm serve ...), not both")
	case minFree != "":
		n, err := gpu.ParseBytes(minFree)
		if err != nil {
			return report.RequiredFree{}, badInput("--min-free: %v", err)
		}
		return report.RequiredFree{Bytes: n, Why: "--min-free"}, nil
	case f.model == "" && !pasted && len(args) > 0:
		return report.RequiredFree{}, badInput("unexpected argument %q: paste the vLLM command after --", args[0])
	case f.model == "" && !pasted:
		return report.RequiredFree{}, nil
	}
	if f.gpuName == "" && f.gpuMemory == "" && len(gpus) > 0 {
		f.gpuName = gpus[0].Name
	}
	e, err := gather(cmd.Context(), cmd, env, f, args)
	if err != nil {
		return report.RequiredFree{}, err
	}
	r, err := report.PlanRequiredFree(e)
	if err != nil {
		return r, usageError{err}
	}
	return r, nil
}

func runWatch(cmd *cobra.Command, env Env, f watchFlags, args []string) error {
	ctx := cmd.Context()
	if cmd.Flags().Changed("metrics-url") {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: --metrics-url is deprecated; use --url")
	}
	if f.output == "table" {
		f.output = "text"
	}
	if f.output != "text" && f.output != "json" && f.output != "yaml" {
		return badInput("unknown output format %q: use table, json or yaml", f.output)
	}
	switch {
	case f.count < 0:
		return badInput("--count must be 0 (until interrupted) or more")
	case f.interval <= 0:
		return badInput("--interval must be positive, e.g. 2s")
	case f.window <= 0:
		return badInput("--window must be positive, e.g. 1m")
	case !(f.kvThreshold > 0 && f.kvThreshold <= 1):
		return badInput("--kv-threshold must be a fraction in (0, 1], e.g. 0.9")
	case f.kvReadings < 1:
		return badInput("--kv-readings must be 1 or more")
	}
	if f.metricsURL == "" {
		return badInput("no --url: give the vLLM server's, e.g. http://localhost:8000/metrics")
	}
	url, err := telemetry.NormalizeMetricsURL(f.metricsURL)
	if err != nil {
		return badInput("%v", err)
	}

	var reader telemetry.GPUReader
	var gpus []telemetry.GPU
	if f.snapshot || f.nvidiaSMI != "" {
		if reader, gpus, err = telemetry.OpenAndRead(ctx, telemetry.OpenOptions{SMIPath: f.nvidiaSMI}); err != nil {
			return usageError{err}
		}
		defer reader.Close()
		fmt.Fprintf(env.Stderr, "headroom: note: GPU memory through %s\n", telemetry.Via(reader))
	}
	req, err := planRequiredFree(cmd, env, f.plan, f.minFree, args, gpus)
	if err != nil {
		return err
	}
	for _, n := range req.Notes {
		fmt.Fprintf(env.Stderr, "headroom: note: %s\n", n)
	}
	if req.Bytes > 0 {
		if reader == nil {
			return badInput("the GPU headroom alert needs GPU readings: add --snapshot")
		}
		fmt.Fprintf(env.Stderr, "headroom: alerting when a GPU has less than %s free (%s)\n", memory.GiB(req.Bytes), req.Why)
	}
	var alertFile *telemetry.LineFile
	if f.alerts != "" {
		if alertFile, err = telemetry.OpenLineFile(f.alerts, telemetry.LineFileOptions{}); err != nil {
			return usageError{err}
		}
		defer alertFile.Close()
	}

	mon := telemetry.NewMonitor(telemetry.AlertRules{KVThreshold: f.kvThreshold, KVReadings: f.kvReadings,
		RequiredFreeBytes: req.Bytes, RequiredFreeWhy: req.Why}, f.window)
	var line *progress.Line // the live line of -o text on a terminal
	if f.output == "text" {
		line = progress.New(env.Stdout)
	}
	w := telemetry.Watcher{Scraper: &telemetry.Scraper{URL: url}, GPUs: reader, Monitor: mon, Interval: f.interval, Count: f.count}
	err = w.Run(ctx, gpus, func(r telemetry.Reading, alerts []telemetry.Alert, readErr error) error {
		return emitWatch(env, f.output, line, r, alerts, readErr, alertFile)
	})
	if err != nil {
		return usageError{err}
	}
	if line.Live() {
		fmt.Fprintln(env.Stdout)
	}
	return nil
}
func emitWatch(env Env, format string, line *progress.Line, r telemetry.Reading, alerts []telemetry.Alert, readErr error, alertFile *telemetry.LineFile) error {
	for _, a := range alerts {
		if alertFile != nil {
			b, err := json.Marshal(a)
			if err != nil {
				return err
			}
			if err := alertFile.WriteLine(b); err != nil {
				return usageError{err}
			}
		}
		line.Clear()
		fmt.Fprintf(env.Stderr, "headroom: ALERT %s: %s\n", a.Code, a.Message)
	}
	switch format {
	case "json":
		b, err := json.Marshal(r.Record(alerts, readErr))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	case "yaml":
		if _, err := fmt.Fprintln(env.Stdout, "---"); err != nil {
			return err
		}
		return writeYAML(env.Stdout, r.Record(alerts, readErr))
	}
	if line.Live() {
		line.Set(watchLine(r, readErr))
		return nil
	}
	_, err := fmt.Fprintln(env.Stdout, watchLine(r, readErr))
	return err
}

// watchLine is the live line: "14:03:07  GPU 72.9/79.6 GiB  KV 94.1%  running 48 ...".
func watchLine(r telemetry.Reading, readErr error) string {
	var b strings.Builder
	b.WriteString(r.Time.Format("15:04:05"))
	if len(r.GPUs) > 0 {
		var used, total int64
		for _, g := range r.GPUs {
			used += max(g.UsedBytes, 0)
			total += max(g.TotalBytes, 0)
		}
		fmt.Fprintf(&b, "  GPU %.1f/%.1f GiB", gibs(used), gibs(total))
	}
	if v := r.VLLM; v != nil {
		if v.Has(vllm.MetricKVCacheUsage) {
			fmt.Fprintf(&b, "  KV %.1f%%", v.KVCacheUsage*100)
		}
		fmt.Fprintf(&b, "  running %s  waiting %s", humanFloat(v.RequestsRunning), humanFloat(v.RequestsWaiting))
		fmt.Fprintf(&b, "  preempt %.1f/min", r.Delta.PreemptionsPerMinute)
		if r.TTFTKnown && r.TTFTWindowSeconds > 0 {
			// The window's own first tokens only: none in it is "-", not
			// the server's lifetime p99.
			fmt.Fprintf(&b, "  TTFT p99 %.2fs", r.TTFTP99Seconds)
		} else {
			b.WriteString("  TTFT p99 -")
		}
		fmt.Fprintf(&b, "  risk %.2f", r.OOMRisk)
		if c := r.Delta.SpecDecode; c != nil {
			if a, ok := c.Acceptance(); ok {
				// The window's drafts: vLLM's own rate, then what
				// simulate --acceptance-rate takes.
				fmt.Fprintf(&b, "  drafts %.0f%% accepted (per token %.2f)", 100*a.DraftAcceptanceRate, a.TokenAcceptance)
			}
		}
		if len(v.Dropped) > 0 {
			fmt.Fprintf(&b, "  (left out: %s)", clip(strings.Join(v.Dropped, "; "), 160))
		}
	}
	if readErr != nil {
		fmt.Fprintf(&b, "  (%s)", clip(readErr.Error(), 160))
	}
	return b.String()
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
