package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
)

// testdata/kernels/example-h100.csv is a worked example in the format
// bench/gpu-kernels writes (not a measurement): every kernel's seconds are
// set from the H100-80GB datasheet (989.4 TFLOP/s, 3.35 TB/s; the ridge
// is 295.3 FLOPs a byte) so that:
//
//	compute-bound GEMMs (FLOPs/byte 2731, 1950, 2012 > 590.6): 0.6, 0.7, 0.75 of the peak → median 0.7
//	memory-bound GEMMs (FLOPs/byte 15.9, 1.0, 8.0 < 73.8): 0.85, 0.80, 0.90 of the bandwidth → median 0.85
//	  (their shares do not grow with their size, so no line with a floor ≥ 0 goes through them: no GEMM floor)
//	grouped GEMMs at 1, 16, 256, 4096 tokens per expert: 0.7 × 0.8 × t / (t + 16) of the peak
//	  → plateau 0.8 of the dense share, half at 16 tokens
//	prefill attention 0.5 of the peak, decode attention 0.8 of the bandwidth
func TestKernelTableShares(t *testing.T) {
	tab := readTable(t, "testdata/kernels/example-h100.csv")
	if tab.GPU != "H100-80GB (worked example)" || len(tab.Rows) != 12 || tab.Driver != "none" {
		t.Fatalf("table %q driver %q, %d rows", tab.GPU, tab.Driver, len(tab.Rows))
	}
	dev, p := perfOf(t, "H100-80GB")
	s := tab.Shares(p)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"GEMM", s.GEMM, 0.7}, {"weights", s.Weights, 0.85}, {"grouped plateau", s.GroupedPlateau, 0.8},
		{"grouped half", s.GroupedHalf, 16}, {"prefill", s.Prefill, 0.5}, {"decode", s.Decode, 0.8}, {"GEMM floor", s.GEMMFloor, 0},
	} {
		if math.Abs(c.got-c.want) > 1e-6*c.want || (c.want == 0 && c.got != 0) {
			t.Errorf("%s share %v, want %v", c.name, c.got, c.want)
		}
	}
	// A fitted device keeps its serving shares; an unfitted one takes the
	// kernel shares. Both keep the fitted grouped curve (bmm's is not
	// fused_moe's).
	base, fitted := CalibrationFor(dev)
	c := tab.Calibration(dev, base, fitted)
	if c.FLOPsEfficiency != base.FLOPsEfficiency || c.GroupedShare != base.GroupedShare {
		t.Errorf("fitted device: %+v", c)
	}
	// The table's grouped curve is named, not applied.
	if !strings.Contains(c.Source, "reach 0.80 of its GEMMs' share, half of it at 16 tokens an expert") {
		t.Errorf("fitted device's source: %s", c.Source)
	}
	// An unfitted device takes the kernel shares scaled by what serving
	// reaches of the H100's kernels (kernelToServing): GEMMs 0.7 × 0.369
	// / 0.739 = 0.3495, KV cache 0.8 × 0.487 / 0.801 = 0.4864, prefill
	// attention 0.5 × 0.5 / 0.395 = 0.6329, weights 0.85 as they are.
	u := tab.Calibration(dev, DefaultCalibration, false)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"GEMM", u.FLOPsEfficiency, 0.3495}, {"KV cache", u.KVBandwidthEfficiency, 0.4864}, {"prefill attention", u.AttentionEfficiency, 0.6329}, {"weights", u.BandwidthEfficiency, 0.85}} {
		if math.Abs(c.got/c.want-1) > 5e-4 {
			t.Errorf("unfitted device's %s share %.4f, want %.4f", c.name, c.got, c.want)
		}
	}
	if !strings.HasPrefix(u.Source, "kernel table of H100-80GB") || !strings.Contains(u.Source, "× what serving reaches of the H100's (GEMMs 0.499, prefill attention 1.27, KV cache reads 0.608)") {
		t.Errorf("unfitted device's source: %s", u.Source)
	}
	if err := u.Check(); err != nil {
		t.Error(err)
	}
}

func readTable(t *testing.T, path string) KernelTable {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := ReadKernelTable(f)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func perfOf(t *testing.T, name string) (gpu.Device, gpu.Perf) {
	t.Helper()
	sel, err := gpu.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := gpu.PerfOf(sel.Device)
	if !ok {
		t.Fatalf("%s has no datasheet figures", name)
	}
	return sel.Device, p
}

// testdata/kernels/h100-sxm.csv and h200-sxm.csv were measured by
// bench/gpu-kernels on one H100 SXM and one H200 (driver 580.159.04,
// torch 2.11.0+cu130; their headers say so), each GEMM replayed in a CUDA
// graph over operand copies four times the L2. A memory-bound GEMM takes
// a fixed time beside its read: on the H100 the line floor + bytes /
// (bandwidth × share) explains the 1 to 64-row BF16 GEMMs of the catalog
// (528) with a median error of 4.4% (90th percentile 13%), where the
// median share alone misses by 11.5% (42%): the small GEMMs take several
// times their read. So the clock prices a floor per GEMM (hopperKernels
// is the H100's line).
func TestGEMMFloorMeasured(t *testing.T) {
	h100 := readTable(t, "testdata/kernels/h100-sxm.csv")
	if h100.GPU != "NVIDIA H100 80GB HBM3" || h100.Torch != "2.11.0+cu130" || len(h100.Rows) < 2000 {
		t.Fatalf("H100 table: %s, %d rows", h100.Source(), len(h100.Rows))
	}
	_, p := perfOf(t, "H100-80GB")
	s := h100.Shares(p)
	if math.Abs(s.GEMMFloor/hopperKernels.GEMMFloor-1) > 0.01 || math.Abs(s.Weights/hopperKernels.Weights-1) > 0.01 {
		t.Errorf("H100 table: floor %.3g s and weights share %.3f; the clock takes %.3g and %.3f", s.GEMMFloor, s.Weights, hopperKernels.GEMMFloor, hopperKernels.Weights)
	}
	// The memory-bound rows, priced with the line and with the table's
	// median share and no floor.
	ridge := p.BF16 / p.Bandwidth
	var line, flat []float64
	var shares []float64
	for _, r := range h100.Rows {
		if r.Kind == "gemm" && r.Dtype == "bf16" && r.FLOPs/r.Bytes < ridge/4 {
			shares = append(shares, r.Bytes/r.Seconds/p.Bandwidth)
		}
	}
	flatShare := median(shares)
	for _, r := range h100.Rows {
		if r.Kind == "gemm" && r.Dtype == "bf16" && r.FLOPs/r.Bytes < ridge/4 {
			line = append(line, math.Abs((s.GEMMFloor+r.Bytes/(p.Bandwidth*s.Weights))/r.Seconds-1))
			flat = append(flat, math.Abs(r.Bytes/(p.Bandwidth*flatShare)/r.Seconds-1))
		}
	}
	p90 := func(v []float64) float64 { sort.Float64s(v); return v[len(v)*9/10] }
	if len(line) < 400 || median(line) > 0.06 || median(flat) < 2*median(line) || p90(flat) < 2*p90(line) {
		t.Errorf("%d memory-bound GEMMs: error with the floor median %.3f p90 %.3f, without (share %.3f) %.3f and %.3f",
			len(line), median(line), p90(line), flatShare, median(flat), p90(flat))
	}
	// The H200 is the same Hopper die with faster memory: its tensor share
	// is the H100's within 2% (0.747 and 0.739), its floor within a sixth
	// (4.33 and 3.92 µs).
	h200 := readTable(t, "testdata/kernels/h200-sxm.csv")
	d200, p200 := perfOf(t, "H200")
	s200 := h200.Shares(p200)
	if math.Abs(s200.GEMMFloor/s.GEMMFloor-1) > 0.16 || math.Abs(s200.GEMM/s.GEMM-1) > 0.02 {
		t.Errorf("H200 floor %.3g s, GEMM share %.3f; H100 %.3g s, %.3f", s200.GEMMFloor, s200.GEMM, s.GEMMFloor, s.GEMM)
	}
	// A table sets the floor on a fitted device too.
	base, fitted := CalibrationFor(d200)
	if c := h200.Calibration(d200, base, fitted); c.GEMMFloor != s200.GEMMFloor || c.FLOPsEfficiency != base.FLOPsEfficiency {
		t.Errorf("H200 table on the fitted Hopper calibration: floor %g, GEMM share %g", c.GEMMFloor, c.FLOPsEfficiency)
	}
}

func TestKernelTableErrors(t *testing.T) {
	head := kernelTableMagic + "\n# gpu: X\n" + strings.Join(kernelColumns, ",") + "\n"
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"kind,dtype\n", "line 1: want"},
		{kernelTableMagic + "\nkind,dtype\n", "line 2: want the columns"},
		{head + "gemm,bf16,x,,0,1,1\n", "line 4: seconds must be > 0"},
		{head + "conv,bf16,x,,1,1,1\n", "line 4: kind \"conv\""},
		{head + "gemm,bf16,x,,1,NaN,1\n", "line 4: flops \"NaN\""},
		{head + "grouped_gemm,bf16,x,,1,1,1\n", "tokens_per_expert > 0"},
		{head + "gemm,bf16,x,1\n", "4 fields, want 7"},
		{kernelTableMagic + "\n" + strings.Join(kernelColumns, ",") + "\n", "no '# gpu:' line"},
		{head + strings.Repeat("x", maxKernelLine+1) + "\n", "longer than"},
	} {
		_, err := ReadKernelTable(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzReadKernelTable: any input reads or fails with an error, never
// panics, and a table that reads has only finite, non-negative figures.
func FuzzReadKernelTable(f *testing.F) {
	if b, err := os.ReadFile("testdata/kernels/example-h100.csv"); err == nil {
		f.Add(string(b))
	}
	head := kernelTableMagic + "\n# gpu: X\n" + strings.Join(kernelColumns, ",") + "\n"
	f.Add(head + "gemm,bf16,m=1,,1e-3,2e9,1e9\n")
	f.Add(head + "grouped_gemm,bf16,,8,1e-3,2e9,1e9\nattention_decode,bf16,,,1e-4,0,1e8\n")
	f.Add("\ufeff" + head)
	f.Add(head + "gemm,bf16,m=1,,5e-6,2e6,1e6\ngemm,bf16,m=1,,1e-5,2e7,2e7\ngemm,bf16,m=1,,4e-5,2e8,1e8\nsmall_kernel,bf16,op=add rows=1,,1.3e-6,4096,24576\n" +
		"gemm,fp8,m=1,,4e-6,2e6,5e5\ngemm,fp8,m=1,,8e-6,2e7,1e7\ngemm,fp8,m=1,,3e-5,2e8,5e7\ngemm,fp8,m=8192,,1e-3,1e12,1e8\ngemm,bf16,m=8192,,2e-3,1e12,2e8\n")
	if b, err := os.ReadFile("testdata/kernels/h100-sxm.csv"); err == nil {
		lines := strings.SplitAfter(string(b), "\n")
		f.Add(strings.Join(lines[:min(len(lines), 60)], ""))
	}
	f.Fuzz(func(t *testing.T, in string) {
		tab, err := ReadKernelTable(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range tab.Rows {
			for _, v := range []float64{r.Seconds, r.FLOPs, r.Bytes, r.TokensPerExpert} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("row %+v", r)
				}
			}
		}
		s := tab.Shares(gpu.Perf{BF16: 1e15, FP8: 2e15, Bandwidth: 3e12})
		for _, v := range []float64{s.GEMM, s.Weights, s.GEMMFloor, s.SmallKernel, s.FP8GEMM, s.FP8Read, s.GroupedPlateau, s.GroupedHalf, s.Prefill, s.Decode} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("shares %+v", s)
			}
		}
	})
}

// Three GEMMs on the line 4 µs + bytes / (0.8 × 3.35 TB/s): 1, 10 and 100
// MB take 4.373, 7.731 and 41.31 µs; gemmLine recovers the floor and the
// share. Two sizes, or times that fall as the bytes grow, are no line.
func TestGEMMLine(t *testing.T) {
	bw := 0.8 * 3.35e12
	var pts [][2]float64
	for _, b := range []float64{1e6, 1e7, 1e8} {
		pts = append(pts, [2]float64{b, 4e-6 + b/bw})
	}
	floor, perByte, ok := gemmLine(pts)
	if !ok || math.Abs(floor-4e-6) > 1e-12 || math.Abs(1/(perByte*3.35e12)-0.8) > 1e-9 {
		t.Errorf("floor %g, share %g, ok %v", floor, 1/(perByte*3.35e12), ok)
	}
	if _, _, ok := gemmLine(pts[:2]); ok {
		t.Error("two sizes fit a line of any floor")
	}
	if _, _, ok := gemmLine([][2]float64{{1e6, 3e-5}, {1e7, 2e-5}, {1e8, 1e-5}}); ok {
		t.Error("times that fall with the bytes are no GEMM line")
	}
}

// testdata/kernels/h100-reduction.csv (bench/gpu-kernels/reduction_sweep.py
// on an H100 SXM, driver and torch as h100-sxm.csv): dense GEMMs at M × N
// = 4096², 8192² and 1024 × 4096 and batched GEMMs of 32–128 experts at
// 256–1024 tokens each, K from 64 to 8192. Each series' share of the BF16 peak follows
// plateau × K / (K + k½) within 4–11% (rms log error), with k½ from 183
// (8192²) to 299 on five series and 563 on the dense 1024 × 4096. The
// serving fit's k½ (groupedGEMM.GroupedKHalf, pinned by Qwen3-235B's
// 192-wide experts at TP 8) lies in that range: the mechanism the fit
// found, a GEMM's share falling with its reduction length, is one cuBLAS
// shows at the size the fit gave it (fused_moe is Triton's, not cuBLAS's,
// so the range, not a value, is the check).
func TestReductionLengthMeasured(t *testing.T) {
	tab := readTable(t, "testdata/kernels/h100-reduction.csv")
	_, p := perfOf(t, "H100-80GB")
	type pt struct{ k, share float64 }
	series := map[string][]pt{}
	for _, r := range tab.Rows {
		var e, m, n, k float64
		e = 1
		for _, f := range strings.Fields(r.Shape) {
			name, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch name {
			case "experts":
				e = x
			case "m":
				m = x
			case "n":
				n = x
			case "k":
				k = x
			}
		}
		key := fmt.Sprintf("%s e=%g m=%g n=%g", r.Kind, e, m, n)
		series[key] = append(series[key], pt{k, r.FLOPs / r.Seconds / p.BF16})
	}
	if len(series) != 6 {
		t.Fatalf("%d series, want 6", len(series))
	}
	lo, hi := math.Inf(1), 0.0
	for key, pts := range series {
		// For each k½, the plateau that minimises the squared log error is
		// the geometric mean of share / (K / (K + k½)).
		bestLoss, bestHalf := math.Inf(1), 0.0
		for h := 1.0; h <= 2000; h++ {
			var sum float64
			for _, q := range pts {
				sum += math.Log(q.share * (q.k + h) / q.k)
			}
			plateau := math.Exp(sum / float64(len(pts)))
			var loss float64
			for _, q := range pts {
				d := math.Log(plateau * q.k / (q.k + h) / q.share)
				loss += d * d
			}
			if loss < bestLoss {
				bestLoss, bestHalf = loss, h
			}
		}
		rms := math.Sqrt(bestLoss / float64(len(pts)))
		t.Logf("%s: k½ %.0f, rms log error %.3f", key, bestHalf, rms)
		if rms > 0.12 {
			t.Errorf("%s: K / (K + k½) misses the shares by %.3f (rms log)", key, rms)
		}
		lo, hi = min(lo, bestHalf), max(hi, bestHalf)
	}
	if lo < 150 || hi > 600 {
		t.Errorf("k½ of the series %.0f–%.0f, want within 150–600", lo, hi)
	}
	if k := groupedGEMM.GroupedKHalf; k < lo || k > hi {
		t.Errorf("the clock's k½ %.0f is outside the measured %.0f–%.0f", k, lo, hi)
	}
}

// Every GPU's entry of kernelsMeasured is what its table says, to the
// digits it keeps: the H100's floor 3.92 µs and weights share 0.855, FP8
// GEMMs at 0.892 of the BF16 share and reading at 0.918 of it; the
// H200's 4.33 µs, 0.847, 0.884 and 0.914. And CalibrationFor gives each
// its own: the H200, a Hopper part of the H100's fit, reads its weights
// at 0.847 and pays 4.33 µs a GEMM.
func TestKernelsMeasured(t *testing.T) {
	for name, k := range kernelsMeasured {
		d, p := perfOf(t, name)
		s := readTable(t, k.Table).Shares(p)
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"GEMM floor", s.GEMMFloor, k.GEMMFloor}, {"weights share", s.Weights, k.Weights},
			{"FP8 GEMM share", s.FP8GEMM, k.FP8GEMM}, {"FP8 read share", s.FP8Read, k.FP8Read},
			{"GEMM share", s.GEMM, k.GEMM}, {"prefill attention share", s.Prefill, k.Prefill}, {"decode share", s.Decode, k.Decode}} {
			if math.Abs(c.got/c.want-1) > 0.005 {
				t.Errorf("%s: the table's %s is %.4g, kernelsMeasured says %.4g", name, c.what, c.got, c.want)
			}
		}
		c, fitted := CalibrationFor(d)
		if !fitted || c.GEMMFloor != k.GEMMFloor || c.BandwidthEfficiency != k.Weights || c.FP8GEMMShare != k.FP8GEMM || c.FP8ReadShare != k.FP8Read {
			t.Errorf("%s's calibration: floor %g, weights %g, FP8 %g/%g", name, c.GEMMFloor, c.BandwidthEfficiency, c.FP8GEMMShare, c.FP8ReadShare)
		}
	}
	// A Hopper part without a table of its own takes the H100's.
	d, _ := perfOf(t, "H100-94GB")
	if c, _ := CalibrationFor(d); c.GEMMFloor != hopperKernels.GEMMFloor || c.BandwidthEfficiency != hopperKernels.Weights {
		t.Errorf("H100 NVL: floor %g, weights %g", c.GEMMFloor, c.BandwidthEfficiency)
	}
}

// testdata/kernels/h100-attention.json (bench/gpu-kernels/
// attention_sweep.py on an H100 SXM): causal prefill through PyTorch's
// attention backends. cuDNN's, the FlashAttention-3 class vLLM runs on
// Hopper, reaches 0.375 of the BF16 peak on 64 prompts of 512 tokens and
// 0.557–0.651 on 2,048–32,768-token prompts in batches of 32,768 tokens;
// FlashAttention-2 through PyTorch stays at or under 0.36. The clock's
// prefillAttentionShare lies between cuDNN's short and long prompts.
func TestPrefillAttentionMeasured(t *testing.T) {
	var m struct {
		GPU     string
		Prefill []struct {
			Backend    string
			Batch, Seq int
			TFLOPS     float64 `json:"tflops"`
		}
	}
	readJSON(t, "testdata/kernels/h100-attention.json", &m)
	_, p := perfOf(t, "H100-80GB")
	short, long := 0.0, math.Inf(1)
	flash := 0.0
	for _, r := range m.Prefill {
		share := r.TFLOPS * 1e12 / p.BF16
		switch {
		case r.Backend == "cudnn" && r.Batch*r.Seq == 32768 && r.Seq == 512:
			short = share
		case r.Backend == "cudnn" && r.Batch*r.Seq == 32768:
			long = min(long, share)
		case r.Backend == "flash":
			flash = max(flash, share)
		}
	}
	if m.GPU != "NVIDIA H100 80GB HBM3" || short == 0 || math.IsInf(long, 1) {
		t.Fatalf("%s: no cuDNN prefill rows", m.GPU)
	}
	if !(short < prefillAttentionShare && prefillAttentionShare < long) || flash > 0.4 {
		t.Errorf("cuDNN at 512 tokens %.3f, at 2k–32k at least %.3f, FlashAttention-2 at most %.3f; the clock takes %.2f", short, long, flash, prefillAttentionShare)
	}
}

// TestPrefillLayerMeasured holds what sim/README.md says of the Hopper
// GEMM share against a whole prefill layer: bench/gpu-kernels/layer_sweep.py
// ran one Qwen3-14B and one Qwen3-8B decoder layer over 8,192 prefill
// tokens on an H100 SXM and an H200. Their GEMMs alone reach 0.70–0.73 of
// the BF16 peak, as the kernel tables' compute-bound GEMMs do; the whole
// layer, norms, rotary, attention and activation unfused, 0.38–0.48. The
// clock prices a prefill step's GEMM FLOPs at the fitted share and its
// attention FLOPs at prefillAttentionShare: for Qwen3-14B at 2 × 4,096
// tokens, 5.412e12 FLOPs (2 × 8,192 × 5,120 × (7,168 + 5,120 + 52,224))
// / (989e12 × 0.369) + 3.437e11 / (989e12 × 0.5) = 14.83 + 0.70 = 15.53
// ms, where the unfused layer took 12.05 ms: 1.29 times as long (Qwen3-8B's
// 1.14-1.21). Fused,
// as vLLM compiles them, the kernels around the GEMMs take less, so the
// fitted share holds at least that much beyond a layer's kernels: time
// vLLM 0.11 spends in a prefill step outside them, or the rows' hosts
// running slower than these GPUs. Every H100 row agrees on it: at a share
// of 0.47, which prices the layer as measured, the seven H100 bursts'
// throughput comes out 8–44% high and the fit's loss goes from 1.34 to
// 5.96 (the closed loops of Qwen3-8B, decode-bound, do not move).
func TestPrefillLayerMeasured(t *testing.T) {
	for _, f := range []struct{ file, gpu, name string }{
		{"testdata/kernels/h100-layer.json", "H100-80GB", "NVIDIA H100 80GB HBM3"},
		{"testdata/kernels/h200-layer.json", "H200", "NVIDIA H200"},
	} {
		m := readLayers(t, f.file)
		dev, p := perfOf(t, f.gpu)
		c, fitted := CalibrationFor(dev)
		if m.GPU != f.name || len(m.Layers) != 6 || !fitted {
			t.Fatalf("%s: GPU %q, %d layers, fitted %v", f.file, m.GPU, len(m.Layers), fitted)
		}
		for _, l := range m.Layers {
			if l.Prompts*l.TokensEach != 8192 {
				t.Errorf("%s: %d × %d tokens", f.file, l.Prompts, l.TokensEach)
			}
			priced := l.GEMMFLOPs/(p.BF16*c.FLOPsEfficiency) + l.AttentionFLOPs/(p.BF16*c.AttentionEfficiency)
			gemms, layer, ratio := l.GEMMFLOPs/l.GEMMs/p.BF16, l.GEMMFLOPs/l.Layer/p.BF16, priced/l.Layer
			t.Logf("%s %s %d × %d: GEMMs %.3f of the peak, the layer %.3f; the clock prices it %.2f ms against %.2f measured (%.2f×)",
				f.gpu, l.Model, l.Prompts, l.TokensEach, gemms, layer, 1e3*priced, 1e3*l.Layer, ratio)
			if gemms < 0.68 || layer > gemms || ratio < 1.1 || ratio > 1.6 {
				t.Errorf("%s %s %d × %d: GEMMs %.3f, layer %.3f of the peak, priced %.2f× the measured layer", f.gpu, l.Model, l.Prompts, l.TokensEach, gemms, layer, ratio)
			}
		}
	}
}

// layerRun is what layer_sweep.py writes.
type layerRun struct {
	GPU    string
	Layers []struct {
		Model          string
		Prompts        int
		TokensEach     int     `json:"tokens_each"`
		GEMMFLOPs      float64 `json:"gemm_flops"`
		AttentionFLOPs float64 `json:"attention_flops"`
		GEMMs          float64 `json:"gemms_s"`
		Layer          float64 `json:"layer_graph_s"`
	}
}

func readLayers(t *testing.T, file string) layerRun {
	var m layerRun
	readJSON(t, file, &m)
	return m
}

// readJSON decodes a measurement file of testdata into v.
func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestPrefillLayerSustained rules out one reading of that gap: a serving
// benchmark keeps the GPU busy for minutes, at the clocks its power limit
// allows. The Qwen3-14B layer replayed back to back for 75 s on the H100
// ran at its 700 W cap (nvidia-smi: 1,576 MHz mean against the 1,980 MHz
// boost), yet took at most 4% longer than the short run's 12.05 ms: the
// GEMMs were at the cap already. Clocks do not make the 1.44×.
func TestPrefillLayerSustained(t *testing.T) {
	var m struct {
		GPU       string
		Sustained []struct {
			T     float64 `json:"t_s"`
			Layer float64 `json:"layer_s"`
		}
	}
	readJSON(t, "testdata/kernels/h100-layer-sustained.json", &m)
	if m.GPU != "NVIDIA H100 80GB HBM3" || len(m.Sustained) < 30 || m.Sustained[len(m.Sustained)-1].T < 70 {
		t.Fatalf("%s: %d windows", m.GPU, len(m.Sustained))
	}
	// The short run: h100-layer.json's Qwen3-14B at 2 × 4,096 tokens.
	short := readLayers(t, "testdata/kernels/h100-layer.json").Layers[0]
	if short.Model != "Qwen3-14B" || short.Prompts != 2 {
		t.Fatalf("h100-layer.json starts with %s at %d prompts", short.Model, short.Prompts)
	}
	slowest := 0.0
	for _, w := range m.Sustained {
		slowest = max(slowest, w.Layer)
	}
	if slowest > 1.05*short.Layer {
		t.Errorf("sustained, the layer took up to %.2f ms against %.2f ms in a short run", 1e3*slowest, 1e3*short.Layer)
	}
}
