package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/workload"
)

type capacityFlags struct {
	plan    planFlags
	traffic workload.Flags

	stepTime, calibration string
	acceptance            float64
	slo, router, plot     string
	gpus                  []string
	prices                []string
	window                time.Duration
	startup, coolDown     time.Duration
	storage               string
	maxReplicas           int
	target, namespace     string
	prometheus, served    string
	kedaFile, hpaFile     string
}

func newCapacityCmd(env Env) *cobra.Command {
	f := capacityFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "capacity --model MODEL (--gpu GPU[,GPU...] | --all-gpus) --slo BOUNDS (--rate R | --requests FILE | ...) [flags] [-- vllm serve MODEL FLAGS...]",
		Short: "How many GPUs a traffic needs under an SLO: replicas over time, the cheapest GPU, autoscaler thresholds replayed",
		Example: `  headroom capacity --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB,L40S --rate 2 --peak-rate 40 --duration 24h --slo ttft_p99=2s,tpot_p99=100ms
  headroom capacity --model Qwen/Qwen3-8B --all-gpus --requests requests.jsonl --slo ttft_p99=1s --price H100-80GB=2.10
  headroom capacity --model meta-llama/Llama-3.1-8B-Instruct --gpu L40S --rate 2 --peak-rate 40 --duration 24h --slo tpot_p99=80ms -o keda --target llama --namespace llm
  headroom capacity --model Qwen/Qwen3-14B --gpu H100-80GB,L40S --rate 2 --peak-rate 30 --duration 24h --slo ttft_p99=2s --plot day.png --keda keda.yaml --hpa hpa.yaml`,
		Long: `Sizes a fleet of vLLM replicas for a traffic on each GPU option, by simulation:

  - the replica: the plan (tensor parallel, max-model-len, max-num-seqs), as
    headroom plan lays out the GPUs given, or its first alternative on the GPU
    when the given settings do not fit;
  - its SLO capacity: the highest rate of the traffic's shape one replica serves
    with every --slo met (bisection over simulate runs);
  - replicas over the trace: per --window, the fewest replicas whose fleet meets
    the SLO, each checked by replaying the window through that fleet;
  - peak and mean GPUs, GPU-hours and cost (a default table of public on-demand
    prices, said in the output; --price GPU=USD_PER_HOUR overrides);
  - the autoscaler handed over: HPA thresholds on vLLM's answered requests,
    waiting requests and KV-cache usage derived from one replica's SLO knee,
    capped at the ideal peak unless uncapped does better, replayed over the
    trace with --startup-time and --cool-down: its GPU-hours and cost are the
    answer (or a static fleet's, where one meets every window for less), the
    per-window fleet beside it.
A closed loop (--concurrency) has no arrival rate to size for and is refused;
simulate --concurrency N --replicas K answers it for K replicas.
The cheapest option that meets the SLO comes first. -o keda writes a KEDA
ScaledObject and -o hpa a HorizontalPodAutoscaler with those thresholds;
--keda FILE and --hpa FILE write them beside the table in the same run.

Exit codes: 0 an option meets the SLO, 1 none does (the closest is named), 2 bad
input.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runCapacity(cmd, env, f, args) },
	}
	fl := cmd.Flags()
	addPlanFlags(fl, &f.plan)
	addSchedulerFlags(fl, &f.plan)
	f.traffic.Register(fl)
	fl.StringSliceVar(&f.gpus, "gpus", nil, "GPU options, comma-separated (the same as --gpu A,B)")
	_ = fl.MarkHidden("gpus")
	fl.BoolVar(&f.plan.allGPUs, "all-gpus", false, "try every GPU of the price table (the defaults and --price)")
	fl.StringVarP(&f.plan.output, "output", "o", "table", "output format: table, json, yaml, keda (a KEDA ScaledObject), hpa (a HorizontalPodAutoscaler)")
	fl.StringVar(&f.stepTime, "step-time", "roofline", "step time model: roofline, or fixed:DURATION")
	fl.StringVar(&f.calibration, "calibration", "", "JSON lines of step-time calibrations (sim/README.md)")
	addAcceptanceFlag(fl, &f.acceptance)
	fl.StringVar(&f.slo, "slo", "", "targets every window must meet, e.g. ttft_p99=2s,tpot_p99=100ms (required)")
	fl.StringVar(&f.router, "router", sim.RoundRobin, "how requests are spread over replicas: "+strings.Join(sim.Routers, ", "))
	fl.StringVar(&f.plot, "plot", "", "draw replicas over time against the arrival rate to FILE.svg or FILE.png")
	fl.StringArrayVar(&f.prices, "price", nil, "GPU=USD_PER_HOUR, the price of one GPU for an hour (repeatable; overrides the default table)")
	fl.DurationVar(&f.window, "window", report.DefaultCapacityWindowS*time.Second, "the sizing window: replicas are chosen, and the SLO judged, per window")
	fl.DurationVar(&f.startup, "startup-time", 0, "time from adding a replica to its first request (default: the start-up estimate of its weights read from --storage: 30s pod start + the read + 60s engine start)")
	addStorageFlag(fl, &f.storage)
	fl.DurationVar(&f.coolDown, "cool-down", report.DefaultCoolDownS*time.Second, "the autoscaler's scale-down stabilization window (the HPA's and KEDA's default)")
	fl.IntVar(&f.maxReplicas, "max-replicas", report.DefaultMaxReplicas, "the most replicas one option may use")
	fl.StringVar(&f.target, "target", "vllm", "-o keda/hpa: the vLLM Deployment to scale")
	fl.StringVar(&f.namespace, "namespace", "default", "-o keda/hpa: its namespace")
	fl.StringVar(&f.prometheus, "prometheus", "http://prometheus-operated.monitoring.svc:9090", "-o keda: the Prometheus server KEDA queries")
	fl.StringVar(&f.served, "served-model-name", "", "-o keda/hpa: the model_name label of vLLM's metrics (default: the model id)")
	fl.StringVar(&f.kedaFile, "keda", "", "also write the autoscaler as a KEDA ScaledObject to FILE (as -o keda prints it)")
	fl.StringVar(&f.hpaFile, "hpa", "", "also write the autoscaler as a HorizontalPodAutoscaler to FILE (as -o hpa prints it)")
	return cmd
}

// parsePrices reads --price GPU=USD_PER_HOUR; the GPU must be a catalog
// device.
func parsePrices(in []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, p := range in {
		name, v, ok := strings.Cut(p, "=")
		usd, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(usd > 0) || usd > 1000 {
			return nil, fmt.Errorf("--price %q: write GPU=USD_PER_HOUR, e.g. H100-80GB=2.49", p)
		}
		sel, err := gpu.Resolve(strings.TrimSpace(name))
		if err != nil || sel.SKU != "" || sel.Count != 1 {
			return nil, fmt.Errorf("--price %q: %s is not a GPU of the catalog (see `headroom gpus`)", p, strings.TrimSpace(name))
		}
		out[sel.Device.Name] = usd
	}
	return out, nil
}

func runCapacity(cmd *cobra.Command, env Env, f capacityFlags, args []string) error {
	spec, rd, _, err := trafficSpec(cmd, env, &f.traffic, "")
	if err != nil {
		return err
	}
	format := f.plan.output
	switch format {
	case "table", "json", "yaml", "keda", "hpa":
	default:
		return badInput("unknown output format %q: use table, json, yaml, keda or hpa", format)
	}
	bounds, err := slo.Parse(f.slo)
	if err != nil {
		return badInput("--slo: %v", err)
	}
	if len(bounds) == 0 {
		return badInput("capacity needs --slo, e.g. --slo ttft_p99=2s,tpot_p99=100ms")
	}
	prices, err := parsePrices(f.prices)
	if err != nil {
		return badInput("%v", err)
	}
	if f.window <= 0 || f.startup < 0 || f.coolDown < 0 {
		return badInput("--window must be positive, --startup-time and --cool-down not negative")
	}
	if f.maxReplicas < 1 {
		return badInput("--max-replicas must be 1 or more")
	}
	if !validRouter(f.router) {
		return badInput("--router %q: use %s", f.router, strings.Join(sim.Routers, ", "))
	}
	if err := plotFormat(f.plot); err != nil {
		return err
	}
	if err := checkArgs(cmd, args); err != nil {
		return err
	}
	if format == "keda" || format == "hpa" || f.kedaFile != "" || f.hpaFile != "" {
		// Checked before hours of simulation, with the model's id as the
		// label when no --served-model-name is given (checked after).
		if err := (report.ScaleTarget{Name: f.target, Namespace: f.namespace, Model: f.served, Prometheus: f.prometheus}).Validate(); err != nil {
			return badInput("%v", err)
		}
	}
	gpus, err := capacityGPUs(f, prices)
	if err != nil {
		return err
	}
	storage, err := readStorage(f.storage)
	if err != nil {
		return err
	}
	// The outputs are made now: a path that cannot be written is bad
	// input before the simulation, not its lost result after.
	var plot, keda, hpa *output
	for _, o := range []struct {
		out        **output
		flag, name string
	}{{&plot, "--plot", f.plot}, {&keda, "--keda", f.kedaFile}, {&hpa, "--hpa", f.hpaFile}} {
		if *o.out, err = prepareOutput(o.flag, o.name); err != nil {
			return err
		}
		defer (*o.out).discard()
	}
	plan := request(cmd, f.plan, args)
	if rd.Bench != nil && plan.Model == "" && len(args) == 0 {
		// The bench command names its model, as simulate takes it.
		plan.Model = rd.Bench.Model
	}
	plan.GPU, plan.AllGPUs = "", false
	req := report.CapacityRequest{Engine: report.EngineRequest{Plan: plan, StepTime: f.stepTime, Calibration: f.calibration, AcceptanceRate: f.acceptance},
		GPUs: gpus, Workload: spec, SLO: bounds, WindowS: f.window.Seconds(), Router: f.router, Prices: prices,
		StartupS: f.startup.Seconds(), Storage: storage, CoolDownS: f.coolDown.Seconds(), MaxReplicas: f.maxReplicas, Policy: f.plan.policy}
	var status atomic.Value
	status.Store("planning")
	begun := time.Now()
	req.Progress = func(p report.CapacityProgress) { status.Store(capacityStatus(p, time.Since(begun))) }
	stop := showProgress(env.Stderr, func() string { return "headroom capacity: " + status.Load().(string) })
	out, err := report.Capacity(cmd.Context(), reportEnv(env), openFile(cmd), req)
	stop()
	var ue *report.UnreachableError
	if errors.As(err, &ue) {
		if werr := writeCapacity(cmd, f, format, ue.Report); werr != nil {
			return werr
		}
		fmt.Fprintf(env.Stderr, "headroom: %v\n", err)
		return errNoFit
	}
	if errors.Is(err, report.ErrNoRequests) || errors.Is(err, report.ErrTooLight) {
		return badInput("%v", err)
	}
	if err != nil {
		return simError(env, err)
	}
	if plot != nil {
		if err := plotCapacity(plot, out); err != nil {
			return err
		}
	}
	for _, side := range []struct {
		out    *output
		format string
	}{{keda, "keda"}, {hpa, "hpa"}} {
		if side.out == nil {
			continue
		}
		var buf bytes.Buffer
		if err := writeScaler(&buf, f, side.format, out); err != nil {
			return err
		}
		if err := side.out.write(buf.Bytes()); err != nil {
			return err
		}
	}
	return writeCapacity(cmd, f, format, out)
}

// capacityStatus is the progress line: the option, its step, and the
// time left, estimated from the share done so far (said once there is
// enough to go by).
func capacityStatus(p report.CapacityProgress, elapsed time.Duration) string {
	s := fmt.Sprintf("%s (option %d of %d): %s", p.GPU, p.Option, p.Options, p.Step)
	if p.Done >= 0.05 && elapsed > 5*time.Second {
		left := time.Duration(float64(elapsed) * (1 - p.Done) / p.Done).Round(time.Second)
		s += fmt.Sprintf("; %.0f%% done, about %s left", 100*p.Done, left)
	}
	return s
}

func validRouter(name string) bool {
	for _, r := range sim.Routers {
		if r == name {
			return true
		}
	}
	return false
}

// capacityGPUs is the GPU options: --gpu's list, or with --all-gpus
// every GPU of the price table.
func capacityGPUs(f capacityFlags, prices map[string]float64) ([]string, error) {
	var names []string
	for _, s := range append(strings.Split(f.plan.gpuName, ","), f.gpus...) {
		if s = strings.TrimSpace(s); s != "" {
			names = append(names, s)
		}
	}
	if f.plan.allGPUs {
		if len(names) > 0 {
			return nil, badInput("give --gpu or --all-gpus, not both")
		}
		seen := map[string]bool{}
		for name := range gpu.Prices() {
			seen[name] = true
		}
		for name := range prices {
			seen[name] = true
		}
		for name := range seen {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	if len(names) == 0 {
		return nil, badInput("give the GPU options: --gpu H100-80GB,L40S (or --all-gpus)")
	}
	for _, n := range names {
		if _, err := gpu.Resolve(n); err != nil {
			return nil, badInput("--gpu %s: %v", n, err)
		}
	}
	return names, nil
}

func writeCapacity(cmd *cobra.Command, f capacityFlags, format string, out *report.CapacityReport) error {
	w := cmd.OutOrStdout()
	switch format {
	case "json":
		return writeJSON(w, out)
	case "yaml":
		return writeYAML(w, out)
	case "keda", "hpa":
		return writeScaler(w, f, format, out)
	}
	return writeCapacityTable(w, out)
}

// writeScaler writes the best option's autoscaler as a KEDA ScaledObject
// or an HPA, with a comment line saying what it is.
func writeScaler(w io.Writer, f capacityFlags, format string, out *report.CapacityReport) error {
	best := out.Options[0]
	if best.Autoscaler == nil {
		return badInput("-o %s: no option meets the SLO, so there is no autoscaler to write", format)
	}
	model := f.served
	if model == "" {
		model = out.Model
	}
	t := report.ScaleTarget{Name: f.target, Namespace: f.namespace, Model: model, Prometheus: f.prometheus}
	if err := t.Validate(); err != nil {
		return badInput("%v", err)
	}
	obj := report.KEDAScaledObject(best.Autoscaler, t)
	if format == "hpa" {
		obj = report.HPAObject(best.Autoscaler, t)
	}
	a := best.Autoscaler
	fmt.Fprintf(w, "# headroom capacity: %s on %s, %s; thresholds from one replica's SLO knee, %d to %d replicas (%s), replayed: SLO met in %d of %d windows with %.1f GPU-hours\n",
		out.Model, best.GPU, strings.Join(out.SLO, ","), a.MinReplicas, a.MaxReplicas, a.Policy, a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours)
	return writeYAML(w, obj)
}
