package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Defaults of the synthetic scenario, documented in README.md: the
// speed benchmark's traffic (prompts 16-2000, outputs 1-400 tokens).
const (
	defaultPromptDist = "uniform:16-2000"
	defaultOutputDist = "uniform:1-400"
)

type simulateFlags struct {
	plan planFlags

	requests string
	speedup  float64

	rate               float64
	duration           time.Duration
	promptDist, output string
	profile            string
	bursts             []string
	seed               uint64

	stepTime, calibration string

	blocksOverride, longPrefill       int
	noPrefixCaching, noChunkedPrefill bool

	window           time.Duration
	trace, plot, slo string
	compare          bool
	serve            bool
	listen           string
	timeScale        float64
	servedModelName  string
}

func newSimulateCmd(env Env) *cobra.Command {
	f := simulateFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "simulate [--model MODEL --gpu GPU] (--requests FILE | --rate R) [flags] [-- vllm serve MODEL FLAGS...]",
		Short: "Simulate vLLM's scheduler and paged KV cache under a traffic: latencies, KV usage, preemptions",
		Example: `  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --rate 20 --duration 10m
  headroom simulate --gpu L4 --requests requests.jsonl --slo ttft_p99=2s,tpot_p99=100ms -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384
  headroom simulate --model Qwen/Qwen3-8B --gpu A100-80GB --rate 5 --burst 50x30000@60s --plot kv.svg
  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --rate 10 --prompt-tokens profile.json --output-tokens profile.json --compare
  headroom simulate --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB --serve --listen 127.0.0.1:8000`,
		Long: `Runs a discrete-event simulation of vLLM V1's engine for a model on a GPU: the FCFS
scheduler with continuous batching, the token budget with chunked prefill,
max-num-seqs, the paged KV cache (as many blocks as 'headroom plan' predicts, or
--num-gpu-blocks-override), preemption of the newest request with recompute, prefix
caching and sliding-window layers. Each step lasts max(FLOPs / peak, bytes / HBM
bandwidth) + an overhead from the GPU's datasheet (--step-time roofline), or a fixed
time.

Traffic: --requests FILE (JSON lines {"id","arrival_s","prompt_tokens","output_tokens"}
or any request log 'headroom profile' reads, with timestamps) or a synthetic Poisson
stream (--rate, --duration, --prompt-tokens, --output-tokens, --burst).

Exit codes: 0 done (and every --slo met), 1 an --slo missed or the plan does not
fit, 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.serve {
				return runSimulateServe(cmd, env, f, args)
			}
			return runSimulate(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	addPlanFlags(fl, &f.plan)
	fl.StringVarP(&f.plan.output, "output", "o", "table", "output format: table, json, yaml")
	fl.StringVar(&f.requests, "requests", "", "replay the requests of FILE (- for stdin): JSON lines or a request log with timestamps")
	fl.Float64Var(&f.speedup, "speedup", 1, "divide the file's arrival times by this (2 = twice the rate)")
	fl.Float64Var(&f.rate, "rate", 0, "synthetic traffic: Poisson arrivals per second")
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "synthetic traffic: how long requests arrive")
	fl.StringVar(&f.promptDist, "prompt-tokens", defaultPromptDist, "synthetic prompt lengths: fixed:N, uniform:A-B, or a 'profile -o json' file (its input_tokens)")
	fl.StringVar(&f.output, "output-tokens", defaultOutputDist, "synthetic output lengths: fixed:N, uniform:A-B, or a 'profile -o json' file (its output_tokens)")
	fl.StringVar(&f.profile, "profile", "", "a 'profile -o json' file: token distributions for the synthetic traffic and, with --compare, its pool split")
	fl.StringArrayVar(&f.bursts, "burst", nil, "add COUNT prompts of TOKENS at TIME, e.g. 50x30000@60s (repeatable)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the synthetic traffic")
	fl.StringVar(&f.stepTime, "step-time", "roofline", "step time model: roofline, or fixed:DURATION (e.g. fixed:10ms)")
	fl.StringVar(&f.calibration, "calibration", "", "JSON lines of step-time calibrations {gpu, flops_efficiency, bandwidth_efficiency, overhead_s}; the last for the GPU wins")
	fl.IntVar(&f.blocksOverride, "num-gpu-blocks-override", 0, "vLLM --num-gpu-blocks-override: the KV pool in blocks instead of the plan's")
	fl.IntVar(&f.longPrefill, "long-prefill-token-threshold", 0, "vLLM --long-prefill-token-threshold")
	fl.BoolVar(&f.noPrefixCaching, "no-enable-prefix-caching", false, "vLLM --no-enable-prefix-caching")
	fl.BoolVar(&f.noChunkedPrefill, "no-enable-chunked-prefill", false, "vLLM --no-enable-chunked-prefill")
	fl.DurationVar(&f.window, "window", 10*time.Second, "time-series window (windows double past 720)")
	fl.StringVar(&f.trace, "trace", "", "write one JSON line per finished request to FILE")
	fl.StringVar(&f.plot, "plot", "", "draw KV usage, running/waiting and preemptions over time to FILE.svg or FILE.png")
	fl.StringVar(&f.slo, "slo", "", "targets, e.g. ttft_p99=2s,tpot_p99=100ms (ttft|tpot|e2e _ mean|p50|p90|p99|max); exit 1 when missed")
	fl.BoolVar(&f.compare, "compare", false, "also simulate headroom's recommended settings (and, with --profile, its pool split) on the same traffic")
	fl.BoolVar(&f.serve, "serve", false, "serve the simulated engine in real time behind an OpenAI-compatible API and vLLM's /metrics")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8000", "--serve: address to listen on")
	fl.Float64Var(&f.timeScale, "time-scale", 1, "--serve: simulated seconds per real second (10 = ten times faster than the GPU)")
	fl.StringVar(&f.servedModelName, "served-model-name", "", "--serve: the model name /v1/models lists (default: the model id)")
	return cmd
}

// deployment is a resolved model on a GPU with settings, planned.
type deployment struct {
	ev     evidence
	in     memory.Input
	budget memory.Budget
	label  string
}

func planDeployment(ev evidence, s vllm.Settings, label string) (deployment, error) {
	in := memory.Input{Model: ev.Spec, Device: ev.Sel.Device, Count: ev.Sel.Count, Settings: s, Measured: ev.Measured}
	if ev.AutoCount {
		in.Count = 0
	}
	b, err := memory.Plan(in)
	if err != nil {
		return deployment{}, usageError{err}
	}
	return deployment{ev: ev, in: in, budget: b, label: label}, nil
}

// engineSetup is what every command that runs the simulated engine reads
// first: the plan of the given settings, vLLM's scheduler flags and the
// step-time calibration for the GPU.
type engineSetup struct {
	given deployment
	sched schedulerFlags
	cal   calibration
}

func setupEngine(cmd *cobra.Command, env Env, pf planFlags, sf simulateFlags, calFile string, args []string) (engineSetup, error) {
	ev, err := gather(cmd.Context(), cmd, env, pf, args)
	if err != nil {
		return engineSetup{}, err
	}
	sched, err := readSchedulerFlags(cmd, sf, ev.Settings)
	if err != nil {
		return engineSetup{}, err
	}
	var cal calibration
	if calFile == "" {
		cal, ev.Notes = defaultCalibration(env, ev.Sel.Device, ev.Notes)
	} else if cal, err = loadCalibration(calFile, ev.Sel.Device); err != nil {
		return engineSetup{}, err
	}
	given, err := planDeployment(ev, ev.Settings, "given")
	if err != nil {
		return engineSetup{}, err
	}
	return engineSetup{given: given, sched: sched, cal: cal}, nil
}

// schedulerFlags are vLLM's scheduler flags: headroom's own flags of the
// same names win, else the pasted command's, as package vllm parsed them.
type schedulerFlags struct {
	blocksOverride, longPrefill       int
	noPrefixCaching, noChunkedPrefill bool
}

func readSchedulerFlags(cmd *cobra.Command, f simulateFlags, set vllm.Settings) (schedulerFlags, error) {
	s := schedulerFlags{set.NumGPUBlocksOverride, set.LongPrefillTokenThreshold,
		set.Set[vllm.FlagNoPrefixCaching], set.Set[vllm.FlagNoChunkedPrefill]}
	changed := cmd.Flags().Changed
	if changed(vllm.FlagNumGPUBlocksOverride) {
		s.blocksOverride = f.blocksOverride
	}
	if changed(vllm.FlagLongPrefillTokenThreshold) {
		s.longPrefill = f.longPrefill
	}
	if changed(vllm.FlagNoPrefixCaching) {
		s.noPrefixCaching = f.noPrefixCaching
	}
	if changed(vllm.FlagNoChunkedPrefill) {
		s.noChunkedPrefill = f.noChunkedPrefill
	}
	if s.blocksOverride < 0 || s.longPrefill < 0 {
		return s, badInput("--num-gpu-blocks-override and --long-prefill-token-threshold must not be negative")
	}
	return s, nil
}

// engineConfig is the simulated engine of a planned deployment.
func engineConfig(d deployment, sched schedulerFlags, timer sim.StepTimer) (sim.Config, error) {
	c := sim.ConfigFor(d.budget, timer)
	if sched.blocksOverride > 0 {
		c.NumGPUBlocks = sched.blocksOverride
	}
	if c.NumGPUBlocks < 2 {
		return sim.Config{}, errNoKV
	}
	c.LongPrefillTokenThreshold, c.NoChunkedPrefill, c.NoPrefixCaching = sched.longPrefill, sched.noChunkedPrefill, sched.noPrefixCaching
	return c, nil
}

var errNoKV = errors.New("no KV cache")

// stepTimer parses --step-time for a deployment.
func stepTimer(spec string, b memory.Budget, calib calibration) (sim.StepTimer, string, error) {
	if spec == "roofline" {
		cal := calib.Calibration
		m, err := sim.RooflineFor(b, cal)
		if err != nil {
			return nil, "", usageError{err}
		}
		if len(calib.samples) > 0 {
			cal = sim.Fit(*m, cal, calib.samples)
			cal.Source += " in " + calib.file
			if m, err = sim.RooflineFor(b, cal); err != nil {
				return nil, "", usageError{err}
			}
		}
		return m, "roofline (" + cal.String() + ")", nil
	}
	if v, ok := strings.CutPrefix(spec, "fixed:"); ok {
		d, err := time.ParseDuration(v)
		if err == nil && d > 0 {
			return sim.Fixed(d.Seconds()), spec, nil
		}
	}
	return nil, "", badInput("--step-time %q: use roofline or fixed:DURATION (e.g. fixed:10ms)", spec)
}

// calibration is what --calibration gives: a correction, and measured
// steps to fit one to.
type calibration struct {
	sim.Calibration
	samples []sim.Sample
	file    string
}

// stepCalibrationPath is where loadtest appends the step-time corrections
// it fits: beside the probe's calibration.jsonl, in the user's cache.
func stepCalibrationPath(getenv func(string) string) (string, error) {
	p, err := probe.CalibrationPath(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "step-calibration.jsonl"), nil
}

// defaultCalibration is what the engine runs with when no --calibration is
// given: the corrections loadtest wrote for this GPU, as plan uses the
// probe's records, said in a note; without any, the defaults. A file that
// does not read is a note, not a failure: the user did not name it.
func defaultCalibration(env Env, dev gpu.Device, notes []string) (calibration, []string) {
	base, _ := sim.CalibrationFor(dev)
	path, err := stepCalibrationPath(env.Getenv)
	if err != nil {
		return calibration{Calibration: base}, notes
	}
	if _, err := os.Stat(path); err != nil {
		return calibration{Calibration: base}, notes
	}
	cal, err := loadCalibration(path, dev)
	if err != nil {
		return calibration{Calibration: base}, append(notes, fmt.Sprintf("step-time calibration not read: %v", err))
	}
	if cal.Calibration == base && len(cal.samples) == 0 {
		return cal, notes
	}
	what := cal.Source
	if len(cal.samples) > 0 {
		what = fmt.Sprintf("%d measured steps", len(cal.samples))
	}
	return cal, append(notes, fmt.Sprintf("step time calibrated by %s (%s); --calibration FILE to use another", path, what))
}

// loadCalibration reads JSON lines of two kinds: corrections {"gpu",
// "flops_efficiency", "bandwidth_efficiency", "overhead_s"} (the last for
// the device, or for any device when it names none, wins) and measured
// steps {"gpu", "batch": {...}, "seconds"} (sim.Sample), which
// sim.Fit turns into a correction on top.
func loadCalibration(name string, dev gpu.Device) (calibration, error) {
	device := dev.Name
	base, _ := sim.CalibrationFor(dev)
	cal := calibration{Calibration: base, file: name}
	if name == "" {
		return cal, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return cal, badInput("--calibration: %v", unwrapPathError(err))
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rec := struct {
			sim.Calibration
			sim.Sample
		}{Calibration: base}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return cal, badInput("--calibration %s line %d: %v", name, i+1, err)
		}
		if rec.GPU != "" && !strings.EqualFold(rec.GPU, device) {
			continue
		}
		if rec.Seconds > 0 {
			cal.samples = append(cal.samples, rec.Sample)
			continue
		}
		if err := rec.Calibration.Check(); err != nil {
			return cal, badInput("--calibration %s line %d: %v (or give a measured step {batch, seconds})", name, i+1, err)
		}
		if rec.Calibration.Source == "" {
			rec.Calibration.Source = fmt.Sprintf("%s line %d", name, i+1)
		}
		cal.Calibration = rec.Calibration
	}
	return cal, nil
}

// workload opens the traffic, again for every compared deployment.
type workload struct {
	env       Env
	file      string
	speedup   float64
	synth     sim.Synthetic
	stdinUsed bool
	describe  string
	// filter, when set, keeps only the requests it accepts (a pool of a
	// split).
	filter func(sim.Request) bool
}

// filtered passes the requests a pool accepts.
type filtered struct {
	src  sim.Source
	keep func(sim.Request) bool
}

func (f filtered) Next() (sim.Request, error) {
	for {
		r, err := f.src.Next()
		if err != nil || f.keep(r) {
			return r, err
		}
	}
}

func newWorkload(cmd *cobra.Command, env Env, f simulateFlags) (*workload, error) {
	w := &workload{env: env, file: f.requests, speedup: f.speedup}
	switch {
	case f.requests != "" && f.rate > 0:
		return nil, badInput("give either --requests or --rate, not both")
	case f.requests != "":
		if f.speedup <= 0 {
			return nil, badInput("--speedup must be positive")
		}
		w.describe = "requests from " + f.requests
		if f.speedup != 1 {
			w.describe += fmt.Sprintf(" at %gx speed", f.speedup)
		}
		return w, nil
	case f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0):
		return nil, badInput("--rate must be a positive number of requests per second")
	case f.rate == 0 && len(f.bursts) == 0:
		return nil, badInput("no traffic: give --requests FILE or --rate R (requests per second)")
	}
	if f.duration <= 0 {
		return nil, badInput("--duration must be positive")
	}
	promptSpec, outSpec := f.promptDist, f.output
	if f.profile != "" {
		if !cmd.Flags().Changed("prompt-tokens") {
			promptSpec = f.profile
		}
		if !cmd.Flags().Changed("output-tokens") {
			outSpec = f.profile
		}
	}
	prompt, err := parseDist(promptSpec, "input_tokens")
	if err != nil {
		return nil, err
	}
	out, err := parseDist(outSpec, "output_tokens")
	if err != nil {
		return nil, err
	}
	var bursts []sim.Burst
	for _, s := range f.bursts {
		b, err := sim.ParseBurst(s)
		if err != nil {
			return nil, usageError{err}
		}
		bursts = append(bursts, b)
	}
	w.synth = sim.Synthetic{Rate: f.rate, Duration: f.duration.Seconds(), Prompt: prompt, Output: out, Bursts: bursts, Seed: f.seed}
	w.describe = fmt.Sprintf("Poisson %g req/s for %s, prompts %s, outputs %s", f.rate, f.duration, prompt, out)
	for _, s := range f.bursts {
		w.describe += ", burst " + s
	}
	return w, nil
}

// parseDist reads fixed:N, uniform:A-B, or a profile -o json file, whose
// field (input_tokens or output_tokens) gives the quantiles.
func parseDist(spec, field string) (sim.Dist, error) {
	if d, err := sim.ParseDist(spec); err == nil {
		return d, nil
	} else if _, statErr := os.Stat(spec); statErr != nil {
		return nil, usageError{err}
	}
	p, err := readProfileJSON(spec)
	if err != nil {
		return nil, err
	}
	s := p.Input
	if field == "output_tokens" {
		s = p.Output
	}
	return quantileDist(s, spec+" "+field)
}

func readProfileJSON(name string) (ProfileReport, error) {
	var p ProfileReport
	data, err := os.ReadFile(name)
	if err != nil {
		return p, badInput("%v", unwrapPathError(err))
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, badInput("%s: not a 'headroom profile -o json' output: %v", name, err)
	}
	return p, nil
}

// quantileDist turns a profile's summary into a distribution: linear
// between p50, p90, p99 and max, and from a lowest value chosen so the
// distribution's mean is the profile's mean (clamped to 1..p50): the
// profile keeps no minimum.
func quantileDist(s traffic.Summary, name string) (sim.Dist, error) {
	if s.Count == 0 || s.Max <= 0 {
		return nil, badInput("%s: the profile has no requests", name)
	}
	p50, p90, p99, mx := float64(s.P50), float64(s.P90), float64(s.P99), float64(s.Max)
	// Mean of the upper segments: each contributes its width × the mean
	// of its ends.
	upper := 0.4*(p50+p90)/2 + 0.09*(p90+p99)/2 + 0.01*(p99+mx)/2
	// The first segment (0..0.5) contributes 0.5 × (v0 + p50) / 2.
	v0 := (s.Mean - upper - 0.25*p50) / 0.25
	v0 = min(max(v0, 1), p50)
	return sim.QuantileDist{Name: name, Points: []sim.QuantilePoint{
		{Q: 0, Value: int(math.Round(v0))}, {Q: 0.5, Value: int(s.P50)}, {Q: 0.9, Value: int(s.P90)},
		{Q: 0.99, Value: int(s.P99)}, {Q: 1, Value: int(s.Max)}}}, nil
}

// open returns a fresh source of the traffic and its closer.
func (w *workload) open(stdin io.Reader) (sim.Source, func(), error) {
	src, closer, err := w.openAll(stdin)
	if err != nil || w.filter == nil {
		return src, closer, err
	}
	return filtered{src, w.filter}, closer, nil
}

func (w *workload) openAll(stdin io.Reader) (sim.Source, func(), error) {
	if w.file == "" {
		s := w.synth
		return &s, func() {}, nil
	}
	if w.file == "-" {
		if w.stdinUsed {
			return nil, nil, badInput("--compare replays the traffic once per setting: give --requests a file, not stdin")
		}
		w.stdinUsed = true
		src, err := sim.NewLineSource(stdin, w.speedup)
		if err != nil {
			return nil, nil, badInput("stdin: %v", err)
		}
		return src, func() {}, nil
	}
	fh, err := os.Open(w.file)
	if err != nil {
		return nil, nil, badInput("%v", unwrapPathError(err))
	}
	src, err := sim.NewLineSource(fh, w.speedup)
	if err != nil {
		fh.Close()
		return nil, nil, badInput("%s: %v", w.file, err)
	}
	return src, func() { fh.Close() }, nil
}

// SimulateReport is `headroom simulate -o json`: the run's numbers at the
// top level (sim.Report), and what was simulated.
type SimulateReport struct {
	*sim.Report
	Model    string       `json:"model"`
	GPU      string       `json:"gpu"`
	GPUCount int          `json:"gpu_count"`
	Settings simSettings  `json:"settings"`
	StepTime string       `json:"step_time"`
	Traffic  string       `json:"traffic"`
	SLO      []sloResult  `json:"slo,omitempty"`
	SLOMet   *bool        `json:"slo_met,omitempty"`
	Compare  []compareRow `json:"compare,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
}

type simSettings struct {
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxModelLen          int     `json:"max_model_len"`
	MaxNumSeqs           int     `json:"max_num_seqs"`
	MaxNumBatchedTokens  int     `json:"max_num_batched_tokens"`
	BlockSize            int     `json:"block_size"`
	NumGPUBlocks         int     `json:"num_gpu_blocks"`
	KVCacheTokens        int64   `json:"kv_cache_tokens"`
	PrefixCaching        bool    `json:"prefix_caching"`
	ChunkedPrefill       bool    `json:"chunked_prefill"`
	VLLMVersion          string  `json:"vllm_version"`
}

func settingsOf(d deployment, c sim.Config) simSettings {
	s := d.budget.Settings
	return simSettings{GPUMemoryUtilization: s.GPUMemoryUtilization, MaxModelLen: c.MaxModelLen, MaxNumSeqs: c.MaxNumSeqs,
		MaxNumBatchedTokens: c.MaxNumBatchedTokens, BlockSize: c.BlockSize, NumGPUBlocks: c.NumGPUBlocks,
		KVCacheTokens: int64(c.NumGPUBlocks) / int64(max(len(c.Groups), 1)) * int64(c.BlockSize),
		PrefixCaching: !c.NoPrefixCaching, ChunkedPrefill: !c.NoChunkedPrefill, VLLMVersion: s.Version.String()}
}

func runSimulate(cmd *cobra.Command, env Env, f simulateFlags, args []string) error {
	switch f.plan.output {
	case "table", "json", "yaml":
	default:
		return badInput("unknown output format %q: use table, json or yaml", f.plan.output)
	}
	slos, err := parseSLO(f.slo)
	if err != nil {
		return err
	}
	if f.window <= 0 {
		return badInput("--window must be positive")
	}
	if err := plotFormat(f.plot); err != nil {
		return err
	}
	w, err := newWorkload(cmd, env, f)
	if err != nil {
		return err
	}
	setup, err := setupEngine(cmd, env, f.plan, f, f.calibration, args)
	if err != nil {
		return err
	}
	ev, sched, cal, given := setup.given.ev, setup.sched, setup.cal, setup.given
	if !given.budget.Fits && sched.blocksOverride == 0 {
		for _, p := range given.budget.Problems {
			fmt.Fprintf(env.Stderr, "headroom: %s\n", p.Message)
		}
		fmt.Fprintln(env.Stderr, "headroom: the plan does not fit, so there is no engine to simulate; see `headroom plan` (or give --num-gpu-blocks-override)")
		return errNoFit
	}
	rep, cfg, err := simulateDeployment(cmd, env, f, w, given, sched, cal, true)
	if err != nil {
		return err
	}
	_, stepDesc, _ := stepTimer(f.stepTime, given.budget, cal)
	out := SimulateReport{Report: rep, Model: ev.Spec.ID, GPU: ev.Sel.Device.Name, GPUCount: given.budget.Count,
		Settings: settingsOf(given, cfg), StepTime: stepDesc, Traffic: w.describe, Notes: ev.Notes}
	if sched.blocksOverride > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("KV pool from --num-gpu-blocks-override %d (the plan has %d blocks)", sched.blocksOverride, given.budget.NumBlocks))
	}
	if len(slos) > 0 {
		out.SLO = checkSLO(slos, rep)
		met := true
		for _, s := range out.SLO {
			met = met && s.Met
		}
		out.SLOMet = &met
	}
	if f.compare {
		rows, err := compareDeployments(cmd, env, f, w, given, rep, sched, cal, slos)
		if err != nil {
			return err
		}
		out.Compare = rows
	}
	if f.plot != "" {
		if err := plotSeries(f.plot, rep); err != nil {
			return err
		}
	}
	stdout := cmd.OutOrStdout()
	switch f.plan.output {
	case "json":
		err = writeJSON(stdout, out)
	case "yaml":
		err = writeYAML(stdout, out)
	default:
		err = writeSimulateTable(stdout, out)
	}
	if err != nil {
		return err
	}
	if out.SLOMet != nil && !*out.SLOMet {
		return errNoFit
	}
	return nil
}

// simulateDeployment runs the traffic through one deployment's engine;
// main is the run the trace and the progress line belong to.
func simulateDeployment(cmd *cobra.Command, env Env, f simulateFlags, w *workload, d deployment, sched schedulerFlags, cal calibration, main bool) (*sim.Report, sim.Config, error) {
	timer, _, err := stepTimer(f.stepTime, d.budget, cal)
	if err != nil {
		return nil, sim.Config{}, err
	}
	cfg, err := engineConfig(d, sched, timer)
	if err != nil {
		return nil, cfg, fmt.Errorf("%s settings: %w", d.label, err)
	}
	e, err := sim.New(cfg)
	if err != nil {
		return nil, cfg, usageError{err}
	}
	src, closeSrc, err := w.open(cmd.InOrStdin())
	if err != nil {
		return nil, cfg, err
	}
	defer closeSrc()
	opt := sim.RunOptions{Window: f.window.Seconds()}
	if _, ok := timer.(*sim.Roofline); ok {
		// A fixed step time is a hand-made engine: no API server either.
		opt.FrontEnd = cal.FrontEnd
	}
	var finished atomic.Int64
	var simNow atomic.Uint64
	var traceOut *bufio.Writer
	if main {
		if f.trace != "" {
			fh, err := os.Create(f.trace)
			if err != nil {
				return nil, cfg, badInput("--trace: %v", unwrapPathError(err))
			}
			defer fh.Close()
			traceOut = bufio.NewWriterSize(fh, 1<<16)
		}
		enc := json.NewEncoder(traceOut)
		opt.OnFinish = func(ev sim.Event) {
			finished.Add(1)
			simNow.Store(math.Float64bits(ev.Finish))
			if traceOut != nil {
				_ = enc.Encode(traceLine{ID: ev.ID, Arrival: ev.Arrival, FirstToken: ev.FirstToken, Finish: ev.Finish,
					Prompt: ev.Prompt, Output: ev.Output, Preemptions: ev.Preemptions})
			}
		}
		stop := showProgress(env.Stderr, func() string {
			return fmt.Sprintf("headroom simulate: %s requests finished, %.0f s simulated", humanInt(finished.Load()), math.Float64frombits(simNow.Load()))
		})
		defer stop()
	}
	rep, err := sim.Run(cmd.Context(), e, src, opt)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, cfg, err
		}
		return nil, cfg, usageError{err}
	}
	if traceOut != nil {
		if err := traceOut.Flush(); err != nil {
			return nil, cfg, fmt.Errorf("--trace: %v", err)
		}
	}
	return rep, cfg, nil
}

// traceLine is one line of --trace.
type traceLine struct {
	ID          string  `json:"id"`
	Arrival     float64 `json:"arrival_s"`
	FirstToken  float64 `json:"first_token_s"`
	Finish      float64 `json:"finish_s"`
	Prompt      int     `json:"prompt_tokens"`
	Output      int     `json:"output_tokens"`
	Preemptions int     `json:"preemptions"`
}
