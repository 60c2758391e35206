package cli

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// engineLine is a simulated engine in one line: model, GPUs, pool, limits.
func engineLine(model string, count int, gpu string, s report.SimSettings) string {
	return fmt.Sprintf("%s on %s, vLLM %s rules: %s KV blocks of %d tokens (%s tokens), max-num-seqs %d, max-num-batched-tokens %d, max-model-len %d",
		model, report.GPUCount(count, gpu), s.VLLMVersion, humanInt(int64(s.NumGPUBlocks)), s.BlockSize, humanInt(s.KVCacheTokens), s.MaxNumSeqs, s.MaxNumBatchedTokens, s.MaxModelLen)
}

// ms writes milliseconds for a column headed ms: a number, never with
// another unit (thousands separated past 999).
func ms(v float64) string {
	if v >= 100 {
		return humanInt(int64(math.Round(v)))
	}
	return fmt.Sprintf("%.1f", v)
}

// msUnit is a duration with its unit, where no column names one: "850ms",
// "2.0s".
func msUnit(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fs", v/1000)
	}
	if v >= 100 {
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", math.Round(v*100)) }

// provenance is a model's name without how it was fitted (what follows
// " ("), for a table that leaves the long story to -v and the JSON.
func provenance(s, more string) string {
	if i := strings.Index(s, " ("); i > 0 {
		return s[:i] + " (" + more + " for how it was fitted)"
	}
	return s
}

func writeSimulateTable(w io.Writer, r *report.SimReport, verbose bool) error {
	if r.RefusedLine != "" {
		fmt.Fprintf(w, "REFUSED: %s\n", r.RefusedLine)
	}
	if r.FellBehindLine != "" {
		fmt.Fprintf(w, "FELL BEHIND: %s\n", r.FellBehindLine)
	}
	fmt.Fprintln(w, engineLine(r.Model, r.GPUCount, r.GPU, r.Settings))
	fleet := len(r.Replicas) / max(r.EnginesPerReplica, 1)
	if fleet > 0 {
		fmt.Fprintf(w, "a fleet of %d such replicas behind %s routing; the numbers below are the whole fleet's (KV usage its busiest engine's, engine time each engine's mean)\n", fleet, r.Router)
	}
	step := r.StepTime
	if !verbose {
		step = provenance(step, "-v or -o json")
	}
	fmt.Fprintf(w, "traffic: %s\nstep time: %s\n", r.Traffic, step)
	for _, f := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", f.Message)
	}
	fmt.Fprintln(w)
	band := ""
	if c := r.Confidence; c != nil {
		band = " (" + c.Band(c.ThroughputPct) + ")"
	}
	fmt.Fprintf(w, "%s requests finished in %.1f s simulated (%s steps): %.2f req/s, %s output tokens/s%s\n",
		humanInt(r.Requests), r.DurationS, humanInt(r.Steps), r.RequestsPerS, humanInt(int64(r.OutputTokensPerS)), band)
	if r.GoodputPerS != nil {
		fmt.Fprintf(w, "goodput: %.2f req/s (%s of the requests meet %s)\n", *r.GoodputPerS, humanInt(*r.GoodRequests), r.Goodput)
	}
	if r.Rejected > 0 {
		var parts []string
		for _, k := range r.SortedReasons() {
			parts = append(parts, fmt.Sprintf("%d %s", r.RejectedBy[k], k))
		}
		fmt.Fprintf(w, "rejected: %s (as vLLM would refuse them)\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "preemptions: %s (%s requests preempted at least once)\n", humanInt(r.Preemptions), humanInt(r.PreemptedRequests))
	if fleet > 0 {
		fmt.Fprintf(w, "peak: running %d, waiting %d over the fleet; KV cache %s on its busiest engine", r.MaxRunning, r.MaxWaiting, pct(r.MaxKVUsage))
	} else {
		fmt.Fprintf(w, "peak: KV cache %s, running %d, waiting %d", pct(r.MaxKVUsage), r.MaxRunning, r.MaxWaiting)
	}
	if r.PrefixHitRate > 0 {
		fmt.Fprintf(w, ", prefix-cache hits %s of prompt tokens", pct(r.PrefixHitRate))
	}
	fmt.Fprintln(w)
	if line := specLine(r.Speculative, r.SpecDecode); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := splitLine(r.StepSplit, r.DurationS); line != "" {
		if fleet > 0 {
			// The split is the engines' mean: one engine's time, not the
			// fleet's sum.
			line = "each " + strings.Replace(line, " s: ", " s on average: ", 1)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	if r.Requests == 0 {
		// No latency was measured: zeros would read as instant answers.
		fmt.Fprintln(w, "no request finished: no latencies")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		c := r.Confidence
		if c != nil {
			fmt.Fprintln(tw, "ms\tmean\tp50\tp90\tp99\tmax\tband\t")
		} else {
			fmt.Fprintln(tw, "ms\tmean\tp50\tp90\tp99\tmax\t")
		}
		for _, l := range []struct {
			name string
			v    sim.Latency
			pct  func(sim.Confidence) float64
		}{{"TTFT", r.TTFT, func(c sim.Confidence) float64 { return c.TTFTPct }}, {"TPOT", r.TPOT, func(c sim.Confidence) float64 { return c.TPOTPct }},
			{"ITL", r.ITL, func(c sim.Confidence) float64 { return c.TPOTPct }}, {"E2E", r.E2E, func(c sim.Confidence) float64 { return c.E2EPct }}} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t", l.name, ms(l.v.Mean), ms(l.v.P50), ms(l.v.P90), ms(l.v.P99), ms(l.v.Max))
			if c != nil {
				fmt.Fprintf(tw, "±%.0f%%\t", l.pct(*c))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if c := r.Confidence; c != nil {
		writeEvidence(w, "", *c)
	}
	if len(r.SLO) > 0 {
		fmt.Fprintln(w)
		for _, s := range r.SLO {
			verdict := "met"
			if !s.Met {
				verdict = "MISSED"
			}
			if s.Name == "error_rate" {
				fmt.Fprintf(w, "SLO error_rate <= %s: %s, %s\n", pct(s.LimitRate), pct(s.Rate), verdict)
				continue
			}
			fmt.Fprintf(w, "SLO %s <= %s: %s, %s\n", s.Name, msUnit(s.LimitMS), msUnit(s.ValueMS), verdict)
		}
		if r.Rejected > 0 {
			fmt.Fprintf(w, "SLOs count as missed: %d requests were rejected\n", r.Rejected)
		}
	}
	if len(r.Compare) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SETTINGS\tUTIL\tMAX-MODEL-LEN\tMAX-NUM-SEQS\tKV BLOCKS\tTTFT p99 ms\tTPOT p99 ms\tE2E p99 ms\tPREEMPT\tREJECTED\tPEAK KV\tSLO")
		for _, c := range r.Compare {
			label := c.Label
			if c.MaxTokens > 0 {
				label += fmt.Sprintf(" (%d-%d tokens)", c.MinTokens, c.MaxTokens)
			}
			slo := "-"
			if c.SLOMet != nil {
				slo = map[bool]string{true: "met", false: "missed"}[*c.SLOMet]
			}
			fmt.Fprintf(tw, "%s\t%.2f\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", label, c.Settings.GPUMemoryUtilization, c.Settings.MaxModelLen,
				c.Settings.MaxNumSeqs, humanInt(int64(c.Settings.NumGPUBlocks)), ms(c.TTFT.P99), ms(c.TPOT.P99), ms(c.E2E.P99), c.Preemptions, c.Rejected, pct(c.MaxKVUsage), slo)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Replicas) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head, dp := "REPLICA", max(r.EnginesPerReplica, 1)
		if dp > 1 {
			head = "REPLICA.ENGINE"
		}
		fmt.Fprintln(tw, head+"\tREQUESTS\tTTFT p50\tTTFT p99\tTPOT p50\tTPOT p99\tPREEMPT\tPEAK KV\tPEAK WAITING")
		for i, p := range r.Replicas {
			label := strconv.Itoa(i)
			if dp > 1 {
				label = fmt.Sprintf("%d.%d", i/dp, i%dp)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\n", label, humanInt(p.Requests), ms(p.TTFT.P50), ms(p.TTFT.P99), ms(p.TPOT.P50), ms(p.TPOT.P99),
				p.Preemptions, pct(p.MaxKVUsage), p.MaxWaiting)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// writeEvidence prints what the bands stand on: "fitted", or
// "extrapolated" and each condition outside the training rows.
func writeEvidence(w io.Writer, indent string, c sim.Confidence) {
	if c.Fitted() {
		fmt.Fprintf(w, "%sevidence: fitted (GPU architecture, model family, weights path, TP and vLLM version all in the training runs); bands from %s\n", indent, c.Source)
		return
	}
	fmt.Fprintf(w, "%sevidence: extrapolated; bands from %s, widened for conditions outside the training runs:\n", indent, c.Source)
	for _, o := range c.Outside {
		fmt.Fprintf(w, "%s  - %s\n", indent, o)
	}
}

// evidenceNotes are the bands and the evidence as a note, for layouts
// that print notes last (the bench layout).
func evidenceNotes(c *sim.Confidence) []string {
	if c == nil {
		return nil
	}
	return []string{"bands from " + c.Source + ": " + c.Summary()}
}

// writeBench prints a run in vllm bench serve's layout ("Serving
// Benchmark Result", vllm/benchmarks/serve.py: 40-column labels, values
// to two decimals; the latencies of --percentile-metrics with the mean,
// the median and each of --metric-percentiles), after a header saying
// what it is, so a measured and a predicted result read side by side,
// line by line. simulate and loadtest both print through it.
func writeBench(w io.Writer, header string, b report.BenchResult, notes []string) error {
	fmt.Fprintln(w, header)
	line := func(label string, v any) {
		switch x := v.(type) {
		case float64:
			fmt.Fprintf(w, "%-40s %-10.2f\n", label, x)
		default:
			fmt.Fprintf(w, "%-40s %-10v\n", label, x)
		}
	}
	head := func(title string, fill string) {
		pad := 50 - len(title)
		fmt.Fprintf(w, "%s%s%s\n", strings.Repeat(fill, pad/2), title, strings.Repeat(fill, pad-pad/2))
	}
	head(" Serving Benchmark Result ", "=")
	line("Successful requests:", b.Completed)
	if b.Failed > 0 {
		line("Failed requests:", b.Failed)
	}
	if b.MaxConcurrency > 0 {
		line("Maximum request concurrency:", b.MaxConcurrency)
	}
	line("Benchmark duration (s):", b.DurationS)
	line("Total input tokens:", b.InputTokens)
	line("Total generated tokens:", b.OutputTokens)
	line("Request throughput (req/s):", b.RequestsPerS)
	if b.GoodputPerS != nil {
		line("Request goodput (req/s):", *b.GoodputPerS)
	}
	line("Output token throughput (tok/s):", b.OutputTokensPerS)
	line("Total Token throughput (tok/s):", b.TotalTokensPerS)
	if b.Completed == 0 {
		// No latency was measured: zeros would read as instant answers.
		head("", "=")
		fmt.Fprintln(w, "no request finished: no latencies")
		for _, n := range notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
		return nil
	}
	for _, m := range []struct{ metric, title, name string }{
		{"ttft", "Time to First Token", "TTFT"}, {"tpot", "Time per Output Token (excl. 1st token)", "TPOT"},
		{"itl", "Inter-token Latency", "ITL"}, {"e2el", "End-to-end Latency", "E2EL"}} {
		if !b.Output.Shows(m.metric) {
			continue
		}
		l := b.Latency(m.metric)
		head(m.title, "-")
		line("Mean "+m.name+" (ms):", l.Mean)
		line("Median "+m.name+" (ms):", l.P50)
		for _, p := range b.Output.Percentiles {
			line(workload.PercentileLabel(p)+" "+m.name+" (ms):", report.PercentileOf(l, p))
		}
	}
	head("", "=")
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// simBenchHeader says what a simulated bench result is.
func simBenchHeader(r *report.SimReport) string {
	if r.FellBehindLine != "" {
		return fmt.Sprintf("FELL BEHIND: %s\nheadroom simulate: the predicted result of %s\n%s\nstep time: %s", r.FellBehindLine, r.Traffic, engineLine(r.Model, r.GPUCount, r.GPU, r.Settings), r.StepTime)
	}
	return fmt.Sprintf("headroom simulate: the predicted result of %s\n%s\nstep time: %s", r.Traffic, engineLine(r.Model, r.GPUCount, r.GPU, r.Settings), r.StepTime)
}

// splitLine says where the engine's busy time went: its share of the run,
// then each mechanism's share of it, the largest first, those under 0.5%
// left out.
func splitLine(p *sim.StepParts, duration float64) string {
	if p == nil {
		return ""
	}
	busy := p.Total()
	if busy <= 0 || duration <= 0 {
		return ""
	}
	type part struct {
		name string
		v    float64
	}
	parts := []part{{"dense GEMMs", p.Dense}, {"expert GEMMs", p.Experts}, {"attention", p.Attention},
		{"all-reduce", p.AllReduce}, {"GEMM floors", p.GEMMFloors}, {"small kernels", p.SmallKernels},
		{"eager launches", p.Launch}, {"drafter", p.Draft}, {"engine CPU", p.CPU}}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].v > parts[j].v })
	var out []string
	for _, q := range parts {
		if q.v/busy >= 0.005 {
			out = append(out, fmt.Sprintf("%s %s", q.name, pct(q.v/busy)))
		}
	}
	line := fmt.Sprintf("engine busy %.1f of %.1f s: %s", busy, duration, strings.Join(out, ", "))
	if p.Overlapped/busy >= 0.005 {
		line += fmt.Sprintf(" (%s of it CPU and GPU at once)", pct(p.Overlapped/busy))
	}
	return line
}
