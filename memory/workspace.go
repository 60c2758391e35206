package memory

import (
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// moeKernel is the family of fused-MoE kernels vLLM runs a model's routed
// experts with. The families differ in the scratch they ask of vLLM's
// workspace manager (vllm-workspace.md): the planner tells them apart by
// the checkpoint's quantization and the GPU's compute capability, as
// vLLM's quantization methods choose them.
type moeKernel int

const (
	// kernelTriton is vLLM's Triton fused MoE (unquantized weights, FP8
	// and int8 W8A8) and CUTLASS's FP8 grouped GEMM, which asks for the
	// same two buffers (model_executor/layers/fused_moe/fused_moe.py,
	// TritonExperts.workspace_shapes).
	kernelTriton moeKernel = iota
	// kernelDeepGEMM is DeepGEMM's grouped GEMM, which block-quantized FP8
	// experts use on Hopper and newer (TritonOrDeepGemmExperts sizes its
	// workspace for DeepGEMM whenever DeepGEMM may run): the Triton
	// buffers, with every local expert's rows padded to DeepGEMM's 128-row
	// alignment (deep_gemm_moe.py, compute_aligned_M).
	kernelDeepGEMM
	// kernelMarlin is the Marlin MoE kernel for weight-only formats:
	// GPTQ/AWQ/compressed-tensors int4 and int8, and FP8, MXFP4 and NVFP4
	// on GPUs without those number formats. MarlinExperts.workspace_shapes
	// swaps the Triton buffers (the output comes out of the smaller one)
	// but asks for the same bytes.
	kernelMarlin
	// kernelOAITriton is OpenAI's triton_kernels matmul_ogs, vLLM's MXFP4
	// path on Hopper (Mxfp4Backend.TRITON): it allocates the gate/up output
	// itself for the call and asks the workspace for the activation output
	// and the layer's output only (OAITritonExperts.workspace_shapes).
	kernelOAITriton
	// kernelFlashInfer is FlashInfer's MoE (MXFP4 and NVFP4 on Blackwell):
	// vLLM asks the workspace for the layer's output only
	// (FlashInferExperts.workspace_shapes), and FlashInfer keeps its
	// scratch to itself, per call (FlashInfer took a
	// caller-owned workspace only with its PR #4057, Jul 2026, whose vLLM
	// release is not known), so nothing of it persists; the planner counts
	// the Triton kernel's intermediates as its scratch while a call lasts,
	// a stand-in no start-up has checked. The B12x kernels' static
	// per-layer workspace (RTX Blackwell, NVFP4; about 640 MiB a layer on
	// one 384-expert shape until vLLM PR #53081) is not modelled: one
	// measured shape does not give its size on others.
	kernelFlashInfer
)

func (k moeKernel) String() string {
	switch k {
	case kernelDeepGEMM:
		return "DeepGEMM"
	case kernelMarlin:
		return "Marlin"
	case kernelOAITriton:
		return "triton_kernels"
	case kernelFlashInfer:
		return "FlashInfer"
	}
	return "Triton"
}

// deepGEMMBlockRows is DeepGEMM's M alignment for grouped GEMMs
// (get_mk_alignment_for_contiguous_layout: 128).
const deepGEMMBlockRows = 128

// moeKernelFor picks the kernel family as vLLM 0.19 does for the model's
// quantization (the checkpoint's, else --quantization applied on the fly)
// on a GPU of the given compute capability ("" = unknown: Triton, the
// kernel every CUDA GPU runs). Sources: quantization/mxfp4.py
// get_mxfp4_backend (Blackwell → FlashInfer, Hopper → triton_kernels,
// others → Marlin); fp8.py and compressed_tensors_moe.py (FP8 on GPUs
// before 8.9 → Marlin; block FP8 → DeepGEMM from Hopper on); gptq/awq
// Marlin MoE methods; modelopt NVFP4 (FlashInfer from Blackwell on, else
// Marlin).
func moeKernelFor(s model.Spec, quantization string, cc string, env map[string]string) moeKernel {
	major, minor := gpu.ParseCapability(cc)
	known := major > 0
	q := s.Quant
	if q == nil || q.Bits == 0 {
		switch strings.ToLower(quantization) {
		case "fp8", "ptpc_fp8", "fbgemm_fp8":
			q = &model.Quantization{Method: "fp8", Bits: 8, Float: true}
		default:
			// Unquantized, or formats (bitsandbytes, experts_int8) whose
			// MoE runs the Triton kernel on dequantized or int8 weights.
			return kernelTriton
		}
	}
	switch {
	case strings.EqualFold(q.Method, "mxfp4"):
		switch b := vllm.MXFP4BackendFor(major, env); {
		case b.FlashInfer():
			return kernelFlashInfer
		case b == vllm.MXFP4Triton:
			return kernelOAITriton
		}
		return kernelMarlin
	case q.Float && q.Bits == 4:
		if major >= 10 {
			return kernelFlashInfer
		}
		return kernelMarlin
	case q.Float && q.Bits == 8:
		switch {
		case known && major*10+minor < 89:
			return kernelMarlin
		case q.GroupSize > 0 && major >= 9:
			return kernelDeepGEMM
		}
		return kernelTriton
	case !q.Float && q.Bits == 8 && strings.Contains(strings.ToLower(q.Format), "int-quantized"):
		// compressed-tensors W8A8 int8: Triton with int8 activations.
		return kernelTriton
	case !q.Float && q.Bits < 16:
		return kernelMarlin
	}
	return kernelTriton
}

// expertWidth is how many ranks an expert's width is split over: every
// rank of tensor × data parallel (vLLM's fused MoE flattens TP across
// DP), or, with --enable-expert-parallel over more than one rank (ep),
// none: each rank holds whole experts.
func expertWidth(set vllm.Settings) (width int, ep bool) {
	width = max(set.TensorParallelSize, 1) * max(set.DataParallelSize, 1)
	if set.ExpertParallel() && width > 1 {
		return 1, true
	}
	return width, false
}

// moeScratch is what a worker's fused-MoE layers hold beyond their weights
// during vLLM's profile run.
type moeScratch struct {
	kernel moeKernel
	// persistent is the workspace in bytes: allocated by the first MoE
	// layer of the profile run, reused by every other layer (the cost is
	// the largest request, not a sum over layers), and still held when
	// the sampler runs and for the life of the server.
	persistent int64
	// callPerToken is the scratch, in activation elements per token, that
	// lives only during one MoE layer's call (per-call allocations; all of
	// the kernel's buffers before the workspace manager).
	callPerToken float64
}

// moeScratchFor sizes the fused-MoE scratch of one worker for a forward of
// batchedTokens tokens (max_num_batched_tokens in the profile run).
//
// The buffers of the Triton fused MoE (and Marlin, CUTLASS) for a chunk of
// M tokens routed to topk experts each, I the expert width on this rank and
// K the hidden size: workspace13 = M × topk × max(I, K) (the activation
// output, then the down projection's output) and workspace2 = M × topk ×
// max(2I, K) (the fused gate/up output), in the activation dtype
// (vllm-workspace.md; fused_moe.py TritonExperts.workspace_shapes). The
// modular kernel (modular_kernel.py) takes the layer's output, tokens × K,
// out of workspace13 when the forward is one chunk and asks for it
// separately when the forward is chunked.
//
// Sharding (FusedMoEParallelConfig): without expert parallelism every rank
// holds every expert at 1/(TP × DP) of its width; with
// --enable-expert-parallel it holds whole experts, 1/(TP × DP) of them, so
// its buffers are as wide as the unsharded expert's. With DP > 1 every rank
// gathers the tokens of all DP ranks before the experts run (the default
// all-gather dispatch), so the experts see DP × the batch. With DP and EP
// together, vLLM PR #27426 (Oct 2025) has the profile run ask for the
// worst case, a whole chunk of VLLM_FUSED_MOE_CHUNK_SIZE tokens and its
// output, because random routing could leave a rank's dummy batch small;
// the DeepEP and pplx all-to-all backends, which size their own buffers,
// are not modelled. Dual-batch overlap keeps one buffer per micro-batch,
// each sized for its half of the batch: the same bytes, so it needs no
// term of its own. Marlin's lock buffers (streaming multiprocessors × 4
// int32 per layer, or shared since vLLM PR #57421) are kilobytes and are
// left out.
func moeScratchFor(s model.Spec, set vllm.Settings, dev gpu.Device, env map[string]string, batchedTokens, dtypeBytes int) moeScratch {
	m := s.MoE
	if m == nil || m.Experts == 0 || m.TopK <= 0 {
		return moeScratch{}
	}
	tp, dp := max(set.TensorParallelSize, 1), max(set.DataParallelSize, 1)
	width, ep := expertWidth(set)
	localExperts := m.Experts
	if ep {
		localExperts = max(m.Experts/(tp*dp), 1)
	}
	inter := int64(m.Intermediate / width)
	up := inter // the gate/up projection's output width
	if s.GatedMLP {
		up = 2 * inter
	}
	k := int64(s.Hidden)
	topk := int64(m.TopK)
	kernel := moeKernelFor(s, set.Quantization, dev.ComputeCapability, env)
	out := moeScratch{kernel: kernel}

	if !vllm.PersistentMoEWorkspace(set.Version) {
		// Before the workspace manager the kernel allocated its three
		// intermediate caches per call: (M, topk, 2I), (M × topk, I) and
		// (M, topk, K), freed when the call returns.
		out.callPerToken = float64(topk * (up + inter + k))
		return out
	}

	tokens := int64(batchedTokens) * int64(dp)
	chunk := int64(vllm.FusedMoEChunkTokens(env))
	// request is what one call of rows tokens asks of the workspace, in
	// elements; outputRows is the tokens of the layer's output when it
	// cannot live in workspace13 (0 when it does).
	request := func(rows, outputRows int64) int64 {
		var ws13, ws2 int64
		switch kernel {
		case kernelOAITriton:
			ws2 = rows * topk * inter
		case kernelFlashInfer:
			ws13 = rows * k
		default:
			routed := rows * topk
			if kernel == kernelDeepGEMM {
				routed += int64(localExperts) * (deepGEMMBlockRows - 1)
				routed = (routed + deepGEMMBlockRows - 1) / deepGEMMBlockRows * deepGEMMBlockRows
			}
			ws13 = routed * max(inter, k)
			ws2 = routed * max(up, k)
		}
		if outputRows == 0 && ws13 < rows*k {
			outputRows = rows
		}
		return ws13 + ws2 + outputRows*k
	}
	var elems int64
	if tokens <= chunk {
		elems = request(tokens, 0)
	} else {
		elems = request(chunk, tokens)
	}
	switch kernel {
	case kernelOAITriton:
		out.callPerToken = float64(topk * up)
	case kernelFlashInfer:
		out.callPerToken = float64(topk * (up + inter + k))
	default:
		if dp > 1 && ep {
			elems = max(elems, request(chunk, chunk))
		}
	}
	out.persistent = elems * int64(dtypeBytes)
	return out
}
