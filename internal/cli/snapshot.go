package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/telemetry"
)

type snapshotFlags struct {
	count     int
	interval  time.Duration
	output    string
	file      string
	maxSize   string
	keep      int
	nvidiaSMI string
}

func newSnapshotCmd(env Env) *cobra.Command {
	var f snapshotFlags
	cmd := &cobra.Command{
		Use:   "snapshot [--count N] [--interval 2s] [-o csv|json] [--file F]",
		Short: "Record GPU memory per device and per process (NVML, or nvidia-smi)",
		Long: `Reads every GPU's memory (total, used, free) and the memory of each compute
process, through NVML, or nvidia-smi where NVML is missing, and prints one CSV row
per GPU and per process, or one JSON object per reading (-o json), each with a
UTC timestamp.

With --file the records are appended to F one whole line per write, so a crash
never leaves a torn line; --max-size rotates F (F.1 the newest old file, up to
--keep of them).

On a machine without an NVIDIA GPU it says so and exits 2.`,
		Example: `  headroom snapshot
  headroom snapshot --count 60 --interval 2s --file gpu.csv --max-size 10MiB --keep 5
  headroom snapshot -o json --count 0 --interval 10s --file gpu.jsonl
  headroom snapshot --nvidia-smi /usr/local/nvidia/bin/nvidia-smi`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSnapshot(cmd.Context(), env, f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.count, "count", 1, "readings to take; 0 runs until interrupted")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "time between readings")
	fl.StringVarP(&f.output, "output", "o", "csv", "output format: csv (the table; also table), json (one object per line) or yaml (one document per reading)")
	fl.StringVar(&f.file, "file", "", "append to this file instead of printing")
	fl.StringVar(&f.maxSize, "max-size", "", "rotate --file before it passes this size, e.g. 10MiB (default: never)")
	fl.IntVar(&f.keep, "keep", 5, "rotated files to keep with --max-size")
	fl.StringVar(&f.nvidiaSMI, "nvidia-smi", "", "read through this nvidia-smi binary instead of NVML")
	return cmd
}

func runSnapshot(ctx context.Context, env Env, f snapshotFlags) error {
	if f.output == "table" {
		f.output = "csv"
	}
	if f.output != "csv" && f.output != "json" && f.output != "yaml" {
		return badInput("unknown output format %q: use csv (table), json or yaml", f.output)
	}
	if f.count < 0 {
		return badInput("--count must be 0 (until interrupted) or more")
	}
	if f.interval <= 0 {
		return badInput("--interval must be positive, e.g. 2s")
	}
	if f.keep < 0 {
		return badInput("--keep must not be negative")
	}
	var maxBytes int64
	if f.maxSize != "" {
		if f.file == "" {
			return badInput("--max-size rotates --file: give --file too")
		}
		n, err := gpu.ParseBytes(f.maxSize)
		if err != nil {
			return badInput("--max-size: %v", err)
		}
		maxBytes = n
	}
	// The first reading comes before any output, so a missing GPU or a
	// broken nvidia-smi leaves no header behind.
	reader, gpus, err := telemetry.OpenAndRead(ctx, telemetry.OpenOptions{SMIPath: f.nvidiaSMI})
	if err != nil {
		return usageError{err}
	}
	defer reader.Close()
	fmt.Fprintf(env.Stderr, "headroom: note: GPU memory through %s\n", telemetry.Via(reader))

	var header []byte
	if f.output == "csv" {
		header = []byte(telemetry.SnapshotCSVHeader + "\n")
	}
	writeLine := func(b []byte) error {
		_, err := env.Stdout.Write(append(bytes.TrimSuffix(b, []byte{'\n'}), '\n'))
		return err
	}
	if f.file != "" {
		lf, err := telemetry.OpenLineFile(f.file, telemetry.LineFileOptions{MaxBytes: maxBytes, Keep: f.keep, Header: header})
		if err != nil {
			return usageError{err}
		}
		defer lf.Close()
		writeLine = lf.WriteLine
	} else if _, err := env.Stdout.Write(header); err != nil {
		return err
	}
	var line *progress.Line // only while recording to a file
	if f.file != "" {
		line = progress.New(env.Stderr)
		line.Print(fmt.Sprintf("headroom: recording GPU memory every %s to %s (%s)", f.interval, f.file, reader.Source()))
	}
	if f.output == "yaml" {
		// Each reading's JSON object, as one YAML document.
		write := writeLine
		writeLine = func(b []byte) error {
			y, err := yaml.JSONToYAML(b)
			if err != nil {
				return err
			}
			return write(append([]byte("---\n"), bytes.TrimSuffix(y, []byte{'\n'})...))
		}
	}
	rec := telemetry.Recording{Reader: reader, JSON: f.output != "csv", Interval: f.interval, Count: f.count}
	err = rec.Run(ctx, gpus, writeLine, func(n int, gpus []telemetry.GPU) {
		line.Set(fmt.Sprintf("reading %d: %s", n, snapshotSummary(gpus)))
	})
	if err != nil {
		return usageError{err}
	}
	line.Print(fmt.Sprintf("headroom: wrote to %s", f.file))
	return nil
}

func snapshotSummary(gpus []telemetry.GPU) string {
	parts := make([]string, 0, len(gpus))
	for _, g := range gpus {
		if g.UsedBytes == telemetry.Unknown || g.TotalBytes == telemetry.Unknown {
			parts = append(parts, fmt.Sprintf("GPU %d ?", g.Index))
			continue
		}
		parts = append(parts, fmt.Sprintf("GPU %d %.1f/%.1f GiB", g.Index, gibs(g.UsedBytes), gibs(g.TotalBytes)))
	}
	return strings.Join(parts, ", ")
}
