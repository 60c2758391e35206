package memory

import (
	"math"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// The profile run (vllm-memory.md §2.3, §2.7). Its torch peak is the larger
// of the forward pass of max_num_batched_tokens tokens and, on the last
// pipeline stage, the dummy sampler over min(max_num_seqs,
// max_num_batched_tokens) rows of the full vocabulary, plus what the
// profile allocates and keeps (the fused-MoE workspace, the Triton
// sampler's cached buffer, a vision encoder's rotary table). With the
// server defaults on a large GPU the sampler sets the peak for almost every
// model with a vocabulary over ~50k, and which top-k/top-p implementation
// it runs (vllm.DummySampler) decides its size.
const (
	// Bytes per logit the dummy sampler holds at its peak beyond the
	// logits themselves (b bytes each, the model dtype), by path. Read from
	// vLLM's sampler code (memory notes §2.7), not fitted:
	//   - sort (torch.sort of each row, 0.11.1–0.16): a float32 copy (4),
	//     sorted values (4), int64 indices (8), an int64 reverse index (8)
	//     and the radix sort's alternate values and indices (12): 36, what
	//     the CUDA allocator held running that code on an H100 (36.02–36.06
	//     over six shapes; TestSortSamplerMeasured);
	//   - FlashInfer's fused top-k/top-p (≤ 0.11.0 when installed, 0.21+)
	//     and the Triton kernel (0.17–0.20): a float32 copy, float32
	//     probabilities and float32 exponential noise: 12;
	//   - Model Runner V2 (no top-k/top-p): a float32 copy for its Gumbel
	//     sample, 4. Later V2 builds skip even the copy; unmeasured, so the
	//     larger figure is planned and the difference is its uncertainty.
	sortBytesPerLogit       = 36
	flashInferBytesPerLogit = 12
	tritonBytesPerLogit     = 12
	runnerV2BytesPerLogit   = 4
	// float32Copy is the float32 copy of the logits each path makes, which
	// float32 logits do not need.
	float32Copy = 4
	// tritonBufferBytes: the Triton top-k/top-p kernel caches a float32
	// buffer of min(SMs, rows) × vocabulary that outlives the profile
	// (132 × V on an H100).
	tritonBufferBytes = 4
	// assumedSMs is the SM count taken for a device whose count the GPU
	// catalog lacks (an H100's; the buffer is tens of MiB either way).
	assumedSMs = 132
	// samplerFixedBytes is what the dummy sampler holds beside the
	// per-logit terms and the hidden states ("a few tens of MiB": its
	// sampling-metadata tensors, the sampled ids, allocator rounding). It
	// is the mean residual of the mechanism over the distinct sampler shapes
	// (vocabulary, hidden size, rows) of every sampler-bound start-up of the
	// calibration set: 34 rows of 14 models in 8 shapes, 28–39 MiB each
	// (the logs' two decimals are ±5 MiB); TestSamplerFixedFit refits it.
	// Qwen3-14B's 0.16.0 (sort) and 0.17.0 (Triton) logs, not in the fit,
	// leave the same residual.
	samplerFixedBytes = 33 * mib
	// hiddenBuffers is how many hidden-sized tensors per token are alive at
	// the forward pass's peak next to the MLP's gate/up and activation
	// outputs (3 × intermediate). Least-squares fit over every
	// forward-bound start-up of the calibration set (TestForwardFit: the
	// rows whose logged peak exceeds their sampler run: Llama-3.1-8B's
	// first pipeline stages at PP 2 and 4 and its float32 run, and
	// Granite-3.1-8B, whose vocabulary is small).
	hiddenBuffers = 6.42
	// encoderCacheCopies is how many copies of the dummy multimodal
	// embeddings (max_num_batched_tokens × text hidden) stay alive through
	// the language model's profile run. Pinned by Mistral-Small-3.1
	// (+0.11 GiB over its sampler path) and granite-vision (+0.04 GiB).
	encoderCacheCopies = 2
)

// profileRun is how the release at hand runs its profile: the model runner
// and the dummy sampler's top-k/top-p path, and the SMs of the device (for
// the Triton sampler's buffer).
type profileRun struct {
	runnerV2 bool
	sampler  vllm.SamplerPath
	sms      int
	smsKnown bool
	// logitShards divides the dummy sampler's logits: the TP size with
	// --enable-batch-sharded-sampling where vLLM takes it, else 1.
	logitShards int
}

// withSampling sets how the sampler's logits are split, once the runner
// is final (a speculative method may have put the model back on V1).
func (p profileRun) withSampling(set vllm.Settings) profileRun {
	p.logitShards = 1
	if set.BatchShardedSampling() && vllm.BatchShardedSamplingRefused(set, p.runnerV2) == "" {
		p.logitShards = set.TensorParallelSize
	}
	return p
}

// profileRunFor reads the release's rules for this model on this device
// and environment.
func profileRunFor(s model.Spec, set vllm.Settings, dev gpu.Device, env map[string]string) profileRun {
	p := profileRun{runnerV2: vllm.ModelRunnerV2(set.Version, runnerModel(s), env)}
	p.sampler = vllm.DummySampler(set.Version, p.runnerV2, set.Install)
	p.sms, p.smsKnown = gpu.Multiprocessors(dev)
	if !p.smsKnown {
		p.sms = assumedSMs
	}
	return p
}

// runnerModel is what vLLM's runner choice reads of the model.
func runnerModel(s model.Spec) vllm.RunnerModel {
	return vllm.RunnerModel{Architecture: s.Architecture, MoE: s.MoE != nil && s.MoE.Experts > 0,
		Quantized: s.Quant != nil && s.Quant.Bits > 0, Hybrid: s.CountKind()[model.Linear] > 0}
}

// activationBytes is the torch peak increase of vLLM's profile run on one
// worker: the larger of the forward pass of max_num_batched_tokens tokens
// and, on the last pipeline stage, the sampler run over
// min(max_num_seqs, max_num_batched_tokens) requests (which keeps the
// final hidden states and the encoder outputs alive), plus, on a stage
// with MoE layers, the fused-MoE workspace that persists from the forward
// pass through the sampler run (moe.persistent; vllm-workspace.md), and,
// on the stage that runs the vision encoder, the rotary table the encoder
// caches on its first image (Vision.RopeTableBytes; vLLM profiles the
// encoder before the language model, so the table is held at the peak).
func activationBytes(s model.Spec, st stage, tp, batchedTokens, maxNumSeqs, dtypeBytes int, run profileRun, moe moeScratch) int64 {
	forward, hasMoE := forwardPeakBytes(s, st, tp, batchedTokens, dtypeBytes, moe)
	peak := float64(forward)
	if st.isLast {
		peak = math.Max(peak, float64(samplerPeakBytes(s, batchedTokens, maxNumSeqs, dtypeBytes, run)))
	}
	if hasMoE {
		peak += float64(moe.persistent)
	}
	if st.isFirst && s.Vision != nil {
		peak += float64(s.Vision.RopeTableBytes)
	}
	return int64(peak)
}

// forwardPeakBytes is the dummy forward pass without attention (profiling
// skips it): per token the MLP's gate/up and activation outputs (3 ×
// intermediate / TP; for MoE layers the routed experts' per-call scratch and
// the shared experts) next to hiddenBuffers hidden-sized tensors. hasMoE
// says whether the stage has MoE layers (their workspace persists).
func forwardPeakBytes(s model.Spec, st stage, tp, batchedTokens, dtypeBytes int, moe moeScratch) (int64, bool) {
	t := float64(tp)
	h := float64(s.Hidden)
	var perToken float64
	hasMoE := false
	for i := st.first; i < st.last; i++ {
		n := hiddenBuffers * h
		if s.IsMoELayer(i) {
			hasMoE = true
			// The routed experts' per-call scratch, and the shared
			// experts, which run as a dense MLP; the routed experts'
			// output is hidden-sized and among the hidden buffers.
			n += moe.callPerToken
			n += 3 * float64(s.MoE.SharedInter) / t
		} else {
			n += 3 * float64(s.Intermediate) / t
		}
		perToken = math.Max(perToken, n)
	}
	return int64(float64(batchedTokens) * float64(dtypeBytes) * perToken), hasMoE
}

// samplerPeakBytes is the dummy sampler run on the last pipeline stage:
// R = min(max_num_seqs, max_num_batched_tokens) rows of V logits with the
// per-logit bytes of the release's top-k/top-p path, while the final
// hidden states [T, h] (and multimodal encoder outputs), the R selected
// rows and a random copy of them stay alive:
//
//	R·V·(b + c) + T·h·b + 2·R·h·b [+ min(SMs, R)·V·4 on Triton] + fixed
//
// Logits are all-gathered to every TP rank, so nothing here shrinks with
// TP. vLLM runs the same sampler again after CUDA graph capture
// (vllm-memory.md §2.4), outside the budget.
func samplerPeakBytes(s model.Spec, batchedTokens, maxNumSeqs, dtypeBytes int, run profileRun) int64 {
	tokens := float64(batchedTokens)
	d := float64(dtypeBytes)
	h := float64(s.Hidden)
	v := float64(s.Vocab)
	rows := math.Min(float64(maxNumSeqs), tokens)
	perLogit := d + samplerBytesPerLogit(run.sampler)
	if dtypeBytes >= 4 {
		perLogit -= float32Copy // float32 logits need no float32 copy
	}
	sampler := rows*v*perLogit/float64(max(run.logitShards, 1)) + samplerFixedBytes
	if run.sampler == vllm.SamplerTriton {
		sampler += math.Min(float64(run.sms), rows) * v * tritonBufferBytes
	}
	kept := tokens*h*d + 2*rows*h*d
	if s.Vision != nil {
		kept += encoderCacheCopies * tokens * h * d
	}
	return int64(sampler + kept)
}

// samplerBytesPerLogit is c of the path: the bytes per logit beyond the
// logits' own.
func samplerBytesPerLogit(p vllm.SamplerPath) float64 {
	switch p {
	case vllm.SamplerSort:
		return sortBytesPerLogit
	case vllm.SamplerFlashInfer:
		return flashInferBytesPerLogit
	case vllm.SamplerTriton:
		return tritonBytesPerLogit
	}
	return runnerV2BytesPerLogit
}
