package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/vllm"
)

type probeFlags struct {
	planFlags
	bin, strategy, logDir string
	storage               string
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

The launch timeout defaults to twice the start-up estimate of the weights read from
--storage (docs/startup.md: 30 s + the read + 60 s).
Ctrl-C stops the engine and everything it started.

Exit codes: 0 found, 1 no length starts, 2 bad input or the engine cannot be run.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProbe(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	addDeploymentFlags(fl, &f.planFlags, "model: a catalog id, a local directory or config.json, or a Hugging Face id",
		"GPU the engine runs on (default: read from NVML or nvidia-smi)", "the vLLM release (default: ask `vllm --version`)")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml")
	fl.BoolVar(&f.enforceEager, "enforce-eager", false, "vLLM --enforce-eager (no CUDA graphs)")
	fl.StringVar(&f.bin, "vllm-bin", "", "the vllm executable (default: the pasted command's, else vllm on PATH)")
	fl.StringVar(&f.strategy, "strategy", string(probe.StrategyAuto), "auto (one or two launches) or bisect (KAITO's binary search)")
	fl.IntVar(&f.steps, "steps", probe.DefaultBisectSteps, "launches of --strategy bisect (KAITO's max_probe_steps)")
	fl.IntVar(&f.maxLaunches, "max-launches", probe.DefaultMaxLaunches, "most launches of --strategy auto")
	fl.DurationVar(&f.launchTimeout, "launch-timeout", 0, "longest one start-up may take (default: twice the start-up estimate)")
	addStorageFlag(fl, &f.storage)
	fl.DurationVar(&f.grace, "stop-grace", 20*time.Second, "time between SIGTERM and SIGKILL when stopping the engine")
	fl.StringVar(&f.logDir, "log-dir", "", "keep each launch's output in this directory")
	fl.BoolVar(&f.noCalibration, "no-calibration", false, "do not write calibration records")
	return cmd
}

func runProbe(cmd *cobra.Command, env Env, f probeFlags, args []string) error {
	if err := checkFormat(f.output, "table", "json", "yaml"); err != nil {
		return err
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
	storage, err := readStorage(f.storage)
	if err != nil {
		return err
	}
	if n := cmd.ArgsLenAtDash(); n > 0 {
		return badInput("unexpected arguments before --: %s (put the vLLM command after --)", strings.Join(args[:n], " "))
	} else if n < 0 && len(args) > 0 {
		return badInput("unexpected argument %q: give the model with --model, or paste the vLLM command after --", args[0])
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	prog := newLaunchProgress(env.Stderr)
	out, runErr := report.Probe(ctx, reportEnv(env), request(cmd, f.planFlags, args), report.ProbeOptions{
		Bin: f.bin, Strategy: strategy, Steps: f.steps, MaxLaunches: f.maxLaunches, LaunchTimeout: f.launchTimeout, Storage: storage,
		Grace: f.grace, LogDir: f.logDir, NoCalibration: f.noCalibration, Progress: prog.update})
	prog.stop()
	if runErr != nil && !errors.Is(runErr, probe.ErrNothingStarts) {
		return usageError{runErr}
	}
	if err := writeAs(cmd.OutOrStdout(), f.output, out, formats[report.ProbeReport]{"": writeProbeTable}); err != nil {
		return err
	}
	if runErr != nil {
		fmt.Fprintf(env.Stderr, "headroom: %s\n", strings.TrimPrefix(runErr.Error(), probe.ErrNothingStarts.Error()+": "))
		return errNoFit
	}
	return nil
}

func writeProbeTable(w io.Writer, r report.ProbeReport) error {
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
