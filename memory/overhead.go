package memory

import (
	"math"

	"headroom.dev/headroom/model"
)

const gib = 1 << 30
const mib = 1 << 20

// nonTorchBytes is the memory outside PyTorch's allocator that appears
// between the worker's baseline snapshot and the end of profiling (cuBLAS
// workspaces, attention-backend buffers, NCCL and custom all-reduce
// buffers), per GPU.
//
// Source: vLLM 0.19.0 on H100-80GB (calibration CSV): 0.24–0.26 GiB at
// TP=1; 2.06–2.11 GiB at TP=2 and 2.13–2.21 GiB at TP=4, a little more for
// wider models; 0.07 GiB per worker with pipeline parallelism alone.
// Modelled as 0.25 GiB, or 2.0 GiB + 0.065 GiB × log2(TP) + 0.006 GiB per
// 1024 of hidden size when TP > 1.
func nonTorchBytes(s model.Spec, tp, pp int) int64 {
	switch {
	case tp > 1:
		g := 2.0 + 0.065*math.Log2(float64(tp)) + 0.006*float64(s.Hidden)/1024
		return gibs(g)
	case pp > 1:
		return gibs(0.07)
	default:
		return gibs(0.25)
	}
}

// contextBytes is what a worker process already holds when vLLM takes its
// baseline snapshot (CUDA context, and NCCL communicators when TP > 1). It
// is outside the utilization budget but on the card. Source: v0.19.0
// start-ups on H100 log 78.68 GiB free of 79.19 at TP=1 (0.51 GiB used)
// and 77.64–77.66 at TP=2/4 (1.53–1.55 GiB).
func contextBytes(tp int) int64 {
	if tp > 1 {
		return gibs(1.54)
	}
	return gibs(0.51)
}

// calibratedCaptureSize is the max_cudagraph_capture_size of the v0.19.0
// calibration runs that cudaGraphBytes is fitted to.
const calibratedCaptureSize = 512

// cudaGraphBytes estimates the CUDA-graph pool captured after the KV cache
// is allocated (vllm-memory.md §2.4): a base plus a per-layer share that
// grows with the width each rank holds; MLA layers keep several times more
// (absorbed-attention decode buffers) and MoE layers more than dense ones.
// Zero with --enforce-eager. Calibrated at max_cudagraph_capture_size 512
// on v0.19.0/H100 ("CUDA graph pool memory: … (actual)"): Llama-3.1-8B
// 0.91 GiB, TP=2 0.76, TP=4 0.67; Llama-3.3-70B TP=2 1.79; DeepSeek-V2-Lite
// 1.57; the per-layer share scales with the capture size. captureSize is
// the settings' after vllm's WithDefaults, which fills vLLM's default.
func cudaGraphBytes(s model.Spec, st stage, tp, captureSize int, eager bool) int64 {
	if eager {
		return 0
	}
	scale := float64(max(captureSize, 0)) / calibratedCaptureSize
	var perLayer float64
	for i := st.first; i < st.last; i++ {
		var l float64
		if s.LayerKind(i).Kind == model.MLA {
			l = 31 * mib
		} else {
			l = 7*mib + 2.2*1024*float64(s.Hidden)/float64(tp)
		}
		if s.IsMoELayer(i) {
			l *= 1.4
		}
		perLayer += l
	}
	return int64(0.4*gib + perLayer*scale)
}

// gibs converts GiB to bytes.
func gibs(x float64) int64 { return int64(x * gib) }
