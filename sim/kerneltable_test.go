package sim

import (
	"math"
	"os"
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
//	grouped GEMMs at 1, 16, 256, 4096 tokens per expert: 0.7 × 0.8 × t / (t + 16) of the peak
//	  → plateau 0.8 of the dense share, half at 16 tokens
//	prefill attention 0.5 of the peak, decode attention 0.8 of the bandwidth
func TestKernelTableShares(t *testing.T) {
	f, err := os.Open("testdata/kernels/example-h100.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := ReadKernelTable(f)
	if err != nil {
		t.Fatal(err)
	}
	if tab.GPU != "H100-80GB (worked example)" || len(tab.Rows) != 12 || tab.Driver != "none" {
		t.Fatalf("table %q driver %q, %d rows", tab.GPU, tab.Driver, len(tab.Rows))
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := gpu.PerfOf(sel.Device)
	s := tab.Shares(p)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"GEMM", s.GEMM, 0.7}, {"weights", s.Weights, 0.85}, {"grouped plateau", s.GroupedPlateau, 0.8},
		{"grouped half", s.GroupedHalf, 16}, {"prefill", s.Prefill, 0.5}, {"decode", s.Decode, 0.8},
	} {
		if math.Abs(c.got-c.want) > 1e-6*c.want {
			t.Errorf("%s share %v, want %v", c.name, c.got, c.want)
		}
	}
	// A fitted device keeps its serving shares and takes the grouped curve;
	// an unfitted one takes the kernel shares too.
	base, fitted := CalibrationFor(sel.Device)
	c := tab.Calibration(sel.Device, base, fitted)
	if c.FLOPsEfficiency != base.FLOPsEfficiency || math.Abs(c.GroupedShare-0.8) > 1e-6 || math.Abs(c.GroupedHalfTokens-16) > 1e-9 {
		t.Errorf("fitted device: %+v", c)
	}
	u := tab.Calibration(sel.Device, DefaultCalibration, false)
	if math.Abs(u.FLOPsEfficiency-0.7) > 1e-6 || math.Abs(u.KVBandwidthEfficiency-0.8) > 1e-6 || !strings.HasPrefix(u.Source, "kernel table of H100-80GB") {
		t.Errorf("unfitted device: %+v", u)
	}
	if err := u.Check(); err != nil {
		t.Error(err)
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
		s := tab.Shares(gpu.Perf{BF16: 1e15, Bandwidth: 3e12})
		for _, v := range []float64{s.GEMM, s.Weights, s.GroupedPlateau, s.GroupedHalf, s.Prefill, s.Decode} {
			if math.IsNaN(v) || v < 0 {
				t.Fatalf("shares %+v", s)
			}
		}
	})
}
