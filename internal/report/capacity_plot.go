package report

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"headroom.dev/headroom/chart"
)

// PlotCapacity draws the best option's replicas over time against the
// arrival rate, in two panels over the trace's hours: the arrival rate
// per window, and the replicas each window needs, the autoscaler's
// replayed replicas and the static fleet; format is chart's (svg or png).
func PlotCapacity(w io.Writer, r *CapacityReport, format string) error {
	if len(r.Options) == 0 || len(r.Options[0].Windows) == 0 {
		return fmt.Errorf("nothing to plot: no option was sized")
	}
	o := r.Options[0]
	hours := func(s float64) float64 { return s / 3600 }
	rate, need := plotter.XYs{}, plotter.XYs{}
	for _, win := range o.Windows {
		// Steps: a window's value holds over the window.
		for _, x := range []float64{win.StartS, win.StartS + r.WindowS} {
			rate = append(rate, plotter.XY{X: hours(x), Y: win.RatePerS})
			need = append(need, plotter.XY{X: hours(x), Y: float64(win.Replicas)})
		}
	}
	mk := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "hours"
		p.Add(plotter.NewGrid())
		p.Y.Min = 0
		return p
	}
	line := func(p *plot.Plot, xy plotter.XYs, label string, dash bool, c color.Color) error {
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = c
		if dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if label != "" {
			p.Legend.Add(label, l)
		}
		return nil
	}
	black := color.Black
	rp := mk(fmt.Sprintf("arrival rate (per %gs window)", r.WindowS), "req/s")
	if err := line(rp, rate, "", false, black); err != nil {
		return err
	}
	reps := mk(fmt.Sprintf("replicas of %s (%d GPU(s) each)", o.GPU, o.GPUsPerReplica), "replicas")
	reps.Legend.Top, reps.Legend.Left = true, true
	if err := line(reps, need, "fewest that meet the SLO, per window", false, black); err != nil {
		return err
	}
	if a := o.Autoscaler; a != nil && len(a.Replay.Series) > 0 {
		xy := make(plotter.XYs, 0, len(a.Replay.Series))
		for _, s := range a.Replay.Series {
			xy = append(xy, plotter.XY{X: hours(s.StartS), Y: float64(s.Replicas)})
		}
		if err := line(reps, xy, "autoscaler, replayed", true, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}); err != nil {
			return err
		}
	}
	// Room above the highest line for the legend.
	reps.Y.Max = float64(max(o.PeakReplicas, 1)) * 1.35
	if a := o.Autoscaler; a != nil {
		reps.Y.Max = max(reps.Y.Max, float64(a.Replay.PeakReplicas)*1.35)
	}
	if o.Static != nil {
		end := o.Windows[len(o.Windows)-1].StartS + r.WindowS
		xy := plotter.XYs{{X: 0, Y: float64(o.PeakReplicas)}, {X: hours(end), Y: float64(o.PeakReplicas)}}
		if err := line(reps, xy, "static fleet for the peak", true, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}); err != nil {
			return err
		}
	}
	return chart.WriteStacked(w, format, []*plot.Plot{rp, reps}, 8*vg.Inch, 6*vg.Inch)
}
