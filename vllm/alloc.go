package vllm

import "strings"

// The PyTorch allocator setting that keeps reserved memory from
// fragmenting: PyTorch grows and reuses segments instead of leaving
// reserved but unallocated blocks (KAITO issue #976: 737 MiB reserved but
// unallocated at the OOM on a 16 GB GPU; vLLM issue #41158 asks for it by
// default).
const (
	AllocConfEnv       = "PYTORCH_CUDA_ALLOC_CONF"
	ExpandableSegments = "expandable_segments:True"
)

// ExpandableSegmentsSafe reports whether a server with these parallel
// sizes and sleep mode may run with PYTORCH_CUDA_ALLOC_CONF=
// expandable_segments:True, and if not, why. Not with more than one GPU per
// server: vLLM crashed with it at tensor-parallel size > 1 (custom
// all-reduce IPC; KAITO issue #1077, which removed it in PR #1120), and
// pipeline parallelism is left out too, as untested. Not with
// --enable-sleep-mode, whose memory pool allocator (CuMemAllocator)
// PyTorch refuses to combine with expandable segments (unverified across
// releases; leaving it out costs nothing).
func ExpandableSegmentsSafe(tensorParallel, pipelineParallel int, sleepMode bool) (bool, string) {
	var why []string
	if max(tensorParallel, 1) > 1 || max(pipelineParallel, 1) > 1 {
		why = append(why, "vLLM crashed with it on more than one GPU per server (KAITO issue #1077)")
	}
	if sleepMode {
		why = append(why, "vLLM's sleep mode (CuMemAllocator) refuses it")
	}
	return len(why) == 0, strings.Join(why, "; ")
}
