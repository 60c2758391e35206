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
	if err := checkFormat(f.output, "table", "json", "yaml"); err != nil {
		return err
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
	if err := writeAs(cmd.OutOrStdout(), f.output, r, formats[report.UpgradeReport]{"": writeUpgradeTable}); err != nil {
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
	word := map[string]string{"ok": "OK", "stops": "BLOCKED", "loses-kv": "BLOCKED"}[r.Verdict]
	fmt.Fprintf(w, "Upgrade vLLM %s -> %s: %s: %s\n\n", r.From.VLLMVersion, r.To.VLLMVersion, word, r.Why)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tvLLM %s\tvLLM %s\n", r.From.VLLMVersion, r.To.VLLMVersion)
	starts := func(b bool) string {
		if b {
			return "starts"
		}
		return "does not start"
	}
	fmt.Fprintf(tw, "verdict\t%s\t%s\n", starts(r.From.Fits), starts(r.To.Fits))
	fmt.Fprintf(tw, "KV cache tokens\t%d\t%d (%+.1f%%)\n", r.From.KVCacheTokens, r.To.KVCacheTokens, -100*r.KVLoss)
	fmt.Fprintf(tw, "largest max-model-len\t%d\t%d\n", r.From.MaxFitLen, r.To.MaxFitLen)
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
		fmt.Fprintf(w, "  %s: %s -> %s\n", c.Term, c.From, c.To)
		for _, b := range c.Causes {
			fmt.Fprintf(w, "      %s (%s): %s [%s]\n", b.Since, b.Rule, b.What, b.Source)
		}
		if c.Unexplained != "" {
			fmt.Fprintf(w, "      %s\n", c.Unexplained)
		}
	}
	for _, f := range r.NewWarnings {
		fmt.Fprintf(w, "new on %s: [%s] %s\n", r.To.VLLMVersion, f.Code, f.Message)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
