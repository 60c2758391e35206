package report

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// Traffic is a sample of the user's requests that plan sizes
// --max-num-seqs for, instead of the quarter-of-max-model-len rule.
type Traffic struct {
	// Describe names the traffic in the report ("Poisson 4 req/s ...").
	Describe string
	// Spec is the traffic, opened once per simulated candidate; it must
	// be bounded. Files reads its log.
	Spec  workload.Spec
	Files Files
	// Keep, when set, passes only the requests it accepts (a pool's), and
	// Max, when > 0, the first Max of those.
	Keep func(workload.Request) bool
	Max  int
}

// open is a fresh source of t's requests and its closer.
func (t Traffic) open() (sim.Source, func(), error) {
	st, closer, err := t.Spec.Open(t.Files.open)
	if err != nil {
		return nil, nil, err
	}
	if t.Keep != nil {
		st = filtered{st, t.Keep}
	}
	var src sim.Source = sim.FromWorkload(st)
	if t.Max > 0 {
		src = &sim.Limit{Src: src, N: t.Max}
	}
	return src, func() { closer.Close() }, nil
}

// SeqsEvidence is `recommended.max_num_seqs_from_traffic` of plan -o
// json: what the simulated traffic chose and the runs it chose from.
type SeqsEvidence struct {
	Traffic string `json:"traffic"`
	// Rule is the max-num-seqs the planner's rule gives without traffic
	// (KV tokens ÷ the typical context).
	Rule       int             `json:"rule_max_num_seqs"`
	MaxNumSeqs int             `json:"max_num_seqs"`
	Reason     string          `json:"reason"`
	StepTime   string          `json:"step_time"`
	Candidates []sim.SeqsTrial `json:"candidates"`
	// Confidence is how sure the candidates' figures are.
	Confidence sim.Confidence `json:"confidence"`
	// FellBehind is set when every candidate fell behind the traffic (the
	// chosen one's rates): no max-num-seqs meets it on this deployment,
	// and Overload says so in words.
	FellBehind *sim.Backlog `json:"fell_behind,omitempty"`
	Overload   string       `json:"overload,omitempty"`
}

// BuildWithTraffic is Build with --max-num-seqs chosen by simulating t on
// the recommended settings (sim.ChooseMaxNumSeqs over vLLM's default or
// the user's value, the powers of two from 8 below it and the rule's
// value). The roofline clock with the default calibration prices the
// steps. Where nothing is recommended, or the GPU has no datasheet
// throughput, the rule stays and a note says why.
func BuildWithTraffic(ctx context.Context, e Evidence, opt memory.Options, t Traffic) (Report, error) {
	e = withLayout(e)
	in, b, rec, alts, chosen, run, err := build(e, opt)
	if err != nil {
		return Report{}, err
	}
	notes := buildNotes(e, b)
	if rec.MaxModelLen > 0 && rec.Budget.Fits {
		if chosen != nil {
			in = chosen.Input
		}
		ev, note, err := ChooseSeqs(ctx, in, &rec, t)
		if err != nil {
			return Report{}, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		r := newReport(e, b, rec, alts, chosen, run, notes)
		r.Recommended.FromTraffic = ev
		tokens, why := trafficPool(ev, rec)
		addPinned(&r, in, run, rec, tokens, why)
		return r, nil
	}
	notes = append(notes, "max-num-seqs not simulated: nothing fits to simulate")
	return newReport(e, b, rec, alts, chosen, run, notes), nil
}

// ChooseSeqs replaces rec's max-num-seqs (memory.Recommend's for in) by
// the one the traffic favours, with its reason in place of the rule's,
// and rec's budget by the plan at that value. A GPU without datasheet
// throughput keeps the rule and returns a note saying so.
func ChooseSeqs(ctx context.Context, in memory.Input, rec *memory.Recommendation, t Traffic) (*SeqsEvidence, string, error) {
	orig, err := memory.Plan(in)
	if err != nil {
		return nil, "", err
	}
	base := in
	base.Settings = rec.Budget.Settings
	cal, _ := sim.CalibrationFor(rec.Budget.Device)
	stepTime := "roofline (" + cal.String() + ")"
	search := sim.SeqsSearch{
		Candidates:   sim.SeqsCandidates(orig.Settings.MaxNumSeqs, rec.MaxNumSeqs),
		Reference:    rec.MaxNumSeqs,
		Open:         t.open,
		Parallel:     runtime.GOMAXPROCS(0),
		DataParallel: rec.Budget.Settings.DataParallelSize,
		Run:          sim.RunOptions{FrontEnd: cal.FrontEndFor(rec.Budget, t.Spec.Endpoint), Concurrency: t.Spec.Concurrency},
		Config: func(n int) (sim.Config, bool, error) {
			at := base
			at.Settings.MaxNumSeqs = n
			b, err := memory.Plan(at)
			if err != nil || !b.Fits || b.NumBlocks < 2 {
				return sim.Config{}, false, err
			}
			timer, err := sim.RooflineFor(b, cal)
			if err != nil {
				return sim.Config{}, false, err
			}
			cfg := sim.ConfigFor(b, timer)
			cfg.Speculation, _, _, err = speculation(b, timer, cal, 0, "")
			return cfg, err == nil, err
		},
	}
	if _, err := sim.RooflineFor(rec.Budget, cal); err != nil {
		return nil, "max-num-seqs not simulated: " + err.Error(), nil
	}
	c, err := sim.ChooseMaxNumSeqs(ctx, search)
	if err != nil {
		return nil, "", fmt.Errorf("simulating %s: %w", t.Describe, err)
	}
	if c.MaxNumSeqs == rec.MaxNumSeqs {
		c.Reason += "; the same as without traffic"
	}
	ev := &SeqsEvidence{Traffic: t.Describe, Rule: rec.MaxNumSeqs, MaxNumSeqs: c.MaxNumSeqs, Reason: c.Reason, StepTime: stepTime, Candidates: c.Trials,
		Confidence: sim.ConfidenceOfRun(rec.Budget, c.Best().Report)}
	if b := c.Best().Report.FellBehind; b != nil && allBehind(c.Trials) {
		ev.FellBehind = b
		ev.Overload = "no max-num-seqs meets this traffic: " + b.Say(EngineName(rec.Budget.Count, rec.Budget.Device.Name))
		c.Reason = ev.Overload + "; " + c.Reason
		ev.Reason = c.Reason
	}
	for i, w := range rec.Why {
		if strings.HasPrefix(w, "max-num-seqs ") {
			rec.Why[i] = c.Reason
		}
	}
	rec.MaxNumSeqs = c.MaxNumSeqs
	at := base
	at.Settings.MaxNumSeqs = c.MaxNumSeqs
	if rec.Budget, err = memory.Plan(at); err != nil {
		return nil, "", err
	}
	return ev, "", nil
}

// allBehind reports whether every trial fell behind its traffic.
func allBehind(trials []sim.SeqsTrial) bool {
	for _, t := range trials {
		if t.Report == nil || t.Report.FellBehind == nil {
			return false
		}
	}
	return len(trials) > 0
}

// trafficPool sizes a pinned KV pool from the simulated traffic: the peak
// KV usage of the chosen max-num-seqs, over the recommended cache, taken
// to sit at telemetry.RiskKVStart (80%) of the pool, where the exporter
// starts counting KV pressure: the rest is the margin that keeps a burst
// from preempting. 0 (the plan's own pool) when the run preempted (the
// cache was already short), has no peak, or would need more than the plan.
func trafficPool(ev *SeqsEvidence, rec memory.Recommendation) (int64, string) {
	if ev == nil {
		return 0, ""
	}
	for _, c := range ev.Candidates {
		if c.MaxNumSeqs != ev.MaxNumSeqs || c.Preemptions > 0 || c.MaxKVUsage <= 0 {
			continue
		}
		peak := int64(math.Ceil(c.MaxKVUsage * float64(rec.Budget.KVTokens)))
		tokens := int64(math.Ceil(float64(peak) / telemetry.RiskKVStart))
		if tokens >= rec.Budget.KVTokens {
			return 0, ""
		}
		return tokens, fmt.Sprintf("the traffic's peak of %d KV tokens at max-num-seqs %d (simulated), at %.0f%% of the pool (the rest the margin before KV pressure): %d tokens", peak, c.MaxNumSeqs, 100*telemetry.RiskKVStart, tokens)
	}
	return 0, ""
}
