package sim

import (
	"errors"
	"fmt"

	"headroom.dev/headroom/gpu"
)

// Calibration corrects the roofline for one GPU: the shares of the
// datasheet peaks its kernels reach and the engine's CPU time per step,
// and the API server's CPU time per request and per token (FrontEnd). A
// calibration file line holds any of these fields; the ones it leaves out
// keep the device's defaults (CalibrationFor).
type Calibration struct {
	GPU string `json:"gpu,omitempty"`
	// FLOPsEfficiency is the share of the tensor peak the GEMMs reach;
	// AttentionEfficiency the share prefill attention reaches (0: the
	// GEMMs'); BandwidthEfficiency the share of HBM bandwidth the GEMMs
	// reach reading the weights; KVBandwidthEfficiency the share decode
	// attention reaches reading the paged cache (0: the weights').
	FLOPsEfficiency       float64 `json:"flops_efficiency"`
	AttentionEfficiency   float64 `json:"attention_efficiency,omitempty"`
	BandwidthEfficiency   float64 `json:"bandwidth_efficiency"`
	KVBandwidthEfficiency float64 `json:"kv_bandwidth_efficiency,omitempty"`
	// Overhead is the engine core's CPU time per step (scheduling,
	// preparing inputs, sampling, output processing) beside the forward
	// pass; SeqOverhead what each scheduled sequence adds to it.
	Overhead    float64 `json:"overhead_s"`
	SeqOverhead float64 `json:"seq_overhead_s,omitempty"`
	// FrontEnd is the API server's CPU time.
	FrontEnd
	Source string `json:"source,omitempty"`
}

func (c Calibration) attention() float64 {
	if c.AttentionEfficiency > 0 {
		return c.AttentionEfficiency
	}
	return c.FLOPsEfficiency
}

func (c Calibration) kvBandwidth() float64 {
	if c.KVBandwidthEfficiency > 0 {
		return c.KVBandwidthEfficiency
	}
	return c.BandwidthEfficiency
}

func (c Calibration) check() error {
	switch {
	case !(c.FLOPsEfficiency > 0 && c.FLOPsEfficiency <= 1) || !(c.BandwidthEfficiency > 0 && c.BandwidthEfficiency <= 1):
		return errors.New("flops_efficiency and bandwidth_efficiency must be in (0, 1]")
	case c.AttentionEfficiency < 0 || c.AttentionEfficiency > 1 || c.KVBandwidthEfficiency < 0 || c.KVBandwidthEfficiency > 1:
		return errors.New("attention_efficiency and kv_bandwidth_efficiency must be in [0, 1]")
	case c.Overhead < 0 || c.SeqOverhead < 0:
		return errors.New("overhead_s and seq_overhead_s must not be negative")
	}
	return c.FrontEnd.check()
}

// String is the calibration in one line, for reports.
func (c Calibration) String() string {
	return fmt.Sprintf("%s: GEMMs x%.2f, attention x%.2f of peak; weights x%.2f, cache x%.2f of bandwidth; +%.2f ms/step, +%.0f µs/sequence; API server %.1f ms/request, %.0f µs/token",
		c.Source, c.FLOPsEfficiency, c.attention(), c.BandwidthEfficiency, c.kvBandwidth(), c.Overhead*1e3, c.SeqOverhead*1e6, c.Request*1e3, c.OutputToken*1e6)
}

// Check reports a calibration that cannot price a step.
func (c Calibration) Check() error { return c.check() }

// The constants below were fitted on testdata/serving/train.csv, copied from
// gpustack/gpustack@47277d79 docs/performance-lab/qwen3-14b/{a100,h100}.md
// (sim/README.md: the rows, the fit, and how well it reproduces them):
// three `vllm bench serve` runs of Qwen3-14B on vLLM 0.11.0, one on an
// A100 SXM, two on an H100 SXM. TestServingRuns replays them.
//
// The GEMM share and the bandwidth share are the device's; the engine's
// and the API server's CPU times are the host's and the release's, and
// are shared by every device. Attention's share is not separable on these
// rows (prefill attention is 6% of the FLOPs of a 4,000-token prompt): it
// is the GEMMs' until a long-prompt run says otherwise.
var (
	// fittedByCapability holds the device shares, by CUDA compute
	// capability: the kernels a release runs, and the share of its
	// datasheet peak a part reaches, are the architecture's (sm_80:
	// A100; sm_90: H100, H200, GH200).
	fittedByCapability = map[string]Calibration{
		"8.0": {FLOPsEfficiency: 0.545, BandwidthEfficiency: weightBandwidthShare, KVBandwidthEfficiency: 0.849,
			Source: "fitted on vllm bench serve of Qwen3-14B on A100-SXM, vLLM 0.11.0 (gpustack/gpustack@47277d79 docs/performance-lab/qwen3-14b/a100.md)"},
		"9.0": {FLOPsEfficiency: 0.374, BandwidthEfficiency: weightBandwidthShare, KVBandwidthEfficiency: 0.420,
			Source: "fitted on vllm bench serve of Qwen3-14B on H100-SXM, vLLM 0.11.0 (gpustack/gpustack@47277d79 docs/performance-lab/qwen3-14b/h100.md)"},
	}
	// hostCPU are the CPU costs of vLLM 0.11.0's engine core and API
	// server (with the bench client), fitted on the same rows. The fit
	// gave 2.27 ms a step before the small kernels were priced apart; on
	// the rows' model those are a constant 40 layers × 6 × 3 µs = 0.72 ms
	// a step (graphKernelFloor), which the engine's CPU time held until
	// then: 1.55 ms remain, and every row reproduces as it did. A refit
	// (TestFitServing) started from these values stays at them (1.58 ms,
	// loss 0.0394); started far off, it slides along a flat valley that
	// trades the A100's cache share for the step's time (0.99 and
	// 1.93 ms, loss 0.0398), which the rows cannot tell apart.
	hostCPU = Calibration{Overhead: 0.00155, SeqOverhead: 23e-6, FrontEnd: FrontEnd{Request: 0.0129, PromptToken: tokenizeSeconds, OutputToken: 55e-6}}
	// defaultShares are for devices without a fit: the mean of the
	// fitted devices' shares, stated as a default in every report.
	defaultShares = Calibration{FLOPsEfficiency: 0.46, BandwidthEfficiency: weightBandwidthShare, KVBandwidthEfficiency: 0.63}
)

// prefillAttentionShare is the share of the tensor peak prefill attention
// reaches: FlashAttention-2 reaches 72% of an A100's BF16 peak (225 of 312
// TFLOP/s, its paper's long-sequence forward pass), FlashAttention-3 75% of
// an H100's (740 of 989); vLLM's paged, variable-length prefill over
// chunks runs below that. Not fitted: on the training rows prefill
// attention is 6% of the FLOPs.
const prefillAttentionShare = 0.5

// tokenizeSeconds is the API server's time per prompt token: a Hugging
// Face fast tokenizer encodes about a million tokens a second on one core.
// Not fitted: the rows' per-request time cannot tell it from the rest.
const tokenizeSeconds = 1e-6

// weightBandwidthShare is the share of HBM bandwidth the GEMMs reach
// streaming the weights through a decode step: the usual figure for
// memory-bound GEMMs of a few dozen rows (cuBLAS and CUTLASS reach 75–85%
// of the datasheet bandwidth), not fitted, since the training rows read
// the weights and the cache in the same steps and cannot tell the two
// apart.
const weightBandwidthShare = 0.8

// DefaultCalibration is the calibration of a device without a fit.
var DefaultCalibration = withHost(defaultShares, "default shares of the datasheet peaks (no serving run fitted on this device)")

func withHost(c Calibration, source string) Calibration {
	c.AttentionEfficiency = prefillAttentionShare
	c.Overhead, c.SeqOverhead, c.FrontEnd = hostCPU.Overhead, hostCPU.SeqOverhead, hostCPU.FrontEnd
	c.Source = source
	return c
}

// CalibrationFor is the calibration of a device: its architecture's fit
// where serving runs were fitted on it, else DefaultCalibration; fitted
// says which.
func CalibrationFor(d gpu.Device) (c Calibration, fitted bool) {
	if f, ok := fittedByCapability[d.ComputeCapability]; ok && d.Vendor != "amd" {
		return withHost(f, f.Source), true
	}
	return DefaultCalibration, false
}

// Sample is one measured step: its batch and how long it took.
type Sample struct {
	Batch   Batch   `json:"batch"`
	Seconds float64 `json:"seconds"`
}

// Fit corrects a calibration from measured steps on the roofline m
// (whose own corrections are ignored; with m.Overlap, async scheduling,
// the CPU's time is hidden under the forward pass). Decode steps (one token per
// request) give the cache's bandwidth share and the per-step overhead: what
// a step takes beyond reading the weights (at c's share) and c's
// per-sequence time, on a least-squares line over the cache bytes it reads
// (slope 1 / (bandwidth × share), intercept the overhead); with one such
// step, or all of the same size, the overhead stays c's. Prefill steps then
// give the GEMM share as the mean of their FLOPs over peak × (seconds − the
// rest of the step). Fields without samples keep c's values.
func Fit(m Roofline, c Calibration, samples []Sample) Calibration {
	var mem, comp []Sample
	for _, s := range samples {
		if s.Seconds <= 0 || s.Batch.Tokens <= 0 {
			continue
		}
		if s.Batch.Tokens <= int64(s.Batch.Requests) {
			mem = append(mem, s)
		} else {
			comp = append(comp, s)
		}
	}
	seq := func(b Batch) float64 { return c.SeqOverhead * float64(b.Requests) }
	if m.Overlap {
		// Async scheduling hides the CPU's time under the forward pass:
		// a step is its GPU time, and the line goes through 0.
		seq = func(Batch) float64 { return 0 }
	}
	// weights is the part of a decode step the cache share does not
	// explain: the weights' read (at c's share) and the small kernels.
	weights := func(b Batch) float64 {
		return (m.WeightBytes+m.ExpertBytes*m.expertsTouched(float64(b.Tokens)))/(m.Bandwidth*c.BandwidthEfficiency) + m.smallKernelTime()
	}
	if len(mem) > 0 {
		var sx, sy, sxx, sxy float64
		for _, s := range mem {
			_, x := m.attention(s.Batch)
			y := s.Seconds - seq(s.Batch) - weights(s.Batch)
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		n := float64(len(mem))
		overhead := c.Overhead
		if m.Overlap {
			overhead = 0
		}
		if d := n*sxx - sx*sx; d > 1e-9*sxx*n && len(mem) > 1 && !m.Overlap {
			slope := (n*sxy - sx*sy) / d
			if icpt := (sy - slope*sx) / n; slope > 0 && icpt >= 0 {
				c.KVBandwidthEfficiency = min(1/(slope*m.Bandwidth), 1)
				c.Overhead = icpt
			}
		} else if t := sy/n - overhead; t > 0 && sx > 0 {
			c.KVBandwidthEfficiency = min(sx/n/m.Bandwidth/t, 1)
		}
	}
	if len(comp) > 0 {
		var sum float64
		k := 0
		for _, s := range comp {
			b := s.Batch
			flops := 2 * (m.LinearParams*float64(b.Tokens) + m.HeadParams*float64(b.Requests))
			pairs, cache := m.attention(b)
			rest := cache/(m.Bandwidth*c.kvBandwidth()) + seq(b) + m.smallKernelTime()
			if !m.Overlap {
				rest += c.Overhead
			}
			// Prefill attention runs at the GEMMs' share unless c sets its own.
			if c.AttentionEfficiency > 0 {
				rest += pairs / (m.PeakFLOPs * c.AttentionEfficiency)
				pairs = 0
			}
			if t := s.Seconds - rest; t > 0 {
				sum += (flops + pairs) / m.PeakFLOPs / t
				k++
			}
		}
		if k > 0 {
			c.FLOPsEfficiency = min(sum/float64(k), 1)
		}
	}
	c.Source = fmt.Sprintf("fitted to %d measured steps", len(mem)+len(comp))
	return c
}
