package cli

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/workload"
)

type loadtestFlags struct {
	url, model, apiKey    string
	traffic               workload.Flags
	ignoreEOS             bool
	timeout, stallTimeout time.Duration
	slo                   string
	metricsURL            string
	interval              time.Duration
	snapshot              bool
	nvidiaSMI             string
	output                string
	plot, trace           string
	noWarmup              bool
	// the prediction: the plan's GPU and settings, simulate's step time
	plan                planFlags
	stepTime            string
	calibration, calOut string
	acceptance          float64
}

func newLoadtestCmd(env Env) *cobra.Command {
	f := loadtestFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "loadtest --url URL (--rate R | --concurrency N | --requests FILE | --bench CMD) [flags] [--gpu GPU [-- vllm serve MODEL FLAGS...]]",
		Short: "Load an OpenAI-compatible server, measure TTFT/TPOT/ITL and watch its KV cache while it runs",
		Long: `Sends streaming requests to an OpenAI-compatible server (/v1/completions, or
/v1/chat/completions with --endpoint chat) and measures them with vllm bench serve's
definitions: TTFT (sent -> first content chunk), TPOT ((E2E - TTFT) / (output
tokens - 1)), ITL (gaps between content chunks), E2E (sent -> last content chunk),
request and token throughput, goodput (requests within every per-request --slo
bound, or every --goodput target as vllm bench serve counts them, per second),
and errors by kind (http_<status>, timeout, broken_stream, bad_response,
stream_error, no_content, connect, canceled).

Traffic (the same flags as simulate): an open loop sends each request at its due
time whatever the earlier ones do (--rate R, Poisson or --arrival constant, --burst
50x30000@60s), a closed loop keeps at most --concurrency N in flight; --requests
FILE replays a request log with its own times and sizes; --bench 'vllm bench serve
...' sends that command's traffic and prints its result in bench's layout (-o
bench); --dataset-name sharegpt|custom --dataset-path FILE takes the sizes of a
dataset's prompts, sampled as bench samples it (the prompts sent are random words
of those lengths). Lengths: --prompt-tokens and --output-tokens (N, 2k,
uniform:A-B, a profile), --range-ratio. Bounds: --num-requests (default 1000)
or --duration.

Prompts of a requested token length are made of random words: two short warm-up
requests (not counted) and the first replies' usage.prompt_tokens calibrate words
per token, and the report gives the prompt tokens the server counted.

While it runs it reads the server's /metrics every --interval (vLLM's names of any
release: KV-cache usage, running, waiting, preemptions) and, where the GPUs are
local (a loopback --url, or --snapshot), GPU memory through NVML or nvidia-smi.
A live line on a terminal, plain lines every 10 readings otherwise (on stderr).

With --gpu (and the model: --model, or the vLLM command after --), the same traffic
is also run through 'headroom simulate' and shown beside the measurement; against
a real vLLM, a calibration fitted from the run's decode steps (ITL against the
server's running count) is appended to --calibration-out for later simulations.
Against headroom's own simulated server (simulate --serve, which says so in
/v1/models) nothing is written.

Exit codes: 0 the SLOs hold (or none given and a request succeeded), 1 they do
not (or no request succeeded), 2 bad input or a server that does not answer.`,
		Example: `  headroom loadtest --url http://localhost:8000 --rate 10 --duration 2m --slo ttft_p99=2s,tpot_p99=100ms
  headroom loadtest --url localhost:8000 --concurrency 32 --num-requests 500 --prompt-tokens 2000 --output-tokens 200
  headroom loadtest --url localhost:8000 --bench 'vllm bench serve --dataset-name random --random-input-len 4000 --random-output-len 200 --num-prompts 500'
  headroom loadtest --url localhost:8000 --requests requests.log.gz --speedup 4 -o json --plot run.svg
  headroom loadtest --url localhost:8000 --rate 5 --duration 5m --burst 50x30000@60s --endpoint chat`,
		RunE: func(cmd *cobra.Command, args []string) error { return runLoadtest(cmd, env, f, args) },
	}
	fl := cmd.Flags()
	f.traffic.Register(fl)
	fl.StringVar(&f.url, "url", "", "the server, e.g. http://localhost:8000 (or its metrics URL, as watch takes it)")
	fl.StringVar(&f.model, "model", "", "the served model name (default: the first of /v1/models)")
	fl.StringVar(&f.apiKey, "api-key", "", "bearer token (default: $OPENAI_API_KEY)")
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", true, "ask the server to generate exactly max_tokens (vLLM's ignore_eos; false for servers that refuse it; with --bench, the command's own --ignore-eos)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "bound on one request, from send to the end of its stream")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", time.Minute, "bound on the wait for the next chunk once a stream has begun")
	fl.StringVar(&f.slo, "slo", "", "service-level objectives, e.g. ttft_p99=2s,tpot_p99=100ms,error_rate=1%")
	fl.StringVar(&f.metricsURL, "metrics-url", "", "the server's metrics (default: /metrics on --url's host)")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between metric readings")
	fl.BoolVar(&f.snapshot, "snapshot", false, "read local GPU memory even when --url is not on this machine")
	fl.StringVar(&f.nvidiaSMI, "nvidia-smi", "", "read GPUs through this nvidia-smi binary")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml, bench (vllm bench serve's layout; the default with --bench)")
	fl.StringVar(&f.plot, "plot", "", "draw the time series to FILE.svg or FILE.png")
	fl.StringVar(&f.trace, "trace", "", "write one JSON line per request to FILE, as simulate --trace does (with due_s and error)")
	fl.BoolVar(&f.noWarmup, "no-warmup", false, "skip the two warm-up requests (prompt lengths then start at 0.75 words per token)")
	fl.StringVar(&f.plan.gpuName, "gpu", "", "predict with simulate on this GPU (and the model of --model or the pasted vLLM command)")
	fl.IntVar(&f.plan.gpuCount, "gpu-count", 0, "number of GPUs for the prediction")
	fl.StringVar(&f.plan.version, "vllm-version", "", "the vLLM version whose rules the prediction uses")
	fl.BoolVar(&f.plan.offline, "offline", false, "never fetch the model's config from the Hugging Face Hub")
	fl.StringVar(&f.stepTime, "step-time", "roofline", "the prediction's step time: roofline, or fixed:DURATION")
	fl.StringVar(&f.calibration, "calibration", "", "step-time calibrations to predict with (JSON lines, as simulate reads them)")
	addAcceptanceFlag(fl, &f.acceptance)
	fl.StringVar(&f.calOut, "calibration-out", "", "append the fitted step-time calibration here (default: step-calibration.jsonl beside the probe's calibration.jsonl)")
	return cmd
}

func runLoadtest(cmd *cobra.Command, env Env, f loadtestFlags, args []string) error {
	ctx := cmd.Context()
	if len(args) > 0 && (f.plan.gpuName == "" || cmd.ArgsLenAtDash() < 0) {
		return badInput("unexpected argument %q (a vLLM command goes after -- with --gpu)", args[0])
	}
	switch {
	case f.output != "table" && f.output != "json" && f.output != "yaml" && f.output != "bench":
		return badInput("unknown output format %q: use table, json, yaml or bench", f.output)
	case f.timeout <= 0 || f.stallTimeout <= 0 || f.interval <= 0:
		return badInput("--timeout, --stall-timeout and --interval must be positive")
	}
	spec, rd, _, err := trafficSpec(cmd, env, &f.traffic, "")
	if err != nil {
		return err
	}
	if err := loadtestBounds(spec); err != nil {
		return err
	}
	if rd.Bench != nil && !cmd.Flags().Changed("output") {
		f.output = "bench"
	}
	if rd.Bench != nil && !cmd.Flags().Changed("ignore-eos") {
		// The command's own choice: without --ignore-eos bench lets the
		// server end a reply at its end-of-sequence token.
		f.ignoreEOS = rd.Bench.IgnoreEOS
	}
	plotFormat := ""
	if f.plot != "" {
		if plotFormat, err = chart.FormatOf(f.plot); err != nil {
			return badInput("--plot %v", err)
		}
	}
	slos, err := slo.Parse(f.slo)
	if err != nil {
		return badInput("--slo: %v", err)
	}
	base, err := loadtest.ParseBaseURL(f.url)
	if err != nil {
		return badInput("%v", err)
	}
	// The URL's user and password are sent, never printed.
	base, user := loadtest.SplitUser(base)
	metricsURL := f.metricsURL
	if metricsURL == "" {
		// The server's own /metrics, with the same credentials.
		metricsURL = loadtest.MetricsURL(base)
		if u, err := url.Parse(metricsURL); err == nil && user != nil {
			u.User = user
			metricsURL = u.String()
		}
	}
	if metricsURL, err = telemetry.NormalizeMetricsURL(metricsURL); err != nil {
		return badInput("--metrics-url: %v", err)
	}
	// The requests are read as they are sent: an interrupt ends the
	// reading too (a gzip bomb's text, an endless pipe).
	stream, closer, err := spec.Open(func(name string) (io.ReadCloser, error) {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{traffic.ContextReader(ctx, f), f}, nil
	})
	if err != nil {
		return badInput("%v", err)
	}
	defer closer.Close()

	apiKey := f.apiKey
	if apiKey == "" && env.Getenv != nil {
		apiKey = env.Getenv("OPENAI_API_KEY")
	}
	hc := env.HTTPClient
	if hc == nil {
		hc = loadtest.NewHTTPClient()
	}
	target := loadtest.Target{BaseURL: base, APIKey: apiKey, User: user, Endpoint: spec.Endpoint, IgnoreEOS: f.ignoreEOS,
		Timeout: f.timeout, StallTimeout: f.stallTimeout}
	served, err := loadtest.ServedModel(ctx, hc, target)
	model := f.model
	if model == "" {
		if err != nil {
			return badInput("%v; give --model", err)
		}
		model = served.Model
	}
	target.Model = model
	client := &loadtest.Client{HTTP: hc, Clock: loadtest.RealClock{}, Target: target}

	var pred *report.Prediction
	if f.plan.gpuName != "" {
		f.plan.model = model
		if pred, err = newPrediction(cmd, env, f, args); err != nil {
			return err
		}
		pred.StandIn = served.StandIn
	}

	var gpus telemetry.GPUReader
	if f.snapshot || f.nvidiaSMI != "" || loadtest.Loopback(base) {
		r, err := telemetry.OpenGPUs(telemetry.OpenOptions{SMIPath: f.nvidiaSMI})
		switch {
		case err == nil:
			gpus = r
			defer r.Close()
		case f.snapshot || f.nvidiaSMI != "":
			return usageError{err}
		}
	}

	plot, err := prepareOutput("--plot", f.plot)
	if err != nil {
		return err
	}
	defer plot.discard()
	trace, err := createTrace(f.trace)
	if err != nil {
		return err
	}
	prog := newLoadtestProgress(env.Stderr)
	cfg := loadtest.Config{Client: client, Stream: stream, Concurrency: spec.Concurrency,
		Warmup: !f.noWarmup, SLOs: slos, Seed: spec.Seed, Goodput: rd.Output.Goodput, Percentiles: rd.Output.Extra(),
		OnWarmup: prog.warmup,
		Scraper:  &telemetry.Scraper{URL: metricsURL, Client: hc}, GPUs: gpus, Interval: f.interval,
		Progress: prog.update, OnDone: func(it loadtest.Item, o *loadtest.Outcome) {
			due, sent := it.Due.Seconds(), o.Sent.Seconds()
			trace.Write(workload.Trace{ID: it.ID, Due: &due, Arrival: sent, FirstToken: sent + o.TTFT.Seconds(), Finish: sent + o.E2E.Seconds(),
				Prompt: int(it.Prompt), Output: int(it.Output), Error: o.Err})
		}}
	if spec.Concurrency > 0 {
		cfg.Duration = time.Duration(spec.Duration * float64(time.Second))
	}
	res, err := loadtest.Run(ctx, cfg)
	prog.finish()
	if cerr := trace.Close(); err == nil && cerr != nil {
		return fmt.Errorf("--trace: %v", cerr)
	}
	if err != nil {
		return usageError{err}
	}
	res.MetricsURL = telemetry.RedactURL(metricsURL)
	res.Describe(spec)
	if note := workload.LogNote(stream); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if rd.Bench != nil {
		res.Notes = append(res.Notes, rd.Bench.Notices...)
	}
	if pred != nil && ctx.Err() != nil {
		res.Notes = append(res.Notes, "no prediction: the run was interrupted")
	} else if pred != nil {
		if err := pred.Run(ctx, spec, res); err != nil {
			return usageError{err}
		}
	}
	if plot != nil {
		if err := writePlot(plot, res, plotFormat); err != nil {
			return err
		}
	}
	switch f.output {
	case "json":
		err = writeJSON(env.Stdout, res)
	case "yaml":
		err = writeYAML(env.Stdout, res)
	case "bench":
		header := fmt.Sprintf("headroom loadtest: the measured result of %s\nserver: %s (%s, %s)", res.Load.Source, res.Target.URL, res.Target.Model, res.Target.Endpoint)
		notes := res.Notes
		if res.Simulated != nil {
			notes = append(notes, "the prediction of --gpu is printed by -o table and -o json")
		}
		err = writeBench(env.Stdout, header, report.BenchOfLoadtest(res, spec, rd.Output), notes)
	default:
		err = writeLoadtestTable(env.Stdout, res)
	}
	if err != nil {
		return err
	}
	if !res.SLOsMet {
		return errNoFit
	}
	return nil
}

// Bounds of a load test, past which it is refused with the bound named:
// a closed loop holds its requests in flight at once (each a connection
// and two goroutines), and a rate so low that its requests would take
// longer than maxRunSeconds to send is a run that sits at "sent 0".
const maxRunSeconds = 7 * 24 * 3600

// loadtestBounds refuses a workload loadtest cannot run within its
// bounds; an open loop's bursts are paced through
// loadtest.DefaultMaxInFlight connections instead (the report notes it).
func loadtestBounds(spec workload.Spec) error {
	if spec.Concurrency > loadtest.DefaultMaxInFlight {
		return badInput("--concurrency %d: at most %d requests in flight (each holds a connection); run several loadtests for more", spec.Concurrency, loadtest.DefaultMaxInFlight)
	}
	if spec.Rate > 0 && !math.IsInf(spec.Rate, 1) && spec.Log == "" {
		n := float64(spec.NumRequests)
		switch {
		case 1/spec.Rate > maxRunSeconds:
			return badInput("--rate %g is one request every %.3g s: at least one a week (%.3g/s) here, or nothing is sent for the run's length", spec.Rate, 1/spec.Rate, 1.0/maxRunSeconds)
		case spec.Duration > 0 && spec.Rate*spec.Duration < 1:
			return badInput("--rate %g over --duration %gs is %.3g requests: fewer than one would be sent; raise --rate", spec.Rate, spec.Duration, spec.Rate*spec.Duration)
		case spec.Duration > 0:
		default:
			if n == 0 {
				n = workload.DefaultNumRequests
			}
			if n/spec.Rate > maxRunSeconds {
				return badInput("--rate %g sends %g requests over %.3g s: at most %d s (7 days) of sending; raise --rate or lower --num-requests", spec.Rate, n, n/spec.Rate, maxRunSeconds)
			}
		}
	}
	return nil
}
