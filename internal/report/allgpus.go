package report

import (
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// GPURow is one GPU of `plan --all-gpus`: the fewest of that GPU, with
// tensor parallel inside one node, that serve the context asked for.
type GPURow struct {
	GPU   string `json:"gpu"`
	Count int    `json:"count"`
	// TotalGiB is one GPU's memory as CUDA reports it; GPUsTotalGiB that of
	// all Count GPUs together.
	TotalGiB     float64 `json:"total_gib"`
	GPUsTotalGiB float64 `json:"gpus_total_gib"`
	// TensorParallelSize is the tensor-parallel size of the row's plan:
	// yours when you gave one, else the smallest from 1 to 8 that serves
	// the context (or, when none does, the one that serves the longest).
	TensorParallelSize int `json:"tensor_parallel_size"`
	// Verdict is "fits" (vLLM starts and serves ContextTokens), "shorter"
	// (it starts only with --max-model-len MaxFitLen or less), or
	// "does_not_start".
	Verdict       string `json:"verdict"`
	ContextTokens int    `json:"context_tokens"`
	Fits          bool   `json:"fits"`
	MaxFitLen     int    `json:"max_fit_model_len"`
	KVCacheTokens int64  `json:"kv_cache_tokens"`
	// Utilization is the --gpu-memory-utilization the row was planned at:
	// yours when given; else the default, or the recommended one where
	// the default does not start and that one does.
	Utilization    float64 `json:"gpu_memory_utilization"`
	Recommended    float64 `json:"recommended_gpu_memory_utilization"`
	FirstProblem   string  `json:"problem,omitempty"`
	ProblemText    string  `json:"problem_text,omitempty"`
	MaxConcurrency float64 `json:"max_concurrency"`
}

// The verdicts of a GPURow.
const (
	RowFits         = "fits"
	RowShorter      = "shorter"
	RowDoesNotStart = "does_not_start"
)

// AllGPUs plans the evidence's model and settings on every catalog GPU,
// each at the fewest shards that serve its context (memory.FewestShards).
// Where the utilization was not given and the default does not start,
// the row is planned at the recommended one if that starts, as `plan`
// offers it ("would fit: --gpu-memory-utilization 0.85"): a row says no
// only when no utilization helps.
func AllGPUs(e Evidence, opt memory.Options) ([]GPURow, error) {
	var rows []GPURow
	for _, d := range gpu.Devices() {
		in := memory.Input{Model: e.Spec, Device: d, Settings: e.Settings, Draft: e.Draft}
		b, err := memory.FewestShards(in)
		if err != nil {
			return nil, err
		}
		if u, _ := memory.Utilization(b, opt.Policy); !b.Fits && !e.Settings.Set[vllm.FlagGPUMemoryUtilization] && u > 0 && u != b.Settings.GPUMemoryUtilization {
			in.Settings.GPUMemoryUtilization = u
			if at, err := memory.FewestShards(in); err == nil && (at.Fits || at.MaxFitLen > b.MaxFitLen) {
				b = at
			}
		}
		rows = append(rows, gpuRow(d, b, opt))
	}
	return rows, nil
}

// gpuRow is one GPU's row of a plan.
func gpuRow(d gpu.Device, b memory.Budget, opt memory.Options) GPURow {
	u, _ := memory.Utilization(b, opt.Policy)
	row := GPURow{GPU: d.Name, Count: b.Count, TotalGiB: GiBs(d.TotalBytes), GPUsTotalGiB: GiBs(d.TotalBytes * int64(max(b.Count, 1))),
		TensorParallelSize: b.Settings.TensorParallelSize, ContextTokens: b.MaxModelLen, Fits: b.Fits, MaxFitLen: b.MaxFitLen,
		KVCacheTokens: b.KVTokens, Utilization: b.Settings.GPUMemoryUtilization, Recommended: u, MaxConcurrency: b.MaxConcurrency}
	switch {
	case b.Fits:
		row.Verdict = RowFits
	case b.MaxFitLen > 0 && b.MaxFitLen < b.MaxModelLen && onlyContext(b.Problems):
		row.Verdict = RowShorter
	default:
		row.Verdict = RowDoesNotStart
	}
	if len(b.Problems) > 0 {
		row.FirstProblem = b.Problems[0].Code
		row.ProblemText = ProblemWords(b.Problems[0].Code)
	}
	return row
}

// onlyContext reports problems that a shorter context answers.
func onlyContext(ps []memory.Finding) bool {
	for _, p := range ps {
		if p.Code != memory.CodeRequestDoesntFit && p.Code != memory.CodeMaxLenTooLong {
			return false
		}
	}
	return true
}

// problemWords are the plan's problem codes in words, for a column a user
// reads (the codes stay in JSON for tools).
var problemWords = map[string]string{
	memory.CodeNotEnoughGPUs:       "more GPUs than given",
	memory.CodeHeadsNotDivisible:   "tensor parallel does not divide the heads",
	memory.CodeFreeMemory:          "the utilization asks more than is free",
	memory.CodeWeightsDontFit:      "the weights do not fit",
	memory.CodeNoCacheMemory:       "no memory left for the KV cache",
	memory.CodeMaxLenTooLong:       "longer than the model's context",
	memory.CodeRequestDoesntFit:    "one full-length request does not fit",
	memory.CodeGraphsOverflow:      "CUDA graphs do not fit",
	memory.CodeAutoUnsupported:     "--max-model-len auto needs a newer vLLM",
	memory.CodePinnedPoolDoesntFit: "the pinned KV pool does not fit",
	memory.CodeComputeCapability:   "too old a GPU for vLLM or these settings",
	memory.CodeSchedulerRefused:    "scheduler limits vLLM refuses",
	memory.CodeFlagUnknown:         "a flag vLLM does not know",
}

// ProblemWords is a problem code in words: a short phrase for a table
// column; a code without one is spelled with spaces.
func ProblemWords(code string) string {
	if w, ok := problemWords[code]; ok {
		return w
	}
	return strings.ReplaceAll(code, "_", " ")
}
