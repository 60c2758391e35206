package report

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/sim"
)

// PlotSimulation draws a run's series in three panels over simulated time:
// KV-cache usage, running and waiting requests, and preemptions per
// window; format is chart's (svg or png).
func PlotSimulation(w io.Writer, r *sim.Report, format string) error {
	panels, err := seriesPlots(r)
	if err != nil {
		return err
	}
	return chart.WriteStacked(w, format, panels, 8*vg.Inch, 7*vg.Inch)
}

func seriesPlots(r *sim.Report) ([]*plot.Plot, error) {
	n := len(r.Series)
	kv, running, waiting, pre := make(plotter.XYs, n), make(plotter.XYs, n), make(plotter.XYs, n), make(plotter.XYs, n)
	for i, w := range r.Series {
		x := w.StartS
		kv[i] = plotter.XY{X: x, Y: w.KVUsage * 100}
		running[i] = plotter.XY{X: x, Y: float64(w.Running)}
		waiting[i] = plotter.XY{X: x, Y: float64(w.Waiting)}
		pre[i] = plotter.XY{X: x, Y: float64(w.Preemptions)}
	}
	mk := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "simulated seconds"
		p.Add(plotter.NewGrid())
		return p
	}
	line := func(p *plot.Plot, xy plotter.XYs, label string, dash bool) error {
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		if dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if label != "" {
			p.Legend.Add(label, l)
		}
		return nil
	}
	kvp := mk(fmt.Sprintf("KV-cache usage (peak per %gs window)", r.WindowS), "%")
	kvp.Y.Min, kvp.Y.Max = 0, 100
	reqs := mk("requests (peak per window)", "requests")
	reqs.Legend.Top = true
	prep := mk("preemptions per window", "preemptions")
	var errs []error
	errs = append(errs, line(kvp, kv, "", false), line(reqs, running, "running", false), line(reqs, waiting, "waiting", true), line(prep, pre, "", false))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return []*plot.Plot{kvp, reqs, prep}, nil
}
