package sim

import (
	"math"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// A model of 1e9 GEMM parameters (no LM head), 2e9 weight bytes and 1e5
// KV bytes per token on a device of 1e15 FLOP/s and 1e12 B/s, measured
// with weights read at 0.8 of the bandwidth, the cache at 0.5, GEMMs at
// 0.5 of the peak, attention at the GEMMs' share, 2 ms per step and 10 µs
// per sequence:
//
//	decode, 1 request over 1000:  2e9/0.8e12 + 1e8/0.5e12 + 0.002 + 0.00001
//	                              = 0.0025 + 0.0002 + 0.00201 = 0.00471 s
//	decode, 64 over 64000:        0.0025 + 6.4e9/0.5e12 + 0.002 + 0.00064
//	                              = 0.0025 + 0.0128 + 0.00264 = 0.01794 s
//	prefill, 8192 new tokens:     GEMMs 2 × 1e9 × 8192 = 1.6384e13 FLOPs (compute-bound:
//	                              0.032768 s > 0.0025 s); attention 8192 × 8193 / 2 pairs
//	                              × 1000 FLOPs = 3.3558528e10; (1.6384e13 + 3.3558528e10)
//	                              / 0.5e15 + 0.00201 = 0.032835117056 + 0.00201 = 0.034845117056 s
//
// Fit recovers the cache's share, the per-step overhead and the GEMM share
// from these steps, given the weights' share and the per-sequence time.
func TestFitRecoversCalibration(t *testing.T) {
	m := Roofline{LinearParams: 1e9, WeightBytes: 2e9, KVBytesPerToken: 1e5, AttentionFLOPsPerPair: 1000,
		PeakFLOPs: 1e15, Bandwidth: 1e12, GraphTokens: 1 << 20}
	samples := []Sample{
		{Batch{Requests: 1, Tokens: 1, ContextTokens: 1000, Decodes: 1, DecodeContext: 1000}, 0.00471},
		{Batch{Requests: 64, Tokens: 64, ContextTokens: 64000, Decodes: 64, DecodeContext: 64000}, 0.01794},
		{Batch{Requests: 1, Tokens: 8192, ContextTokens: 8192, PrefillPairs: 8192 * 8193 / 2}, 0.034845117056},
	}
	start := Calibration{FLOPsEfficiency: 0.9, BandwidthEfficiency: 0.8, KVBandwidthEfficiency: 0.9, Overhead: 0.01, SeqOverhead: 10e-6}
	c := Fit(m, start, samples)
	if math.Abs(c.KVBandwidthEfficiency-0.5) > 1e-9 || math.Abs(c.Overhead-0.002) > 1e-9 || math.Abs(c.FLOPsEfficiency-0.5) > 1e-9 {
		t.Errorf("fit: %+v, want kv bandwidth 0.5, overhead 0.002, flops 0.5", c)
	}
	// With the fitted values the model reproduces the measurements.
	m.GEMMEfficiency, m.AttentionEfficiency, m.BandwidthEfficiency, m.KVBandwidthEfficiency = c.FLOPsEfficiency, c.attention(), c.BandwidthEfficiency, c.kvBandwidth()
	m.StepOverhead, m.SeqOverhead = c.Overhead, c.SeqOverhead
	for _, s := range samples {
		if got := m.StepTime(s.Batch); math.Abs(got-s.Seconds) > 1e-9 {
			t.Errorf("%+v: model %v, measured %v", s.Batch, got, s.Seconds)
		}
	}
}

func plan(t testing.TB, id, device string, count int, set vllm.Settings) memory.Budget {
	t.Helper()
	spec, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s not in the catalog", id)
	}
	sel, err := gpu.Resolve(device)
	if err != nil {
		t.Fatal(err)
	}
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Count: count, Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Llama-3.1-8B on one H100-80GB with the H100's calibration, vLLM 0.11.0
// (no async scheduling): a decode step of one request over 1000 tokens
// reads the weights (the plan's weights_total) at the H100's fitted share
// of 3.35 TB/s and
// 1000 × 131072 B of KV (32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B) at
// the cache's share, runs 32 layers × 6 small kernels at 3 µs each
// (576 µs) and 32 × 4 + 1 = 129 GEMMs (qkv, o, gate-up and down in each
// layer, the LM head) at 3.92 µs each beyond their read (505.68 µs), and
// costs the per-step and one per-sequence overhead.
func TestRooflineLlama8BH100(t *testing.T) {
	b := plan(t, "meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", 1, vllm.Settings{Version: vllm.Version{Major: 0, Minor: 11}})
	if b.ModelKVBytesPerToken != 32*8*128*2*2 {
		t.Fatalf("KV per token %d", b.ModelKVBytesPerToken)
	}
	c, fitted := CalibrationFor(b.Device)
	if !fitted {
		t.Fatal("the H100 has a fit")
	}
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	small := 32*6*3e-6 + 129*3.92e-6
	want := float64(b.WeightsTotal)/(c.BandwidthEfficiency*3.35e12) + 1000*131072/(c.KVBandwidthEfficiency*3.35e12) + small + c.Overhead + c.SeqOverhead
	decode := Batch{Requests: 1, Tokens: 1, ContextTokens: 1000, Decodes: 1, DecodeContext: 1000}
	if got := m.StepTime(decode); math.Abs(got-want) > 1e-12 {
		t.Errorf("decode step %v, want %v", got, want)
	}
	// The same step by its parts.
	p := m.Parts(decode)
	for _, q := range []struct {
		name      string
		got, want float64
	}{
		{"dense GEMMs (the weights' read)", p.Dense, float64(b.WeightsTotal) / (c.BandwidthEfficiency * 3.35e12)},
		{"attention (the cache's read)", p.Attention, 1000 * 131072 / (c.KVBandwidthEfficiency * 3.35e12)},
		{"GEMM floors", p.GEMMFloors, 129 * 3.92e-6},
		{"small kernels", p.SmallKernels, 32 * 6 * 3e-6},
		{"engine CPU", p.CPU, c.Overhead + c.SeqOverhead},
		{"experts, all-reduce, launches", p.Experts + p.AllReduce + p.Launch, 0},
	} {
		if math.Abs(q.got-q.want) > 1e-12 {
			t.Errorf("decode step's %s %v, want %v", q.name, q.got, q.want)
		}
	}
	// A prefill of 4096 tokens: 2 × (GEMM params × 4096 + LM head × 1)
	// FLOPs at the GEMM share, 4096 × 4097 / 2 pairs × 4 × 32 layers × 32
	// heads × 128 at the attention share. Llama-3.1-8B's GEMMs: per layer
	// 4096 × (4096 + 1024 + 1024 + 4096) attention + 3 × 4096 × 14336 MLP.
	gemm := 32.0 * (4096*(4096+1024+1024+4096) + 3*4096*14336)
	head := 128256.0 * 4096
	flops := 2 * (gemm*4096 + head)
	pairs := 4096.0 * 4097 / 2
	want = flops/(989.4e12*c.FLOPsEfficiency) + pairs*4*32*32*128/(989.4e12*c.AttentionEfficiency) + small + c.Overhead + c.SeqOverhead
	// 4096 tokens are more than the largest CUDA graph (512): eager, but
	// the 3.2 ms of launches hide under the compute.
	if got := m.StepTime(Batch{Requests: 1, Tokens: 4096, PrefillTokens: 4096, PrefillPairs: int64(pairs)}); math.Abs(got/want-1) > 1e-12 {
		t.Errorf("prefill step %v, want %v", got, want)
	}
	if _, err := RooflineFor(memory.Budget{Device: gpu.Custom(24 << 30)}, DefaultCalibration); err == nil || !strings.Contains(err.Error(), "--step-time fixed:DURATION") {
		t.Errorf("a GPU without datasheet figures must ask for a fixed step time: %v", err)
	}
}

// Mixtral-8x7B: 8 experts, 2 per token. One decode token reaches 2 of 8
// experts per layer (1 − (1 − 2/8)^1 = 0.25 of the expert bytes), 4 tokens
// 1 − 0.75^4 = 0.68359375, 64 tokens all but 0.75^64 ≈ 1e-8.
func TestMoEReadsTheExpertsItsTokensReach(t *testing.T) {
	b := plan(t, "mistralai/Mixtral-8x7B-Instruct-v0.1", "H100-80GB", 2, vllm.Settings{TensorParallelSize: 2})
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	if m.Experts != 8 || m.TopK != 2 || m.ExpertBytes <= m.WeightBytes {
		t.Fatalf("experts %d top-%d, expert bytes %g, the rest %g", m.Experts, m.TopK, m.ExpertBytes, m.WeightBytes)
	}
	for _, c := range []struct {
		tokens float64
		share  float64
	}{{1, 0.25}, {4, 0.68359375}, {64, 1 - math.Pow(0.75, 64)}} {
		if got := m.expertsTouched(c.tokens); math.Abs(got-c.share) > 1e-12 {
			t.Errorf("%g tokens reach %v of the experts, want %v", c.tokens, got, c.share)
		}
	}
	// Each of the 2 ranks holds half the experts and computes half the
	// active parameters.
	one := plan(t, "mistralai/Mixtral-8x7B-Instruct-v0.1", "H200", 1, vllm.Settings{})
	m1, _ := RooflineFor(one, DefaultCalibration)
	if math.Abs(m1.LinearParams/m.LinearParams-2) > 1e-9 {
		t.Errorf("TP 2 halves the GEMM parameters: %g vs %g", m.LinearParams, m1.LinearParams)
	}
}

// Llama-3.1-70B at TP 4 on H100s (NVLink, 450 GB/s each way, 0.8 of it
// reached): every layer all-reduces its attention and MLP outputs, 2 × 80
// per step, of tokens × 8192 × 2 B. vLLM's custom all-reduce takes a
// message of up to 8 MiB, in one stage under 512 KiB at 4 ranks (each rank
// reads its 3 peers: 8 µs + bytes × 3 / 360e9), else in two (2 × 8 µs + 2 ×
// bytes × 3/4 / 360e9); NCCL's ring above 8 MiB (25 µs + 2 × bytes × 3/4 /
// 360e9):
//
//	16 tokens, 262,144 B (one stage):    8e-6 + 262144 × 3 / 360e9 = 10.1845e-6
//	32 tokens, 524,288 B (two stages):  16e-6 + 524288 × 1.5 / 360e9 = 18.1845e-6
//	1024 tokens, 16 MiB (NCCL):         25e-6 + 16777216 × 1.5 / 360e9 = 94.9055e-6
func TestTensorParallelAllReduce(t *testing.T) {
	b := plan(t, "meta-llama/Llama-3.1-70B-Instruct", "H100-80GB", 4, vllm.Settings{TensorParallelSize: 4})
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokens int64
		each   float64
	}{
		{16, 8e-6 + 262144*3/360e9},
		{32, 16e-6 + 524288*1.5/360e9},
		{1024, 25e-6 + 16777216*1.5/360e9},
	} {
		batch := Batch{Requests: int(c.tokens), Tokens: c.tokens, Decodes: int(c.tokens), DecodeContext: c.tokens * 1000}
		m.TP = 4
		with := m.GPUTime(batch)
		m.TP = 1
		without := m.GPUTime(batch)
		if want := 160 * c.each; math.Abs((with-without)-want) > 1e-12 {
			t.Errorf("%d tokens: all-reduce %v s, want %v", c.tokens, with-without, want)
		}
	}
}

// Groups vLLM's custom all-reduce does not take go to NCCL's ring: 3
// ranks (it takes 2, 4, 6 and 8), and 16 across two nodes of 8, whose
// ring crosses the network at 400 Gb/s a GPU (50 GB/s, 40 GB/s at the
// ring's 0.8) with 40 µs a call. Llama-3.1-70B's 80 layers all-reduce
// twice each, 8,192 × 2 B a token. A 16-token decode: 3 ranks over NVLink
// 25 µs + 2 × 262,144 × 2/3 / 360e9; 16 across nodes 40 µs + 2 × 262,144
// × 15/16 / 40e9 = 52.3 µs, where 8 ranks on one node take the custom
// two-stage (256 KiB is not under its one-stage bound) 16 µs + 2 ×
// 262,144 × 7/8 / 360e9 = 17.3 µs. A pipeline of
// 2 stages of 8 sends 1,024 tokens' hidden state and residual (32 KiB a
// token) across the nodes in 40 µs + 33,554,432 / 40e9 = 879 µs, where 2
// stages of 4 on one node take 25 µs + 33,554,432 / 360e9 = 118 µs.
func TestAllReduceGroups(t *testing.T) {
	b := plan(t, "meta-llama/Llama-3.1-70B-Instruct", "H100-80GB", 4, vllm.Settings{TensorParallelSize: 4})
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	batch := Batch{Requests: 16, Tokens: 16, Decodes: 16, DecodeContext: 16000}
	allReduce := func(m *Roofline, tp int) float64 {
		m.TP = tp
		with := m.GPUTime(batch)
		m.TP = 1
		defer func() { m.TP = tp }()
		return (with - m.GPUTime(batch)) / 160
	}
	const bytes = 16 * 8192 * 2
	if got, want := allReduce(m, 3), 25e-6+2*bytes*2.0/3/360e9; math.Abs(got-want) > 1e-12 {
		t.Errorf("3 ranks: %v s an all-reduce, want NCCL's %v", got, want)
	}
	if got, want := allReduce(m, 8), 16e-6+2*bytes*7.0/8/360e9; math.Abs(got-want) > 1e-12 {
		t.Errorf("8 ranks: %v s an all-reduce, want the custom two-stage %v", got, want)
	}
	wide, err := RooflineFor(plan(t, "meta-llama/Llama-3.1-70B-Instruct", "H100-80GB", 16, vllm.Settings{TensorParallelSize: 16}), DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	if !wide.CrossesNodes() {
		t.Fatal("TP 16 on nodes of 8 should cross nodes")
	}
	if got, want := allReduce(wide, 16), 40e-6+2*bytes*15.0/16/40e9; math.Abs(got-want) > 1e-12 {
		t.Errorf("16 ranks on two nodes: %v s an all-reduce, want %v", got, want)
	}
	prefill := Batch{Requests: 1, Tokens: 1024, PrefillPairs: 1024 * 1025 / 2}
	for _, c := range []struct {
		tp, gpus int
		want     float64
	}{{8, 16, 40e-6 + 1024*32768/40e9}, {4, 8, 25e-6 + 1024*32768/360e9}} {
		pp, err := RooflineFor(plan(t, "meta-llama/Llama-3.1-70B-Instruct", "H100-80GB", c.gpus, vllm.Settings{TensorParallelSize: c.tp, PipelineParallelSize: 2}), DefaultCalibration)
		if err != nil {
			t.Fatal(err)
		}
		if got := pp.PipelineSend(prefill); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("TP %d × PP 2: a send of 1,024 tokens %v s, want %v", c.tp, got, c.want)
		}
		if pp.CrossesNodes() != (c.gpus > 8) {
			t.Errorf("TP %d × PP 2: crosses nodes %v", c.tp, pp.CrossesNodes())
		}
	}
}

// --enforce-eager: a decode step of Qwen3-0.6B (28 layers) launches its
// kernels from the CPU, 28 × 100 µs = 2.8 ms, twice its forward pass on
// an H100 (1.5 GB of weights: about 0.6 ms; 28 × 6 small kernels at 3 µs,
// 0.5 ms; 28 × 4 + 1 GEMMs at 3.92 µs beyond their read, 0.44 ms); with
// CUDA graphs the forward pass alone counts.
func TestEagerStepIsLaunchBound(t *testing.T) {
	graphs := plan(t, "Qwen/Qwen3-0.6B", "H100-80GB", 1, vllm.Settings{})
	eager := plan(t, "Qwen/Qwen3-0.6B", "H100-80GB", 1, vllm.Settings{EnforceEager: true})
	mg, _ := RooflineFor(graphs, DefaultCalibration)
	me, _ := RooflineFor(eager, DefaultCalibration)
	batch := Batch{Requests: 1, Tokens: 1, Decodes: 1, DecodeContext: 100}
	if g := mg.GPUTime(batch); g > 28*100e-6/2 {
		t.Errorf("with CUDA graphs the step is its forward pass, %v s", g)
	}
	if g := me.GPUTime(batch); math.Abs(g-28*100e-6) > 1e-12 {
		t.Errorf("eager step %v s, want 28 × 100 µs", g)
	}
}

// Async scheduling (on by default from vLLM 0.14.0, off with
// --no-async-scheduling) hides the engine's CPU time under the forward
// pass: a step lasts the longer of the two, not their sum.
func TestAsyncSchedulingOverlapsCPU(t *testing.T) {
	for _, c := range []struct {
		version string
		flag    bool
		overlap bool
	}{{"0.11.0", false, false}, {"0.13.0", false, false}, {"0.14.0", false, true}, {"0.19.0", true, false}} {
		v, _ := vllm.ParseVersion(c.version)
		set := vllm.Settings{Version: v}
		if c.flag {
			set.Set = map[string]bool{vllm.FlagNoAsyncScheduling: true}
		}
		m, err := RooflineFor(plan(t, "Qwen/Qwen3-8B", "H100-80GB", 1, set), DefaultCalibration)
		if err != nil {
			t.Fatal(err)
		}
		batch := Batch{Requests: 8, Tokens: 8, Decodes: 8, DecodeContext: 8000}
		g, cpu := m.GPUTime(batch), m.StepOverhead+8*m.SeqOverhead
		want := g + cpu
		if c.overlap {
			want = max(g, cpu)
		}
		if got := m.StepTime(batch); math.Abs(got-want) > 1e-15 || m.Overlap != c.overlap {
			t.Errorf("%s (no-async flag %v): step %v, want %v", c.version, c.flag, got, want)
		}
	}
}

// The keys a window leaves the queries at positions lo..hi: a sliding
// window of 4 gives min(i, 4), chunked local attention of 4 the place in
// the chunk, ((i − 1) mod 4) + 1.
func TestWindowKeys(t *testing.T) {
	sliding, chunked := WindowAttention{Window: 4}, WindowAttention{Window: 4, Chunked: true}
	for _, c := range []struct {
		lo, hi           int64
		sliding, chunked int64
	}{
		{1, 10, 1 + 2 + 3 + 4*7, 1 + 2 + 3 + 4 + 1 + 2 + 3 + 4 + 1 + 2}, // 34, 23
		{3, 6, 3 + 4 + 4 + 4, 3 + 4 + 1 + 2},                            // 15, 10
		{9, 9, 4, 1},
		{1, 2, 1 + 2, 1 + 2},
	} {
		if got := sliding.keys(c.lo, c.hi); got != c.sliding {
			t.Errorf("sliding %d..%d: %d keys, want %d", c.lo, c.hi, got, c.sliding)
		}
		if got := chunked.keys(c.lo, c.hi); got != c.chunked {
			t.Errorf("chunked %d..%d: %d keys, want %d", c.lo, c.hi, got, c.chunked)
		}
	}
}

// gpt-oss-20b alternates 12 sliding-window layers (128 tokens) with 12
// full ones, 64 query heads of 64 (qk and v): a query × key pair costs
// 2 × 64 × 128 = 16,384 FLOPs a layer, and a token 8 KV heads × (64 + 64)
// × 2 B = 2,048 B a layer. A first prefill of 8192 tokens has 8192 × 8193
// / 2 = 33,558,528 pairs in a full layer and Σ min(i, 128) = 128 × 129 / 2
// + 8064 × 128 = 1,040,448 in a sliding one; a decode at 10,000 tokens
// reads 10,000 keys in a full layer and 128 in a sliding one.
func TestRooflineSlidingWindow(t *testing.T) {
	b := plan(t, "openai/gpt-oss-20b", "H100-80GB", 1, vllm.Settings{MaxModelLen: 16384})
	c, _ := CalibrationFor(b.Device)
	m, err := RooflineFor(b, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Windows) != 1 || m.Windows[0].Window != 128 || m.Windows[0].FLOPsPerPair != 12*16384 || m.Windows[0].KVBytesPerToken != 12*2048 || m.AttentionFLOPsPerPair != 12*16384 {
		t.Fatalf("windows %+v, full layers %v FLOPs a pair", m.Windows, m.AttentionFLOPsPerPair)
	}
	peak := 989.4e12 * c.AttentionEfficiency
	prefill := Batch{Requests: 1, Tokens: 8192, PrefillTokens: 8192, PrefillPairs: 33_558_528, AttentionPairs: 33_558_528,
		Chunks: []Chunk{{New: 8192}}}
	asFull := prefill
	asFull.Chunks = nil // a measured step: priced as full attention, as before
	if d, want := m.GPUTime(asFull)-m.GPUTime(prefill), 12*16384*float64(33_558_528-1_040_448)/peak; math.Abs(d/want-1) > 1e-9 {
		t.Errorf("the window saves %v s of prefill attention, want %v", d, want)
	}
	decode := Batch{Requests: 1, Tokens: 1, Decodes: 1, DecodeContext: 10_000, ContextTokens: 10_000, AttentionPairs: 10_000,
		Chunks: []Chunk{{New: 1, Computed: 9_999}}}
	noCache := decode
	noCache.Chunks = nil
	if d, want := m.GPUTime(decode)-m.GPUTime(noCache), 12*2048*128/(3.35e12*c.KVBandwidthEfficiency); math.Abs(d/want-1) > 1e-9 {
		t.Errorf("the sliding layers read %v s of cache in a decode, want %v", d, want)
	}
}

// The routed experts' part of a step on a hand-made roofline: 1e9 routed
// parameters a token, 4e9 bytes of experts, 8 experts of which a token
// takes 2, 1e15 FLOP/s, 1e12 B/s at 0.8, grouped GEMMs at 0.4 of the
// peak on full tiles (fused_moe's: 16 to 64 rows), 10 MoE layers of hidden 1000 and intermediate 2000 moving 2-byte
// activations.
//
//	4096 tokens: every expert touched, 4096 × 2 / 8 = 1024 tokens each, in
//	  tiles of 64: 1024 + 32 rows of padding on average, 1056/1024 of the
//	  math; math 2e9 × 4096 × 1.03125 / (1e15 × 0.4) = 21.12 ms > read 4e9 /
//	  8e11 = 5 ms; activations 10 × 4096 × 2 × (3 × 1000 + 5 × 2000) × 2 B /
//	  8e11 = 2.6624 ms: 23.7824 ms.
//	1 token: 2 of 8 experts touched (0.25), 1 token each in a tile of 16
//	  rows; math 2e9 × 16 / 4e14 = 80 µs < read 1e9 / 8e11 = 1.25 ms;
//	  activations 10 × 2 × 13000 × 2 / 8e11 = 0.65 µs: 1.25065 ms.
//	On Marlin (tiles of 8 to 64 rows, the first the tokens fill to less
//	  than 0.9) 4096 tokens take tiles of 64 too: the same 21.12 ms at a
//	  dequantizing share of 0.5 is 42.24 ms.
func TestExpertTimeGroupedGEMM(t *testing.T) {
	m := &Roofline{RoutedParams: 1e9, ExpertBytes: 4e9, Experts: 8, TopK: 2, PeakFLOPs: 1e15, Bandwidth: 1e12,
		GEMMEfficiency: 0.5, BandwidthEfficiency: 0.8, GroupedPlateau: 0.4,
		MoELayers: 10, MoEHidden: 1000, MoEInter: 2000, ActBytes: 2}
	// (1 − 0.75^4096) is 1 in float64
	if got, want := m.expertTime(4096), 0.02112+0.0026624; math.Abs(got-want) > 1e-12 {
		t.Errorf("4096 tokens: %v s, want %v", got, want)
	}
	if got, want := m.expertTime(1), 0.00125+0.65e-6; math.Abs(got-want) > 1e-12 {
		t.Errorf("1 token: %v s, want %v", got, want)
	}
	// Weight-only dequantizing kernels at half the GEMM share double the math.
	m.ExpertDequant, m.ExpertKernel = 0.5, marlinMoE
	if got, want := m.expertTime(4096), 0.04224+0.0026624; math.Abs(got-want) > 1e-12 {
		t.Errorf("4096 tokens dequantized: %v s, want %v", got, want)
	}
}

// The tiles each grouped GEMM kernel pads an expert's tokens to, and the
// rows it computes: fused_moe 16 to 64 (a power of two), matmul_ogs 16 to
// 128, Marlin the first of 8, 16, 32, 48, 64 the tokens fill to less than
// 0.9; one tile under half a tile of tokens, else the tokens and half a
// tile.
func TestMoETilePadding(t *testing.T) {
	for _, c := range []struct {
		k          moeKernel
		t, b, rows float64
	}{
		{fusedMoE, 1, 16, 16}, {fusedMoE, 8, 16, 16}, {fusedMoE, 9, 16, 17}, {fusedMoE, 20, 32, 36}, {fusedMoE, 62, 64, 94}, {fusedMoE, 512, 64, 544},
		{matmulOGS, 2, 16, 16}, {matmulOGS, 100, 128, 164}, {matmulOGS, 1000, 128, 1064},
		{marlinMoE, 3, 8, 8}, {marlinMoE, 7.2, 16, 16}, {marlinMoE, 40, 48, 64}, {marlinMoE, 300, 64, 332},
	} {
		if b := c.k.tileRows(c.t); b != c.b || paddedRows(c.t, b) != c.rows {
			t.Errorf("kernel %d, %v tokens an expert: tiles of %v rows, %v rows; want %v, %v", c.k, c.t, b, paddedRows(c.t, b), c.b, c.rows)
		}
	}
}

// DeepSeek-V2-Lite at TP 2 (27 MLA layers of 16 heads, kv_lora_rank 512,
// rope 64; 26 MoE layers of 64 experts, top-6, 1408 wide, 2 shared):
//   - the latent cache is whole on every rank: 27 × (512 + 64) × 2 B =
//     31,104 B a token, not halved;
//   - a decode's attention computes 2 × 27 × 16 × (2 × 512 + 64) / 2 =
//     470,016 FLOPs a token of context on each rank;
//   - the routed experts a token passes: 26 × 6 × 3 × 2048 × 1408 / 2 =
//     674,758,656 parameters a rank; the shared experts stay dense.
func TestRooflineMLAAndSharedExperts(t *testing.T) {
	b := plan(t, "deepseek-ai/DeepSeek-V2-Lite", "H100-80GB", 2, vllm.Settings{TensorParallelSize: 2})
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	if m.KVBytesPerToken != 31104 || m.MLADecodeFLOPsPerToken != 470016 || m.RoutedParams != 674758656 {
		t.Errorf("KV %v B a token, MLA decode %v FLOPs a token, routed %v", m.KVBytesPerToken, m.MLADecodeFLOPsPerToken, m.RoutedParams)
	}
	shared := float64(b.Model.Layer(1).Shared) / 2
	if shared == 0 || m.LinearParams < shared {
		t.Errorf("shared experts %v not in the dense GEMMs %v", shared, m.LinearParams)
	}
}

// rooflineOf is the plan of a catalog model on a catalog GPU and its clock
// at the default calibration.
func rooflineOf(t testing.TB, id, device string, set vllm.Settings) (memory.Budget, *Roofline) {
	t.Helper()
	b := plan(t, id, device, 0, set)
	m, err := RooflineFor(b, DefaultCalibration)
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

// device is the catalog's GPU of that name.
func device(t *testing.T, name string) gpu.Device {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Device
}

// The kernel paths quantized weights take, by architecture.
func TestQuantPath(t *testing.T) {
	for _, c := range []struct {
		method, gpu string
		fp8, deq    bool
	}{
		{"", "H100-80GB", false, false},
		{"fp8", "H100-80GB", true, false},
		{"fp8", "A100-80GB", false, true},
		{"fp8", "L40S", true, false},
		{"mxfp4", "H100-80GB", false, true},
		{"mxfp4", "A100-80GB", false, true},
		{"gptq", "H100-80GB", false, true},
		{"modelopt_fp4", "H100-80GB", false, true},
		{"modelopt_fp4", "B200", false, false},
		{"fp8", "A10", false, true},
	} {
		p := quantPathOf(c.method, device(t, c.gpu))
		if p.FP8 != c.fp8 || p.Dequant != c.deq {
			t.Errorf("%s on %s: %+v", c.method, c.gpu, p)
		}
	}
}

// The routed experts' grouped GEMM follows vLLM's choice for the format
// and the GPU (memory.ExpertShapeFor), and the clock reads and computes
// the padded experts: gpt-oss-120b's MXFP4 experts run matmul_ogs on an
// H100, Marlin on an L40S (triton_kernels needs sm_90) and an A100, and
// FlashInfer on a B200, where at TP 8 each rank's experts are padded from
// 360 × 2,880 to 512 × 3,072, 1.5170 times the checkpoint's shard
// (memory's TestExpertShapeMXFP4Padding works it out); the expert width
// the down GEMM reduces over is the padded 512. A BF16 MoE keeps fused_moe
// and its shapes.
func TestExpertPath(t *testing.T) {
	for _, c := range []struct {
		model, gpu string
		tp         int
		kernel     moeKernel
		deq        bool
		pad, inter float64
	}{
		{"openai/gpt-oss-120b", "H100-80GB", 1, matmulOGS, true, 1, 2880},
		{"openai/gpt-oss-120b", "L40S", 2, marlinMoE, true, 1536.0 * 3072 / (1440 * 2880), 1536},
		{"openai/gpt-oss-120b", "A100-80GB", 2, marlinMoE, true, 1536.0 * 3072 / (1440 * 2880), 1536},
		{"openai/gpt-oss-120b", "B200", 8, flashInferMoE, true, 512.0 * 3072 / (360 * 2880), 512},
		{"Qwen/Qwen3-30B-A3B", "H100-80GB", 2, fusedMoE, false, 1, 384},
	} {
		s, ok := catalog.Lookup(c.model)
		if !ok {
			t.Fatalf("%s not in the catalog", c.model)
		}
		set := vllm.Settings{TensorParallelSize: c.tp}
		d := device(t, c.gpu)
		p := expertPathOf(s, set, d)
		if p.MoE != c.kernel || p.Dequant != c.deq {
			t.Errorf("%s on %s: %+v, want kernel %d, dequantized %v", c.model, c.gpu, p, c.kernel, c.deq)
		}
		b, m := rooflineOf(t, c.model, c.gpu, set)
		want := float64(b.ExpertWeightsTotal) / float64(c.tp) * c.pad
		if math.Abs(m.ExpertBytes/want-1) > 1e-9 || m.MoEInter != c.inter {
			t.Errorf("%s on %s at TP %d: experts %.0f B a rank, width %v; want %.0f B, %v", c.model, c.gpu, c.tp, m.ExpertBytes, m.MoEInter, want, c.inter)
		}
	}
}

// With VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 a B200 multiplies gpt-oss's
// experts on the FP8 tensor cores (MXFP8 activations): the expert GEMMs
// run at the FP8 peak, where by default they widen the weights to BF16.
func TestExpertPathMXFP8(t *testing.T) {
	s, _ := catalog.Lookup("openai/gpt-oss-120b")
	d := device(t, "B200")
	for _, c := range []struct {
		env map[string]string
		fp8 bool
	}{{nil, false}, {map[string]string{vllm.EnvFlashInferMXFP4MXFP8: "1"}, true}} {
		set := vllm.Settings{Env: c.env}
		p := expertPathOf(s, set, d)
		if p.FP8 != c.fp8 || p.Dequant == c.fp8 || p.MoE != flashInferMoE {
			t.Errorf("env %v: %+v", c.env, p)
		}
		_, m := rooflineOf(t, "openai/gpt-oss-120b", "B200", set)
		if perf, _ := gpu.PerfOf(d); (m.ExpertPeak == perf.FP8) != c.fp8 {
			t.Errorf("env %v: experts at a peak of %v, FP8's %v", c.env, m.ExpertPeak, perf.FP8)
		}
	}
}

// Native FP8 quantizes every GEMM input in a kernel of its own; Marlin's
// weight-only FP8 on Ampere does not. Llama-3.1-8B in FP8, 32 layers:
// 6 small kernels a layer, plus 2 (qkv, o) and 2 (gate_up, down) on the
// H100: 32 × 10 = 320; on the A100 32 × 6 = 192. DeepSeek-V3 (FP8 block
// scales), 61 layers of MLA, the first 3 dense, the other 58 with 256
// routed experts and 1 shared: a dense layer 6 + 3 (MLA) + 3 (MLA's
// GEMM inputs) + 2 (MLP) = 14, a MoE layer 6 + 4 (router, top-k, align,
// sum) + 3 + 3 + 2 (shared experts) + 2 (fused_moe's inputs) = 20, so
// 3 × 14 + 58 × 20 = 1202 on the H100; on the A100 3 × 9 + 58 × 13 = 781.
func TestSmallKernelsQuantizedActivations(t *testing.T) {
	for _, c := range []struct {
		model, gpu string
		want       float64
	}{
		{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "H100-80GB", 320},
		{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "A100-80GB", 192},
		{"deepseek-ai/DeepSeek-V3", "H100-80GB", 1202},
		{"deepseek-ai/DeepSeek-V3", "A100-80GB", 781},
		{"meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", 192},
	} {
		s, ok := catalog.Lookup(c.model)
		if !ok {
			t.Fatalf("%s not in the catalog", c.model)
		}
		d := device(t, c.gpu)
		got := smallKernels(s, quantPathOf(denseQuant(s, ""), d), expertPathOf(s, vllm.Settings{}, d))
		if got != c.want {
			t.Errorf("%s on %s: %v small kernels a step, want %v", c.model, c.gpu, got, c.want)
		}
	}
}

// GEMM kernels a step, read from vLLM's layer code (gemmKernels), with the
// LM head once:
//
//	Llama-3.1-8B:  32 layers × (qkv, o, gate-up, down) + 1            = 129
//	Qwen3-235B:    94 MoE layers × (qkv, o, fused_moe's 2) + 1         = 377
//	DeepSeek-V3:   61 MLA layers × (q_a/kv_a, q_b, o) + 3 dense MLPs × 2
//	               + 58 MoE layers × (fused_moe's 2 + shared experts' 2) + 1 = 422
func TestGEMMKernels(t *testing.T) {
	for _, c := range []struct {
		model string
		want  float64
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 129},
		{"Qwen/Qwen3-235B-A22B", 377},
		{"deepseek-ai/DeepSeek-V3", 61*3 + 3*2 + 58*4 + 1},
	} {
		s, ok := catalog.Lookup(c.model)
		if !ok {
			t.Fatalf("%s not in the catalog", c.model)
		}
		if got := gemmKernels(s); got != c.want {
			t.Errorf("%s: %v GEMM kernels a step, want %v", c.model, got, c.want)
		}
	}
}

// The path shares of a step's GEMMs: native FP8 on an H100 reaches its
// table's FP8GEMM of the BF16 GEMM share and reads at its FP8Read of the
// weights' bandwidth share; on Ampere the same checkpoint takes FP8 Marlin
// (the dequantizing share, BF16's read); BF16 weights take neither.
func TestFP8PathShares(t *testing.T) {
	for _, c := range []struct {
		model, gpu  string
		deq, read   float64
		wantFP8Peak bool
	}{
		{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "H100-80GB", hopperKernels.FP8GEMM, hopperKernels.FP8Read, true},
		{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "H200", kernelsMeasured["H200"].FP8GEMM, kernelsMeasured["H200"].FP8Read, true},
		{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "A100-80GB", fittedByCapability["8.0"].DequantShare, 1, false},
		{"meta-llama/Llama-3.1-8B-Instruct", "H100-80GB", 1, 1, false},
	} {
		b := plan(t, c.model, c.gpu, 1, vllm.Settings{})
		cal, _ := CalibrationFor(b.Device)
		m, err := RooflineFor(b, cal)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := gpu.PerfOf(b.Device)
		if m.denseDequant() != c.deq || orOne(m.DenseRead) != c.read || (m.PeakFLOPs == p.FP8) != c.wantFP8Peak {
			t.Errorf("%s on %s: GEMM path share %v, read share %v, peak %g; want %v, %v", c.model, c.gpu, m.denseDequant(), orOne(m.DenseRead), m.PeakFLOPs, c.deq, c.read)
		}
	}
}

// A step is the sum of its parts, and a run's split sums to the steps'
// time: 300 requests of 100–3000 prompt and 10–400 output tokens on
// Llama-3.1-8B, every step of the engine summed by hand, with the CPU in
// series (0.11) and beside the GPU (async scheduling, the newest release).
func TestStepPartsSumToTheSteps(t *testing.T) {
	for _, async := range []bool{false, true} {
		cfg, _ := llama8B(t, "H100-80GB")
		m := cfg.Timer.(*Roofline)
		m.Overlap = async
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			if _, err := e.Add(Request{Arrival: float64(i) * 0.02, PromptTokens: 100 + i*29%2900, OutputTokens: 10 + i*37%390}); err != nil {
				t.Fatal(err)
			}
		}
		var busy float64
		var split StepParts
		steps := 0
		for {
			res := e.Step()
			if res.Idle {
				break
			}
			if !res.HasParts {
				t.Fatal("a roofline step without its parts")
			}
			if d, want := res.End-res.Start, m.StepTime(res.Batch); math.Abs(d-want) > 1e-12 {
				t.Fatalf("step of %+v took %v, the roofline says %v", res.Batch, d, want)
			}
			busy += res.End - res.Start
			split.Add(res.Parts)
			steps++
		}
		if steps < 100 || math.Abs(split.Total()/busy-1) > 1e-9 {
			t.Errorf("async %v: %d steps, busy %.6f s, split %.6f s (%+v)", async, steps, busy, split.Total(), split)
		}
		if async != (split.Overlapped > 0) || split.Dense <= 0 || split.GEMMFloors <= 0 || split.CPU <= 0 {
			t.Errorf("async %v: split %+v", async, split)
		}
	}
}

// A step within the largest graph is one graph of the whole pass only for
// a batch of one-token queries from 0.11.0 (FULL_AND_PIECEWISE); before,
// and for a step with a prefill chunk in any release, the CPU launches
// each layer's attention between the graph's pieces, 25 µs a layer. On a
// hand-made roofline of 10 layers whose decode of one token reads 1e8
// bytes at 1e12 B/s × 0.8 (125 µs) and whose chunk of 10 tokens computes
// 2e8 × 2 × 10 FLOPs at 1e15 × 0.5 (8 µs, under the same read), the
// launches (250 µs) set both steps below 0.11.0, only the chunk's from it.
func TestPiecewiseGraphs(t *testing.T) {
	m := &Roofline{LinearParams: 2e8, WeightBytes: 1e8, PeakFLOPs: 1e15, Bandwidth: 1e12, GEMMEfficiency: 0.5, BandwidthEfficiency: 0.8,
		AttentionEfficiency: 0.5, KVBandwidthEfficiency: 0.5, Layers: 10, GraphTokens: 512, LaunchPerLayer: eagerLaunchPerLayer, PiecewisePerLayer: piecewiseLaunchPerLayer}
	decode := Batch{Requests: 1, Tokens: 1, Decodes: 1, DecodeContext: 1}
	chunk := Batch{Requests: 1, Tokens: 10, PrefillTokens: 10, PrefillPairs: 55}
	for _, c := range []struct {
		full          bool
		decode, chunk float64
	}{{false, 250e-6, 250e-6}, {true, 125e-6, 250e-6}} {
		m.FullDecodeGraphs = c.full
		if d, k := m.GPUTime(decode), m.GPUTime(chunk); math.Abs(d-c.decode) > 1e-12 || math.Abs(k-c.chunk) > 1e-12 {
			t.Errorf("full decode graphs %v: decode %v s, chunk %v s; want %v and %v", c.full, d, k, c.decode, c.chunk)
		}
	}
	// The release decides, and --enforce-eager captures no graph at all.
	for _, c := range []struct {
		version string
		eager   bool
		full    bool
	}{{"0.10.2", false, false}, {"0.11.0", false, true}, {"0.19.0", true, false}} {
		r, err := RooflineFor(plan(t, "Qwen/Qwen3-8B", "H100-80GB", 1, vllm.Settings{Version: vllm.MustVersion(c.version), EnforceEager: c.eager}), DefaultCalibration)
		if err != nil {
			t.Fatal(err)
		}
		if r.FullDecodeGraphs != c.full {
			t.Errorf("%s (eager %v): full decode graphs %v, want %v", c.version, c.eager, r.FullDecodeGraphs, c.full)
		}
	}
	// A line's cudagraph_mode overrides the release: FULL_DECODE_ONLY
	// runs the chunk eagerly (10 layers × 100 µs = 1 ms), PIECEWISE
	// replays the decode in pieces (10 × 25 µs), NONE runs both eagerly.
	for _, c := range []struct {
		line          string
		decode, chunk float64
	}{
		{`--compilation-config.cudagraph_mode FULL_DECODE_ONLY`, 125e-6, 1e-3},
		{`--compilation-config {"cudagraph_mode":"PIECEWISE"}`, 250e-6, 250e-6},
		{`--compilation-config {"cudagraph_mode":"none"}`, 1e-3, 1e-3},
	} {
		set, err := vllm.ParseFlags(append([]string{"Qwen/Qwen3-8B"}, strings.SplitN(c.line, " ", 2)...))
		if err != nil {
			t.Fatal(err)
		}
		set.Version = vllm.MustVersion("0.13.0")
		r, err := RooflineFor(plan(t, "Qwen/Qwen3-8B", "H100-80GB", 1, set), DefaultCalibration)
		if err != nil {
			t.Fatal(err)
		}
		m.FullDecodeGraphs, m.NoPiecewise, m.GraphTokens = r.FullDecodeGraphs, r.NoPiecewise, min(r.GraphTokens, 512)
		if d, k := m.GPUTime(decode), m.GPUTime(chunk); math.Abs(d-c.decode) > 1e-12 || math.Abs(k-c.chunk) > 1e-12 {
			t.Errorf("%s: decode %v s, chunk %v s; want %v and %v", c.line, d, k, c.decode, c.chunk)
		}
	}
}

// A step reads the weights it multiplies: a vision tower runs on images
// only, so a text step of Qwen2.5-VL-7B reads its weights less the
// tower's parameters in BF16, and a text-only model's reads them all.
func TestRooflineSkipsTheVisionTower(t *testing.T) {
	set := vllm.Settings{Version: vllm.Version{Minor: 11}}
	for _, id := range []string{"Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"} {
		b := plan(t, id, "H100-80GB", 1, set)
		cal, _ := CalibrationFor(b.Device)
		m, err := RooflineFor(b, cal)
		if err != nil {
			t.Fatal(err)
		}
		vision := float64(b.Model.VisionParams()) * 2
		if got, want := m.WeightBytes, float64(b.WeightsTotal-b.ExpertWeightsTotal)-vision; got != want {
			t.Errorf("%s: reads %.0f B a step, want %.0f (%.0f B of vision tower left out)", id, got, want, vision)
		}
		if id == "Qwen/Qwen2.5-VL-7B-Instruct" && vision < 1e9 {
			t.Errorf("%s: a vision tower of %.0f B", id, vision)
		}
	}
}

// Every catalog GPU vLLM runs on (compute capability 7.0 and up, or an
// AMD part) has datasheet figures, so simulate and capacity take it (A10G,
// which capacity prices by default, among them); what has none says what
// to do: a MIG slice, a GPU given by its memory alone, a K80.
func TestEveryRunnableGPUHasFigures(t *testing.T) {
	for _, d := range gpu.Devices() {
		major, _ := gpu.ParseCapability(d.ComputeCapability)
		if d.MIG != "" || (d.Vendor != "amd" && major < 7) {
			continue
		}
		if _, ok := gpu.PerfOf(d); !ok {
			t.Errorf("%s (compute capability %q): no datasheet figures", d.Name, d.ComputeCapability)
		}
	}
	k80, _ := gpu.Resolve("K80")
	mig, _ := gpu.Resolve("A100-80GB:3g.40gb")
	for _, c := range []struct {
		d    gpu.Device
		want string
	}{
		{k80.Device, "K80 (compute capability 3.7): vLLM runs on 7.0 and up"},
		{gpu.Custom(100 << 30), "a GPU given by its memory alone: name it with --gpu"},
		{mig.Device, "a MIG slice (3g.40gb of A100-80GB)"},
	} {
		if err := noPerf(c.d); !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.d.Name, err, c.want)
		}
	}
}
