package sim

import (
	"math"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// The kernels a step runs beside the dense GEMMs: the routed experts'
// grouped GEMMs, the quantized weights' kernel paths, MLA's decode over the
// latent cache and the tensor-parallel all-reduce. Each function states the
// kernel it prices and where its figures come from (sim/README.md has the
// table).

// moeKernel is the grouped GEMM a MoE layer's routed experts run as: it
// computes each expert's tokens in tiles of a fixed number of rows, so an
// expert given fewer tokens than a tile computes the rest as padding, and
// the kernel's choice of tile is what the padding costs.
type moeKernel int

const (
	// fusedMoE is vLLM's Triton fused_moe (BF16, FP8 and INT8 experts).
	// Its tuned configurations (fused_moe/configs/E=*,N=*,device_name=*.json,
	// written by benchmark_moe.py per batch size) take BLOCK_SIZE_M 16 for
	// small batches and 32 or 64 as tokens per expert grow; the default
	// without a file is 16 up to as many tokens as experts, 64 beyond
	// (get_default_config).
	fusedMoE moeKernel = iota
	// matmulOGS is triton_kernels' matmul_ogs, gpt-oss's MXFP4 experts on
	// Hopper and Blackwell: its block_m is the next power of two of the
	// tokens per expert, 16 to 128 (opt_flags).
	matmulOGS
	// marlinMoE is the Marlin MoE kernel (Ampere's MXFP4 and FP8, INT4
	// everywhere): fused_marlin_moe takes the first block of 8, 16, 32,
	// 48, 64 rows that the tokens per expert fill to less than 0.9.
	marlinMoE
	// flashInferMoE is FlashInfer's TRT-LLM MoE, MXFP4 and NVFP4 experts on
	// Blackwell: vLLM gives it tiles of the next power of two of the tokens
	// per expert, 8 to 64 (calculate_tile_tokens_dim).
	flashInferMoE
)

// tileRows is the rows of one tile when each touched expert gets t
// tokens.
func (k moeKernel) tileRows(t float64) float64 {
	switch k {
	case marlinMoE:
		for _, b := range []float64{8, 16, 32, 48} {
			if t/b < 0.9 {
				return b
			}
		}
		return 64
	case matmulOGS:
		return min(max(nextPow2(t), 16), 128)
	case flashInferMoE:
		return min(max(nextPow2(t), 8), 64)
	}
	return min(max(nextPow2(t), 16), 64)
}

func nextPow2(t float64) float64 {
	if t <= 1 {
		return 1
	}
	return math.Exp2(math.Ceil(math.Log2(t)))
}

// paddedRows is the rows a grouped GEMM computes for an expert given t
// tokens on average, in tiles of b rows: one tile while t is under half
// a tile, else t and half a tile of padding on average (the tokens an
// expert gets scatter around t, and the last tile is filled to a
// uniform share; a Poisson spread of t = b gives 1.43 tiles, this 1.5).
func paddedRows(t, b float64) float64 { return max(b, t+b/2) }

// quantPath is the kernel path a quantized weight takes on a device:
// the tensor peak its GEMMs run at and the share of the BF16 GEMMs' share
// that path reaches (1: the quantization changes only the bytes read).
type quantPath struct {
	Name string
	// FP8 is true when the GEMMs run on FP8 tensor cores.
	FP8 bool
	// Dequant is true for weight-only kernels that widen the weights to
	// 16 bits in registers before the BF16 tensor cores (Marlin on Ampere
	// for FP8, MXFP4 and INT4; matmul_ogs for gpt-oss's MXFP4 experts on
	// Hopper): the weights are read at their own bytes, the math is BF16,
	// and the widening costs the kernel a share of its throughput, fitted
	// per architecture (Calibration.DequantShare).
	Dequant bool
	// MoE is the grouped GEMM routed experts stored this way run as.
	MoE moeKernel
}

// quantizesActivations reports whether the path quantizes each GEMM's
// input first (native FP8 and FP4 math), a kernel of its own.
func (q quantPath) quantizesActivations() bool { return q.FP8 || q.Name == "nvfp4" }

// quantPathOf is the path of weights stored as method on d (vLLM 0.10–0.11's
// choice, read from its quantization layers):
//   - FP8 (fp8, compressed-tensors float, modelopt): native FP8 GEMMs
//     (cutlass_scaled_mm) on sm_89 and later; on Ampere, which has no FP8
//     tensor cores, fp8.py falls back to the weight-only FP8 Marlin kernel
//     (dequantized to BF16 in the kernel, activations stay BF16);
//   - MXFP4 (gpt-oss's experts only): weights upcast in the kernel, BF16
//     math; which kernel, per GPU and environment, is expertPathOf's;
//   - INT4/INT8 weight-only (GPTQ, AWQ, compressed-tensors pack-quantized):
//     Marlin on every NVIDIA architecture vLLM runs it on;
//   - none or another method: BF16 GEMMs.
func quantPathOf(method string, d gpu.Device) quantPath {
	m := strings.ToLower(method)
	major, minor := d.Capability()
	ampere := major == 8 && minor < 9
	switch {
	case m == "":
		return quantPath{Name: "bf16"}
	case strings.Contains(m, "mxfp4"):
		return quantPath{Name: "mxfp4 (upcast in kernel)", Dequant: true, MoE: matmulOGS}
	case strings.Contains(m, "fp4"):
		// FP4 math needs Blackwell; before it, Marlin widens NVFP4 too
		if major >= 10 {
			return quantPath{Name: "nvfp4"}
		}
		return quantPath{Name: "nvfp4 marlin (weight-only, dequantized)", Dequant: true, MoE: marlinMoE}
	case strings.Contains(m, "fp8"):
		if ampere {
			return quantPath{Name: "fp8 marlin (weight-only, dequantized)", Dequant: true, MoE: marlinMoE}
		}
		return quantPath{Name: "fp8", FP8: true}
	case strings.Contains(m, "gptq"), strings.Contains(m, "awq"), strings.Contains(m, "marlin"), strings.Contains(m, "compressed-tensors"):
		return quantPath{Name: "marlin (weight-only, dequantized)", Dequant: true, MoE: marlinMoE}
	}
	return quantPath{Name: m}
}

// expertPathOf is the path of the routed experts of s under set on d: the
// format's (quantPathOf), run by the grouped GEMM vLLM picks for the
// format and the GPU (memory.ExpertShapeFor, which the weights' padding
// follows too). MXFP4 takes triton_kernels' matmul_ogs on Hopper, Marlin
// on Ampere and Ada (triton_kernels needs sm_90 to sm_100, mxfp4.py), and
// FlashInfer on Blackwell, which by default widens the weights to BF16
// activations' math as the others do, and with
// VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8 (or its _CUTLASS form) multiplies
// MXFP8 activations on the FP8 tensor cores (vllm.MXFP4BackendFor). ROCm
// keeps the Triton path.
func expertPathOf(s model.Spec, set vllm.Settings, d gpu.Device) quantPath {
	q := quantPathOf(expertQuant(s, set.Quantization), d)
	if d.Vendor == "amd" || s.MoE == nil {
		return q
	}
	shape := memory.ExpertShapeFor(s, set, d)
	switch shape.Kernel {
	case "Marlin":
		if strings.Contains(q.Name, "mxfp4") {
			q.Name = "mxfp4 marlin (weight-only, dequantized)"
		}
		q.Dequant, q.FP8, q.MoE = true, false, marlinMoE
	case "FlashInfer":
		q.MoE = flashInferMoE
		switch {
		case shape.MXFP8:
			// MXFP8 activations: the FP8 tensor cores multiply them with
			// the FP4 weights, nothing is widened
			q.Name, q.Dequant, q.FP8 = "mxfp4 flashinfer (mxfp8 activations)", false, true
		case strings.Contains(q.Name, "mxfp4"):
			q.Name = "mxfp4 flashinfer (upcast in kernel)"
		}
	}
	return q
}

// expertQuant is the method the routed experts are stored in: the
// checkpoint's (gpt-oss's MXFP4 covers its experts only) or the
// --quantization given.
func expertQuant(s model.Spec, quantization string) string {
	if quantization != "" {
		return quantization
	}
	if q := s.Quant; q != nil {
		m := strings.ToLower(q.Method)
		switch {
		case m == "modelopt" || ((m == "compressed-tensors" || m == "quark") && q.Float && q.Bits == 8):
			return "fp8"
		case m == "modelopt_fp4" || strings.Contains(q.Format, "nvfp4"):
			return "nvfp4"
		}
		return m
	}
	return ""
}

// denseQuant is the method the dense linear layers are stored in:
// gpt-oss's MXFP4 leaves attention and the router in BF16.
func denseQuant(s model.Spec, quantization string) string {
	m := expertQuant(s, quantization)
	if strings.Contains(strings.ToLower(m), "mxfp4") && quantization == "" {
		return ""
	}
	return m
}

// All-reduce of the tensor-parallel ranks, twice a layer (after the
// attention's output projection and after the MLP or the experts).
//
// vLLM's custom all-reduce (csrc/custom_all_reduce.cuh, PR #2192) takes
// messages up to 8 MiB between GPUs with full NVLink (and two PCIe GPUs
// with peer access): one stage (every rank reads every peer's buffer)
// for 2 ranks, up to 4 ranks under 512 KiB and up to 8 under 256 KiB,
// two stages (reduce-scatter, all-gather) above. Larger messages, PCIe
// beyond two GPUs and AMD go to NCCL/RCCL's ring. Latencies are the
// order the custom all-reduce's PR and NCCL's tests report (a one-stage
// custom all-reduce 5–10 µs, a small NCCL ring all-reduce 20–30 µs over
// NVLink, more over PCIe); not fitted: the tensor-parallel training rows
// (tp 2 with async scheduling, tp 8) spend 2% (gpt-oss-120b, tp 2, ~300 sequences: 72 × 13 µs of a
// ~40 ms step) to 13% (Qwen3-235B, tp 8, 1,000 sequences: 188 × 57 µs of
// ~80 ms) of a decode step here, and the latencies are a small part of it.
// The custom all-reduce takes groups of 2, 4, 6 or 8 ranks on one node
// (custom_all_reduce.py: _SUPPORTED_WORLD_SIZES, and a group that is not
// all on one node turns it off); any other group goes to NCCL.
const (
	customAllReduceMax     = 8 << 20
	customAllReduceLatency = 8e-6
	ncclAllReduceLatency   = 25e-6
	pcieAllReduceLatency   = 30e-6
	// allReduceLinkShare is the share of the link a ring all-reduce's
	// bandwidth term reaches (NCCL's bus bandwidth against the link's).
	allReduceLinkShare = 0.8
)

// A group of ranks on more than one node (memory.Budget.GPUsPerNode) meets
// over the network between nodes: NCCL's ring, whose step across nodes
// each GPU's own network card bounds. crossNodeLink is NDR InfiniBand's
// 400 Gb/s, one card a GPU (the HGX H100 reference design, AWS p5, Azure
// ND H100 v5; an A100 node's HDR is half, a cloud's Ethernet often less),
// crossNodeLatency the order NCCL's tests report for a small all-reduce
// across two nodes over InfiniBand (20–50 µs). Neither is fitted: no
// training row crosses nodes, and such runs are extrapolated.
const (
	crossNodeLink    = 50e9
	crossNodeLatency = 40e-6
)

// fabric is what a group of ranks meets over: the GPUs' own link, or the
// network when the group spans nodes.
type fabric struct {
	link               float64
	nvlink, amd, nodes bool
}

// latency is a NCCL call's fixed time over f.
func (f fabric) latency() float64 {
	switch {
	case f.nodes:
		return crossNodeLatency
	case f.nvlink:
		return ncclAllReduceLatency
	}
	return pcieAllReduceLatency
}

// bandwidth is what a NCCL ring's bandwidth term reaches over f.
func (f fabric) bandwidth() float64 {
	if f.nodes {
		return min(f.link, crossNodeLink) * allReduceLinkShare
	}
	return f.link * allReduceLinkShare
}

// dispatchCombineTime is a MoE layer's exchange across a data-parallel
// group of n ranks (vLLM's all2all backends without expert-parallel
// kernels, naive and allgather_reducescatter): an all-gather of every
// rank's tokens before the experts and a reduce-scatter of their outputs
// after, bytes the gathered tokens' activations, each a NCCL collective
// over f.
func dispatchCombineTime(bytes float64, n int, f fabric) float64 {
	if n <= 1 {
		return 0
	}
	return 2 * (f.latency() + bytes*float64(n-1)/float64(n)/f.bandwidth())
}

// sendTime is one NCCL send of bytes from a pipeline stage to the next
// over f (its latency and share as the all-reduce's).
func sendTime(bytes float64, f fabric) float64 {
	return f.latency() + bytes/f.bandwidth()
}

// customWorldSize reports whether vLLM's custom all-reduce takes a group
// of tp ranks (_SUPPORTED_WORLD_SIZES).
func customWorldSize(tp int) bool { return tp == 2 || tp == 4 || tp == 6 || tp == 8 }

// allReduceTime is one all-reduce of bytes across tp ranks over f.
func allReduceTime(bytes float64, tp int, f fabric) float64 {
	if tp <= 1 {
		return 0
	}
	n := float64(tp)
	nvlink, link := f.nvlink, f.link
	custom := !f.amd && !f.nodes && customWorldSize(tp) && bytes <= customAllReduceMax && (nvlink || tp == 2)
	if custom {
		lat := customAllReduceLatency
		if !nvlink {
			lat = pcieAllReduceLatency
		}
		oneStage := tp == 2 || (tp <= 4 && bytes < 512<<10) || (tp <= 8 && bytes < 256<<10)
		if oneStage {
			// every rank reads its tp−1 peers' buffers at once
			return lat + bytes*(n-1)/(link*allReduceLinkShare)
		}
		return 2*lat + 2*bytes*(n-1)/n/(link*allReduceLinkShare)
	}
	return f.latency() + 2*bytes*(n-1)/n/f.bandwidth()
}
