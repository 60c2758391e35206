package cli

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

func addUpgradeFlags(fl *pflag.FlagSet, f *planFlags) {
	fl.StringVar(&f.upgradeTo, "upgrade-to", "", "upgrade preflight: plan the deployment on this vLLM release too and show what changes (exit 1 when it does not start or loses more KV cache than --max-kv-loss)")
	fl.StringVar(&f.maxKVLoss, "max-kv-loss", strconv.FormatFloat(100*memory.DefaultMaxKVLoss, 'f', -1, 64)+"%", "with --upgrade-to: the share of KV-cache tokens the upgrade may lose, as 20% or 0.2")
}

// parseShare reads --max-kv-loss as report.ParseShare does, naming the
// flag in its error.
func parseShare(flag, s string) (float64, error) {
	v, err := report.ParseShare(s)
	if err != nil {
		return 0, badInput("--%s %v", flag, err)
	}
	return v, nil
}

func runUpgrade(cmd *cobra.Command, f planFlags, e evidence) error {
	if f.upgradeTo == "" {
		return badInput("--max-kv-loss needs --upgrade-to VERSION")
	}
	if f.allGPUs || f.profile != "" {
		return badInput("--upgrade-to compares one deployment: give --gpu, without --all-gpus or --profile")
	}
	if err := checkFormat(f.output, "table", "json", "yaml", "args"); err != nil {
		return err
	}
	if f.pinKV && f.output != "args" {
		return badInput("--pin-kv writes -o args: add -o args (the table and JSON show the pinned pool anyway)")
	}
	to, err := vllm.ParseRelease(f.upgradeTo)
	if err != nil {
		return badInput("--upgrade-to: %v", err)
	}
	loss, err := parseShare("max-kv-loss", f.maxKVLoss)
	if err != nil {
		return err
	}
	r, err := report.Upgrade(e, to, loss)
	if err != nil {
		return usageError{err}
	}
	if f.output == "args" {
		// The flags to run on the release moved to: with the remedy that
		// keeps the KV cache where the move loses some.
		args, err := report.UpgradeArgs(e, r, f.pinKV)
		if err != nil {
			return usageError{err}
		}
		if _, err := fmt.Fprintln(cmd.OutOrStdout(), vllm.ShellJoin(args)); err != nil {
			return err
		}
	} else if err := writeAs(cmd.OutOrStdout(), f.output, r, formats[report.UpgradeReport]{"": writeUpgradeTable}); err != nil {
		return err
	}
	if !r.OK {
		return errNoFit
	}
	return nil
}

// writeUpgradeTable writes the verdict first, then the two plans side by
// side, then each change with its cause.
func writeUpgradeTable(w io.Writer, r report.UpgradeReport) error {
	word := map[string]string{report.UpgradeOK: "OK", report.UpgradeStops: "BLOCKED", report.UpgradeLosesKV: "BLOCKED"}[r.Verdict]
	if r.OK && r.KVLoss > memory.DriftShare {
		word = fmt.Sprintf("OK, %.1f%% LESS KV CACHE", 100*r.KVLoss)
	}
	fmt.Fprintf(w, "Upgrade vLLM %s -> %s: %s: %s\n", r.From.VLLMVersion, r.To.VLLMVersion, word, r.Why)
	fmt.Fprintf(w, "  blocked past %.0f%% less KV cache (--max-kv-loss) or a deployment that no longer starts\n", 100*r.MaxKVLoss)
	for _, m := range r.Remedies {
		fmt.Fprintf(w, "  keep it: %s (-o args%s): %s\n", vllm.ShellJoin(m.Args), map[bool]string{true: " --pin-kv", false: ""}[m.Kind == memory.RemedyPinKVPool], m.Why)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tvLLM %s\tvLLM %s\n", r.From.VLLMVersion, r.To.VLLMVersion)
	starts := func(b bool) string {
		if b {
			return "starts"
		}
		return "does not start"
	}
	fmt.Fprintf(tw, "verdict\t%s\t%s\n", starts(r.From.Fits), starts(r.To.Fits))
	fmt.Fprintf(tw, "KV cache tokens\t%s\t%s (%+.1f%%)\n", humanInt(r.From.KVCacheTokens), humanInt(r.To.KVCacheTokens), -100*r.KVLoss)
	fmt.Fprintf(tw, "longest context that fits\t%s\t%s\n", humanInt(int64(r.From.MaxFitLen)), humanInt(int64(r.To.MaxFitLen)))
	fmt.Fprintf(tw, "gpu-memory-utilization\t%.2f\t%.2f\n", r.From.GPUMemoryUtilization, r.To.GPUMemoryUtilization)
	graphs := func(s report.UpgradeSide) string {
		if s.PerGPU.CUDAGraphInBudget {
			return fmt.Sprintf("%.2f GiB, in the budget", s.PerGPU.CUDAGraphGiB)
		}
		return fmt.Sprintf("%.2f GiB, outside", s.PerGPU.CUDAGraphGiB)
	}
	fmt.Fprintf(tw, "CUDA graphs\t%s\t%s\n", graphs(r.From), graphs(r.To))
	fmt.Fprintf(tw, "activation\t%.2f GiB\t%.2f GiB\n", r.From.PerGPU.ActivationGiB, r.To.PerGPU.ActivationGiB)
	fmt.Fprintf(tw, "sampler path\t%s\t%s\n", r.From.SamplerPath, r.To.SamplerPath)
	fmt.Fprintf(tw, "KV cache\t%.2f GiB\t%.2f GiB\n", r.From.PerGPU.KVCacheGiB, r.To.PerGPU.KVCacheGiB)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Changes) > 0 {
		fmt.Fprintln(w, "\nWhat changes and why:")
	}
	for _, c := range r.Changes {
		ours := ""
		if c.Ours {
			ours = " (headroom's calibration, not vLLM: held at vLLM " + r.From.VLLMVersion + "'s)"
		}
		fmt.Fprintf(w, "  %s: %s -> %s%s\n", c.Label, c.From, c.To, ours)
		for _, b := range c.Causes {
			fmt.Fprintf(w, "      %s (%s): %s [%s]\n", b.Since, b.Rule, b.What, b.Source)
		}
		if c.Unexplained != "" {
			fmt.Fprintf(w, "      %s\n", c.Unexplained)
		}
	}
	for _, f := range r.NewWarnings {
		fmt.Fprintf(w, "new on %s: %s\n", r.To.VLLMVersion, f.Message)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
