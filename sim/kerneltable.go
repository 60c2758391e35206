package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
)

// KernelTable is a per-GPU table of timed kernels, as bench/gpu-kernels
// writes it on a machine with the GPU and PyTorch (no vLLM): dense GEMMs
// of the catalog's shapes, grouped GEMMs of MoE shapes at 1 to 4096 tokens
// per expert, and attention prefill and decode. Its header names its
// source (the GPU as the driver reports it, the driver, torch and CUDA
// versions), its rows what each kernel did and how long it took:
//
//	# headroom gpu-kernels 1
//	# gpu: NVIDIA H100 80GB HBM3
//	# driver: 550.54.15
//	# torch: 2.5.1+cu124
//	# cuda: 12.4
//	kind,dtype,shape,tokens_per_expert,seconds,flops,bytes
//	gemm,bf16,m=8192 n=5120 k=5120,,0.000652,4.294967296e+11,1.52e+08
//
// kind is gemm, grouped_gemm, small_kernel (an elementwise kernel of a
// few rows), attention_prefill or attention_decode;
// flops and bytes are what the kernel must compute and move at least
// (the script's arithmetic), so flops / seconds and bytes / seconds are
// the rates it reached.
type KernelTable struct {
	GPU, Driver, Torch, CUDA string
	Rows                     []KernelRow
}

// KernelRow is one timed kernel.
type KernelRow struct {
	Kind, Dtype, Shape    string
	TokensPerExpert       float64
	Seconds, FLOPs, Bytes float64
}

// Bounds of a table: a script run writes a few hundred rows.
const (
	maxKernelRows = 100_000
	maxKernelLine = 4096
)

// maxGroupedFit bounds the grouped GEMMs the curve's grid search reads
// (the script writes about 70): 171 × 25 grid points each.
const maxGroupedFit = 4096

const kernelTableMagic = "# headroom gpu-kernels 1"

// IsKernelTable reports whether data starts like a kernel table.
func IsKernelTable(data []byte) bool {
	return strings.HasPrefix(strings.TrimLeft(string(data[:min(len(data), 64)]), "\ufeff"), kernelTableMagic)
}

var kernelColumns = []string{"kind", "dtype", "shape", "tokens_per_expert", "seconds", "flops", "bytes"}

// ReadKernelTable reads a table; an error names the line and what is wrong
// with it.
func ReadKernelTable(r io.Reader) (KernelTable, error) {
	var t KernelTable
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxKernelLine)
	n, header := 0, false
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
			if line != kernelTableMagic {
				return t, fmt.Errorf("line 1: want %q (a table written by bench/gpu-kernels)", kernelTableMagic)
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			k, v, ok := strings.Cut(strings.TrimSpace(line[1:]), ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "gpu":
				t.GPU = v
			case "driver":
				t.Driver = v
			case "torch":
				t.Torch = v
			case "cuda":
				t.CUDA = v
			}
			continue
		}
		f := strings.Split(line, ",")
		if !header {
			if strings.Join(f, ",") != strings.Join(kernelColumns, ",") {
				return t, fmt.Errorf("line %d: want the columns %s", n, strings.Join(kernelColumns, ","))
			}
			header = true
			continue
		}
		if len(f) != len(kernelColumns) {
			return t, fmt.Errorf("line %d: %d fields, want %d", n, len(f), len(kernelColumns))
		}
		if len(t.Rows) >= maxKernelRows {
			return t, fmt.Errorf("line %d: more than %d kernels", n, maxKernelRows)
		}
		row := KernelRow{Kind: f[0], Dtype: f[1], Shape: f[2]}
		switch row.Kind {
		case "gemm", "grouped_gemm", "small_kernel", "attention_prefill", "attention_decode":
		default:
			return t, fmt.Errorf("line %d: kind %q is not gemm, grouped_gemm, small_kernel, attention_prefill or attention_decode", n, row.Kind)
		}
		nums := []*float64{&row.TokensPerExpert, &row.Seconds, &row.FLOPs, &row.Bytes}
		for i, p := range nums {
			s := f[3+i]
			if s == "" && i == 0 {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return t, fmt.Errorf("line %d: %s %q is not a number ≥ 0", n, kernelColumns[3+i], s)
			}
			*p = v
		}
		if row.Seconds <= 0 {
			return t, fmt.Errorf("line %d: seconds must be > 0", n)
		}
		if row.Kind == "grouped_gemm" && row.TokensPerExpert <= 0 {
			return t, fmt.Errorf("line %d: a grouped_gemm needs tokens_per_expert > 0", n)
		}
		t.Rows = append(t.Rows, row)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return t, fmt.Errorf("line %d: longer than %d bytes", n+1, maxKernelLine)
		}
		return t, err
	}
	if n == 0 {
		return t, fmt.Errorf("empty: want %q on line 1", kernelTableMagic)
	}
	if t.GPU == "" {
		return t, errors.New("no '# gpu:' line: the table must name the GPU it was measured on")
	}
	return t, nil
}

// Source is the table's provenance in one line.
func (t KernelTable) Source() string {
	return fmt.Sprintf("kernel table of %s (driver %s, torch %s, CUDA %s, %d kernels)", t.GPU, orUnknown(t.Driver), orUnknown(t.Torch), orUnknown(t.CUDA), len(t.Rows))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// KernelShares are the shares of a device's datasheet peaks its kernels
// reached in a table; 0 where the table has no row to tell.
type KernelShares struct {
	// GEMM: compute-bound dense BF16 GEMMs over the BF16 peak; Weights:
	// memory-bound ones (a few rows) over the bandwidth, beyond GEMMFloor,
	// the seconds each takes whatever its size (gemmLine).
	GEMM, Weights, GEMMFloor float64
	// SmallKernel is the median time of the small_kernel rows: the least
	// a kernel of almost no work holds the GPU.
	SmallKernel float64
	// FP8GEMM and FP8Read are the FP8 GEMMs' shares against the BF16
	// ones': the compute-bound share of the FP8 peak over GEMM, and the
	// memory-bound line's share of the bandwidth over Weights.
	FP8GEMM, FP8Read float64
	// Grouped: the grouped GEMMs' plateau (a share of GEMM) and the
	// tokens per expert where they reach half of it.
	GroupedPlateau, GroupedHalf float64
	// Prefill attention over the BF16 peak; decode attention's cache read
	// over the bandwidth.
	Prefill, Decode float64
}

// Shares reads the table against the device's datasheet (gpu.Perf). A
// dense GEMM counts as compute-bound when its FLOPs per byte exceed twice
// the device's (peak / bandwidth), as memory-bound below a quarter of it;
// the compute-bound share is the median of its rows, the memory-bound
// GEMMs give the weights' share and the GEMM floor (gemmLine). The grouped
// GEMMs' curve plateau × t / (t + half) is fitted to their times as the
// clock prices them.
func (t KernelTable) Shares(p gpu.Perf) KernelShares {
	var s KernelShares
	if p.BF16 <= 0 || p.Bandwidth <= 0 {
		return s
	}
	ridge := p.BF16 / p.Bandwidth
	var comp, mem, pre, dec, small []float64
	var line, line8 [][2]float64
	var comp8 []float64
	type point struct{ t, flops, bytes, seconds float64 }
	var grouped []point
	for _, r := range t.Rows {
		if r.Dtype == "fp8" && r.Kind == "gemm" && p.FP8 > 0 && r.Bytes > 0 {
			ridge8 := p.FP8 / p.Bandwidth
			if r.FLOPs/r.Bytes > 2*ridge8 {
				comp8 = append(comp8, r.FLOPs/r.Seconds/p.FP8)
			} else if r.FLOPs/r.Bytes < ridge8/4 {
				line8 = append(line8, [2]float64{r.Bytes, r.Seconds})
			}
		}
		if r.Dtype != "bf16" && r.Dtype != "fp16" {
			continue
		}
		rate, bw := r.FLOPs/r.Seconds/p.BF16, r.Bytes/r.Seconds/p.Bandwidth
		switch r.Kind {
		case "gemm":
			if r.Bytes > 0 && r.FLOPs/r.Bytes > 2*ridge {
				comp = append(comp, rate)
			} else if r.Bytes > 0 && r.FLOPs/r.Bytes < ridge/4 {
				mem = append(mem, bw)
				line = append(line, [2]float64{r.Bytes, r.Seconds})
			}
		case "small_kernel":
			small = append(small, r.Seconds)
		case "grouped_gemm":
			if r.FLOPs > 0 {
				if len(grouped) < maxGroupedFit {
					grouped = append(grouped, point{r.TokensPerExpert, r.FLOPs, r.Bytes, r.Seconds})
				}
			}
		case "attention_prefill":
			if r.FLOPs > 0 {
				pre = append(pre, rate)
			}
		case "attention_decode":
			if r.Bytes > 0 {
				dec = append(dec, bw)
			}
		}
	}
	s.GEMM, s.Weights, s.Prefill, s.Decode, s.SmallKernel = median(comp), median(mem), median(pre), median(dec), median(small)
	if floor, perByte, ok := gemmLine(line); ok && !math.IsInf(1/(perByte*p.Bandwidth), 0) {
		s.GEMMFloor, s.Weights = floor, 1/(perByte*p.Bandwidth)
		if _, perByte8, ok := gemmLine(line8); ok {
			s.FP8Read = perByte / perByte8
		}
	}
	if s.GEMM > 0 && len(comp8) > 0 {
		s.FP8GEMM = median(comp8) / s.GEMM
	}
	if s.GEMM > 0 && s.Weights > 0 && len(grouped) > 0 {
		// Each grouped GEMM is priced as the clock prices the experts
		// (Roofline.expertTime): the longer of its math at the grouped
		// share and its read at the weights' share, plus the GEMM floor;
		// plateau and half are searched on grids (plateau 0.30–2.00 by
		// 0.01, half 1–4096 tokens by √2) for the least squared log error.
		best := math.Inf(1)
		for pi := 30; pi <= 200; pi++ {
			plateau := float64(pi) / 100
			for h := 1.0; h <= 4096; h *= math.Sqrt2 {
				var loss float64
				for _, g := range grouped {
					share := p.BF16 * s.GEMM * plateau * g.t / (g.t + h)
					pred := max(g.flops/share, g.bytes/(p.Bandwidth*s.Weights)) + s.GEMMFloor
					d := math.Log(pred / g.seconds)
					loss += d * d
				}
				if loss < best {
					best, s.GroupedPlateau, s.GroupedHalf = loss, plateau, h
				}
			}
		}
	}
	return s
}

// gemmLine fits seconds = floor + perByte × bytes through memory-bound
// GEMMs by least squares on relative error (weights 1 / seconds²), so
// the small GEMMs, where the floor shows, count as much as the large. It
// needs three sizes at least, a floor ≥ 0 and a positive slope.
func gemmLine(pts [][2]float64) (floor, perByte float64, ok bool) {
	var sw, sx, sy, sxx, sxy float64
	sizes := map[float64]bool{}
	for _, p := range pts {
		x, y := p[0], p[1]
		w := 1 / (y * y)
		sw, sx, sy, sxx, sxy = sw+w, sx+w*x, sy+w*y, sxx+w*x*x, sxy+w*x*y
		sizes[x] = true
	}
	d := sw*sxx - sx*sx
	if len(sizes) < 3 || !(d > 0) {
		return 0, 0, false
	}
	perByte = (sw*sxy - sx*sy) / d
	floor = (sy - perByte*sx) / sw
	if !(perByte > 0) || !(floor >= 0) || math.IsInf(floor, 0) {
		return 0, 0, false
	}
	return floor, perByte, true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// Calibration applies the table to base, the device's calibration. The
// FP8 GEMMs' shares are relative to the dense BF16 GEMMs and the GEMM
// floor is the kernels' own, so the table's replace the fitted ones on any
// device. The grouped GEMMs' curve is reported, not applied: torch.bmm
// gives every expert the same tokens and pads none, where fused_moe pads
// each expert's tokens to its tile, and on the H100 their curves differ
// (bmm: plateau 0.96, half at 16 tokens; the serving fit's fused_moe:
// 0.908, 30.7), so the fitted curve stays; the source line names the
// table's curve and its elementwise kernels' time beside the table. The
// absolute shares are kernel ceilings, while a fitted device's shares
// also hold what serving adds around the kernels (the fit's H100 GEMM
// share is 0.329 where cuBLAS alone reaches 0.74 in the H100's table): a
// fitted device keeps its own, and a device without a serving fit takes
// the table's scaled by what serving reaches of its kernels on Hopper
// (kernelToServing), not the ceilings.
func (t KernelTable) Calibration(d gpu.Device, base Calibration, fitted bool) Calibration {
	p, ok := gpu.PerfOf(d)
	if !ok {
		return base
	}
	s := t.Shares(p)
	c := base
	if s.GEMMFloor > 0 {
		c.GEMMFloor = min(s.GEMMFloor, 1e-3)
	}
	if s.FP8GEMM > 0 {
		c.FP8GEMMShare = min(s.FP8GEMM, 1.5)
	}
	if s.FP8Read > 0 {
		c.FP8ReadShare = min(s.FP8Read, 1.5)
	}
	c.Source = t.Source()
	if !fitted {
		set := func(dst *float64, v float64) {
			if v > 0 {
				*dst = min(v, 1)
			}
		}
		gemm, prefill, decode := kernelToServing()
		set(&c.FLOPsEfficiency, s.GEMM*gemm)
		set(&c.BandwidthEfficiency, s.Weights)
		set(&c.AttentionEfficiency, s.Prefill*prefill)
		set(&c.KVBandwidthEfficiency, s.Decode*decode)
		c.Source += fmt.Sprintf("; its kernel shares × what serving reaches of the H100's (GEMMs %.3f, prefill attention %.2f, KV cache reads %.3f)", gemm, prefill, decode)
	}
	if s.GroupedPlateau > 0 {
		c.Source += fmt.Sprintf("; its grouped GEMMs (torch.bmm, not applied: not fused_moe's) reach %.2f of its GEMMs' share, half of it at %.0f tokens an expert", s.GroupedPlateau, s.GroupedHalf)
	}
	if s.SmallKernel > 0 {
		c.Source += fmt.Sprintf("; an elementwise kernel takes %.1f µs (the clock takes %.0f µs for vLLM's fused ones)", s.SmallKernel*1e6, graphKernelFloor*1e6)
	}
	return c
}
