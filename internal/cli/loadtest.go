package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/telemetry"
)

type loadtestFlags struct {
	url, model, apiKey, endpoint string
	rate                         float64
	arrival                      string
	concurrency                  int
	duration                     time.Duration
	numRequests                  int
	requests                     string
	speedup                      float64
	burst                        string
	inputTokens, outputTokens    int64
	ignoreEOS                    bool
	timeout, stallTimeout        time.Duration
	slo                          string
	metricsURL                   string
	interval                     time.Duration
	snapshot                     bool
	nvidiaSMI                    string
	seed                         uint64
	output                       string
	plot                         string
	noWarmup                     bool
	// the prediction: the plan's GPU and settings, simulate's step time
	plan                planFlags
	stepTime            string
	calibration, calOut string
}

func newLoadtestCmd(env Env) *cobra.Command {
	f := loadtestFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "loadtest --url URL (--rate R | --concurrency N) (--duration D | --num-requests N | --requests FILE) [--gpu GPU [-- vllm serve MODEL FLAGS...]]",
		Short: "Load an OpenAI-compatible server, measure TTFT/TPOT/ITL and watch its KV cache while it runs",
		Long: `Sends streaming requests to an OpenAI-compatible server (/v1/completions, or
/v1/chat/completions with --endpoint chat) and measures them with vllm bench serve's
definitions: TTFT (sent -> first content chunk), TPOT ((E2E - TTFT) / (output
tokens - 1)), ITL (gaps between content chunks), E2E (sent -> last content chunk),
request and token throughput, goodput (requests within every per-request --slo
bound, per second), and errors by kind (http_<status>, timeout, broken_stream,
bad_response, stream_error, no_content, connect, canceled).

Load: an open loop sends request i at its due time whatever the earlier ones do
(--rate R, Poisson arrivals or --arrival constant; --burst 50x30000@60s adds 50
prompts of 30000 tokens at 60 s), and reports the send rate it achieved; a closed
loop keeps --concurrency N requests in flight. --requests FILE replays a request log
(every format 'headroom profile' reads, gzip too) with its own timestamps and token
sizes (--speedup 2 halves its time; with --rate or --concurrency only its sizes).

Prompts of a requested token length are made of random words: two short warm-up
requests (not counted) and the first replies' usage.prompt_tokens calibrate words
per token, and the report gives the prompt tokens the server counted.

While it runs it reads the server's /metrics every --interval (vLLM's names of any
release: KV-cache usage, running, waiting, preemptions) and, where the GPUs are
local (a loopback --url, or --snapshot), GPU memory through NVML or nvidia-smi.
A live line on a terminal, plain lines every 10 readings otherwise (on stderr).

With --gpu (and the model: --model, or the vLLM command after --), an open loop's
traffic is also run through 'headroom simulate' (the plan's KV pool and settings,
--step-time): its TTFT/TPOT/E2E, KV usage and preemptions are shown beside the
measurement, and with the roofline step time a calibration fitted from the run's
decode steps (mean ITL per interval against the server's running count) is
appended to --calibration-out, for 'headroom simulate --calibration FILE'.

Exit codes: 0 the SLOs hold (or none given and a request succeeded), 1 they do
not (or no request succeeded), 2 bad input or a server that does not answer.`,
		Example: `  headroom loadtest --url http://localhost:8000 --rate 10 --duration 2m --slo ttft_p99=2s,tpot_p99=100ms
  headroom loadtest --url localhost:8000 --concurrency 32 --num-requests 500 --input-tokens 2000 --output-tokens 200
  headroom loadtest --url localhost:8000 --requests requests.log.gz --speedup 4 -o json --plot run.svg
  headroom loadtest --url localhost:8000 --rate 5 --duration 5m --burst 50x30000@60s --endpoint chat`,
		RunE: func(cmd *cobra.Command, args []string) error { return runLoadtest(cmd, env, f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "the server, e.g. http://localhost:8000")
	fl.StringVar(&f.model, "model", "", "the served model name (default: the first of /v1/models)")
	fl.StringVar(&f.apiKey, "api-key", "", "bearer token (default: $OPENAI_API_KEY)")
	fl.StringVar(&f.endpoint, "endpoint", loadtest.EndpointCompletions, "completions or chat")
	fl.Float64Var(&f.rate, "rate", 0, "open loop: requests per second")
	fl.StringVar(&f.arrival, "arrival", loadtest.ArrivalPoisson, "open-loop arrivals: poisson or constant")
	fl.IntVar(&f.concurrency, "concurrency", 0, "closed loop: requests in flight")
	fl.DurationVar(&f.duration, "duration", 0, "send for this long (open loop: requests due within it)")
	fl.IntVar(&f.numRequests, "num-requests", 0, "send this many requests")
	fl.StringVar(&f.requests, "requests", "", "replay this request log (its times and token sizes)")
	fl.Float64Var(&f.speedup, "speedup", 1, "replay the log this many times faster")
	fl.StringVar(&f.burst, "burst", "", "bursts COUNTxTOKENS@TIME, comma-separated, e.g. 50x30000@60s")
	fl.Int64Var(&f.inputTokens, "input-tokens", 1024, "prompt tokens per request (and for log lines without them)")
	fl.Int64Var(&f.outputTokens, "output-tokens", 128, "max_tokens per request (and for log lines without them)")
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", true, "ask the server to generate exactly max_tokens (vLLM's ignore_eos; false for servers that refuse it)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "bound on one request, from send to the end of its stream")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", time.Minute, "bound on the wait for the next chunk once a stream has begun")
	fl.StringVar(&f.slo, "slo", "", "service-level objectives, e.g. ttft_p99=2s,tpot_p99=100ms,error_rate=1%")
	fl.StringVar(&f.metricsURL, "metrics-url", "", "the server's metrics (default: /metrics on --url's host)")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between metric readings")
	fl.BoolVar(&f.snapshot, "snapshot", false, "read local GPU memory even when --url is not on this machine")
	fl.StringVar(&f.nvidiaSMI, "nvidia-smi", "", "read GPUs through this nvidia-smi binary")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the arrival times and prompts")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
	fl.StringVar(&f.plot, "plot", "", "draw the time series to FILE.svg or FILE.png")
	fl.BoolVar(&f.noWarmup, "no-warmup", false, "skip the two warm-up requests (prompt lengths then start at 0.75 words per token)")
	fl.StringVar(&f.plan.gpuName, "gpu", "", "predict with simulate on this GPU (and the model of --model or the pasted vLLM command)")
	fl.IntVar(&f.plan.gpuCount, "gpu-count", 0, "number of GPUs for the prediction")
	fl.StringVar(&f.plan.version, "vllm-version", "", "the vLLM version whose rules the prediction uses")
	fl.BoolVar(&f.plan.offline, "offline", false, "never fetch the model's config from the Hugging Face Hub")
	fl.StringVar(&f.stepTime, "step-time", "roofline", "the prediction's step time: roofline, or fixed:DURATION")
	fl.StringVar(&f.calibration, "calibration", "", "step-time calibrations to predict with (JSON lines, as simulate reads them)")
	fl.StringVar(&f.calOut, "calibration-out", "", "append the fitted step-time calibration here (default: step-calibration.jsonl beside the probe's calibration.jsonl)")
	return cmd
}

// loadtestSchedule builds the schedule from the flags: a replayed log or
// synthetic traffic, and the caller's mode. The log file is returned to be
// closed.
func loadtestSchedule(f loadtestFlags, bursts []loadtest.Burst) (loadtest.Schedule, io.Closer, string, error) {
	synth := &loadtest.Synthetic{Rate: f.rate, Arrival: f.arrival, Prompt: f.inputTokens,
		Output: f.outputTokens, Bursts: bursts, Seed: f.seed}
	if f.requests == "" {
		if f.duration <= 0 && f.numRequests <= 0 {
			return nil, nil, "", badInput("give --duration or --num-requests (or --requests FILE to replay a log)")
		}
		if f.rate <= 0 && f.concurrency <= 0 {
			return nil, nil, "", badInput("give --rate R (open loop) or --concurrency N (closed loop)")
		}
		return synth, nil, "synthetic", nil
	}
	file, err := os.Open(f.requests)
	if err != nil {
		return nil, nil, "", badInput("--requests: %v", err)
	}
	rp, err := loadtest.NewReplay(file, f.speedup)
	if err != nil {
		file.Close()
		return nil, nil, "", badInput("--requests %s: %v", f.requests, err)
	}
	rp.DefaultPrompt, rp.DefaultOutput = f.inputTokens, f.outputTokens
	timed, any, err := rp.Timed()
	if err != nil || !any {
		file.Close()
		if err == nil {
			err = errors.New("no line holds a token count (input_tokens=, prompt_tokens=, an OpenAI usage object or a vLLM request line)")
		}
		return nil, nil, "", badInput("--requests %s: %v", f.requests, err)
	}
	source := "replay " + filepath.Base(f.requests)
	switch {
	case f.concurrency > 0:
		source += " (sizes only, closed loop)"
	case f.rate > 0:
		// --rate replaces the log's own timing.
		rp.Untimed = synth
		timed = false
		source += " (sizes only, at --rate)"
	case !timed:
		file.Close()
		return nil, nil, "", badInput("--requests %s: its first request has no time; give --rate or --concurrency to replay its sizes", f.requests)
	}
	if timed && len(bursts) > 0 {
		// Bursts ride on synthetic arrivals; a log has its own.
		file.Close()
		return nil, nil, "", badInput("--burst goes with synthetic traffic (--rate), not with a timed --requests log")
	}
	return rp, file, source, nil
}

func runLoadtest(cmd *cobra.Command, env Env, f loadtestFlags, args []string) error {
	ctx := cmd.Context()
	if len(args) > 0 && (f.plan.gpuName == "" || cmd.ArgsLenAtDash() < 0) {
		return badInput("unexpected argument %q (a vLLM command goes after -- with --gpu)", args[0])
	}
	switch {
	case f.output != "table" && f.output != "json" && f.output != "yaml":
		return badInput("unknown output format %q: use table, json or yaml", f.output)
	case f.endpoint != loadtest.EndpointCompletions && f.endpoint != loadtest.EndpointChat:
		return badInput("--endpoint %q: use completions or chat", f.endpoint)
	case f.arrival != loadtest.ArrivalPoisson && f.arrival != loadtest.ArrivalConstant:
		return badInput("--arrival %q: use poisson or constant", f.arrival)
	case f.rate < 0 || f.concurrency < 0 || f.numRequests < 0 || f.duration < 0:
		return badInput("--rate, --concurrency, --num-requests and --duration cannot be negative")
	case f.rate > 0 && f.concurrency > 0:
		return badInput("give --rate (open loop) or --concurrency (closed loop), not both")
	case f.speedup <= 0:
		return badInput("--speedup must be positive, e.g. 2")
	case f.inputTokens < 1 || f.outputTokens < 1:
		return badInput("--input-tokens and --output-tokens must be 1 or more")
	case f.timeout <= 0 || f.stallTimeout <= 0 || f.interval <= 0:
		return badInput("--timeout, --stall-timeout and --interval must be positive")
	}
	plotFormat := ""
	if f.plot != "" {
		var err error
		if plotFormat, err = chart.FormatOf(f.plot); err != nil {
			return badInput("--plot %v", err)
		}
	}
	slos, err := slo.Parse(f.slo)
	if err != nil {
		return badInput("--slo: %v", err)
	}
	bursts, err := loadtest.ParseBursts(f.burst)
	if err != nil {
		return badInput("--burst: %v", err)
	}
	if len(bursts) > 0 && f.concurrency > 0 {
		return badInput("--burst needs an open loop (--rate): a closed loop sends when a request ends")
	}
	base, err := loadtest.ParseBaseURL(f.url)
	if err != nil {
		return badInput("%v", err)
	}
	metricsURL := f.metricsURL
	if metricsURL == "" {
		u, _ := url.Parse(base)
		metricsURL = u.Scheme + "://" + u.Host + "/metrics"
	}
	if metricsURL, err = telemetry.NormalizeMetricsURL(metricsURL); err != nil {
		return badInput("--metrics-url: %v", err)
	}
	sched, closer, source, err := loadtestSchedule(f, bursts)
	if err != nil {
		return err
	}
	if closer != nil {
		defer closer.Close()
	}

	apiKey := f.apiKey
	if apiKey == "" && env.Getenv != nil {
		apiKey = env.Getenv("OPENAI_API_KEY")
	}
	hc := env.HTTPClient
	if hc == nil {
		// No client timeout: streams last as long as --timeout allows.
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 1024, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}
	}
	model := f.model
	if model == "" {
		if model, err = servedModel(ctx, hc, base, apiKey); err != nil {
			return badInput("%v; give --model", err)
		}
	}
	client := &loadtest.Client{HTTP: hc, Clock: loadtest.RealClock{}, Target: loadtest.Target{
		BaseURL: base, Model: model, APIKey: apiKey, Endpoint: f.endpoint, IgnoreEOS: f.ignoreEOS,
		Timeout: f.timeout, StallTimeout: f.stallTimeout}}

	var pred *prediction
	if f.plan.gpuName != "" {
		if f.concurrency > 0 {
			return badInput("--gpu predicts an open loop's traffic; a closed loop's arrivals depend on the server")
		}
		f.plan.model = model
		if pred, err = newPrediction(cmd, env, f, args); err != nil {
			return err
		}
	}

	var gpus telemetry.GPUReader
	if f.snapshot || f.nvidiaSMI != "" || loopback(base) {
		r, err := telemetry.OpenGPUs(telemetry.OpenOptions{SMIPath: f.nvidiaSMI})
		switch {
		case err == nil:
			gpus = r
			defer r.Close()
		case f.snapshot || f.nvidiaSMI != "":
			return usageError{err}
		}
	}

	prog := newLoadtestProgress(env.Stderr)
	cfg := loadtest.Config{Client: client, Schedule: sched, Concurrency: f.concurrency, Count: f.numRequests,
		Duration: f.duration, Warmup: !f.noWarmup, SLOs: slos, Seed: f.seed,
		Scraper: &telemetry.Scraper{URL: metricsURL, Client: hc}, GPUs: gpus, Interval: f.interval,
		Progress: prog.update}
	res, err := loadtest.Run(ctx, cfg)
	prog.finish()
	if err != nil {
		return usageError{err}
	}
	res.MetricsURL = metricsURL
	res.Load.Source, res.Load.Arrival, res.Load.Rate = source, "", 0
	if f.concurrency <= 0 {
		if f.rate > 0 {
			res.Load.Rate, res.Load.Arrival = f.rate, f.arrival
			res.SendRate.Requested = f.rate
		} else {
			res.Load.Speedup = f.speedup
		}
	}
	if rp, ok := sched.(*loadtest.Replay); ok && (rp.OutOfOrder > 0 || rp.Skipped > 0) {
		res.Notes = append(res.Notes, fmt.Sprintf("request log: %d lines without a token count skipped, %d out of order sent with the line before", rp.Skipped, rp.OutOfOrder))
	}
	if pred != nil {
		if err := pred.run(ctx, f, bursts, res); err != nil {
			return err
		}
	}
	if plotFormat != "" {
		if err := writePlot(f.plot, res, plotFormat); err != nil {
			return usageError{err}
		}
	}
	switch f.output {
	case "json":
		err = writeJSON(env.Stdout, res)
	case "yaml":
		err = writeYAML(env.Stdout, res)
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

func writePlot(path string, r *loadtest.Result, format string) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %v", err)
	}
	if err := loadtest.Plot(file, r, format); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// servedModel asks /v1/models for the first model's id.
func servedModel(ctx context.Context, hc *http.Client, base, apiKey string) (string, error) {
	u := base
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/models", nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot ask %s/models for the model: %v", u, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/models answered %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("%s/models lists no model", u)
	}
	return list.Data[0].ID, nil
}

// loopback reports whether the server is on this machine, so its GPUs are
// the ones NVML sees here.
func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// loadtestProgress is the live line on a terminal, a plain line every 10
// readings elsewhere.
type loadtestProgress struct {
	w     io.Writer
	tty   bool
	n     int
	drawn bool
}

func newLoadtestProgress(w io.Writer) *loadtestProgress {
	return &loadtestProgress{w: w, tty: telemetryIsTTY(w)}
}

func (p *loadtestProgress) update(pr loadtest.Progress, pt *loadtest.Point) {
	p.n++
	if !p.tty && p.n%10 != 1 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%5.0fs  sent %d  done %d  errors %d", pr.Elapsed.Seconds(), pr.Sent, pr.Done, pr.Failed)
	if pr.HaveTTFT {
		fmt.Fprintf(&b, "  TTFT p50 %s", pr.TTFTP50.Round(time.Millisecond))
	} else {
		b.WriteString("  TTFT p50 -")
	}
	if pt.KVUsage != nil {
		fmt.Fprintf(&b, "  KV %.1f%%", *pt.KVUsage*100)
	}
	if pt.Running != nil && pt.Waiting != nil {
		fmt.Fprintf(&b, "  running %s  waiting %s", humanFloat(*pt.Running), humanFloat(*pt.Waiting))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", b.String())
		p.drawn = true
		return
	}
	fmt.Fprintf(p.w, "headroom: loadtest %s\n", b.String())
}

func (p *loadtestProgress) finish() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func writeLoadtestTable(w io.Writer, r *loadtest.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	load := r.Load.Mode + " loop"
	switch {
	case r.Load.Concurrency > 0:
		load += fmt.Sprintf(", %d in flight", r.Load.Concurrency)
	case r.Load.Rate > 0:
		load += fmt.Sprintf(", %s %g/s", r.Load.Arrival, r.Load.Rate)
	case r.Load.Speedup > 0:
		load += fmt.Sprintf(", the log's timing x%g", r.Load.Speedup)
	}
	fmt.Fprintf(tw, "target\t%s (model %s)\n", r.Target.URL, r.Target.Model)
	fmt.Fprintf(tw, "load\t%s, %s\n", load, r.Load.Source)
	fmt.Fprintf(tw, "requests\t%d sent, %d completed, %d failed%s\n", r.Requests, r.Completed, r.Failed, errorKinds(r.Errors))
	if r.Load.Mode == "open" {
		req := ""
		if r.SendRate.Requested > 0 {
			req = fmt.Sprintf(" of %g/s requested", r.SendRate.Requested)
		}
		fmt.Fprintf(tw, "send rate\t%.2f/s achieved%s (send lag p99 %.2f ms, max %.2f ms)\n", r.SendRate.Achieved, req, r.SendLag.P99, r.SendLag.Max)
	}
	fmt.Fprintf(tw, "duration\t%.1f s\n", r.DurationS)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tmean\tp50\tp90\tp99\tmax\t")
	for _, l := range []struct {
		name string
		v    loadtest.Latency
	}{{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"ITL", r.ITL}, {"E2E", r.E2E}} {
		if l.v.Count == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t\n", l.name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", l.name, l.v.Mean, l.v.P50, l.v.P90, l.v.P99, l.v.Max)
	}
	if sm := r.Simulated; sm != nil {
		for _, l := range []struct {
			name string
			v    loadtest.Latency
		}{{"TTFT simulated", sm.TTFT}, {"TPOT simulated", sm.TPOT}, {"E2E simulated", sm.E2E}} {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", l.name, l.v.Mean, l.v.P50, l.v.P90, l.v.P99, l.v.Max)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := r.Throughput
	fmt.Fprintf(tw, "throughput\t%.2f req/s, %.1f output tok/s, %.1f total tok/s, goodput %.2f req/s\n",
		t.RequestsPerS, t.OutputTokensPerS, t.TotalTokensPerS, t.GoodputPerS)
	fmt.Fprintf(tw, "tokens\tprompt asked mean %.0f, served mean %.0f (p50 %d, p99 %d); output mean %.1f (%.3f tokens per word)\n",
		r.PromptTokens.Requested.Mean, r.PromptTokens.Served.Mean, r.PromptTokens.Served.P50, r.PromptTokens.Served.P99,
		r.OutputTokens.Mean, r.Calibration.TokensPerWord)
	if r.MaxKVUsage != nil || r.MaxRunning != nil {
		s := []string{}
		if r.MaxKVUsage != nil {
			s = append(s, fmt.Sprintf("max KV usage %.1f%%", *r.MaxKVUsage*100))
		}
		if r.Preemptions != nil {
			s = append(s, fmt.Sprintf("preemptions %s", humanFloat(*r.Preemptions)))
		}
		if r.MaxRunning != nil {
			s = append(s, fmt.Sprintf("max running %s, max waiting %s", humanFloat(*r.MaxRunning), humanFloat(*r.MaxWaiting)))
		}
		fmt.Fprintf(tw, "server\t%s\n", strings.Join(s, ", "))
	}
	if sm := r.Simulated; sm != nil {
		fmt.Fprintf(tw, "simulated\t%s on %s (%s): %d requests, %d rejected, max KV usage %.1f%%, preemptions %d, %.2f req/s\n",
			sm.Model, sm.GPU, sm.StepTime, sm.Requests, sm.Rejected, sm.MaxKVUsage*100, sm.Preemptions, sm.RequestsPerS)
	}
	if c := r.StepCalibration; c != nil {
		fmt.Fprintf(tw, "calibration\tflops x%.2f, bandwidth x%.2f, +%.2f ms/step, appended to %s\n",
			c.FLOPsEfficiency, c.BandwidthEfficiency, c.Overhead*1000, r.StepCalibrationFile)
	}
	if r.GPUMaxUsedBytes != nil {
		fmt.Fprintf(tw, "GPU\tmax used %s of %s\n", memory.GiB(*r.GPUMaxUsedBytes), memory.GiB(*r.GPUTotalBytes))
	}
	for _, s := range r.SLOs {
		verdict := "met"
		if !s.Met {
			verdict = "MISSED"
		}
		if s.Name == "error_rate" {
			fmt.Fprintf(tw, "SLO %s\t%.2f%% measured, bound %.2f%%: %s\n", s.Name, s.Measured*100, s.Limit*100, verdict)
		} else {
			fmt.Fprintf(tw, "SLO %s\t%.1f ms measured, bound %.1f ms: %s\n", s.Name, s.Measured, s.Limit, verdict)
		}
	}
	for _, e := range r.ErrorExamples {
		fmt.Fprintf(tw, "error %s\t%s\n", e.Kind, e.Message)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	return tw.Flush()
}

func errorKinds(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(kinds, ", ") + ")"
}
