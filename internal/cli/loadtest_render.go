package cli

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/progress"
)

func writePlot(out *output, r *loadtest.Result, format string) error {
	var buf bytes.Buffer
	if err := loadtest.Plot(&buf, r, format); err != nil {
		return usageError{fmt.Errorf("--plot %s: %v", out.name, err)}
	}
	return out.write(buf.Bytes())
}

// loadtestProgress is the live line on a terminal, a plain line every 10
// readings elsewhere.
type loadtestProgress struct {
	line *progress.Line
	n    int
	mu   sync.Mutex
	warm *time.Timer
}

func newLoadtestProgress(w io.Writer) *loadtestProgress {
	return &loadtestProgress{line: progress.New(w)}
}

// warmupSilence is how long a warm-up request waits before the progress
// says so: a server that answers at once adds no line to the output.
const warmupSilence = 2 * time.Second

// warmup is told of each warm-up request: on a terminal the live line
// names it; otherwise a line is printed once it has waited warmupSilence.
func (p *loadtestProgress) warmup(i, n, words int) {
	p.stopWarmup()
	msg := fmt.Sprintf("warm-up request %d of %d (%d words) sent; it gives up after %s", i, n, words, loadtest.DefaultWarmupTimeout)
	if p.line.Live() {
		p.line.Set(msg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warm = time.AfterFunc(warmupSilence, func() {
		if !p.line.Live() {
			p.line.Print(fmt.Sprintf("headroom: loadtest warm-up request %d of %d has had no answer for %s (it gives up after %s)", i, n, warmupSilence, loadtest.DefaultWarmupTimeout))
		}
	})
}

func (p *loadtestProgress) stopWarmup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.warm != nil {
		p.warm.Stop()
		p.warm = nil
	}
}

func (p *loadtestProgress) update(pr loadtest.Progress, pt *loadtest.Point) {
	p.stopWarmup()
	p.n++
	if !p.line.Live() && p.n%10 != 1 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%5.0fs  sent %d  done %d  errors %d", pr.Elapsed.Seconds(), pr.Sent, pr.Done, pr.Failed)
	if pr.HaveTTFT {
		fmt.Fprintf(&b, "  TTFT p50 %s", pr.TTFTP50.Round(time.Millisecond))
	} else {
		b.WriteString("  TTFT p50 -")
	}
	if pt.KVUsage != nil {
		fmt.Fprintf(&b, "  KV %.1f%%", *pt.KVUsage*100)
	}
	if pt.Running != nil && pt.Waiting != nil {
		fmt.Fprintf(&b, "  running %s  waiting %s", humanFloat(*pt.Running), humanFloat(*pt.Waiting))
	}
	if p.line.Live() {
		p.line.Set(b.String())
		return
	}
	p.line.Print("headroom: loadtest " + b.String())
}

func (p *loadtestProgress) finish() {
	p.stopWarmup()
	p.line.Clear()
}

func writeLoadtestTable(w io.Writer, r *loadtest.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	load := r.Load.Mode + " loop"
	switch {
	case r.Load.Concurrency > 0:
		load += fmt.Sprintf(", %d in flight", r.Load.Concurrency)
	case r.Load.Rate > 0:
		load += fmt.Sprintf(", %s %g/s", r.Load.Arrival, r.Load.Rate)
	case r.Load.Speedup > 0:
		load += fmt.Sprintf(", the log's timing x%g", r.Load.Speedup)
	}
	fmt.Fprintf(tw, "target\t%s (model %s)\n", r.Target.URL, r.Target.Model)
	fmt.Fprintf(tw, "load\t%s, %s\n", load, r.Load.Source)
	fmt.Fprintf(tw, "requests\t%d sent, %d completed, %d failed%s\n", r.Requests, r.Completed, r.Failed, errorKinds(r.Errors))
	if r.Load.Mode == "open" {
		req := ""
		if r.SendRate.Requested > 0 {
			req = fmt.Sprintf(" of %g/s requested", r.SendRate.Requested)
		}
		fmt.Fprintf(tw, "send rate\t%.2f/s achieved%s (send lag p99 %.2f ms, max %.2f ms)\n", r.SendRate.Achieved, req, r.SendLag.P99, r.SendLag.Max)
	}
	fmt.Fprintf(tw, "duration\t%.1f s\n", r.DurationS)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tmean\tp50\tp90\tp99\tmax\t")
	for _, l := range []struct {
		name string
		v    loadtest.Latency
	}{{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"ITL", r.ITL}, {"E2E", r.E2E}} {
		if l.v.Count == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t\n", l.name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", l.name, ms(l.v.Mean), ms(l.v.P50), ms(l.v.P90), ms(l.v.P99), ms(l.v.Max))
	}
	if sm := r.Simulated; sm != nil {
		for _, l := range []struct {
			name string
			v    loadtest.Latency
		}{{"TTFT simulated", sm.TTFT}, {"TPOT simulated", sm.TPOT}, {"E2E simulated", sm.E2E}} {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", l.name, ms(l.v.Mean), ms(l.v.P50), ms(l.v.P90), ms(l.v.P99), ms(l.v.Max))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := r.Throughput
	fmt.Fprintf(tw, "throughput\t%.2f req/s, %.1f output tok/s, %.1f total tok/s, goodput %.2f req/s\n",
		t.RequestsPerS, t.OutputTokensPerS, t.TotalTokensPerS, t.GoodputPerS)
	fmt.Fprintf(tw, "tokens\tprompt asked mean %.0f, served mean %.0f (p50 %d, p99 %d); output mean %.1f (%.3f tokens per word)\n",
		r.PromptTokens.Requested.Mean, r.PromptTokens.Served.Mean, r.PromptTokens.Served.P50, r.PromptTokens.Served.P99,
		r.OutputTokens.Mean, r.Calibration.TokensPerWord)
	if r.MaxKVUsage != nil || r.MaxRunning != nil {
		s := []string{}
		if r.MaxKVUsage != nil {
			s = append(s, fmt.Sprintf("max KV usage %.1f%%", *r.MaxKVUsage*100))
		}
		if r.Preemptions != nil {
			s = append(s, fmt.Sprintf("preemptions %s", humanFloat(*r.Preemptions)))
		}
		if r.MaxRunning != nil {
			s = append(s, fmt.Sprintf("max running %s, max waiting %s", humanFloat(*r.MaxRunning), humanFloat(*r.MaxWaiting)))
		}
		fmt.Fprintf(tw, "server\t%s\n", strings.Join(s, ", "))
	}
	if a := r.SpecDecode; a != nil {
		fmt.Fprintf(tw, "drafts\t%s\n", acceptanceLine(*a))
	}
	if sm := r.Simulated; sm != nil {
		fmt.Fprintf(tw, "simulated\t%s on %s (%s): %d requests, %d rejected, max KV usage %.1f%%, preemptions %d, %.2f req/s\n",
			sm.Model, sm.GPU, sm.StepTime, sm.Requests, sm.Rejected, sm.MaxKVUsage*100, sm.Preemptions, sm.RequestsPerS)
	}
	if c := r.StepCalibration; c != nil {
		where := "appended to " + r.StepCalibrationFile
		if r.StepCalibrationFile == "" {
			where = "not written"
		}
		fmt.Fprintf(tw, "calibration\t%s, %s\n", c, where)
	}
	if r.GPUMaxUsedBytes != nil {
		fmt.Fprintf(tw, "GPU\tmax used %s of %s\n", memory.GiB(*r.GPUMaxUsedBytes), memory.GiB(*r.GPUTotalBytes))
	}
	for _, s := range r.SLOs {
		verdict := "met"
		if !s.Met {
			verdict = "MISSED"
		}
		if s.Name == "error_rate" {
			fmt.Fprintf(tw, "SLO %s\t%.2f%% measured, bound %.2f%%: %s\n", s.Name, s.Measured*100, s.Limit*100, verdict)
		} else {
			fmt.Fprintf(tw, "SLO %s\t%.1f ms measured, bound %.1f ms: %s\n", s.Name, s.Measured, s.Limit, verdict)
		}
	}
	for _, e := range r.ErrorExamples {
		fmt.Fprintf(tw, "error %s\t%s\n", e.Kind, e.Message)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	return tw.Flush()
}

func errorKinds(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(kinds, ", ") + ")"
}
