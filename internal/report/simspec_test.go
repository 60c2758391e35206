package report

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

func specEngine(t *testing.T, gpu string, line string, acceptance float64) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), offlineEnv(), NoFiles, EngineRequest{
		Plan: Request{GPU: gpu, Command: strings.Fields(line), Offline: true}, AcceptanceRate: acceptance})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A draft model from the catalog: k and the lookahead as vLLM runs them,
// the method's default acceptance named with its source, the drafter
// priced as the 0.5B model; --acceptance-rate replaces the default and
// stays when the engine is planned again at other settings.
func TestEngineSpeculation(t *testing.T) {
	const line = `vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --speculative-config {"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":3}`
	e := specEngine(t, "L4", line, 0)
	sp, info := e.Config.Speculation, e.Spec
	if sp == nil || sp.K != 3 || sp.Lookahead != 3 || sp.Drafter == nil || sp.Acceptance != 0.71 || info.Drafter != "Qwen/Qwen2.5-0.5B-Instruct" ||
		!strings.HasPrefix(info.AcceptanceSource, "default for draft_model: ") {
		t.Fatalf("speculation %+v, report %+v", sp, info)
	}
	fixed, err := NewEngine(context.Background(), offlineEnv(), NoFiles, EngineRequest{
		Plan: Request{GPU: "L4", Command: strings.Fields(line), Offline: true}, StepTime: "fixed:10ms"})
	if err != nil || fixed.Config.Speculation == nil || fixed.Config.Speculation.Drafter != nil || !strings.Contains(strings.Join(fixed.Notes, "\n"), "a fixed step time prices the target's steps alone") {
		t.Errorf("fixed step time: %v, notes %q", err, fixed.Notes)
	}
	e = specEngine(t, "L4", line, 0.6)
	if e.Config.Speculation.Acceptance != 0.6 || e.Spec.AcceptanceSource != "--acceptance-rate" {
		t.Errorf("given 0.6: %+v", e.Spec)
	}
	set := e.Budget.Settings
	set.MaxNumSeqs = 16
	o, err := e.At(set)
	if err != nil {
		t.Fatal(err)
	}
	if o.Config.Speculation == nil || o.Config.Speculation.Acceptance != 0.6 {
		t.Errorf("planned again: %+v", o.Config.Speculation)
	}
}

// DeepSeek-V3's MTP layer on 8 × H200 drafts from the checkpoint: the
// drafter is that layer as a model (one MoE layer) at TP 8, MTP's default.
// n-gram has no drafter and drafts for 30% of the requests; a custom
// class is not simulated, and a note says so.
func TestEngineSpeculationMethods(t *testing.T) {
	e := specEngine(t, "8xH200", `vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --max-model-len 8192 --speculative-config {"method":"mtp","num_speculative_tokens":1}`, 0)
	if sp := e.Config.Speculation; sp == nil || sp.Drafter == nil || sp.Acceptance != 0.82 || e.Spec.Drafter != "deepseek-ai/DeepSeek-V3's 1 MTP layer(s)" {
		t.Errorf("MTP: %+v %+v", sp, e.Spec)
	}
	e = specEngine(t, "L4", `vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --speculative-config {"method":"ngram","num_speculative_tokens":3}`, 0)
	if sp := e.Config.Speculation; sp == nil || sp.Drafter != nil || sp.Lookahead != 0 || sp.Matching != 0.3 {
		t.Errorf("n-gram: %+v", sp)
	}
	e = specEngine(t, "L4", `vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --speculative-config {"model":"pkg.mod.Proposer","num_speculative_tokens":3}`, 0)
	if e.Config.Speculation != nil || !strings.Contains(strings.Join(e.Notes, "\n"), "(custom_class) is not simulated") {
		t.Errorf("custom class: %+v, notes %q", e.Config.Speculation, e.Notes)
	}
}

// loadtest's prediction takes the acceptance the server's counters
// measured when none was given, and writes no step calibration from a
// speculative server.
func TestPredictionMeasuredAcceptance(t *testing.T) {
	const line = `vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --speculative-config {"method":"ngram","num_speculative_tokens":3}`
	measured := &vllm.SpecAcceptance{Drafts: 500, DraftTokens: 1500, DraftAcceptanceRate: 0.3, TokenAcceptance: 0.45}
	p := &Prediction{Engine: specEngine(t, "L4", line, 0)}
	res := &loadtest.Result{SpecDecode: measured}
	if err := p.measuredAcceptance(res); err != nil {
		t.Fatal(err)
	}
	if got := p.Engine.Config.Speculation.Acceptance; got != 0.45 || !strings.HasPrefix(p.Engine.Spec.AcceptanceSource, "measured by this run") || len(res.Notes) != 1 {
		t.Errorf("acceptance %v (%s), notes %q", got, p.Engine.Spec.AcceptanceSource, res.Notes)
	}
	p = &Prediction{Engine: specEngine(t, "L4", line, 0.7), Getenv: func(string) string { return "" }}
	res = &loadtest.Result{SpecDecode: measured, Series: []loadtest.Point{}}
	res.ITL.Count, res.ITL.P50 = 100, 30
	spec := workload.Spec{Concurrency: 2, NumRequests: 4, Prompt: workload.Fixed(100), Output: workload.Fixed(20)}
	if err := p.Run(context.Background(), spec, res); err != nil {
		t.Fatal(err)
	}
	if p.Engine.Config.Speculation.Acceptance != 0.7 {
		t.Errorf("--acceptance-rate 0.7 was replaced: %v", p.Engine.Config.Speculation.Acceptance)
	}
	if res.StepCalibration != nil || !strings.Contains(strings.Join(res.Notes, "\n"), "no calibration written: the server decodes speculatively") {
		t.Errorf("calibration %+v, notes %q", res.StepCalibration, res.Notes)
	}
}
