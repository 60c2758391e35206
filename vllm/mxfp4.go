package vllm

// The MXFP4 MoE backends (gpt-oss's experts), as vLLM picks them in
// quantization/mxfp4.py (get_mxfp4_backend, from 0.10.1 when gpt-oss came;
// the image has FlashInfer and triton_kernels): on Blackwell (sm_100)
// FlashInfer, by default TRT-LLM's kernels with BF16 activations, which the
// environment can turn to MXFP8 activations (TRT-LLM's or CUTLASS's
// kernels: the math then runs on the FP8 tensor cores); on Hopper
// triton_kernels' matmul_ogs, or FlashInfer's CUTLASS kernels with BF16
// activations when asked; on every other GPU the Marlin kernel.

// The environment variables that choose an MXFP4 backend.
const (
	EnvFlashInferMXFP4BF16         = "VLLM_USE_FLASHINFER_MOE_MXFP4_BF16"
	EnvFlashInferMXFP4MXFP8        = "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8"
	EnvFlashInferMXFP4MXFP8Cutlass = "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS"
)

// MXFP4Backend is one of vLLM's MXFP4 MoE backends.
type MXFP4Backend int

// The backends (Mxfp4Backend in mxfp4.py).
const (
	MXFP4Marlin                 MXFP4Backend = iota
	MXFP4Triton                              // triton_kernels' matmul_ogs (TRITON)
	MXFP4FlashInferBF16                      // SM100_FI_MXFP4_BF16: TRT-LLM's kernels
	MXFP4FlashInferMXFP8                     // SM100_FI_MXFP4_MXFP8_TRTLLM
	MXFP4FlashInferCutlassMXFP8              // SM100_FI_MXFP4_MXFP8_CUTLASS
	MXFP4FlashInferCutlassBF16               // SM90_FI_MXFP4_BF16
)

// MXFP4BackendFor is the backend on a GPU of CUDA compute capability
// major (0: not CUDA, or unknown), in get_mxfp4_backend's order.
func MXFP4BackendFor(major int, env map[string]string) MXFP4Backend {
	on := func(name string) bool { v, _ := envBool(env, name); return v }
	switch {
	case major == 9 && on(EnvFlashInferMXFP4BF16):
		return MXFP4FlashInferCutlassBF16
	case major == 10 && on(EnvFlashInferMXFP4MXFP8Cutlass):
		return MXFP4FlashInferCutlassMXFP8
	case major == 10 && on(EnvFlashInferMXFP4MXFP8):
		return MXFP4FlashInferMXFP8
	case major == 10:
		return MXFP4FlashInferBF16
	case major == 9:
		return MXFP4Triton
	}
	return MXFP4Marlin
}

// FlashInfer reports a FlashInfer backend.
func (b MXFP4Backend) FlashInfer() bool { return b >= MXFP4FlashInferBF16 }

// MXFP8Activations reports a backend that quantizes the activations to
// MXFP8 and multiplies on the FP8 tensor cores; the others widen the
// weights to BF16.
func (b MXFP4Backend) MXFP8Activations() bool {
	return b == MXFP4FlashInferMXFP8 || b == MXFP4FlashInferCutlassMXFP8
}

// Alignment is the multiples the backend allocates an expert's width
// (intermediate size on one rank) and the hidden size at (create_weights):
// Marlin 128 and 256, TRT-LLM's kernels 256 and 256, CUTLASS's 128 and
// 128, matmul_ogs the width to 64.
func (b MXFP4Backend) Alignment() (width, hidden int) {
	switch b {
	case MXFP4Marlin:
		return 128, 256
	case MXFP4FlashInferBF16, MXFP4FlashInferMXFP8:
		return 256, 256
	case MXFP4FlashInferCutlassMXFP8, MXFP4FlashInferCutlassBF16:
		return 128, 128
	}
	return 64, 1
}
