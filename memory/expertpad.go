package memory

import (
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// ExpertShape is one rank's routed-expert GEMMs as the kernel lays them
// out: the hidden width they reduce over (gate-up) and produce (down), the
// expert's width on this rank, and Pad, the padded experts' parameters over
// the checkpoint's share of them (1 when nothing is padded), and Kernel,
// the grouped GEMM's family as vLLM picks it for the format and the GPU
// ("Triton", "DeepGEMM", "Marlin", "triton_kernels", "FlashInfer").
// MXFP8 is set when the kernel multiplies MXFP8 activations on the FP8
// tensor cores (vllm.MXFP4Backend.MXFP8Activations).
type ExpertShape struct {
	Hidden, Intermediate int
	Pad                  float64
	Kernel               string
	MXFP8                bool
	// ShardHidden and ShardIntermediate are the checkpoint's shard, before
	// the kernel's padding.
	ShardHidden, ShardIntermediate int
	// ExpertParallel is set when each rank holds whole experts, a share of
	// them (--enable-expert-parallel over more than one rank), instead of
	// a slice of every expert.
	ExpertParallel bool
}

// ExpertShapeFor is the routed experts' shape on one rank of a plan with
// tensor parallel tp and data parallel dp.
//
// vLLM's MXFP4 method (quantization/mxfp4.py, Mxfp4MoEMethod.create_weights,
// from 0.10.1 when gpt-oss came) allocates each rank's experts at widths its
// backend accepts (vllm.MXFP4Backend.Alignment) and loads the checkpoint's
// shard into the top-left corner: Marlin (Ampere, Ada) the expert width to
// a multiple of 128 and the hidden size of 256 ("the moe marlin kernel
// requires that for each linear n % 256 == 0 and k % 128 == 0"), FlashInfer
// on Blackwell both to 256 (TRT-LLM's kernels, the default) or 128
// (CUTLASS's), ROCm both to 256, triton_kernels (Hopper) the width to 64.
//
// gpt-oss's 2,880 is a multiple of 64 but not of 128 or 256: on an A100 its
// experts are 3,072 × 2,944 (9.0% more parameters), on a B200 3,072 × 3,072
// (13.8%), and split eight ways on a B200 360 columns become 512 (51.7%).
// Other formats keep the checkpoint's shapes (their kernels take them as
// they are or refuse the model).
func ExpertShapeFor(s model.Spec, set vllm.Settings, dev gpu.Device) ExpertShape {
	m := s.MoE
	if m == nil || m.Experts == 0 {
		return ExpertShape{Hidden: s.Hidden, Pad: 1, ShardHidden: s.Hidden}
	}
	width, ep := expertWidth(set)
	kernel := moeKernelFor(s, set.Quantization, dev.ComputeCapability, set.Env)
	out := ExpertShape{Hidden: s.Hidden, Intermediate: m.Intermediate / width, Pad: 1, Kernel: kernel.String(), ExpertParallel: ep}
	out.ShardHidden, out.ShardIntermediate = out.Hidden, out.Intermediate
	q := s.Quant
	if q == nil || !strings.EqualFold(q.Method, "mxfp4") || out.Intermediate == 0 || out.Hidden == 0 {
		return out
	}
	major, _ := dev.Capability()
	backend := vllm.MXFP4BackendFor(major, set.Env)
	interAlign, hiddenAlign := backend.Alignment()
	if dev.Vendor == "amd" {
		interAlign, hiddenAlign = 256, 256
		out.Kernel = "ROCm's MoE"
	}
	out.MXFP8 = backend.MXFP8Activations()
	inter, hidden := roundUp(out.Intermediate, interAlign), roundUp(out.Hidden, hiddenAlign)
	out.Pad = float64(inter) * float64(hidden) / (float64(out.Intermediate) * float64(out.Hidden))
	out.Hidden, out.Intermediate = hidden, inter
	return out
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
