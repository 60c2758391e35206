package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"headroom.dev/headroom/chart"
	"headroom.dev/headroom/internal/report"
)

// plotCapacity writes report.PlotCapacity to name, SVG or PNG by its
// extension.
func plotCapacity(out *output, r *report.CapacityReport) error {
	format, _ := chart.FormatOf(out.name)
	var buf bytes.Buffer
	if err := report.PlotCapacity(&buf, r, format); err != nil {
		return fmt.Errorf("--plot %s: %v", out.name, err)
	}
	return out.write(buf.Bytes())
}

func dur(s float64) string { return (time.Duration(s) * time.Second).String() }

func usd(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("$%.2f", v)
}

func writeCapacityTable(w io.Writer, r *report.CapacityReport) error {
	fmt.Fprintf(w, "%s, SLO %s in every %s window, router %s\ntraffic: %s\n", r.Model, strings.Join(r.SLO, ","), dur(r.WindowS), r.Router, r.Traffic)
	best := r.Options[0]
	if a := best.Autoscaler; r.Best != "" && a != nil {
		// The answer is the fleet handed over: the autoscaler (or the
		// static fleet in its place), replayed.
		fmt.Fprintf(w, "cheapest that meets the SLO: %s, %d GPU(s) a replica, %s: SLO met in %d of %d windows, %.1f GPU-hours, %s\n",
			best.GPU, best.GPUsPerReplica, handedFleet(a), a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours, usd(a.Replay.CostUSD))
		fmt.Fprintf(w, "  beside it: each window sized alone, %d replicas at the peak, %.1f on average, %.1f GPU-hours, %s; a static fleet of %d: %.1f GPU-hours, %s%s\n",
			best.PeakReplicas, best.MeanReplicas, best.GPUHours, usd(best.CostUSD), best.PeakReplicas, best.Static.GPUHours, usd(best.Static.CostUSD), staticSaid(best.Static))
	} else {
		fmt.Fprintln(w, "no option meets the SLO")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tGPUs/replica\tmax-num-seqs\tSLO capacity\thanded over: replicas\tSLO met\tGPU-hours\tcost\t$/GPU-hour\tper window: replicas peak/mean\tGPU-hours\tstatic: GPU-hours")
	for _, o := range r.Options {
		if o.NoFit {
			fmt.Fprintf(tw, "%s\t%d\t-\tdoes not fit\t\t\t\t\t\t\t\t\n", o.GPU, o.GPUsPerReplica)
			continue
		}
		if o.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\tnot simulated (see below)\t\t\t\t\t\t\t\t\n", o.GPU)
			continue
		}
		capy := "never met"
		switch {
		case o.Refused != "":
			capy = "refuses requests (see below)"
		case o.SLOCapacityPerS > 0:
			capy = fmt.Sprintf("%.3g req/s", o.SLOCapacityPerS)
			if c := o.Confidence; c != nil {
				capy += fmt.Sprintf(" ±%.0f%%", c.ThroughputPct)
			}
		}
		reps, hours := "-", "-"
		if o.SLOCapacityPerS > 0 {
			reps, hours = fmt.Sprintf("%d / %.1f", o.PeakReplicas, o.MeanReplicas), fmt.Sprintf("%.1f", o.GPUHours)
			if !o.Met {
				reps = fmt.Sprintf("over %d", o.PeakReplicas)
			}
		}
		price := "-"
		if o.USDPerGPUHour > 0 {
			price = fmt.Sprintf("%.2f", o.USDPerGPUHour)
		}
		as, met, asH, cost, stH := "-", "-", "-", "-", "-"
		if a := o.Autoscaler; a != nil {
			as = fmt.Sprintf("%d-%d", a.MinReplicas, a.MaxReplicas)
			met, asH, cost = fmt.Sprintf("%s (%d/%d)", pct(a.Replay.SLOAttainment), a.Replay.WindowsMet, a.Replay.Windows), fmt.Sprintf("%.1f", a.Replay.GPUHours), usd(a.Replay.CostUSD)
		}
		if s := o.Static; s != nil {
			stH = fmt.Sprintf("%.1f", s.GPUHours)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.GPU, o.GPUsPerReplica, o.Settings.MaxNumSeqs, capy, as, met, asH, cost, price, reps, hours, stH)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if a := best.Autoscaler; a != nil && a.Policy == report.PolicyStatic {
		fmt.Fprintf(w, "\n%s for %s (-o keda, -o hpa, --keda FILE, --hpa FILE write it as an autoscaler held at %d replicas)\n", handedFleet(a), best.GPU, a.MinReplicas)
		fmt.Fprintf(w, "  %s\n", policyLine(best))
		fmt.Fprintf(w, "  replayed: SLO met in %d of %d windows, %.1f GPU-hours\n", a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours)
	} else if a != nil {
		fmt.Fprintf(w, "\nautoscaler for %s (HPA/KEDA: -o keda, -o hpa, --keda FILE, --hpa FILE): add replicas when a replica answers more than %.3g req/s (rate of %s), or %s passes %g a replica, or %s passes %g on average\n",
			best.GPU, a.TargetRatePerS, a.RateMetric, a.WaitingMetric, a.TargetWaiting, a.KVMetric, a.TargetKV)
		fmt.Fprintf(w, "  %.3g req/s is the SLO capacity %.3g req/s less headroom for the rate's rise over a start-up and the HPA's 10%% tolerance; the KV and waiting targets are guards, one replica's usage (mean) and queue (95th percentile) at the capacity\n",
			a.TargetRatePerS, best.SLOCapacityPerS)
		fmt.Fprintf(w, "  start-up %s (%s), cool-down %s, %d to %d replicas\n", dur(a.StartupS), a.StartupSource, dur(a.CoolDownS), a.MinReplicas, a.MaxReplicas)
		fmt.Fprintf(w, "  %s\n", policyLine(best))
		fmt.Fprintf(w, "  replayed: SLO met in %d of %d windows, %.1f GPU-hours, peak %d, %s\n", a.Replay.WindowsMet, a.Replay.Windows, a.Replay.GPUHours, a.Replay.PeakReplicas, flapsSaid(a))
	}
	fmt.Fprintf(w, "\nSLO capacity measured on: %s\n", best.CapacityProbe)
	for _, o := range r.Options {
		if c := o.Confidence; c != nil && o.SLOCapacityPerS > 0 {
			fmt.Fprintf(w, "  how sure, %s: %s\n", o.GPU, c.Summary())
		}
	}
	fmt.Fprintf(w, "prices: %s\n", r.Prices)
	for _, o := range r.Options {
		if o.PriceSource != "" {
			fmt.Fprintf(w, "  %s: %s a GPU-hour (%s)\n", o.GPU, usd(o.USDPerGPUHour), o.PriceSource)
		}
	}
	seen := map[string]bool{}
	for _, o := range r.Options {
		if o.Error != "" {
			fmt.Fprintf(w, "%s not simulated: %s\n", o.GPU, o.Error)
		}
		if o.Refused != "" {
			fmt.Fprintf(w, "%s: %s\n", o.GPU, o.Refused)
		}
	}
	for _, o := range r.Options {
		for _, f := range o.Warnings {
			if !seen[f.Message] {
				seen[f.Message] = true
				fmt.Fprintf(w, "warning: %s\n", f.Message)
			}
		}
	}
	for _, o := range r.Options {
		for _, n := range o.Notes {
			if !seen[n] {
				seen[n] = true
				fmt.Fprintf(w, "note: %s\n", n)
			}
		}
	}
	return nil
}

// handedFleet is the fleet handed over in words.
func handedFleet(a *report.Autoscaler) string {
	if a.Policy == report.PolicyStatic {
		if a.MinReplicas == 1 {
			return "a static fleet of 1 replica"
		}
		return fmt.Sprintf("a static fleet of %d replicas", a.MinReplicas)
	}
	return fmt.Sprintf("autoscaled from %d to %d replicas", a.MinReplicas, a.MaxReplicas)
}

// staticSaid says how the static fleet's verdict was reached.
func staticSaid(s *report.FleetRun) string {
	if s.Replayed {
		return fmt.Sprintf(" (replayed: SLO met in %d of %d windows)", s.WindowsMet, s.Windows)
	}
	return " (worked out: every window met on its own replay with no more)"
}

// policyLine says the replica bound handed over and why.
func policyLine(o report.CapacityOption) string {
	a := o.Autoscaler
	if a.Policy == report.PolicyStatic {
		if a.AutoscaledGPUHours > 0 {
			return fmt.Sprintf("static: it meets every window for less than the autoscaler would (%.1f GPU-hours against %.1f), or where the autoscaler missed windows", a.Replay.GPUHours, a.AutoscaledGPUHours)
		}
		return fmt.Sprintf("static: every window needs %d replicas, so the autoscaler, capped at that peak, never moves", a.MinReplicas)
	}
	asks := fmt.Sprintf("the rate target alone asks for %d at the busiest window", a.RateAsks)
	if a.Policy == report.PolicyUncapped {
		return fmt.Sprintf("uncapped (up to %d): capped at the ideal peak of %d it met fewer windows; %s, above the static fleet of %d", a.MaxReplicas, o.PeakReplicas, asks, o.PeakReplicas)
	}
	if a.RateAsks > a.MaxReplicas {
		return fmt.Sprintf("capped at the ideal peak, %d: %s, more than any window needs", a.MaxReplicas, asks)
	}
	return fmt.Sprintf("capped at the ideal peak, %d (%s)", a.MaxReplicas, asks)
}

// flapsSaid says the replay's reversals.
func flapsSaid(a *report.Autoscaler) string {
	if a.Flaps == 0 {
		return "no flapping (no replica added back within twice the cool-down of one removed, nor removed within it of one added)"
	}
	times := fmt.Sprintf("%d times", a.Flaps)
	if a.Flaps == 1 {
		times = "once"
	}
	return "flapping " + times + " (a replica added back within twice the cool-down of one removed, or removed within it of one added): a longer --cool-down damps it"
}
