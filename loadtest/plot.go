package loadtest

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"headroom.dev/headroom/chart"
)

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
)

// Plot draws r's time series in three panels over the run's time: the
// server's KV-cache usage; requests (running and waiting at the server,
// in flight at the client); preemptions (cumulative) and failed requests.
// A series the server did not report is left out, and its panel says so.
func Plot(w io.Writer, r *Result, format string) error {
	type series struct {
		name string
		c    color.Color
		y    func(Point) (float64, bool)
	}
	opt := func(p *float64) (float64, bool) {
		if p == nil {
			return 0, false
		}
		return *p, true
	}
	panels := []struct {
		title, ylabel string
		series        []series
	}{
		{"KV-cache usage", "%", []series{
			{"KV usage", blue, func(p Point) (float64, bool) { v, ok := opt(p.KVUsage); return v * 100, ok }},
		}},
		{"Requests", "requests", []series{
			{"running (server)", blue, func(p Point) (float64, bool) { return opt(p.Running) }},
			{"waiting (server)", orange, func(p Point) (float64, bool) { return opt(p.Waiting) }},
			{"in flight (client)", green, func(p Point) (float64, bool) { return float64(p.Sent - p.Done - p.Failed), true }},
		}},
		{"Preemptions and failures", "cumulative", []series{
			{"preemptions", red, func(p Point) (float64, bool) { return opt(p.Preemptions) }},
			{"failed requests", orange, func(p Point) (float64, bool) { return float64(p.Failed), true }},
		}},
	}
	plots := make([]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Y.Label.Text = pn.ylabel
		p.X.Label.Text = "time (s)"
		p.Y.Min = 0
		p.Legend.Top = true
		drawn := 0
		for _, s := range pn.series {
			var xys plotter.XYs
			for _, pt := range r.Series {
				if y, ok := s.y(pt); ok {
					xys = append(xys, plotter.XY{X: pt.TS, Y: y})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("plot: %v", err)
			}
			l.Color = s.c
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(s.name, l)
			drawn++
		}
		if drawn < len(pn.series) {
			p.Title.Text += " (no server metrics for some series)"
		}
		if i == 0 && drawn > 0 {
			p.Y.Max = 100
		}
		plots[i] = p
	}
	return chart.WriteStacked(w, format, plots, 8*vg.Inch, 9*vg.Inch)
}
