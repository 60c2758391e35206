package sim

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// servingRun is one published `vllm bench serve` run with its setup
// (testdata/serving/train.csv, copied from gpustack/gpustack@47277d79
// docs/performance-lab/qwen3-14b/a100.md and h100.md).
type servingRun struct {
	id, model, gpu, version             string
	input, output, prompts, concurrency int
	rate                                float64 // 0: inf
	// published figures (NaN when the source does not give them)
	reqPerS, ttftMean, ttftMedian, ttftP99, tpotMean, tpotMedian, tpotP99, itlMean float64
}

// servingGPU maps the rows' GPU names to the catalog's.
var servingGPU = map[string]string{"A100 SXM": "A100-80GB", "H100 SXM": "H100-80GB"}

func readServingRuns(t testing.TB, path string) []servingRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := csv.NewReader(f)
	head, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	var runs []servingRun
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		num := func(name string) float64 {
			v, err := strconv.ParseFloat(rec[col[name]], 64)
			if err != nil {
				return math.NaN()
			}
			return v
		}
		r := servingRun{id: rec[col["id"]], model: rec[col["model"]], gpu: rec[col["gpu"]], version: rec[col["vllm_version"]],
			input: int(num("input_len")), output: int(num("output_len")), prompts: int(num("num_prompts")),
			reqPerS: num("req_throughput"), ttftMean: num("mean_ttft_ms"), ttftMedian: num("median_ttft_ms"), ttftP99: num("p99_ttft_ms"),
			tpotMean: num("mean_tpot_ms"), tpotMedian: num("median_tpot_ms"), tpotP99: num("p99_tpot_ms"), itlMean: num("mean_itl_ms")}
		if c := num("max_concurrency"); !math.IsNaN(c) {
			r.concurrency = int(c)
		}
		if v := num("request_rate"); !math.IsNaN(v) && !math.IsInf(v, 0) {
			r.rate = v
		}
		runs = append(runs, r)
	}
	return runs
}

// simulateServing runs a row through the engine of its plan with
// calibration c.
func simulateServing(t testing.TB, r servingRun, c Calibration) *Report {
	t.Helper()
	spec, ok := catalog.Lookup(r.model)
	if !ok {
		t.Fatalf("%s: not in the catalog", r.model)
	}
	sel, err := gpu.Resolve(servingGPU[r.gpu])
	if err != nil {
		t.Fatal(err)
	}
	v, err := vllm.ParseVersion(r.version)
	if err != nil {
		t.Fatal(err)
	}
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: 1, Settings: vllm.Settings{Version: v}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(ConfigFor(b, m))
	if err != nil {
		t.Fatal(err)
	}
	src := &benchSource{n: r.prompts, prompt: r.input, output: r.output, rate: r.rate}
	rep, err := Run(context.Background(), e, src, RunOptions{FrontEnd: c.FrontEnd, Concurrency: r.concurrency})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// benchSource is vllm bench serve's random dataset at a fixed length.
type benchSource struct {
	n, prompt, output, i int
	rate                 float64
}

func (s *benchSource) Next() (Request, error) {
	if s.i >= s.n {
		return Request{}, io.EOF
	}
	s.i++
	at := 0.0
	if s.rate > 0 {
		at = float64(s.i-1) / s.rate
	}
	return Request{ID: strconv.Itoa(s.i), Arrival: at, PromptTokens: s.prompt, OutputTokens: s.output}, nil
}

func relErr(got, want float64) float64 { return (got - want) / want }

// TestServingRuns replays the published runs the step time was fitted on
// and holds the simulation to request throughput and mean TPOT within 15%
// and mean TTFT within 25% of what vllm bench serve measured (the bar the
// simulator is held to), and prints every figure beside its measurement.
func TestServingRuns(t *testing.T) {
	for _, r := range readServingRuns(t, "testdata/serving/train.csv") {
		sel, _ := gpu.Resolve(servingGPU[r.gpu])
		c, fitted := CalibrationFor(sel.Device)
		if !fitted {
			t.Errorf("%s: %s has no fitted calibration", r.id, r.gpu)
		}
		rep := simulateServing(t, r, c)
		t.Logf("%-20s req/s %6.2f (%+5.1f%%)  TTFT mean %8.0f (%+5.1f%%) median %8.0f (%+5.1f%%) p99 %8.0f (%+5.1f%%)  TPOT mean %6.1f (%+5.1f%%) median %6.1f (%+5.1f%%) p99 %6.1f (%+5.1f%%)",
			r.id, rep.RequestsPerS, 100*relErr(rep.RequestsPerS, r.reqPerS),
			rep.TTFT.Mean, 100*relErr(rep.TTFT.Mean, r.ttftMean), rep.TTFT.P50, 100*relErr(rep.TTFT.P50, r.ttftMedian), rep.TTFT.P99, 100*relErr(rep.TTFT.P99, r.ttftP99),
			rep.TPOT.Mean, 100*relErr(rep.TPOT.Mean, r.tpotMean), rep.TPOT.P50, 100*relErr(rep.TPOT.P50, r.tpotMedian), rep.TPOT.P99, 100*relErr(rep.TPOT.P99, r.tpotP99))
		for _, f := range []struct {
			name      string
			got, want float64
			tol       float64
		}{
			{"request throughput", rep.RequestsPerS, r.reqPerS, 0.15},
			{"mean TPOT", rep.TPOT.Mean, r.tpotMean, 0.15},
			{"mean TTFT", rep.TTFT.Mean, r.ttftMean, 0.25},
		} {
			if e := relErr(f.got, f.want); math.Abs(e) > f.tol {
				t.Errorf("%s: %s %.2f, measured %.2f (%+.1f%%, bound %.0f%%)", r.id, f.name, f.got, f.want, 100*e, 100*f.tol)
			}
		}
	}
}

// One request in a closed loop of one, on a hand-made roofline (1e9 GEMM
// parameters, 2e9 weight bytes, 1e5 KV bytes per token, 1000 FLOPs per
// attention pair, 1e15 FLOP/s, 1e12 B/s; GEMMs and attention at 0.5 of the
// peak, weights at 0.8 and the cache at 0.5 of the bandwidth, 2 ms per step
// and 10 µs per sequence) behind an API server of 10 ms per request, 1 µs
// per prompt token and 100 µs per streamed token. A prompt of 2048 tokens
// with 1024 tokens a step is prefilled in two steps:
//
//	step 1: GEMMs 2e9 × 1024 / 5e14 = 4.096 ms (> weights 2e9 / 8e11 = 2.5 ms),
//	        attention 1024 × 1025 / 2 = 524,800 pairs × 1000 / 5e14 = 1.0496 µs,
//	        CPU 2.01 ms: 6.1070496 ms
//	step 2: 1024 new over 1024: 1024² + 524,800 = 1,573,376 pairs → 3.146752 µs:
//	        6.109146752 ms
//
// TTFT = API server (10 ms + 2048 µs) + both steps + the first token's
// delivery (0.1 ms) = 12.048 + 6.1070496 + 6.109146752 + 0.1 = 24.364196352
// ms. Decode step k (k = 1..4) reads the weights (2.5 ms) and 2048 + k
// tokens of cache ((2048 + k) × 1e5 / 5e11 = 0.4096 ms + k × 0.2 µs), plus
// 2.01 ms of CPU: 4.9196 ms + k × 0.2 µs. Every token is delivered 0.1 ms
// after its step (the server has nothing else to do), so TPOT is the mean
// decode step, 4.9196 + 2.5 × 0.0002 = 4.9201 ms.
func TestOneRequestClosedLoop(t *testing.T) {
	m := &Roofline{LinearParams: 1e9, WeightBytes: 2e9, KVBytesPerToken: 1e5, AttentionFLOPsPerPair: 1000,
		PeakFLOPs: 1e15, Bandwidth: 1e12, GraphTokens: 1 << 20,
		GEMMEfficiency: 0.5, AttentionEfficiency: 0.5, BandwidthEfficiency: 0.8, KVBandwidthEfficiency: 0.5,
		StepOverhead: 0.002, SeqOverhead: 10e-6}
	e := newEngine(t, Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 1024, MaxModelLen: 4096, Timer: m})
	src := sliceSource{{ID: "A", PromptTokens: 2048, OutputTokens: 5}}
	var ev Event
	rep, err := Run(context.Background(), e, &src, RunOptions{Concurrency: 1,
		FrontEnd: FrontEnd{Request: 0.010, PromptToken: 1e-6, OutputToken: 100e-6},
		OnFinish: func(x Event) { ev = x }})
	if err != nil {
		t.Fatal(err)
	}
	ttft := ev.FirstToken - ev.Arrival
	tpot := (ev.Finish - ev.FirstToken) / 4
	if math.Abs(ttft-24.364196352e-3) > 1e-12 || math.Abs(tpot-4.9201e-3) > 1e-12 {
		t.Errorf("TTFT %.12f s, TPOT %.12f s; want 0.024364196352 and 0.0049201", ttft, tpot)
	}
	if rep.Requests != 1 || rep.Steps != 6 || math.Abs(rep.TTFT.Mean-24.36) > 0.01 || math.Abs(rep.TPOT.Mean-4.92) > 0.01 {
		t.Errorf("report: %d requests, %d steps, TTFT %v ms, TPOT %v ms", rep.Requests, rep.Steps, rep.TTFT.Mean, rep.TPOT.Mean)
	}
}

// servingTargets are the published figures a fit matches, with weights:
// the means the issue checks, then medians and tails.
func servingTargets(r servingRun, rep *Report) (got, want, w []float64) {
	add := func(g, p, weight float64) {
		if math.IsNaN(p) || p <= 0 || g <= 0 {
			return
		}
		got, want, w = append(got, g), append(want, p), append(w, weight)
	}
	add(rep.RequestsPerS, r.reqPerS, 3)
	add(rep.TTFT.Mean, r.ttftMean, 2)
	add(rep.TTFT.P50, r.ttftMedian, 1)
	add(rep.TTFT.P99, r.ttftP99, 1)
	add(rep.TPOT.Mean, r.tpotMean, 3)
	add(rep.TPOT.P50, r.tpotMedian, 1)
	add(rep.TPOT.P99, r.tpotP99, 1)
	return
}

// TestFitServing searches the calibration constants that reproduce the
// training runs best (least squares of the log errors, Nelder-Mead). It
// runs only with HEADROOM_FIT_SERVING=1 and prints the constants that
// calibration.go then holds.
func TestFitServing(t *testing.T) {
	if os.Getenv("HEADROOM_FIT_SERVING") == "" {
		t.Skip("set HEADROOM_FIT_SERVING=1 to refit the step-time constants")
	}
	runs := readServingRuns(t, "testdata/serving/train.csv")
	names := []string{"gemm_a100", "gemm_h100", "kv_a100", "kv_h100", "step_s", "seq_s", "request_s", "output_token_s"}
	x0 := []float64{0.545, 0.374, 0.849, 0.420, 0.00155, 23e-6, 0.0129, 55e-6}
	cal := func(x []float64, r servingRun) (Calibration, bool) {
		for _, v := range x {
			if v <= 0 {
				return Calibration{}, false
			}
		}
		if x[0] > 1 || x[1] > 1 || x[2] > 1 || x[3] > 1 {
			return Calibration{}, false
		}
		c := Calibration{Overhead: x[4], SeqOverhead: x[5], AttentionEfficiency: prefillAttentionShare,
			FrontEnd: FrontEnd{Request: x[6], PromptToken: tokenizeSeconds, OutputToken: x[7]}}
		c.BandwidthEfficiency = weightBandwidthShare
		if r.gpu == "A100 SXM" {
			c.FLOPsEfficiency, c.KVBandwidthEfficiency = x[0], x[2]
		} else {
			c.FLOPsEfficiency, c.KVBandwidthEfficiency = x[1], x[3]
		}
		return c, true
	}
	loss := func(x []float64) float64 {
		var l float64
		for _, r := range runs {
			c, ok := cal(x, r)
			if !ok {
				return math.Inf(1)
			}
			got, want, w := servingTargets(r, simulateServing(t, r, c))
			for i := range got {
				d := math.Log(got[i] / want[i])
				l += w[i] * d * d
			}
		}
		return l
	}
	x, l := nelderMead(loss, x0, 400)
	for i, n := range names {
		fmt.Printf("%s = %.6g\n", n, x[i])
	}
	fmt.Printf("loss %.5f (start %.5f)\n", l, loss(x0))
}

// nelderMead minimises f from x0 in at most iters iterations, on a
// simplex of steps of 10% of each coordinate.
func nelderMead(f func([]float64) float64, x0 []float64, iters int) ([]float64, float64) {
	n := len(x0)
	pts := make([][]float64, n+1)
	vals := make([]float64, n+1)
	for i := range pts {
		p := append([]float64(nil), x0...)
		if i > 0 {
			p[i-1] *= 1.1
		}
		pts[i], vals[i] = p, f(p)
	}
	comb := func(a []float64, wa float64, b []float64, wb float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = wa*a[i] + wb*b[i]
		}
		return out
	}
	for range iters {
		// order
		for i := 1; i <= n; i++ {
			for j := i; j > 0 && vals[j] < vals[j-1]; j-- {
				vals[j], vals[j-1] = vals[j-1], vals[j]
				pts[j], pts[j-1] = pts[j-1], pts[j]
			}
		}
		c := make([]float64, n)
		for _, p := range pts[:n] {
			for i := range c {
				c[i] += p[i] / float64(n)
			}
		}
		xr := comb(c, 2, pts[n], -1)
		fr := f(xr)
		switch {
		case fr < vals[0]:
			xe := comb(c, 3, pts[n], -2)
			if fe := f(xe); fe < fr {
				pts[n], vals[n] = xe, fe
			} else {
				pts[n], vals[n] = xr, fr
			}
		case fr < vals[n-1]:
			pts[n], vals[n] = xr, fr
		default:
			xc := comb(c, 0.5, pts[n], 0.5)
			if fc := f(xc); fc < vals[n] {
				pts[n], vals[n] = xc, fc
			} else {
				for i := 1; i <= n; i++ {
					pts[i] = comb(pts[0], 0.5, pts[i], 0.5)
					vals[i] = f(pts[i])
				}
			}
		}
	}
	best := 0
	for i := range vals {
		if vals[i] < vals[best] {
			best = i
		}
	}
	return pts[best], vals[best]
}
