package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/workload"
)

type simulateFlags struct {
	plan    planFlags
	traffic workload.Flags
	profile string

	stepTime, calibration string
	acceptance            float64

	window           time.Duration
	trace, plot, slo string
	compare          bool
	verbose          bool
	serve            bool
	listen           string
	timeScale        float64
	servedModelName  string
	replicas         int
	router           string
}

func newSimulateCmd(env Env) *cobra.Command {
	f := simulateFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "simulate [--model MODEL --gpu GPU] (--rate R | --concurrency N | --requests FILE | --bench CMD) [flags] [-- vllm serve MODEL FLAGS...]",
		Short: "Simulate vLLM's scheduler and paged KV cache under a traffic: latencies, KV usage, preemptions",
		Example: `  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --rate 10 --duration 10m
  headroom simulate --gpu H100-80GB --bench 'vllm bench serve --model Qwen/Qwen3-14B --dataset-name random --random-input-len 4000 --random-output-len 200 --num-prompts 500'
  headroom simulate --gpu H100-80GB --bench 'vllm bench serve --model Qwen/Qwen3-8B --dataset-name sharegpt --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json --request-rate 8 --goodput ttft:2000 tpot:50'
  headroom simulate --gpu L4 --requests requests.jsonl --slo ttft_p99=2s,tpot_p99=100ms -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384
  headroom simulate --model Qwen/Qwen3-8B --gpu A100-80GB --concurrency 32 --num-requests 500 --prompt-tokens 2000 --range-ratio 0.2
  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --rate 5 --profile profile.json --compare
  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --serve --listen 127.0.0.1:8000`,
		Long: `Runs a discrete-event simulation of vLLM V1's engine for a model on a GPU: the FCFS
scheduler with continuous batching, the token budget with chunked prefill,
max-num-seqs, the paged KV cache (as many blocks as 'headroom plan' predicts, or
--num-gpu-blocks-override), preemption of the newest request with recompute, prefix
caching and sliding-window layers; the API server in front of it as a shared CPU.
A step lasts what its kernels take on the GPU's datasheet peaks at the shares
fitted on published vllm bench serve runs (sim/README.md), or a fixed time.

Traffic (the same flags as loadtest): --rate, --concurrency, --num-requests,
--duration, --prompt-tokens, --output-tokens (token counts take 2k = 2000, 2K =
2048), --range-ratio, --burst, --requests FILE, --dataset-name sharegpt|custom
--dataset-path FILE (sampled as vllm bench serve samples it, with its seed; token
lengths estimated at 4 bytes of text per token), or a pasted --bench 'vllm bench
serve ...' whose result is printed in vllm bench serve's own layout, with its
--goodput, --percentile-metrics and --metric-percentiles.

Exit codes: 0 done (and every --slo met), 1 an --slo missed, the engine fell
behind its arrivals, or the plan does not fit, 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.serve {
				return runSimulateServe(cmd, env, f, args)
			}
			// The flags' own struct: --profile sets the length flags
			// through the flag set, which writes into it, not a copy.
			return runSimulate(cmd, env, &f, args)
		},
	}
	fl := cmd.Flags()
	addPlanFlags(fl, &f.plan)
	addSchedulerFlags(fl, &f.plan)
	f.traffic.Register(fl)
	fl.StringVarP(&f.plan.output, "output", "o", "table", "output format: table, json, yaml, bench (vllm bench serve's layout; the default with --bench)")
	fl.StringVar(&f.profile, "profile", "", "a 'profile -o json' file: token lengths for the synthetic traffic and, with --compare, its pool split")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "also print how the step time model was fitted (always in -o json)")
	fl.StringVar(&f.stepTime, "step-time", "roofline", "step time model: roofline, or fixed:DURATION (e.g. fixed:10ms; no API server then)")
	fl.StringVar(&f.calibration, "calibration", "", "JSON lines of step-time calibrations (sim/README.md); the last for the GPU wins")
	addAcceptanceFlag(fl, &f.acceptance)
	fl.DurationVar(&f.window, "window", 10*time.Second, "time-series window (windows double past 720)")
	fl.StringVar(&f.trace, "trace", "", "write one JSON line per finished request to FILE")
	fl.StringVar(&f.plot, "plot", "", "draw KV usage, running/waiting and preemptions over time to FILE.svg or FILE.png")
	fl.StringVar(&f.slo, "slo", "", "targets, e.g. ttft_p99=2s,tpot_p99=100ms,error_rate=1% (ttft|tpot|itl|e2e _ mean|p50|p90|p95|p99|max); exit 1 when missed")
	fl.BoolVar(&f.compare, "compare", false, "also simulate headroom's recommended settings, the max-num-seqs the traffic favours and, with --profile, its pool split")
	fl.IntVar(&f.replicas, "replicas", 1, "serve the traffic with N replicas of the engine behind --router, in one simulation")
	fl.StringVar(&f.router, "router", sim.RoundRobin, "with --replicas: "+strings.Join(sim.Routers, ", "))
	fl.BoolVar(&f.serve, "serve", false, "serve the simulated engine in real time behind an OpenAI-compatible API and vLLM's /metrics")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8000", "--serve: address to listen on")
	fl.Float64Var(&f.timeScale, "time-scale", 1, "--serve: simulated seconds per real second (10 = ten times faster than the GPU)")
	fl.StringVar(&f.servedModelName, "served-model-name", "", "--serve: the model name /v1/models lists (default: the model id)")
	return cmd
}

// schedulerFlags are vLLM's scheduler flags the simulator reads, taken
// under their own names like the memory flags.
var schedulerFlags = []struct{ name, usage string }{
	{"num-gpu-blocks-override", "vLLM --num-gpu-blocks-override: the KV pool in blocks instead of the plan's"},
	{"long-prefill-token-threshold", "vLLM --long-prefill-token-threshold"},
}

var schedulerBools = []struct{ name, usage string }{
	{"no-enable-prefix-caching", "vLLM --no-enable-prefix-caching"},
	{"no-enable-chunked-prefill", "vLLM --no-enable-chunked-prefill"},
	{"async-scheduling", "vLLM --async-scheduling (on by default from 0.14.0)"},
	{"no-async-scheduling", "vLLM --no-async-scheduling"},
}

func addSchedulerFlags(fl *pflag.FlagSet, f *planFlags) {
	for _, v := range schedulerFlags {
		f.vllm[v.name] = fl.String(v.name, "", v.usage)
	}
	for _, v := range schedulerBools {
		fl.Bool(v.name, false, v.usage)
	}
}

// openFile is the CLI's file opener: stdin for "-", once (a comparison
// replays the traffic once per setting).
func openFile(cmd *cobra.Command) report.Files {
	used := false
	return func(name string) (io.ReadCloser, error) {
		if name != "-" {
			return os.Open(name)
		}
		if used {
			return nil, errors.New("stdin can be read once: give --requests a file to replay it more than once (--compare)")
		}
		used = true
		return io.NopCloser(cmd.InOrStdin()), nil
	}
}

// trafficSpec reads the workload flags; --profile gives the lengths the
// flags leave at their defaults, and its pools.
func trafficSpec(cmd *cobra.Command, env Env, tf *workload.Flags, profile string) (workload.Spec, workload.Read, []traffic.Pool, error) {
	fl := cmd.Flags()
	if v, _ := fl.GetString("dataset-name"); profile != "" && v != workload.DatasetRandom {
		return workload.Spec{}, workload.Read{}, nil, badInput("--profile and --dataset-name %s both give the requests' lengths: give one", v)
	}
	// --profile gives the lengths, or its pools to --compare: a profile
	// that would do neither is refused rather than ignored.
	if profile != "" && !fl.Changed("compare") && (fl.Changed("bench") || (fl.Changed("prompt-tokens") && fl.Changed("output-tokens"))) {
		by := "--prompt-tokens and --output-tokens set"
		if fl.Changed("bench") {
			by = "--bench sets"
		}
		return workload.Spec{}, workload.Read{}, nil, badInput("--profile sets the prompt and output lengths, and %s them too: give one (or add --compare to split the traffic into the profile's pools)", by)
	}
	if profile != "" && !fl.Changed("bench") {
		for _, name := range []string{"prompt-tokens", "output-tokens"} {
			if !fl.Changed(name) {
				_ = fl.Set(name, profile)
			}
		}
	}
	spec, rd, err := tf.Spec(fl, func(name string) (io.ReadCloser, error) { return os.Open(name) })
	if err != nil {
		return spec, rd, nil, badInput("%v", err)
	}
	for _, n := range rd.Notices {
		fmt.Fprintf(env.Stderr, "headroom: %s\n", n)
	}
	if profile == "" {
		return spec, rd, nil, nil
	}
	p, err := report.ReadProfile(nil, profile)
	if err != nil {
		return spec, rd, nil, badInput("%v", err)
	}
	return spec, rd, p.Pools, nil
}

func runSimulate(cmd *cobra.Command, env Env, f *simulateFlags, args []string) error {
	spec, rd, pools, err := trafficSpec(cmd, env, &f.traffic, f.profile)
	if err != nil {
		return err
	}
	format := f.plan.output
	if rd.Bench != nil && !cmd.Flags().Changed("output") {
		format = "bench"
	}
	switch format {
	case "table", "json", "yaml", "bench":
	default:
		return badInput("unknown output format %q: use table, json, yaml or bench", format)
	}
	bounds, err := slo.Parse(f.slo)
	if err != nil {
		return badInput("--slo: %v", err)
	}
	if f.window <= 0 {
		return badInput("--window must be positive")
	}
	if f.replicas < 1 {
		return badInput("--replicas %d: a fleet needs at least 1 replica", f.replicas)
	}
	if !validRouter(f.router) {
		return badInput("--router %q: use %s", f.router, strings.Join(sim.Routers, ", "))
	}
	if f.replicas > 1 && (f.compare || format == "bench") {
		return badInput("--replicas simulates a fleet: it takes no --compare and no -o bench")
	}
	if err := plotFormat(f.plot); err != nil {
		return err
	}
	if err := checkArgs(cmd, args); err != nil {
		return err
	}
	plan := request(cmd, f.plan, args)
	if rd.Bench != nil && plan.Model == "" && len(args) == 0 {
		plan.Model = rd.Bench.Model
	}
	req := report.SimRequest{Engine: report.EngineRequest{Plan: plan, StepTime: f.stepTime, Calibration: f.calibration, AcceptanceRate: f.acceptance},
		Workload: spec, Window: f.window.Seconds(), SLO: bounds, Compare: f.compare, Policy: f.plan.policy,
		Goodput: rd.Output.Goodput, Percentiles: rd.Output.Extra(), Replicas: f.replicas, Router: f.router}
	if f.compare {
		req.Pools = pools
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
	var finished atomic.Int64
	var simNow atomic.Uint64
	req.OnFinish = func(ev sim.Event) {
		finished.Add(1)
		simNow.Store(math.Float64bits(ev.Finish))
		trace.Write(workload.Trace{ID: ev.ID, Arrival: ev.Arrival, FirstToken: ev.FirstToken, Finish: ev.Finish,
			Prompt: ev.Prompt, Output: ev.Output, Preemptions: ev.Preemptions})
	}
	stop := showProgress(env.Stderr, func() string {
		return fmt.Sprintf("headroom simulate: %s requests finished, %.0f s simulated", humanInt(finished.Load()), math.Float64frombits(simNow.Load()))
	})
	out, err := report.Simulate(cmd.Context(), reportEnv(env), openFile(cmd), req)
	stop()
	if cerr := trace.Close(); err == nil && cerr != nil {
		return fmt.Errorf("--trace %s: %v", f.trace, cerr)
	}
	if err != nil {
		return simError(env, err)
	}
	if rd.Bench != nil {
		out.Notes = append(out.Notes, rd.Bench.Notices...)
		if !rd.Bench.IgnoreEOS {
			out.Notes = append(out.Notes, "the bench command has no --ignore-eos: a real server may end a reply before max_tokens; simulated replies run to max_tokens")
		}
	}
	if plot != nil {
		if err := plotSeries(plot, out.Report); err != nil {
			return err
		}
	}
	stdout := cmd.OutOrStdout()
	switch format {
	case "json":
		err = writeJSON(stdout, out)
	case "yaml":
		err = writeYAML(stdout, out)
	case "bench":
		err = writeBench(stdout, simBenchHeader(out), report.BenchOfSim(out, spec, rd.Output), append(evidenceNotes(out.Confidence), out.Notes...))
	default:
		err = writeSimulateTable(stdout, out, f.verbose)
	}
	if err != nil {
		return err
	}
	if (out.SLOMet != nil && !*out.SLOMet) || out.FellBehind != nil || out.RefusedLine != "" {
		if format == "json" || format == "yaml" || format == "bench" {
			for _, line := range []string{out.RefusedLine, out.FellBehindLine} {
				if line != "" {
					fmt.Fprintf(env.Stderr, "headroom: %s\n", line)
				}
			}
		}
		return errNoFit
	}
	return nil
}

// checkArgs refuses arguments that are not a pasted command.
func checkArgs(cmd *cobra.Command, args []string) error {
	if n := cmd.ArgsLenAtDash(); n > 0 {
		return badInput("unexpected arguments before --: %v (put the vLLM command after --)", args[:n])
	} else if n < 0 && len(args) > 0 {
		return badInput("unexpected argument %q: give the model with --model, or paste the vLLM command after --", args[0])
	}
	return nil
}

// simError turns the builder's error into the CLI's: a plan that does not
// fit is exit 1 with its problems, a canceled run passes, the rest is bad
// input.
func simError(env Env, err error) error {
	var nf *report.NoFitError
	switch {
	case errors.As(err, &nf):
		for _, p := range nf.Problems {
			fmt.Fprintf(env.Stderr, "headroom: %s\n", p)
		}
		fmt.Fprintln(env.Stderr, "headroom: vLLM would not start with this plan, so there is no engine to simulate; see `headroom plan` (or, for the KV cache alone, give --num-gpu-blocks-override)")
		return errNoFit
	case errors.Is(err, report.ErrNoKV):
		return badInput("the plan leaves no KV cache: nothing to simulate")
	case errors.Is(err, context.Canceled):
		return usageError{errors.New("interrupted: no report (the run, or the reading of its requests, was stopped)")}
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	return usageError{err}
}

// createTrace opens --trace ("" is none: a nil writer).
func createTrace(name string) (*workload.TraceWriter, error) {
	if name == "" {
		return nil, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, badInput("%s", pathError("--trace", name, err))
	}
	return workload.NewTraceWriter(f), nil
}
