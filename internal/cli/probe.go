package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/vllm"
)

type probeFlags struct {
	planFlags
	bin, strategy, logDir string
	steps, maxLaunches    int
	launchTimeout, grace  time.Duration
	noCalibration         bool
}

func newProbeCmd(env Env) *cobra.Command {
	f := probeFlags{planFlags: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "probe [--model MODEL] [--gpu GPU] [vLLM flags] [-- vllm serve MODEL FLAGS...]",
		Short: "Find the largest --max-model-len a real vLLM starts with, in one or two launches",
		Example: `  headroom probe --gpu H100-80GB -- vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.92
  headroom probe --vllm-bin /opt/venv/bin/vllm --model Qwen/Qwen2.5-7B-Instruct --gpu L4 -o json
  headroom probe --strategy bisect --gpu L4 -- vllm serve Qwen/Qwen3-8B`,
		Long: `Launches the real engine (vllm on PATH, or --vllm-bin) on a free loopback port with
your flags and a candidate --max-model-len, reads its log, decides from the log or
/health whether it started, stops it (SIGTERM to its process group, SIGKILL after
--stop-grace) and waits until the GPU memory is released before the next launch.

Strategy auto: one launch with --max-model-len auto where the vLLM release has it
(0.14.0 on); otherwise a launch at the planner's predicted maximum, then one at the
length the engine's own numbers name (the estimate in its error, or its KV cache
size). It bisects only when the log gives no number. --strategy bisect reproduces
KAITO's 6-step binary search for comparison.

Every launch that started is kept as a calibration record in
$XDG_CACHE_HOME/headroom/calibration.jsonl; 'headroom plan' uses a matching record.

The launch timeout defaults to 2 minutes plus 20 seconds per GiB of weights.
Ctrl-C stops the engine and everything it started.

Exit codes: 0 found, 1 no length starts, 2 bad input or the engine cannot be run.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProbe(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: a catalog id, a local directory or config.json, or a Hugging Face id")
	fl.StringVar(&f.gpuName, "gpu", "", "GPU the engine runs on (default: read from NVML or nvidia-smi)")
	fl.IntVar(&f.gpuCount, "gpu-count", 0, "number of GPUs (default: what the parallelism needs)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "the GPU by its usable memory instead of a name, e.g. 24GiB")
	fl.StringVar(&f.version, "vllm-version", "", "the vLLM release (default: ask `vllm --version`)")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml")
	fl.BoolVar(&f.enforceEager, "enforce-eager", false, "vLLM --enforce-eager (no CUDA graphs)")
	fl.BoolVar(&f.offline, "offline", false, "never fetch from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
	for _, v := range vllmStringFlags {
		f.vllm[v.name] = fl.String(v.name, "", v.usage)
	}
	fl.StringVar(&f.bin, "vllm-bin", "", "the vllm executable (default: the pasted command's, else vllm on PATH)")
	fl.StringVar(&f.strategy, "strategy", string(probe.StrategyAuto), "auto (one or two launches) or bisect (KAITO's binary search)")
	fl.IntVar(&f.steps, "steps", probe.DefaultBisectSteps, "launches of --strategy bisect (KAITO's max_probe_steps)")
	fl.IntVar(&f.maxLaunches, "max-launches", probe.DefaultMaxLaunches, "most launches of --strategy auto")
	fl.DurationVar(&f.launchTimeout, "launch-timeout", 0, "longest one start-up may take (default: 2m + 20s per GiB of weights)")
	fl.DurationVar(&f.grace, "stop-grace", 20*time.Second, "time between SIGTERM and SIGKILL when stopping the engine")
	fl.StringVar(&f.logDir, "log-dir", "", "keep each launch's output in this directory")
	fl.BoolVar(&f.noCalibration, "no-calibration", false, "do not write calibration records")
	return cmd
}

func runProbe(cmd *cobra.Command, env Env, f probeFlags, args []string) error {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return badInput("unknown output format %q: use table, json or yaml", f.output)
	}
	strategy := probe.Strategy(f.strategy)
	switch strategy {
	case probe.StrategyAuto, probe.StrategyBisect:
	default:
		return badInput("unknown --strategy %q: use auto or bisect", f.strategy)
	}
	if f.steps <= 0 || f.maxLaunches <= 0 {
		return badInput("--steps and --max-launches must be positive")
	}
	if f.launchTimeout < 0 || f.grace < 0 {
		return badInput("--launch-timeout and --stop-grace must be positive")
	}
	if n := cmd.ArgsLenAtDash(); n > 0 {
		return badInput("unexpected arguments before --: %s (put the vLLM command after --)", strings.Join(args[:n], " "))
	} else if n < 0 && len(args) > 0 {
		return badInput("unexpected argument %q: give the model with --model, or paste the vLLM command after --", args[0])
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := settingsFrom(cmd, f.planFlags, args)
	if err != nil {
		return err
	}
	if s.Model == "" {
		return badInput("no model: give --model or paste `-- vllm serve MODEL ...`")
	}
	bin, err := vllmBinary(f.bin, args)
	if err != nil {
		return usageError{err}
	}
	spec, err := resolveModel(ctx, env, s.Model, f.offline)
	if err != nil {
		return usageError{err}
	}
	var notes []string
	gauge, gaugeNote := probe.FindGauge(ctx)
	if gaugeNote != "" {
		notes = append(notes, gaugeNote)
	}
	if c, ok := gauge.(interface{ Close() }); ok {
		defer c.Close()
	}
	sel, gpuNote, err := probeGPU(ctx, f.planFlags, gauge)
	if err != nil {
		return usageError{err}
	}
	if gpuNote != "" {
		notes = append(notes, gpuNote)
	}

	cfg := probe.Config{
		Engine:        &probe.Process{Bin: bin, Env: envAssignments(s.Env), Gauge: gauge, Grace: f.grace, LogDir: f.logDir},
		Settings:      s,
		Model:         spec,
		Device:        sel.Device,
		Count:         sel.Count,
		Version:       s.Version,
		Strategy:      strategy,
		Steps:         f.steps,
		MaxLaunches:   f.maxLaunches,
		LaunchTimeout: f.launchTimeout,
	}
	calPath := ""
	if !f.noCalibration {
		if calPath, err = probe.CalibrationPath(env.Getenv); err != nil {
			notes = append(notes, err.Error())
			calPath = ""
		} else {
			cfg.Calibration = func(r probe.Record) error { return probe.AppendRecord(calPath, r) }
		}
	}
	prog := newLaunchProgress(env.Stderr)
	cfg.Progress = prog.update
	res, runErr := probe.Run(ctx, cfg)
	prog.stop()
	if runErr != nil && !errors.Is(runErr, probe.ErrNothingStarts) {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted during launch %d; every engine process it started was stopped", len(res.History))
		}
		return usageError{runErr}
	}
	if res.Launches == 0 || res.MaxModelLen == 0 {
		calPath = ""
	}
	out := newProbeReport(spec.ID, sel, res, append(notes, res.Notes...), calPath)
	var werr error
	switch f.output {
	case "json":
		werr = writeJSON(cmd.OutOrStdout(), out)
	case "yaml":
		werr = writeYAML(cmd.OutOrStdout(), out)
	default:
		werr = writeProbeTable(cmd.OutOrStdout(), out)
	}
	if werr != nil {
		return werr
	}
	if runErr != nil {
		fmt.Fprintf(env.Stderr, "headroom: %s\n", strings.TrimPrefix(runErr.Error(), probe.ErrNothingStarts.Error()+": "))
		return errNoFit
	}
	return nil
}

// envAssignments renders the command's VAR=value prefix for the engine,
// `vllm --version` included (VLLM_USE_V1 and the like change what runs).
func envAssignments(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// vllmBinary picks the engine executable: --vllm-bin, else the pasted
// command's program when it is a path to vllm, else vllm on PATH.
func vllmBinary(flag string, pasted []string) (string, error) {
	if flag != "" {
		p, err := exec.LookPath(flag)
		if err != nil {
			return "", fmt.Errorf("--vllm-bin %s: %v", flag, errors.Unwrap(err))
		}
		return p, nil
	}
	for _, a := range pasted {
		if strings.Contains(a, "=") && !strings.Contains(a, "/") {
			continue // VAR=value before the command
		}
		if strings.Contains(a, "/") && filepath.Base(a) == "vllm" {
			if _, err := exec.LookPath(a); err != nil {
				return "", fmt.Errorf("%s: %v; give --vllm-bin", a, errors.Unwrap(err))
			}
			return a, nil
		}
		break
	}
	p, err := exec.LookPath("vllm")
	if err != nil {
		return "", fmt.Errorf("vllm is not on PATH: give --vllm-bin /path/to/vllm")
	}
	return p, nil
}

// probeGPU resolves --gpu or --gpu-memory, else the GPU the gauge sees.
func probeGPU(ctx context.Context, f planFlags, gauge probe.MemoryGauge) (gpu.Selection, string, error) {
	if f.gpuName != "" || f.gpuMemory != "" {
		sel, err := resolveGPU(f)
		return sel, "", err
	}
	if gauge == nil {
		return gpu.Selection{}, "", errors.New("no GPU: give --gpu (e.g. H100-80GB, L4); neither NVML nor nvidia-smi answers here to tell")
	}
	gpus, err := gauge.Read(ctx)
	if err != nil || len(gpus) == 0 {
		return gpu.Selection{}, "", fmt.Errorf("no GPU: give --gpu (%s: %v)", gauge.Source(), err)
	}
	g := gpus[0]
	sel, err := gpu.Resolve(g.Name)
	note := fmt.Sprintf("GPU %q read from %s", g.Name, gauge.Source())
	if err != nil {
		sel = gpu.Selection{Device: gpu.Custom(g.TotalBytes)}
		note = fmt.Sprintf("GPU %q read from %s is not in the catalog; planning with its %s", g.Name, gauge.Source(), memory.GiB(g.TotalBytes))
	}
	sel.Count = max(f.gpuCount, 1)
	return sel, note, nil
}

// ProbeReport is `headroom probe -o json`. Fields may be added, never renamed.
type ProbeReport struct {
	Model               string           `json:"model"`
	GPU                 report.GPUReport `json:"gpu"`
	MaxModelLen         int              `json:"max_model_len"`
	Launches            int              `json:"launches"`
	KVCacheTokens       int64            `json:"kv_cache_tokens"`
	AvailableKVCacheGiB float64          `json:"available_kv_cache_gib"`
	VLLMVersion         string           `json:"vllm_version"`
	Seconds             float64          `json:"seconds"`
	Strategy            string           `json:"strategy"`
	Predicted           int              `json:"predicted_max_model_len"`
	ModelMaxLen         int              `json:"model_max_len"`
	History             []LaunchReport   `json:"history"`
	Notes               []string         `json:"notes,omitempty"`
	CalibrationFile     string           `json:"calibration_file,omitempty"`
}

// LaunchReport is one launch of the history.
type LaunchReport struct {
	// MaxModelLen is the length launched with; "auto" for --max-model-len auto.
	MaxModelLen any      `json:"max_model_len"`
	Args        []string `json:"args"`
	Outcome     string   `json:"outcome"`
	Reason      string   `json:"reason,omitempty"`
	// Numbers are the figures read from the engine's log.
	Numbers  vllm.StartupReport `json:"numbers"`
	ExitCode int                `json:"exit_code"`
	Seconds  float64            `json:"seconds"`
	Notes    []string           `json:"notes,omitempty"`
}

func newProbeReport(modelID string, sel gpu.Selection, r probe.Result, notes []string, calPath string) ProbeReport {
	out := ProbeReport{
		Model:               modelID,
		GPU:                 report.GPUReport{Name: sel.Device.Name, Count: max(sel.Count, 1), TotalBytes: sel.Device.TotalBytes, SKU: sel.SKU},
		MaxModelLen:         r.MaxModelLen,
		Launches:            r.Launches,
		KVCacheTokens:       r.KVCacheTokens,
		AvailableKVCacheGiB: gibs(r.AvailableKVBytes),
		Seconds:             r.Seconds,
		Strategy:            string(r.Strategy),
		Predicted:           r.Predicted,
		ModelMaxLen:         r.ModelMaxLen,
		History:             []LaunchReport{},
		Notes:               notes,
		CalibrationFile:     calPath,
	}
	if !r.Version.IsZero() {
		out.VLLMVersion = r.Version.String()
	}
	for _, a := range r.History {
		l := LaunchReport{MaxModelLen: a.MaxModelLen, Args: a.Args, Outcome: string(a.Outcome), Reason: a.Reason,
			Numbers: a.Report, ExitCode: a.ExitCode, Seconds: a.Seconds, Notes: a.Notes}
		if a.MaxModelLen == vllm.AutoMaxModelLen {
			l.MaxModelLen = "auto"
		}
		if l.Numbers.Errors == nil {
			l.Numbers.Errors = []vllm.LogEvent{}
		}
		out.History = append(out.History, l)
	}
	return out
}

func writeProbeTable(w io.Writer, r ProbeReport) error {
	if r.MaxModelLen > 0 {
		fmt.Fprintf(w, "max-model-len %d: started on %s", r.MaxModelLen, r.GPU.Name)
		switch {
		case r.MaxModelLen >= r.ModelMaxLen:
			fmt.Fprintf(w, " (the full context of %s)\n", r.Model)
		default:
			fmt.Fprintf(w, " (%s allows %d)\n", r.Model, r.ModelMaxLen)
		}
		fmt.Fprintf(w, "  KV cache %s tokens, %.2f GiB per GPU", humanInt(r.KVCacheTokens), r.AvailableKVCacheGiB)
	} else {
		fmt.Fprintf(w, "no --max-model-len started for %s on %s\n ", r.Model, r.GPU.Name)
	}
	version := r.VLLMVersion
	if version == "" {
		version = "unknown"
	}
	fmt.Fprintf(w, "; vLLM %s; %d launch%s in %.0f s; strategy %s", version, r.Launches, plural(r.Launches, "", "es"), r.Seconds, r.Strategy)
	if r.Predicted > 0 {
		fmt.Fprintf(w, "; planner predicted %d", r.Predicted)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "launch\tmax-model-len\toutcome\tseconds\tread from the log")
	for i, a := range r.History {
		said := summarize(a.Numbers)
		if a.Reason != "" {
			said = a.Reason
			if len(said) > 160 {
				said = said[:160] + "..."
			}
		}
		fmt.Fprintf(tw, "%d\t%v\t%s\t%.0f\t%s\n", i+1, a.MaxModelLen, a.Outcome, a.Seconds, said)
	}
	tw.Flush()
	for _, a := range r.History {
		for _, n := range a.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	if len(r.History) > 0 {
		fmt.Fprintf(w, "\nlast command: %s\n", vllm.ShellJoin(r.History[len(r.History)-1].Args))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.CalibrationFile != "" {
		fmt.Fprintf(w, "calibration records: %s ('headroom plan' uses them)\n", r.CalibrationFile)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// summarize lists the numbers a launch's log gave.
func summarize(n vllm.StartupReport) string {
	var parts []string
	if af := n.AutoFit; af != nil {
		if af.To > 0 && af.To < af.From {
			parts = append(parts, fmt.Sprintf("auto-fit %d → %d", af.From, af.To))
		} else {
			parts = append(parts, "auto-fit: full context")
		}
	}
	if n.KVTokens > 0 {
		parts = append(parts, "KV "+humanInt(n.KVTokens)+" tokens")
	} else if n.NumGPUBlocks > 0 {
		parts = append(parts, fmt.Sprintf("%d blocks", n.NumGPUBlocks))
	}
	if n.AvailableKVBytes > 0 {
		parts = append(parts, fmt.Sprintf("KV %.2f GiB", gibs(n.AvailableKVBytes)))
	}
	if n.WeightsBytes > 0 {
		parts = append(parts, fmt.Sprintf("weights %.2f GiB", gibs(n.WeightsBytes)))
	}
	if n.ActivationBytes > 0 {
		parts = append(parts, fmt.Sprintf("activation %.2f GiB", gibs(n.ActivationBytes)))
	}
	if n.CUDAGraphBytes > 0 {
		parts = append(parts, fmt.Sprintf("graphs %.2f GiB", gibs(n.CUDAGraphBytes)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// launchProgress shows each launch: a live line on a terminal, redrawn
// every second, and a line per phase otherwise.
type launchProgress struct {
	line *progress.Line
	stop func()

	mu      sync.Mutex
	cur     probe.Progress
	started time.Time
	phase   probe.Phase
}

func newLaunchProgress(w io.Writer) *launchProgress {
	p := &launchProgress{line: progress.New(w)}
	p.stop = p.line.Every(time.Second, 0, p.live)
	return p
}

func lengthText(n int) string {
	if n == vllm.AutoMaxModelLen {
		return "auto"
	}
	return fmt.Sprint(n)
}

func (p *launchProgress) update(u probe.Progress) {
	p.mu.Lock()
	if u.Launch != p.cur.Launch {
		p.started, p.phase = time.Now(), ""
	}
	p.cur = u
	newPhase := u.Phase != p.phase
	p.phase = u.Phase
	if u.Done != nil {
		p.phase = probe.PhaseReleasing
	}
	p.mu.Unlock()
	switch {
	case u.Done != nil:
		line := fmt.Sprintf("launch %d: --max-model-len %s: %s in %.0f s", u.Launch, lengthText(u.MaxModelLen), u.Done.Outcome, u.Done.Seconds)
		if u.Done.Reason != "" {
			line += ": " + u.Done.Reason
		} else if s := summarize(u.Done.Report); s != "-" {
			line += " (" + s + ")"
		}
		p.line.Print(line)
	case p.line.Live():
		p.line.Set(p.live())
	case newPhase:
		p.line.Print(fmt.Sprintf("launch %d: --max-model-len %s: %s", u.Launch, lengthText(u.MaxModelLen), u.Phase))
	}
}

// live is the live line of the launch running, "" between launches.
func (p *launchProgress) live() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.Launch == 0 || p.cur.Done != nil {
		return ""
	}
	line := fmt.Sprintf("launch %d  --max-model-len %s  %s  %s", p.cur.Launch, lengthText(p.cur.MaxModelLen), p.cur.Phase, time.Since(p.started).Round(time.Second))
	if s := summarize(p.cur.Report); s != "-" {
		line += "  " + s
	}
	return line
}
