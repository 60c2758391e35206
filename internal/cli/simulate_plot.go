package cli

import (
	"bytes"
	"fmt"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
)

// plotSeries writes the run's panels (report.PlotSimulation) to name, SVG
// or PNG by its extension.
func plotSeries(out *output, r *sim.Report) error {
	format, _ := chart.FormatOf(out.name)
	var buf bytes.Buffer
	if err := report.PlotSimulation(&buf, r, format); err != nil {
		return fmt.Errorf("--plot %s: %v", out.name, err)
	}
	return out.write(buf.Bytes())
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
