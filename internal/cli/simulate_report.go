package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
)

// sloTarget is one --slo term: a latency statistic and its limit.
type sloTarget struct {
	Name    string
	metric  string // ttft, tpot, e2e
	stat    string // mean, p50, p90, p99, max
	limitMS float64
}

// parseSLO reads --slo with loadtest's grammar (package slo), keeping the
// bounds a simulation reports: it has no failed requests and no ITL of
// its own, and its latency summary has no p95.
func parseSLO(s string) ([]sloTarget, error) {
	bounds, err := slo.Parse(s)
	if err != nil {
		return nil, badInput("--slo: %v", err)
	}
	var out []sloTarget
	for _, b := range bounds {
		if b.Metric == "error_rate" || b.Metric == "itl" || b.Stat == "p95" {
			return nil, badInput("--slo %s: simulate judges ttft, tpot or e2e by mean, p50, p90, p99 or max (error_rate, itl and p95 are loadtest's)", b.Name())
		}
		out = append(out, sloTarget{Name: b.Name(), metric: b.Metric, stat: b.Stat, limitMS: float64(b.Limit) / float64(time.Millisecond)})
	}
	return out, nil
}

type sloResult struct {
	Name    string  `json:"name"`
	LimitMS float64 `json:"limit_ms"`
	ValueMS float64 `json:"value_ms"`
	Met     bool    `json:"met"`
}

func (t sloTarget) value(r *sim.Report) float64 {
	l := r.TTFT
	switch t.metric {
	case "tpot":
		l = r.TPOT
	case "e2e":
		l = r.E2E
	}
	switch t.stat {
	case "mean":
		return l.Mean
	case "p50":
		return l.P50
	case "p90":
		return l.P90
	case "max":
		return l.Max
	}
	return l.P99
}

// checkSLO judges a run; rejected requests miss every target (vLLM
// answered them with an error).
func checkSLO(targets []sloTarget, r *sim.Report) []sloResult {
	out := make([]sloResult, 0, len(targets))
	for _, t := range targets {
		v := t.value(r)
		out = append(out, sloResult{Name: t.Name, LimitMS: t.limitMS, ValueMS: v, Met: v <= t.limitMS && r.Rejected == 0})
	}
	return out
}

// compareRow is one deployment of --compare.
type compareRow struct {
	Label       string      `json:"label"`
	Settings    simSettings `json:"settings"`
	Requests    int64       `json:"requests"`
	Rejected    int64       `json:"rejected"`
	Preemptions int64       `json:"preemptions"`
	TTFT        sim.Latency `json:"ttft_ms"`
	TPOT        sim.Latency `json:"tpot_ms"`
	E2E         sim.Latency `json:"e2e_ms"`
	MaxKVUsage  float64     `json:"max_kv_usage"`
	MaxWaiting  int         `json:"max_waiting"`
	SLOMet      *bool       `json:"slo_met,omitempty"`
	// Pool bounds: the requests (by prompt + output tokens) this pool
	// serves, for a pool of a split.
	MinTokens int64 `json:"min_tokens,omitempty"`
	MaxTokens int64 `json:"max_tokens,omitempty"`
}

func rowOf(label string, d deployment, c sim.Config, r *sim.Report, slos []sloTarget) compareRow {
	row := compareRow{Label: label, Settings: settingsOf(d, c), Requests: r.Requests, Rejected: r.Rejected, Preemptions: r.Preemptions,
		TTFT: r.TTFT, TPOT: r.TPOT, E2E: r.E2E, MaxKVUsage: r.MaxKVUsage, MaxWaiting: r.MaxWaiting}
	if len(slos) > 0 {
		met := true
		for _, s := range checkSLO(slos, r) {
			met = met && s.Met
		}
		row.SLOMet = &met
	}
	return row
}

// compareDeployments runs the same traffic on headroom's recommended
// settings and, with a profile, on each pool of its split (requests
// routed by prompt + output tokens).
func compareDeployments(cmd *cobra.Command, env Env, f simulateFlags, w *workload, given deployment, givenRep *sim.Report,
	sched schedulerFlags, cal calibration, slos []sloTarget) ([]compareRow, error) {
	givenCfg, _ := engineConfig(given, sched, sim.Fixed(0))
	rows := []compareRow{rowOf("given", given, givenCfg, givenRep, slos)}
	rec, err := memory.Recommend(given.in, memory.Options{Policy: f.plan.policy})
	if err != nil {
		return nil, usageError{err}
	}
	s := given.budget.Settings
	s.GPUMemoryUtilization, s.MaxModelLen, s.MaxNumSeqs = rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs
	recSched := sched
	recSched.blocksOverride = 0
	if rec.MaxModelLen > 0 {
		d, err := planDeployment(given.ev, s, "recommended")
		if err != nil {
			return nil, err
		}
		rep, cfg, err := simulateDeployment(cmd, env, f, w, d, recSched, cal, false)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rowOf("recommended", d, cfg, rep, slos))
	}
	tuned, err := tuneMaxNumSeqs(cmd, env, f, w, given, givenRep, rec.MaxNumSeqs, sched, cal, slos)
	if err != nil {
		return nil, err
	}
	rows = append(rows, tuned)
	if f.profile == "" {
		return rows, nil
	}
	p, err := readProfileJSON(f.profile)
	if err != nil {
		return nil, err
	}
	for i, pool := range p.Pools {
		ps := given.budget.Settings
		ps.GPUMemoryUtilization, ps.MaxModelLen, ps.MaxNumSeqs = pool.GPUMemoryUtilization, pool.MaxModelLen, pool.MaxNumSeqs
		d, err := planDeployment(given.ev, ps, "pool "+pool.Name)
		if err != nil {
			return nil, err
		}
		lo, hi := pool.MinTokens, pool.MaxTokens
		// The last pool also takes what is longer than its bound: there
		// it is rejected as too long, and counted, not lost.
		last := i == len(p.Pools)-1
		pw := *w
		pw.filter = func(r sim.Request) bool {
			t := int64(r.PromptTokens + r.OutputTokens)
			return t >= lo && (last || t <= hi)
		}
		rep, cfg, err := simulateDeployment(cmd, env, f, &pw, d, recSched, cal, false)
		if err != nil {
			return nil, err
		}
		row := rowOf("pool "+pool.Name, d, cfg, rep, slos)
		row.MinTokens, row.MaxTokens = lo, hi
		rows = append(rows, row)
	}
	return rows, nil
}

func ms(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// msUnit is ms with its unit: "850ms", "2.0s".
func msUnit(v float64) string {
	if s := ms(v); strings.HasSuffix(s, "s") {
		return s
	} else if v >= 1000 {
		return fmt.Sprintf("%.1fs", v/1000)
	} else {
		return s + "ms"
	}
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", math.Round(v*100)) }

func writeSimulateTable(w io.Writer, r SimulateReport) error {
	s := r.Settings
	fmt.Fprintf(w, "%s on %dx %s, vLLM %s rules: %s KV blocks of %d tokens (%s tokens), max-num-seqs %d, max-num-batched-tokens %d, max-model-len %d\n",
		r.Model, r.GPUCount, r.GPU, s.VLLMVersion, humanInt(int64(s.NumGPUBlocks)), s.BlockSize, humanInt(s.KVCacheTokens), s.MaxNumSeqs, s.MaxNumBatchedTokens, s.MaxModelLen)
	fmt.Fprintf(w, "traffic: %s\nstep time: %s\n\n", r.Traffic, r.StepTime)
	fmt.Fprintf(w, "%s requests finished in %.1f s simulated (%s steps): %.2f req/s, %s output tokens/s\n",
		humanInt(r.Requests), r.DurationS, humanInt(r.Steps), r.RequestsPerS, humanInt(int64(r.OutputTokensPerS)))
	if r.Rejected > 0 {
		var parts []string
		for _, k := range r.SortedReasons() {
			parts = append(parts, fmt.Sprintf("%d %s", r.RejectedBy[k], k))
		}
		fmt.Fprintf(w, "rejected: %s (as vLLM would refuse them)\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "preemptions: %s (%s requests preempted at least once)\n", humanInt(r.Preemptions), humanInt(r.PreemptedRequests))
	fmt.Fprintf(w, "peak: KV cache %s, running %d, waiting %d", pct(r.MaxKVUsage), r.MaxRunning, r.MaxWaiting)
	if r.PrefixHitRate > 0 {
		fmt.Fprintf(w, ", prefix-cache hits %s of prompt tokens", pct(r.PrefixHitRate))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ms\tmean\tp50\tp90\tp99\tmax\t")
	for _, l := range []struct {
		name string
		v    sim.Latency
	}{{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"E2E", r.E2E}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", l.name, ms(l.v.Mean), ms(l.v.P50), ms(l.v.P90), ms(l.v.P99), ms(l.v.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.SLO) > 0 {
		fmt.Fprintln(w)
		for _, s := range r.SLO {
			verdict := "met"
			if !s.Met {
				verdict = "MISSED"
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
		fmt.Fprintln(tw, "SETTINGS\tUTIL\tMAX-MODEL-LEN\tMAX-NUM-SEQS\tKV BLOCKS\tTTFT p99\tTPOT p99\tE2E p99\tPREEMPT\tREJECTED\tPEAK KV\tSLO")
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
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// tuneMaxNumSeqs chooses --max-num-seqs from the traffic itself with
// sim.ChooseMaxNumSeqs: the given settings with max-num-seqs at every
// power of two from 8 below the given value, at the given value and at
// the recommended one, each run on the same traffic (the given run is
// reused).
func tuneMaxNumSeqs(cmd *cobra.Command, env Env, f simulateFlags, w *workload, given deployment, givenRep *sim.Report,
	recommended int, sched schedulerFlags, cal calibration, slos []sloTarget) (compareRow, error) {
	top := given.budget.Settings.MaxNumSeqs
	cands := sim.SeqsCandidates(top, recommended)
	deps := map[int]deployment{top: given}
	search := sim.SeqsSearch{
		Candidates: cands,
		Config: func(n int) (sim.Config, bool, error) {
			d, ok := deps[n]
			if !ok {
				s := given.budget.Settings
				s.MaxNumSeqs = n
				var err error
				if d, err = planDeployment(given.ev, s, "max-num-seqs "+strconv.Itoa(n)); err != nil {
					return sim.Config{}, false, err
				}
				deps[n] = d
			}
			if !d.budget.Fits && sched.blocksOverride == 0 {
				return sim.Config{}, false, nil
			}
			timer, _, err := stepTimer(f.stepTime, d.budget, cal)
			if err != nil {
				return sim.Config{}, false, err
			}
			cfg, err := engineConfig(d, sched, timer)
			if err != nil {
				return sim.Config{}, false, fmt.Errorf("%s settings: %w", d.label, err)
			}
			return cfg, true, nil
		},
		Open:      func() (sim.Source, func(), error) { return w.open(cmd.InOrStdin()) },
		Run:       sim.RunOptions{Window: f.window.Seconds()},
		Done:      map[int]*sim.Report{top: givenRep},
		Reference: recommended,
	}
	choice, err := sim.ChooseMaxNumSeqs(cmd.Context(), search)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) || errors.Is(err, context.Canceled) || errors.Is(err, errNoKV) {
			return compareRow{}, err
		}
		return compareRow{}, usageError{err}
	}
	b := choice.Best()
	best := rowOf("", deps[b.MaxNumSeqs], b.Config, b.Report, slos)
	best.Label = fmt.Sprintf("simulated best max-num-seqs (of %d tried)", len(cands))
	return best, nil
}
