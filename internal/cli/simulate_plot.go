package cli

import (
	"bytes"
	"fmt"
	"os"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
)

// plotSeries writes the run's panels (report.PlotSimulation) to name, SVG
// or PNG by its extension.
func plotSeries(name string, r *sim.Report) error {
	if err := plotFormat(name); err != nil {
		return err
	}
	format, _ := chart.FormatOf(name)
	var buf bytes.Buffer
	if err := report.PlotSimulation(&buf, r, format); err != nil {
		return fmt.Errorf("--plot %s: %v", name, err)
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return badInput("--plot: %v", unwrapPathError(err))
	}
	return nil
}

// plotFormat checks --plot's name before a run: SVG or PNG by extension.
func plotFormat(name string) error {
	if name == "" {
		return nil
	}
	if _, err := chart.FormatOf(name); err != nil {
		return badInput("--plot %v", err)
	}
	return nil
}
