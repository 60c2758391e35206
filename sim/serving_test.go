package sim

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// servingRun is one published `vllm bench serve` run with its setup
// (testdata/serving/train.csv and train-more.csv, copied from gpustack's
// performance lab; testdata/serving/README.md).
type servingRun struct {
	id, model, gpu, version, dataset    string
	input, output, prompts, concurrency int
	tp                                  int
	async                               bool
	maxModelLen                         int
	rate                                float64 // 0: inf
	// published totals from the notes (0 when not given): prompt and
	// generated tokens, successful requests
	inTotal, outTotal, successful int
	// published figures (NaN when the source does not give them)
	reqPerS, ttftMean, ttftMedian, ttftP99, tpotMean, tpotMedian, tpotP99, itlMean float64
	outTokPerS                                                                     float64
	// itlMedian is the median gap between streamed chunks, from the
	// notes: at a steady batch it is one step, the one figure the rows
	// publish that tells a decode step from the prefill steps beside it.
	itlMedian float64
}

// servingEndpoint is what every row's client calls: vllm bench serve
// --backend openai-chat --endpoint /v1/chat/completions (the lab's command,
// testdata/serving/README.md).
const servingEndpoint = workload.EndpointChat

// servingGPU maps the rows' GPU names to the catalog's.
var servingGPU = map[string]string{"A100 SXM": "A100-80GB", "A100 SXM 80GB": "A100-80GB", "H100 SXM": "H100-80GB"}

// servingFiles are the training rows: the first fit's three and the eight
// that add MoE, tensor parallelism, Ampere's quantized path and low
// concurrency.
var servingFiles = []string{"testdata/serving/train.csv", "testdata/serving/train-more.csv", "testdata/serving/train-turn5.csv"}

var (
	totalsRe      = regexp.MustCompile(`total input (\d+) / generated (\d+)`)
	itlMedianRe   = regexp.MustCompile(`median ITL ([0-9.]+)`)
	successfulRe  = regexp.MustCompile(`successful (\d+)`)
	maxModelLenRe = regexp.MustCompile(`--max-model-len (\d+)`)
)

func readAllServingRuns(t testing.TB) []servingRun {
	t.Helper()
	var runs []servingRun
	for _, p := range servingFiles {
		runs = append(runs, readServingRuns(t, p)...)
	}
	return runs
}

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
		str := func(name string) string {
			if i, ok := col[name]; ok {
				return rec[i]
			}
			return ""
		}
		num := func(name string) float64 {
			v, err := strconv.ParseFloat(str(name), 64)
			if err != nil {
				return math.NaN()
			}
			return v
		}
		notes := str("notes")
		r := servingRun{id: str("id"), model: str("model"), gpu: str("gpu"), version: str("vllm_version"), dataset: strings.Fields(str("dataset") + " ")[0],
			input: int(num("input_len")), output: int(num("output_len")), prompts: int(num("num_prompts")), tp: 1,
			reqPerS: num("req_throughput"), ttftMean: num("mean_ttft_ms"), ttftMedian: num("median_ttft_ms"), ttftP99: num("p99_ttft_ms"),
			tpotMean: num("mean_tpot_ms"), tpotMedian: num("median_tpot_ms"), tpotP99: num("p99_tpot_ms"), itlMean: num("mean_itl_ms"),
			outTokPerS: num("output_tok_throughput"), async: strings.Contains(notes, "--async-scheduling")}
		if v := num("tp"); v > 1 {
			r.tp = int(v)
		}
		if c := num("max_concurrency"); !math.IsNaN(c) {
			r.concurrency = int(c)
		}
		if v := num("request_rate"); !math.IsNaN(v) && !math.IsInf(v, 0) {
			r.rate = v
		}
		if m := totalsRe.FindStringSubmatch(notes); m != nil {
			r.inTotal, _ = strconv.Atoi(m[1])
			r.outTotal, _ = strconv.Atoi(m[2])
		}
		r.itlMedian = math.NaN()
		if m := itlMedianRe.FindStringSubmatch(notes); m != nil {
			r.itlMedian, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := successfulRe.FindStringSubmatch(notes); m != nil {
			r.successful, _ = strconv.Atoi(m[1])
		}
		if m := maxModelLenRe.FindStringSubmatch(notes); m != nil {
			r.maxModelLen, _ = strconv.Atoi(m[1])
		}
		runs = append(runs, r)
	}
	return runs
}

// servingModel is the catalog entry of a row's model. Qwen3-235B-A22B's
// Instruct-2507 release has the base model's architecture (its config
// differs in the context length and the rotary base only), so the
// catalog's Qwen3-235B-A22B stands for it.
func servingModel(name string) (model.Spec, bool) {
	if s, ok := catalog.Lookup(name); ok {
		return s, true
	}
	return catalog.Lookup(strings.TrimSuffix(name, "-Instruct-2507"))
}

// servingPlans caches the rows' plans: a fit simulates each row hundreds
// of times.
var servingPlans sync.Map

// servingPlan is the memory plan of a row's server.
func servingPlan(t testing.TB, r servingRun) memory.Budget {
	t.Helper()
	if b, ok := servingPlans.Load(r.id); ok {
		return b.(memory.Budget)
	}
	b := planServing(t, r)
	servingPlans.Store(r.id, b)
	return b
}

func planServing(t testing.TB, r servingRun) memory.Budget {
	t.Helper()
	spec, ok := servingModel(r.model)
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
	set := vllm.Settings{Version: v, TensorParallelSize: r.tp, MaxModelLen: r.maxModelLen, Install: servingInstall(v)}
	if r.async {
		set.Set = map[string]bool{vllm.FlagAsyncScheduling: true}
	}
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: r.tp, Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// servingInstall is how gpustack's servers of release v were installed,
// which decides the sampler the profile run takes at 0.10-0.11, and with it
// the KV pool. The rows do not say, so two of them decide, and they decide
// by release. gpt-oss-120b on one H100 at 0.10.2 (median TTFT 26 s, about
// 150 requests decoding at once by Little's law: 2,901 tokens/s × 54 ms)
// fits the sort sampler's pool (a pip install without FlashInfer) and not
// the image's, which lets the simulated burst decode 600 at once (mean TTFT
// -67%, TPOT +122%). Qwen3-32B's 128-token burst on one H100 at 0.11.0
// (mean TPOT 1.17 s: every decode rode a prefill step of 8,192 tokens, so
// admission never stalled) needs the image's pool of 32,624 tokens; the
// pip plan's 18,384 hold 134 of its requests, which then decode alone
// (TPOT -53%). The other rows fit either.
func servingInstall(v vllm.Version) vllm.Install {
	if v.AtLeast(vllm.MustVersion("0.11.0")) {
		return vllm.InstallImage
	}
	return vllm.InstallPip
}

// simulateServing runs a row through the engine of its plan with
// calibration c, a ShareGPT row with outputs of shape sh.
func simulateServing(t testing.TB, r servingRun, c Calibration, sh outputShape) *Report {
	t.Helper()
	b := servingPlan(t, r)
	return runPlan(t, b, c, servingSource(r, sh), RunOptions{FrontEnd: c.FrontEndFor(b, servingEndpoint), Concurrency: r.concurrency})
}

// servingSource is a row's requests: the random dataset at its fixed
// lengths, or the stand-in for a dataset whose lengths are published as
// totals only (shareGPTStandIn, outputs of shape sh). A random row whose
// outputs stopped early (its generated total under 95% of prompts ×
// output_len) draws outputs uniform in [lo, output_len], lo set so the
// mean is the published one.
func servingSource(r servingRun, sh outputShape) Source {
	n := r.prompts
	if r.successful > 0 {
		n = r.successful
	}
	if r.dataset == "sharegpt" {
		return shareGPTStandIn(n, r.inTotal, r.outTotal, r.rate, sh)
	}
	s := &benchSource{n: n, prompt: r.input, output: r.output, rate: r.rate}
	if r.outTotal > 0 && float64(r.outTotal) < 0.95*float64(n*r.output) {
		mean := float64(r.outTotal) / float64(n)
		s.outputLo = max(1, int(math.Round(2*mean))-r.output)
	}
	return s
}

// benchSource is vllm bench serve's random dataset at a fixed length.
type benchSource struct {
	n, prompt, output, i int
	outputLo             int // > 0: outputs uniform in [outputLo, output], spread evenly
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
	out := s.output
	if s.outputLo > 0 {
		// a deterministic spread: request i's output is the i-th of n
		// evenly spaced points, shuffled by a multiplicative stride
		k := (s.i * 7919) % s.n
		out = s.outputLo + int(float64(k)*float64(s.output-s.outputLo)/float64(max(s.n-1, 1))+0.5)
	}
	return Request{ID: strconv.Itoa(s.i), Arrival: at, PromptTokens: s.prompt, OutputTokens: out}, nil
}

// outputShape is the shape of the generated lengths of a ShareGPT row's
// stand-in (workload.ShareGPTShape).
type outputShape = workload.ShareGPTShape

// shareGPTOutputs is the shape TestFitServing fits with the clock, one for
// every ShareGPT row, and the product's stand-in for a ShareGPT file not
// found (workload.ShareGPTOutputs). The rows publish the generated total
// only, and what is generated is not ShareGPT's replies: bench asks for a
// reply's length as max_tokens but sets no --ignore-eos, so a model stops
// at its own end and the long replies' tail is cut (the fit's longest
// output is 717 tokens where bench's filter allows 2,048 less the prompt),
// while short replies cut a model short (more short outputs than the
// replies' log-normal of σ 0.8 the stand-in had before, which made the
// ShareGPT bursts' durations 15% long and their mean TPOT 10–27% short).
var shareGPTOutputs = workload.ShareGPTOutputs

// shareGPTStandIn stands in for `vllm bench serve --dataset-name sharegpt`
// where only the totals are published: workload.ShareGPTStandIn's n
// requests scaled to the row's totals, sent at rate (all at once at 0).
func shareGPTStandIn(n, inTotal, outTotal int, rate float64, sh outputShape) Source {
	prompts, outputs := workload.ShareGPTStandIn(n, float64(inTotal), float64(outTotal), sh)
	reqs := make(sliceSource, n)
	for i := range n {
		at := 0.0
		if rate > 0 {
			at = float64(i) / rate
		}
		reqs[i] = Request{ID: strconv.Itoa(i + 1), Arrival: at, PromptTokens: prompts[i], OutputTokens: outputs[i]}
	}
	return &reqs
}

func relErr(got, want float64) float64 { return (got - want) / want }

// servingMisses are the figures of the training rows the fit does not
// bring within the bounds, each held instead to the bound given
// here (a little above its miss, so a regression still fails) and
// explained in sim/README.md ("What the fit does not reproduce").
var servingMisses = map[string]map[string]float64{
	// the gpt-oss rows: the ShareGPT stand-in's outputs (the rows publish
	// totals only) and the MXFP4 experts' share at 20-60 tokens an
	// expert, which gpt-oss-20b's and gpt-oss-120b's bursts pull apart
	"gs-goss20-h100-sharegpt":      {"mean TPOT": 0.15},
	"gs-goss120-h100-tp1-sharegpt": {"request throughput": 0.17},
	"gs-goss120-h100-tp2-sharegpt": {"request throughput": 0.14},
	// one server, two decodes: ShareGPT's ~800 sequences at ~60 tokens an
	// expert over short contexts run slower than the clock (its median
	// gap between chunks 16% long, its mean TPOT 16% short: the run's
	// long gaps, a p99 ITL of 678 ms against the clock's 280), the random
	// 4000/200's ~70 at ~5 tokens an expert over 4,000-token contexts
	// faster (median gap 39% long)
	"gs-q235-h100-tp8-sharegpt":  {"request throughput": 0.17, "mean TPOT": 0.17},
	"t5-gs-q235-h100-tp8-rand4k": {"mean TPOT": 0.17},
}

// TestServingRuns replays the published runs the step time was fitted on
// and holds the simulation to request throughput and mean TPOT within 10%
// and mean TTFT within 20% of what vllm bench serve measured (the figures
// in servingMisses to their own bounds), and prints every figure beside
// its measurement.
func TestServingRuns(t *testing.T) {
	for _, r := range readAllServingRuns(t) {
		sel, _ := gpu.Resolve(servingGPU[r.gpu])
		c, fitted := CalibrationFor(sel.Device)
		if !fitted {
			t.Errorf("%s: %s has no fitted calibration", r.id, r.gpu)
		}
		rep := simulateServing(t, r, c, shareGPTOutputs)
		t.Logf("%-30s req/s %6.2f (%+5.1f%%)  TTFT mean %8.0f (%+5.1f%%) median %8.0f (%+5.1f%%) p99 %8.0f (%+5.1f%%)  TPOT mean %6.1f (%+5.1f%%) median %6.1f (%+5.1f%%) p99 %6.1f (%+5.1f%%)  ITL median %6.1f (%+5.1f%%)",
			r.id, rep.RequestsPerS, 100*relErr(rep.RequestsPerS, r.reqPerS),
			rep.TTFT.Mean, 100*relErr(rep.TTFT.Mean, r.ttftMean), rep.TTFT.P50, 100*relErr(rep.TTFT.P50, r.ttftMedian), rep.TTFT.P99, 100*relErr(rep.TTFT.P99, r.ttftP99),
			rep.TPOT.Mean, 100*relErr(rep.TPOT.Mean, r.tpotMean), rep.TPOT.P50, 100*relErr(rep.TPOT.P50, r.tpotMedian), rep.TPOT.P99, 100*relErr(rep.TPOT.P99, r.tpotP99),
			rep.ITL.P50, 100*relErr(rep.ITL.P50, r.itlMedian))
		for _, f := range []struct {
			name      string
			got, want float64
			tol       float64
		}{
			{"request throughput", rep.RequestsPerS, r.reqPerS, 0.10},
			{"mean TPOT", rep.TPOT.Mean, r.tpotMean, 0.10},
			{"mean TTFT", rep.TTFT.Mean, r.ttftMean, 0.20},
		} {
			tol := f.tol
			if m, ok := servingMisses[r.id][f.name]; ok {
				tol = m
			}
			if e := relErr(f.got, f.want); math.Abs(e) > tol {
				t.Errorf("%s: %s %.2f, measured %.2f (%+.1f%%, bound %.0f%%)", r.id, f.name, f.got, f.want, 100*e, 100*tol)
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
// the means TestServingRuns holds, then medians, tails and the median gap
// between streamed chunks.
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
	add(rep.ITL.P50, r.itlMedian, 1)
	return
}

// fitNames are the constants TestFitServing searches, in the order of
// its vector; fitStart is where it starts (calibration.go's values and
// shareGPTOutputs). sigma_out and out_cap shape the ShareGPT stand-in's
// outputs, the test's own constants, not the clock's.
var fitNames = []string{"gemm_a100", "gemm_h100", "kv_a100", "kv_h100", "step_s", "seq_s", "request_s", "output_token_s",
	"grouped_share", "dequant_a100", "dequant_h100", "latency_s", "harmony_request_s", "sigma_out", "out_cap", "grouped_k_half", "node_host_share"}

// fitFixed marks the constants of the vector that are measured, not
// searched: the experts' reduction length (the median of the H100's six
// series, TestReductionLengthMeasured).
var fitFixed = func() []bool { f := make([]bool, len(fitNames)); f[15] = true; return f }()

func fitStart() []float64 {
	a, h := fittedByCapability["8.0"], fittedByCapability["9.0"]
	return []float64{a.FLOPsEfficiency, h.FLOPsEfficiency, a.KVBandwidthEfficiency, h.KVBandwidthEfficiency,
		hostCPU.Overhead, hostCPU.SeqOverhead, hostCPU.Request, hostCPU.OutputToken,
		groupedGEMM.GroupedShare, a.DequantShare, h.DequantShare, hostCPU.Latency, hostCPU.HarmonyRequest,
		shareGPTOutputs.Sigma, shareGPTOutputs.Longest, groupedGEMM.GroupedKHalf, hostCPU.NodeHostShare}
}

// fitCalibration is the calibration of row r's GPU and the stand-in's
// output shape at the vector x; false when x leaves the constants' ranges.
func fitCalibration(x []float64, r servingRun) (Calibration, outputShape, bool) {
	for _, v := range x {
		if !(v > 0) {
			return Calibration{}, outputShape{}, false
		}
	}
	if x[0] > 1 || x[1] > 1 || x[2] > 1 || x[3] > 1 || x[8] > 1 || x[9] > 1 || x[10] > 1 || x[13] > 3 || x[14] < 100 || x[14] > 2048 || x[16] > 2 {
		return Calibration{}, outputShape{}, false
	}
	c := Calibration{Overhead: x[4], SeqOverhead: x[5], AttentionEfficiency: prefillAttentionShare,
		GroupedShare: x[8], GroupedKHalf: x[15], HarmonyRequest: x[12], GEMMFloor: hopperKernels.GEMMFloor, NodeHostShare: x[16],
		FrontEnd: FrontEnd{Latency: x[11], Request: x[6], PromptToken: tokenizeSeconds, OutputToken: x[7]}}
	if strings.HasPrefix(r.gpu, "A100") {
		c.FLOPsEfficiency, c.KVBandwidthEfficiency, c.BandwidthEfficiency, c.DequantShare = x[0], x[2], weightBandwidthShare, x[9]
	} else {
		c.FLOPsEfficiency, c.KVBandwidthEfficiency, c.BandwidthEfficiency, c.DequantShare = x[1], x[3], hopperKernels.Weights, x[10]
	}
	return c, outputShape{Sigma: x[13], Longest: x[14]}, true
}

// servingResiduals are the rows' weighted log errors at x (√weight ×
// log(simulated / published), servingTargets' order), the rows simulated
// in parallel; nil when x leaves the constants' ranges.
func servingResiduals(t testing.TB, runs []servingRun, x []float64) []float64 {
	parts := make([][]float64, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		c, sh, ok := fitCalibration(x, r)
		if !ok {
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, want, w := servingTargets(r, simulateServing(t, r, c, sh))
			for j := range got {
				parts[i] = append(parts[i], math.Sqrt(w[j])*math.Log(got[j]/want[j]))
			}
		}()
	}
	wg.Wait()
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// servingLoss is the weighted sum of squared log errors of rows at x.
func servingLoss(t testing.TB, runs []servingRun, x []float64) float64 {
	r := servingResiduals(t, runs, x)
	if r == nil {
		return math.Inf(1)
	}
	var l float64
	for _, v := range r {
		l += v * v
	}
	return l
}

// TestFitServing searches the calibration constants that reproduce the
// training runs best (least squares of the weighted log errors,
// Levenberg-Marquardt). It runs only with HEADROOM_FIT_SERVING=1 and
// prints the constants that calibration.go then holds.
func TestFitServing(t *testing.T) {
	if os.Getenv("HEADROOM_FIT_SERVING") == "" {
		t.Skip("set HEADROOM_FIT_SERVING=1 to refit the step-time constants")
	}
	runs := readAllServingRuns(t)
	x0 := fitStart()
	iters := 12
	if s := os.Getenv("HEADROOM_FIT_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	x, l := levenbergMarquardt(func(x []float64) []float64 { return servingResiduals(t, runs, x) }, x0, fitFixed, iters)
	for i, n := range fitNames {
		fmt.Printf("%s = %.6g\n", n, x[i])
	}
	fmt.Printf("loss %.5f (start %.5f)\n", l, servingLoss(t, runs, x0))
}

// levenbergMarquardt minimises the sum of squares of res from x0 in at
// most iters iterations, each coordinate positive and searched in log
// space (the constants span shares, seconds and token counts); fixed
// marks coordinates kept at x0 (nil: none). The Jacobian is taken by
// steps of 3%: a simulation's figures move in steps (whole requests,
// whole engine steps), which a finer difference would read as noise. It
// returns the best point and its loss.
func levenbergMarquardt(res func([]float64) []float64, x0 []float64, fixed []bool, iters int) ([]float64, float64) {
	n := len(x0)
	u := make([]float64, n)
	for i, v := range x0 {
		u[i] = math.Log(v)
	}
	at := func(u []float64) []float64 {
		x := make([]float64, n)
		for i, v := range u {
			x[i] = math.Exp(v)
		}
		return x
	}
	sq := func(r []float64) float64 {
		var s float64
		for _, v := range r {
			s += v * v
		}
		return s
	}
	r := res(at(u))
	if r == nil {
		return x0, math.Inf(1)
	}
	loss, lambda := sq(r), 1e-2
	const h = 0.03
	for it := 0; it < iters; it++ {
		J := make([][]float64, n) // columns
		for j := range n {
			if fixed != nil && fixed[j] {
				continue
			}
			v := append([]float64(nil), u...)
			v[j] += h
			rj := res(at(v))
			sign := 1.0
			if len(rj) != len(r) {
				v[j] -= 2 * h
				if rj, sign = res(at(v)), -1; len(rj) != len(r) {
					continue
				}
			}
			J[j] = make([]float64, len(r))
			for i := range r {
				J[j][i] = sign * (rj[i] - r[i]) / h
			}
		}
		A := make([][]float64, n)
		g := make([]float64, n)
		for a := range n {
			A[a] = make([]float64, n)
			for b := range n {
				if J[a] != nil && J[b] != nil {
					for i := range r {
						A[a][b] += J[a][i] * J[b][i]
					}
				}
			}
			if J[a] != nil {
				for i := range r {
					g[a] += J[a][i] * r[i]
				}
			}
		}
		accepted := false
		for try := 0; try < 8 && !accepted; try++ {
			M := make([][]float64, n)
			for a := range n {
				M[a] = append([]float64(nil), A[a]...)
				M[a][a] += lambda*A[a][a] + 1e-9
			}
			d := solve(M, g)
			v := append([]float64(nil), u...)
			for j := range n {
				v[j] -= min(max(d[j], -0.5), 0.5)
			}
			if rv := res(at(v)); len(rv) == len(r) {
				if lv := sq(rv); lv < loss {
					u, r, loss, accepted = v, rv, lv, true
					lambda /= 3
					break
				}
			}
			lambda *= 4
		}
		fmt.Printf("iteration %d: loss %.5f at %.4g\n", it+1, loss, at(u))
		if !accepted {
			break
		}
	}
	return at(u), loss
}

// solve is the solution of M d = g by Gaussian elimination with partial
// pivoting (M is positive definite here, damped).
func solve(M [][]float64, g []float64) []float64 {
	n := len(g)
	b := append([]float64(nil), g...)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(M[r][c]) > math.Abs(M[p][c]) {
				p = r
			}
		}
		M[c], M[p] = M[p], M[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			f := M[r][c] / M[c][c]
			for k := c; k < n; k++ {
				M[r][k] -= f * M[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	d := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		v := b[r]
		for k := r + 1; k < n; k++ {
			v -= M[r][k] * d[k]
		}
		d[r] = v / M[r][r]
	}
	return d
}

// rowConditions are a row's conditions: its plan's, and whether its run
// (on the built-in clock) decodes small batches.
func rowConditions(t testing.TB, r servingRun) conditions {
	c := conditionsOf(servingPlan(t, r))
	sel, _ := gpu.Resolve(servingGPU[r.gpu])
	cal, _ := CalibrationFor(sel.Device)
	rep := simulateServing(t, r, cal, shareGPTOutputs)
	c.SmallBatch = rep.MaxRunning <= smallBatch
	return c
}

// TestTrainingCoverage reads the conditions the training rows cover back
// from the rows themselves: trainingCoverage must be exactly theirs.
func TestTrainingCoverage(t *testing.T) {
	var cv coverage
	for _, r := range readAllServingRuns(t) {
		cv.add(rowConditions(t, r))
	}
	if fmt.Sprint(cv) != fmt.Sprint(trainingCoverage) {
		t.Errorf("the rows cover\n%+v\ntrainingCoverage says\n%+v", cv, trainingCoverage)
	}
}

// cvStart is where every cross-validation fold's search starts: the
// constants before the eleven-row fit (the three Qwen3-14B rows' fit and
// the mechanisms' first guesses, the grouped GEMMs at that fit's Hopper
// GEMM share), the stand-in's output shape before it was fitted (σ 0.8,
// no cap below bench's 2,048) and a node's host at the slices' speed, so
// no fold starts from a point that has seen its left-out rows.
var cvStart = []float64{0.545, 0.374, 0.849, 0.420, 0.00155, 23e-6, 0.0129, 55e-6, 0.374, 0.6, 0.8, 0.030, 0.003, 0.8, 2048, reductionKHalf, 1}

// cvFold is one fold: the rows it leaves out.
type cvFold struct {
	name string
	out  func(servingRun) bool
}

// TestCrossValidateServing refits the constants with one GPU, one model or
// one tensor-parallel size left out and simulates the left-out rows:
// the errors it prints are the bands' source (confidence.go). A left-out
// GPU architecture has no fitted shares: its rows run at the default
// shares of the device the fold fitted (what an unfitted GPU gets). Only
// with HEADROOM_FIT_SERVING=1 (minutes).
func TestCrossValidateServing(t *testing.T) {
	if os.Getenv("HEADROOM_FIT_SERVING") == "" {
		t.Skip("set HEADROOM_FIT_SERVING=1 to cross-validate the step-time fit")
	}
	runs := readAllServingRuns(t)
	var folds []cvFold
	for _, g := range []string{"A100", "H100"} {
		folds = append(folds, cvFold{"GPU " + g, func(r servingRun) bool { return strings.HasPrefix(r.gpu, g) }})
	}
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.model] {
			seen[r.model] = true
			m := r.model
			folds = append(folds, cvFold{"model " + m, func(r servingRun) bool { return r.model == m }})
		}
	}
	// TP 8 is Qwen3-235B's fold, and the 8-GPU host's; vLLM 0.10.2 is
	// gpt-oss-120b's; TP 2 is one row of it.
	folds = append(folds, cvFold{"tp 2", func(r servingRun) bool { return r.tp == 2 }})
	iters := 12
	if s := os.Getenv("HEADROOM_CV_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	// figs are the left-out figures: their fold, evidence class (0
	// fitted, 1 extrapolated, 2 unseen), figure (0 throughput, 1 TTFT, 2
	// TPOT) and error in percent.
	type fig struct {
		fold, class, kind int
		err               float64
		kinds             []string
	}
	var figs []fig
	for fi, f := range folds {
		var train, test []servingRun
		var cv coverage
		for _, r := range runs {
			if f.out(r) {
				test = append(test, r)
			} else {
				train = append(train, r)
				cv.add(rowConditions(t, r))
			}
		}
		x, _ := levenbergMarquardt(func(x []float64) []float64 { return servingResiduals(t, train, x) }, cvStart, fitFixed, iters)
		for _, r := range test {
			c, sh, _ := fitCalibration(x, r)
			if !slices.ContainsFunc(train, func(o servingRun) bool { return o.gpu[:4] == r.gpu[:4] }) {
				// no row of this GPU: the other GPU's fitted shares
				o, _, _ := fitCalibration(x, servingRun{gpu: map[string]string{"A100": "H100 SXM", "H100": "A100 SXM"}[r.gpu[:4]]})
				c.FLOPsEfficiency, c.KVBandwidthEfficiency, c.BandwidthEfficiency, c.DequantShare = o.FLOPsEfficiency, o.KVBandwidthEfficiency, o.BandwidthEfficiency, o.DequantShare
			}
			rep := simulateServing(t, r, c, sh)
			out := cv.outside(rowConditions(t, r))
			var kinds []string
			for _, g := range cv.gaps(rowConditions(t, r)) {
				if !slices.Contains(kinds, g.Kind) {
					kinds = append(kinds, g.Kind)
				}
			}
			class := 0
			switch {
			case cv.unseen(rowConditions(t, r)):
				class = 2
			case len(out) > 0:
				class = 1
			}
			add := func(kind int, got, want float64) {
				if !math.IsNaN(want) && want > 0 {
					figs = append(figs, fig{fi, class, kind, 100 * relErr(got, want), kinds})
				}
			}
			add(0, rep.RequestsPerS, r.reqPerS)
			add(1, rep.TTFT.Mean, r.ttftMean)
			add(1, rep.TTFT.P50, r.ttftMedian)
			add(1, rep.TTFT.P99, r.ttftP99)
			add(2, rep.TPOT.Mean, r.tpotMean)
			add(2, rep.TPOT.P50, r.tpotMedian)
			add(2, rep.TPOT.P99, r.tpotP99)
			add(2, rep.ITL.P50, r.itlMedian)
			fmt.Printf("%-28s %-30s req/s %+6.1f%%  TTFT mean %+6.1f%% p50 %+6.1f%% p99 %+6.1f%%  TPOT mean %+6.1f%% p50 %+6.1f%% p99 %+6.1f%%  ITL p50 %+6.1f%%  outside: %s\n", f.name, r.id,
				100*relErr(rep.RequestsPerS, r.reqPerS), 100*relErr(rep.TTFT.Mean, r.ttftMean), 100*relErr(rep.TTFT.P50, r.ttftMedian), 100*relErr(rep.TTFT.P99, r.ttftP99),
				100*relErr(rep.TPOT.Mean, r.tpotMean), 100*relErr(rep.TPOT.P50, r.tpotMedian), 100*relErr(rep.TPOT.P99, r.tpotP99), 100*relErr(rep.ITL.P50, r.itlMedian), strings.Join(out, "; "))
		}
	}
	// in reports whether a figure of class c counts toward the band of
	// class b: the extrapolated band pools every figure outside its
	// fold's rows, the unseen band those whose architecture, family or
	// small batches the fold had not seen.
	in := func(c, b int) bool { return c == b || (b == 1 && c == 2) }
	band := func(kind, b int, skip int) (float64, int, float64, float64) {
		var a []float64
		var sum float64
		for _, f := range figs {
			if f.kind == kind && in(f.class, b) && f.fold != skip {
				a = append(a, math.Abs(f.err))
				sum += math.Abs(f.err)
			}
		}
		if len(a) == 0 {
			return 0, 0, 0, 0
		}
		sort.Float64s(a)
		return a[coverRank(len(a), 0.8, bandConfidence)-1], len(a), sum / float64(len(a)), a[len(a)-1]
	}
	classes := []string{"fitted", "extrapolated", "unseen"}
	kinds := []string{"throughput", "TTFT", "TPOT"}
	printed := []errorBand{fittedBand, extrapolatedBand, unseenBand}
	var below [3]float64 // the band of the class inside, by kind
	for b, cn := range classes {
		for k, kn := range kinds {
			v, n, mean, worst := band(k, b, -1)
			if n > 0 {
				fmt.Printf("%-13s %-10s n %2d  mean |err| %5.1f%%  band %5.1f%%  worst %5.1f%%\n", cn, kn, n, mean, v, worst)
			}
			// A band is at least the band of the class inside it; the
			// printed one is this, rounded (confidence.go).
			v = max(v, below[k])
			below[k] = v
			got := []float64{printed[b].Throughput, printed[b].TTFT, printed[b].TPOT}[k]
			if math.Abs(got-v) > 1 {
				t.Errorf("%s %s: confidence.go prints ±%.0f%%, the folds give ±%.1f%%: set it to the folds'", cn, kn, got, v)
			}
		}
		if e := printed[b]; e.E2E != max(e.TTFT, e.TPOT) {
			t.Errorf("%s E2E band ±%.0f%%: want the larger of TTFT's and TPOT's", cn, e.E2E)
		}
	}
	// The figures by the kind of condition their fold had not seen (a
	// figure outside by several counts toward each): what a band of each
	// condition would rest on.
	var gapKinds []string
	for _, f := range figs {
		for _, k := range f.kinds {
			if !slices.Contains(gapKinds, k) {
				gapKinds = append(gapKinds, k)
			}
		}
	}
	sort.Strings(gapKinds)
	for _, g := range gapKinds {
		for k, kn := range kinds {
			var a []float64
			for _, f := range figs {
				if f.kind == k && slices.Contains(f.kinds, g) {
					a = append(a, math.Abs(f.err))
				}
			}
			if len(a) > 0 {
				sort.Float64s(a)
				fmt.Printf("outside: %-17s %-10s n %2d  mean |err| %5.1f%%  p80 %5.1f%%\n", g, kn, len(a), mean(a), a[coverRank(len(a), 0.8, bandConfidence)-1])
			}
		}
	}
	// Each fold's figures against bands from the other folds alone (a
	// band at least its inner class's, as confidenceOf prints it): how
	// often a band holds a figure none of its errors came from, by class
	// and in all.
	inside, total, width := make([]int, 4), make([]int, 4), make([]float64, 4)
	for _, f := range figs {
		var w float64
		for b := 0; b <= f.class; b++ {
			v, _, _, _ := band(f.kind, b, f.fold)
			w = max(w, v)
		}
		for _, c := range []int{f.class, 3} {
			total[c]++
			width[c] += w
			if math.Abs(f.err) <= w {
				inside[c]++
			}
		}
	}
	for c, cn := range append(classes, "all") {
		if total[c] > 0 {
			fmt.Printf("held-out folds, %-12s: the bands of the other folds hold %d of %d figures (%.0f%%), mean half-width %.1f%%\n", cn, inside[c], total[c], 100*float64(inside[c])/float64(total[c]), width[c]/float64(total[c]))
		}
	}
}

// bandConfidence is the confidence with which a band's order statistic
// lies above the 80th percentile of the errors it stands for (coverRank):
// 0.5 takes the plain 80th percentile. Checked fold by fold (each fold's
// figures against the bands of the other folds), the plain percentile
// holds 88% of the 248 left-out figures at a mean half-width of 54%, every
// class at least 86%; 0.9, the confidence the bands had, held 92% at 66%.
const bandConfidence = 0.5

func mean(a []float64) float64 {
	var s float64
	for _, v := range a {
		s += v
	}
	return s / float64(len(a))
}

// coverRank is the rank k (1-based, at most n) of the k-th smallest of n
// errors that exceeds a share q of the errors' distribution with
// confidence conf, whatever the distribution: the least k with
// P(Binomial(n, q) < k) ≥ conf, or n when none is (too few errors to say,
// the worst is the band). The confidence.go bands are these order
// statistics of the cross-validation's errors at bandConfidence.
func coverRank(n int, q, conf float64) int {
	cdf := 0.0
	for k := 0; k < n; k++ {
		// P(X = k) for X ~ Binomial(n, q)
		lg, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		cdf += math.Exp(lg - lk - lnk + float64(k)*math.Log(q) + float64(n-k)*math.Log(1-q))
		if cdf >= conf {
			return k + 1
		}
	}
	return n
}

// The rank of the band: of 21 errors the 20th (P(X ≤ 19) = 0.942 for X ~
// Binomial(21, 0.8), P(X ≤ 18) = 0.821); of 7 the 7th (P(X ≤ 6) =
// 1 − 0.8⁷ = 0.790 < 0.9: the worst).
func TestCoverRank(t *testing.T) {
	for _, c := range []struct{ n, want int }{{21, 20}, {7, 7}, {1, 1}} {
		if got := coverRank(c.n, 0.8, 0.9); got != c.want {
			t.Errorf("coverRank(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestServingProbe prints every row's errors at the constants in
// HEADROOM_FIT_X (space-separated, fitNames' order), for a look at one
// point of the fit's search.
func TestServingProbe(t *testing.T) {
	s := os.Getenv("HEADROOM_FIT_X")
	if s == "" {
		t.Skip("set HEADROOM_FIT_X to the constants to probe")
	}
	var x []float64
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatal(err)
		}
		x = append(x, v)
	}
	runs := readAllServingRuns(t)
	for _, r := range runs {
		c, sh, ok := fitCalibration(x, r)
		if !ok {
			t.Fatal("constants out of range")
		}
		rep := simulateServing(t, r, c, sh)
		fmt.Printf("%-28s req/s %+6.1f%%  TTFT mean %+6.1f%% p50 %+6.1f%% p99 %+6.1f%%  TPOT mean %+6.1f%% p50 %+6.1f%% p99 %+6.1f%%\n", r.id,
			100*relErr(rep.RequestsPerS, r.reqPerS), 100*relErr(rep.TTFT.Mean, r.ttftMean), 100*relErr(rep.TTFT.P50, r.ttftMedian), 100*relErr(rep.TTFT.P99, r.ttftP99),
			100*relErr(rep.TPOT.Mean, r.tpotMean), 100*relErr(rep.TPOT.P50, r.tpotMedian), 100*relErr(rep.TPOT.P99, r.tpotP99))
	}
	fmt.Printf("loss %.4f\n", servingLoss(t, runs, x))
}
