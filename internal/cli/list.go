package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

func newGPUsCmd(env Env) *cobra.Command {
	return newListCmd("gpus", "List the GPUs and cloud instance types headroom knows", report.GPUs, func(w io.Writer, _ report.GPUCatalog) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GPU\tTOTAL (CUDA)\tCC\tSOURCE")
		for _, d := range gpu.Devices() {
			fmt.Fprintf(tw, "%s\t%.2f GiB\t%s\t%s\n", d.Name, float64(d.TotalBytes)/(1<<30), d.ComputeCapability, d.Source)
		}
		fmt.Fprintln(tw, "\nINSTANCE TYPE\tGPUS\tCLOUD")
		for _, s := range gpu.SKUs() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, report.GPUCount(s.Count, s.Device.Name), s.Cloud)
		}
		return tw.Flush()
	})
}

func newModelsCmd(env Env) *cobra.Command {
	return newListCmd("models", "List the models in the embedded catalog", report.Models, func(w io.Writer, rows []report.ModelRow) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tPARAMS\tLAYERS\tATTENTION\tMAX CONTEXT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", r.ID, humanCount(r.Params), r.Layers, r.Attention, r.MaxPositions)
		}
		return tw.Flush()
	})
}

// newListCmd is a command that lists what headroom knows: list() as a
// table, JSON or YAML.
func newListCmd[T any](use, short string, list func() T, table func(io.Writer, T) error) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, "table", "json", "yaml"); err != nil {
				return err
			}
			return writeAs(cmd.OutOrStdout(), output, list(), formats[T]{"": table})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, yaml")
	return cmd
}

func runAllGPUs(cmd *cobra.Command, f planFlags, e evidence, opt memory.Options) error {
	rows, err := report.AllGPUs(e, opt)
	if err != nil {
		return usageError{err}
	}
	w := cmd.OutOrStdout()
	if f.output == "json" || f.output == "yaml" {
		return writeAs(w, f.output, rows, nil)
	}
	return writeAllGPUs(w, e, rows)
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print headroom's version and the vLLM versions its rules know (also --version)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what `headroom version` and `headroom --version` print.
func versionLine() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("headroom %s%s; vLLM rules up to %s, calibrated on start-ups of 0.19.0 (H100) and 0.10.1 (A100, TP 2)", v, rev, vllm.Newest())
}
