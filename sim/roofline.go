package sim

import (
	"fmt"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
)

// Calibration corrects the roofline for one GPU: the shares of the
// datasheet peaks a real step reaches, and the time a step costs beyond
// its forward pass.
type Calibration struct {
	GPU                 string  `json:"gpu,omitempty"`
	FLOPsEfficiency     float64 `json:"flops_efficiency"`
	BandwidthEfficiency float64 `json:"bandwidth_efficiency"`
	Overhead            float64 `json:"overhead_s"`
	Source              string  `json:"source,omitempty"`
}

// DefaultCalibration is used for a GPU without records. The values are
// the usual shares of a roofline that inference kernels reach: dense
// GEMMs of a prefill run at about half the tensor peak, a decode step
// streams its weights and KV at about 80% of the HBM bandwidth, and a
// V1 step with CUDA graphs costs about 1 ms of scheduling, sampling and
// launches on top. docs/simulate-accuracy.md says how far this lands from
// measured runs.
var DefaultCalibration = Calibration{FLOPsEfficiency: 0.5, BandwidthEfficiency: 0.8, Overhead: 0.001, Source: "default"}

// RooflineFor builds the step-time model of a plan: the model's active
// parameters, weights and KV per token split over the tensor-parallel
// ranks, on the device's datasheet figures. A pipeline-parallel step runs
// its stages one after the other, so pipeline parallelism does not
// shorten a step here (vLLM's micro-batching across stages is not
// modelled). The collective of tensor parallelism is part of Overhead.
func RooflineFor(b memory.Budget, c Calibration) (*Roofline, error) {
	p, ok := gpu.PerfOf(b.Device)
	if !ok {
		return nil, fmt.Errorf("no datasheet throughput for %s: give --step-time fixed:DURATION (e.g. fixed:15ms)", b.Device.Name)
	}
	if c.FLOPsEfficiency <= 0 || c.BandwidthEfficiency <= 0 || c.Overhead < 0 {
		return nil, fmt.Errorf("calibration for %s: efficiencies must be positive and the overhead not negative", b.Device.Name)
	}
	s := b.Model
	tp := float64(max(b.Settings.TensorParallelSize, 1))
	peak := p.BF16
	if fp8Weights(s, b.Settings.Quantization) && p.FP8 > 0 {
		peak = p.FP8
	}
	full := 0
	for i := range s.Layers {
		switch s.LayerKind(i).Kind {
		case model.Full, model.MLA, model.Sliding:
			full++
		}
	}
	return &Roofline{
		ActiveParams:          float64(s.ActiveParams()) / tp,
		WeightBytes:           float64(b.WeightsTotal) / tp,
		KVBytesPerToken:       float64(b.ModelKVBytesPerToken) / tp,
		AttentionFLOPsPerPair: 4 * float64(full) * float64(s.Heads) * float64(s.HeadDim) / tp,
		PeakFLOPs:             peak,
		Bandwidth:             p.Bandwidth,
		FLOPsEfficiency:       c.FLOPsEfficiency,
		BandwidthEfficiency:   c.BandwidthEfficiency,
		Overhead:              c.Overhead,
	}, nil
}

// fp8Weights: FP8 checkpoints and on-the-fly FP8 run their GEMMs on the
// FP8 tensor cores.
func fp8Weights(s model.Spec, quantization string) bool {
	if s.Quant != nil && strings.Contains(strings.ToLower(s.Quant.Method), "fp8") {
		return true
	}
	return strings.Contains(strings.ToLower(quantization), "fp8")
}

// Sample is one measured step: its batch and how long it took.
type Sample struct {
	Batch   Batch   `json:"batch"`
	Seconds float64 `json:"seconds"`
}

// Fit corrects a calibration from measured steps on the roofline m
// (whose own efficiencies are ignored). Steps that m's datasheet
// figures call memory-bound give the bandwidth efficiency and the
// overhead by a least-squares line of seconds over bytes (slope 1 /
// (bandwidth × efficiency), intercept the overhead); with one such step,
// or all of the same size, the overhead stays c's. Compute-bound steps
// then give the FLOPs efficiency as the mean of FLOPs / (peak × (seconds
// − overhead)). Fields without samples keep c's values.
func Fit(m Roofline, c Calibration, samples []Sample) Calibration {
	var mem, comp []Sample
	for _, s := range samples {
		if s.Seconds <= 0 || s.Batch.Tokens <= 0 {
			continue
		}
		f, by := m.work(s.Batch)
		if by/m.Bandwidth >= f/m.PeakFLOPs {
			mem = append(mem, s)
		} else {
			comp = append(comp, s)
		}
	}
	if len(mem) > 0 {
		var sx, sy, sxx, sxy float64
		for _, s := range mem {
			_, x := m.work(s.Batch)
			sx, sy, sxx, sxy = sx+x, sy+s.Seconds, sxx+x*x, sxy+x*s.Seconds
		}
		n := float64(len(mem))
		if d := n*sxx - sx*sx; d > 1e-9*sxx*n && len(mem) > 1 {
			slope := (n*sxy - sx*sy) / d
			if icpt := (sy - slope*sx) / n; slope > 0 && icpt >= 0 {
				c.BandwidthEfficiency = 1 / (slope * m.Bandwidth)
				c.Overhead = icpt
			}
		} else if t := sy/n - c.Overhead; t > 0 {
			c.BandwidthEfficiency = sx / n / m.Bandwidth / t
		}
	}
	if len(comp) > 0 {
		var sum float64
		k := 0
		for _, s := range comp {
			f, _ := m.work(s.Batch)
			if t := s.Seconds - c.Overhead; t > 0 {
				sum += f / m.PeakFLOPs / t
				k++
			}
		}
		if k > 0 {
			c.FLOPsEfficiency = sum / float64(k)
		}
	}
	c.Source = fmt.Sprintf("fitted to %d measured steps", len(mem)+len(comp))
	return c
}
