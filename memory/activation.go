package memory

import (
	"math"

	"headroom.dev/headroom/model"
)

// The coefficients below model vLLM's profile run (vllm-memory.md §2.3). They
// were read off 57 vLLM 0.19.0 start-ups on H100-80GB
// (testdata/vllm-0.19.0-h100.csv) and are checked by the
// calibration benchmark in this package; each names the rows that pin it.
const (
	// hiddenBuffers is how many hidden-sized tensors per token are alive at
	// the forward pass's peak next to the MLP's gate/up and activation
	// outputs (3 × intermediate). Pinned by Llama-3.1-8B's forward-only
	// peaks: 1.10 GiB on the first PP stage (no sampler) and 2.21 GiB in
	// float32 (twice the bf16 forward): 1.10 GiB / 8192 tokens / 2 B =
	// 70,400 elements = 3 × 14336 + 7.1 × 4096.
	hiddenBuffers = 7.1
	// samplerBytes is the bytes per (request × vocabulary entry) the dummy
	// sampler run holds beyond the logits themselves: a float32 copy,
	// float32 probabilities and float32 exponential noise for random
	// sampling, plus sort scratch. Pinned by the sampler-bound rows:
	// Gemma-7B 3.63 GiB = 1024 × 256000 × 14.7 B + 8192 × 3072 × 2 B and
	// Llama-3.1-8B 1.89 GiB at bf16 (14.7 B = 2 B bf16 logits + 12.7 B).
	samplerBytes = 12.7
	// encoderCacheCopies is how many copies of the dummy multimodal
	// embeddings (max_num_batched_tokens × text hidden) stay alive through
	// the language model's profile run. Pinned by Mistral-Small-3.1
	// (+0.11 GiB over its sampler path) and granite-vision (+0.04 GiB).
	encoderCacheCopies = 2
	// leanProfileFactor: vLLM 0.17.0 cut the reported activation peak by
	// ~60% against 0.16.0 (Qwen3-14B: 5.64 → 2.23 GiB, vllm-memory.md §2.5);
	// older versions are modelled as this multiple of the lean profile.
	leanProfileFactor = 5.64 / 2.23
)

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
func activationBytes(s model.Spec, st stage, tp, batchedTokens, maxNumSeqs, dtypeBytes int, lean bool, moe moeScratch) int64 {
	tokens := float64(batchedTokens)
	d := float64(dtypeBytes)
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
	forward := tokens * d * perToken

	peak := forward
	if st.isLast {
		peak = math.Max(peak, float64(samplerPeakBytes(s, batchedTokens, maxNumSeqs, dtypeBytes)))
	}
	if hasMoE {
		peak += float64(moe.persistent)
	}
	if !lean {
		peak *= leanProfileFactor
	}
	if st.isFirst && s.Vision != nil {
		peak += float64(s.Vision.RopeTableBytes)
	}
	return int64(peak)
}

// samplerPeakBytes is the dummy sampler run on the last pipeline stage:
// logits for min(max_num_seqs, max_num_batched_tokens) requests with their
// float32 working copies, while the final hidden states (and multimodal
// encoder outputs) stay alive. vLLM runs the same sampler again after CUDA
// graph capture (vllm-memory.md §2.4), outside the budget.
func samplerPeakBytes(s model.Spec, batchedTokens, maxNumSeqs, dtypeBytes int) int64 {
	tokens := float64(batchedTokens)
	d := float64(dtypeBytes)
	h := float64(s.Hidden)
	seqs := math.Min(float64(maxNumSeqs), tokens)
	logitBytes := d
	if dtypeBytes >= 4 {
		// Float32 logits need no float32 copy.
		logitBytes = 0
	}
	sampler := seqs * float64(s.Vocab) * (logitBytes + samplerBytes)
	kept := tokens * h * d
	if s.Vision != nil {
		kept += encoderCacheCopies * tokens * h * d
	}
	return int64(sampler + kept)
}
