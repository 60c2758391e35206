package workload

import (
	"math"
	"path/filepath"
	"strings"
)

// ShareGPT without its file. vllm bench serve's ShareGPT runs name
// ShareGPT_V3_unfiltered_cleaned_split.json, 642 MB that few keep at hand;
// when that file is not found (or --dataset-path is not given), the
// requests are drawn from a model of what bench sends from it and what the
// models then generate, fitted on published runs, and the output says so.

// ShareGPTShape is the shape of the stand-in's lengths: log-normal of
// spread Sigma, none longer than Longest tokens.
type ShareGPTShape struct{ Sigma, Longest float64 }

// The stand-in's constants. Prompts: log-normal of σ 1.0 (ShareGPT's skew,
// many short turns and a long tail), 215,312 tokens over the 1,000 prompts
// bench samples with its default seed (gpustack's four gpt-oss ShareGPT
// runs, vLLM 0.10.2–0.11.0: the same sample each; 232.6 a prompt over
// Qwen3-8B's 100). Outputs: what the models generated, not the replies'
// lengths, since bench asks for a reply's length as max_tokens without
// --ignore-eos and a model stops at its own end (193,979 over the same
// 1,000; 220.6 over Qwen3-8B's 100), in ShareGPTOutputs' shape, which the
// simulator's serving fit searches with its clock (sim/README.md).
var ShareGPTOutputs = ShareGPTShape{Sigma: 1.750, Longest: 534}

const (
	shareGPTPromptSigma = 1.0
	shareGPTPromptMean  = 215.312
	shareGPTOutputMean  = 193.979
	// shareGPTBenchFile is the file bench's docs name.
	shareGPTBenchFile = "sharegpt_v3_unfiltered_cleaned_split.json"
)

// standsInForShareGPT reports whether a ShareGPT dataset at path may be
// drawn from the stand-in when the file cannot be opened: no path, or
// bench's own file name (with .gz too). Any other missing file is an error:
// it is more likely a typo than a wish for the stand-in.
func standsInForShareGPT(path string) bool {
	if path == "" {
		return true
	}
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(path)), ".gz")
	return base == shareGPTBenchFile
}

// ShareGPTStandIn is n requests' prompt and output lengths: deterministic
// quantiles of the normal at (i + ½)/n, log-normal of σ 1.0 for the prompts
// and of shape sh for the outputs, paired by fixed permutations (a burst
// admits in that order, so sorted prompts would let the short ones in
// first), kept inside bench's filters (a prompt or reply of at least 4
// tokens, a prompt of at most 1,024, a pair of at most 2,048) and scaled so
// they sum to promptTotal and outputTotal.
func ShareGPTStandIn(n int, promptTotal, outputTotal float64, sh ShareGPTShape) (prompts, outputs []int) {
	p := scatter(logNormalQuantiles(n, shareGPTPromptSigma), 6151, 7)
	o := scatter(logNormalQuantiles(n, sh.Sigma), 7919, 13)
	fitTotal(p, nil, promptTotal, shareGPTMaxPrompt, shareGPTMaxPrompt)
	fitTotal(o, p, outputTotal, shareGPTMaxTotal, sh.Longest)
	prompts, outputs = make([]int, n), make([]int, n)
	for i := range n {
		prompts[i], outputs[i] = int(p[i]), int(o[i])
	}
	return prompts, outputs
}

// shareGPTConversations bounds the stand-in's distinct requests: the
// conversations of bench's file (94,145), more than its filter lets
// through. Past them the stand-in repeats itself, as bench repeats the
// file's entries to reach a larger --num-prompts, and its memory stays
// that of the file's sample (a few MiB) whatever the count.
const shareGPTConversations = 94_145

// shareGPTStandInPairs is the stand-in for num requests at the published
// means, as dataset pairs, at most shareGPTConversations of them (the
// stream repeats them); outputLen > 0 fixes every output
// (--sharegpt-output-len).
func shareGPTStandInPairs(num, outputLen int) []pair {
	num = min(num, shareGPTConversations)
	prompts, outputs := ShareGPTStandIn(num, shareGPTPromptMean*float64(num), shareGPTOutputMean*float64(num), ShareGPTOutputs)
	out := make([]pair, num)
	for i := range out {
		out[i] = pair{prompt: int32(prompts[i]), output: int32(outputs[i])}
		if outputLen > 0 {
			out[i].output = int32(outputLen)
		}
	}
	return out
}

// scatter is xs in the order i·stride + offset (mod n): a fixed
// permutation when stride is prime to n.
func scatter(xs []float64, stride, offset int) []float64 {
	n := len(xs)
	out := make([]float64, n)
	for i := range n {
		out[i] = xs[(i*stride+offset)%n]
	}
	return out
}

// logNormalQuantiles are n quantiles of a log-normal of median 1 and
// spread sigma.
func logNormalQuantiles(n int, sigma float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		p := (float64(i) + 0.5) / float64(n)
		out[i] = math.Exp(sigma * math.Sqrt2 * math.Erfinv(2*p-1))
	}
	return out
}

// fitTotal scales xs so they sum to total, each rounded and kept in [4,
// hi] (hi less the paired prompt when pair is given) and at most longest,
// repeating the scaling a few times since the bounds take from the sum.
func fitTotal(xs, pair []float64, total, hi, longest float64) {
	shape := append([]float64(nil), xs...)
	scale := total / float64(len(xs))
	for range 30 {
		var sum float64
		for i, v := range shape {
			top := hi
			if pair != nil {
				top = hi - pair[i]
			}
			top = min(top, longest)
			xs[i] = math.Round(min(max(v*scale, shareGPTMinLen), top))
			sum += xs[i]
		}
		if math.Abs(sum-total) < 0.5 {
			return
		}
		scale *= total / sum
	}
}
