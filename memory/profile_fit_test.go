package memory_test

import (
	"math"
	"testing"

	"headroom.dev/headroom/memory"
)

// TestSamplerFixedFit refits samplerFixedBytes from the calibration rows:
// on every start-up whose logged torch peak is its dummy sampler run (a
// dense text model, one pipeline stage, the sampler above the forward pass
// by more than 0.1 GiB), the logged peak less the mechanism's per-logit,
// hidden-state and Triton-buffer terms leaves what the sampler holds
// beside them. The constant is the mean over the distinct sampler shapes
// (vocabulary, hidden size, rows): the set holds twelve start-ups of
// Llama-3.1-8B's shape and one of Gemma-7B's, and each shape is one
// measurement of the mechanism, repeated. Every row must leave it within
// 0.03 GiB (the logs give two decimals, ±5 MiB).
func TestSamplerFixedFit(t *testing.T) {
	type shape struct{ vocab, hidden, rows int }
	byShape := map[shape][]float64{}
	n := 0
	models := map[string]bool{}
	for _, r := range readCalibration(t) {
		in := r.input(t)
		if in.Model.MoE != nil || in.Model.Vision != nil || r.pp > 1 || r.act == 0 {
			continue
		}
		b := plan(t, in)
		fwd, smp := memory.ProfileTerms(b)
		if float64(smp-fwd) < 0.1*(1<<30) {
			continue
		}
		res := r.act*(1<<30) - float64(smp)
		t.Logf("%-60s tp%d logged %.2f GiB, mechanism %.3f GiB: residual %4.0f MiB", r.model, r.tp, r.act, float64(smp)/(1<<30), res/(1<<20))
		if math.Abs(res-memory.SamplerFixedBytes) > 0.03*(1<<30) {
			t.Errorf("%s tp%d: residual %.0f MiB, the fitted constant is %d MiB", r.model, r.tp, res/(1<<20), memory.SamplerFixedBytes>>20)
		}
		k := shape{in.Model.Vocab, in.Model.Hidden, min(r.seqs, r.batched)}
		byShape[k] = append(byShape[k], res)
		n++
		models[r.model] = true
	}
	if n < 10 || len(byShape) < 5 {
		t.Fatalf("only %d sampler-bound rows of %d shapes", n, len(byShape))
	}
	var fit float64
	for k, rs := range byShape {
		var m float64
		for _, x := range rs {
			m += x
		}
		m /= float64(len(rs))
		t.Logf("shape V %d, h %d, R %d: %d rows, mean residual %.1f MiB", k.vocab, k.hidden, k.rows, len(rs), m/(1<<20))
		fit += m / float64(len(byShape))
	}
	t.Logf("%d rows of %d models, %d shapes: mean residual %.1f MiB, constant %d MiB", n, len(models), len(byShape), fit/(1<<20), memory.SamplerFixedBytes>>20)
	if math.Abs(fit-memory.SamplerFixedBytes) > 1<<20 {
		t.Errorf("mean residual %.1f MiB, samplerFixedBytes is %d MiB: refit it", fit/(1<<20), memory.SamplerFixedBytes>>20)
	}
}

// TestForwardFit refits hiddenBuffers by least squares over the
// forward-bound start-ups: the first stage of a pipeline (no sampler) and
// the dense single-stage rows whose logged peak exceeds their sampler run
// by more than 0.05 GiB. The forward is T·b·(3·I/TP + k·h), so each row
// gives k_i = (A/(T·b) − 3·I/TP)/h with weight (T·b·h)².
func TestForwardFit(t *testing.T) {
	var num, den float64
	n := 0
	models := map[string]bool{}
	for _, r := range readCalibration(t) {
		in := r.input(t)
		if in.Model.MoE != nil || in.Model.Vision != nil || r.act == 0 {
			continue
		}
		b := plan(t, in)
		fwd, smp := memory.ProfileTerms(b)
		if r.pp > 1 {
			fwd = memory.FirstStageForward(b)
		} else if r.act*(1<<30)-float64(smp+memory.SamplerFixedBytes) < 0.05*(1<<30) {
			continue
		}
		s := in.Model
		tb := float64(r.batched) * float64(b.DtypeBytes)
		k := (r.act*(1<<30)/tb - 3*float64(s.Intermediate)/float64(r.tp)) / float64(s.Hidden)
		w := tb * float64(s.Hidden)
		num += w * w * k
		den += w * w
		n++
		models[r.model] = true
		t.Logf("%-45s tp%d pp%d %s: logged %.2f GiB, planned forward %.2f: k = %.2f", r.model, r.tp, r.pp, r.dtype, r.act, float64(fwd)/(1<<30), k)
	}
	if n < 3 || len(models) < 2 {
		t.Fatalf("only %d forward-bound rows of %d models", n, len(models))
	}
	fit := num / den
	t.Logf("%d rows of %d models: k = %.3f, hiddenBuffers = %.2f", n, len(models), fit, memory.HiddenBuffers)
	if math.Abs(fit-memory.HiddenBuffers) > 0.02 {
		t.Errorf("least-squares k = %.3f, hiddenBuffers is %.2f: refit it", fit, memory.HiddenBuffers)
	}
}
