// Package report builds what headroom's front ends show from the user's
// evidence: the plan report (the `plan -o json` contract of docs/architecture.md), the
// every-GPU table of `plan --all-gpus`, the doctor's diagnosis, the
// simulation, the probe's launches and the profile of request logs. The
// CLI and the web API both call it, so the two cannot disagree: the same
// request gives the same bytes.
package report

import (
	"fmt"
	"math"
	"strconv"

	"headroom.dev/headroom/host"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Report is `headroom plan -o json`: the output contract of docs/architecture.md.
// Fields may be added, never renamed.
type Report struct {
	// Answer is the verdict in one line, what the table prints first:
	// fits or not, on what, and the first change that fits.
	Answer string `json:"answer"`
	// Layout says which parallel layout was chosen for the GPUs given
	// (ChooseLayout); absent when the user set it.
	Layout        string         `json:"layout_chosen,omitempty"`
	Model         ModelReport    `json:"model"`
	GPU           GPUReport      `json:"gpu"`
	Settings      SettingsReport `json:"settings"`
	PerGPU        PerGPUReport   `json:"per_gpu"`
	KVCacheTokens int64          `json:"kv_cache_tokens"`
	// KVCacheTokensBand is the range of KV tokens the plan stands behind
	// (memory.Budget.KVTokensBand); Evidence says, per planned part, how
	// sure it is (calibrated, extrapolated and why, or measured).
	KVCacheTokensBand memory.Band          `json:"kv_cache_tokens_band"`
	Evidence          []memory.Term        `json:"evidence"`
	NumGPUBlocks      int64                `json:"num_gpu_blocks"`
	MaxConcurrency    float64              `json:"max_concurrency"`
	MaxFitLen         int                  `json:"max_fit_model_len"`
	Fits              bool                 `json:"fits"`
	Problems          []memory.Finding     `json:"problems"`
	Warnings          []memory.Finding     `json:"warnings"`
	Recommended       RecommendedReport    `json:"recommended"`
	Alternatives      []memory.Alternative `json:"alternatives,omitempty"`
	VLLMArgs          []string             `json:"vllm_args"`
	Notes             []string             `json:"notes,omitempty"`
	// Frontier is the concurrency × context frontier (memory.Budget.Frontier).
	Frontier []memory.FrontierPoint `json:"frontier"`
	// Features is what LoRA slots, a speculative drafter and multimodal
	// limits add to the plan (memory.Budget.Features); empty without them.
	Features memory.Features `json:"features"`

	// Command is the recommended `vllm serve` line: the user's command
	// with VLLMArgs applied, ready to paste.
	Command string `json:"vllm_command"`

	// PinnedKV is the recommendation with a fixed KV pool
	// (--kv-cache-memory-bytes) instead of a utilization, where the
	// release has the flag; PinnedArgs its flags (plan -o args --pin-kv).
	PinnedKV   *memory.Pinned `json:"pinned_kv,omitempty"`
	PinnedArgs []string       `json:"pinned_vllm_args,omitempty"`

	// Host is the pod's host memory and /dev/shm for the settings as
	// given (host.Build): the memory limit and request to set, by term.
	Host host.Plan `json:"host"`
}

// ModelReport describes the model.
type ModelReport struct {
	Name                  string `json:"name"`
	Architecture          string `json:"architecture"`
	Params                int64  `json:"params"`
	WeightsBytes          int64  `json:"weights_bytes"`
	KVBytesPerToken       int64  `json:"kv_bytes_per_token"`
	MaxPositionEmbeddings int    `json:"max_position_embeddings"`
	Layers                int    `json:"layers"`
	Attention             string `json:"attention"`
	Quantization          string `json:"quantization,omitempty"`
	WeightsSource         string `json:"weights_source"`
}

// GPUReport describes the GPUs.
type GPUReport struct {
	Name       string `json:"name"`
	Count      int    `json:"count"`
	TotalBytes int64  `json:"total_bytes"`
	SKU        string `json:"sku,omitempty"`
}

// SettingsReport holds the vLLM settings the plan used (defaults filled in).
type SettingsReport struct {
	TensorParallelSize   int     `json:"tensor_parallel_size"`
	PipelineParallelSize int     `json:"pipeline_parallel_size"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxModelLen          int     `json:"max_model_len"`
	MaxNumSeqs           int     `json:"max_num_seqs"`
	MaxNumBatchedTokens  int     `json:"max_num_batched_tokens"`
	Dtype                string  `json:"dtype"`
	KVCacheDtype         string  `json:"kv_cache_dtype"`
	BlockSize            int     `json:"block_size"`
	VLLMVersion          string  `json:"vllm_version"`
	// VLLMVersionFrom says where vllm_version came from: "--vllm-version",
	// "image tag" (--vllm-image), or "assumed" (nothing named one: the
	// newest release headroom knows, whose defaults the plan then uses).
	VLLMVersionFrom string `json:"vllm_version_from"`
	Quantization    string `json:"quantization,omitempty"`
	EnforceEager    bool   `json:"enforce_eager"`
	// VLLMInstall is the install the plan assumed (image: vLLM's official
	// image, with FlashInfer; pip: without it); SamplerPath the top-k/top-p
	// path of the profile run's dummy sampler in that release and install
	// (sort, flashinfer, triton, or none on Model Runner V2);
	// ModelRunnerV2 whether Model Runner V2 runs the model.
	VLLMInstall   string `json:"vllm_install"`
	SamplerPath   string `json:"sampler_path"`
	ModelRunnerV2 bool   `json:"model_runner_v2"`
}

// PerGPUReport is one GPU's budget in GiB (2^30 bytes, as vLLM logs).
type PerGPUReport struct {
	TotalGiB          float64 `json:"total_gib"`
	RequestedGiB      float64 `json:"requested_gib"`
	WeightsGiB        float64 `json:"weights_gib"`
	ActivationGiB     float64 `json:"activation_gib"`
	NonTorchGiB       float64 `json:"non_torch_gib"`
	CUDAGraphGiB      float64 `json:"cudagraph_gib"`
	CUDAGraphInBudget bool    `json:"cudagraph_in_budget"`
	KVCacheGiB        float64 `json:"kv_cache_gib"`
	ContextGiB        float64 `json:"cuda_context_gib"`
	UnusedGiB         float64 `json:"unused_gib"`
}

// RecommendedReport is the recommended settings.
type RecommendedReport struct {
	GPUMemoryUtilization float64  `json:"gpu_memory_utilization"`
	MaxModelLen          int      `json:"max_model_len"`
	MaxNumSeqs           int      `json:"max_num_seqs"`
	Policy               string   `json:"policy"`
	TypicalContext       int      `json:"typical_context"`
	KVCacheTokens        int64    `json:"kv_cache_tokens"`
	Fits                 bool     `json:"fits"`
	Why                  []string `json:"why"`
	// Alternative is the code of the alternative the recommendation is
	// for, when the plan as given does not fit; Changes what it changes.
	Alternative string   `json:"alternative,omitempty"`
	Changes     []string `json:"changes,omitempty"`
	// FromTraffic is the evidence for a max-num-seqs chosen by simulating
	// the user's traffic (plan --profile); absent otherwise.
	FromTraffic *SeqsEvidence `json:"max_num_seqs_from_traffic,omitempty"`
}

// GiBs renders bytes as GiB (2^30, as vLLM logs) rounded to hundredths.
func GiBs(b int64) float64 { return math.Round(float64(b)/(1<<30)*100) / 100 }

// AttentionSummary counts the model's layers by attention kind ("32 full").
func AttentionSummary(s model.Spec) string {
	c := s.CountKind()
	out := ""
	for _, k := range []model.AttentionKind{model.Full, model.Sliding, model.MLA, model.Linear} {
		if c[k] == 0 {
			continue
		}
		if out != "" {
			out += " + "
		}
		out += strconv.Itoa(c[k]) + " " + string(k)
	}
	return out
}

// newReport renders a plan; rec is the recommendation, for the alternative
// chosen when there is one, and run the settings it applies to.
func newReport(e Evidence, b memory.Budget, rec memory.Recommendation, alts []memory.Alternative, chosen *memory.Alternative, run vllm.Settings, notes []string) Report {
	s, set, p := b.Model, b.Settings, b.PerGPU
	wsrc := "computed from the architecture"
	if s.CheckpointBytes > 0 {
		wsrc = s.CheckpointSource
	}
	q := ""
	if s.Quant != nil {
		q = s.Quant.Method
	}
	dtype := set.Dtype
	major, minor := e.Sel.Device.Capability()
	if d, err := vllm.ResolveDtypeOn(set.Dtype, s.Dtype, major*10+minor); err == nil {
		dtype = d // what vLLM loads: "auto" resolved against the checkpoint
	}
	unused := b.Unused()
	r := Report{
		Model: ModelReport{Name: s.ID, Architecture: s.Architecture, Params: s.Params(), WeightsBytes: b.WeightsTotal,
			KVBytesPerToken: b.ModelKVBytesPerToken, MaxPositionEmbeddings: s.MaxPositions, Layers: s.Layers,
			Attention: AttentionSummary(s), Quantization: q, WeightsSource: wsrc},
		GPU: GPUReport{Name: e.Sel.Device.Name, Count: b.Count, TotalBytes: e.Sel.Device.TotalBytes, SKU: e.Sel.SKU},
		Settings: SettingsReport{TensorParallelSize: set.TensorParallelSize, PipelineParallelSize: set.PipelineParallelSize,
			GPUMemoryUtilization: set.GPUMemoryUtilization, MaxModelLen: b.MaxModelLen, MaxNumSeqs: set.MaxNumSeqs,
			MaxNumBatchedTokens: set.MaxNumBatchedTokens, Dtype: dtype, KVCacheDtype: set.KVCacheDtype,
			BlockSize: set.BlockSize, VLLMVersion: set.Version.String(), VLLMVersionFrom: e.VersionFrom, Quantization: set.Quantization, EnforceEager: set.EnforceEager,
			VLLMInstall: string(b.Install), SamplerPath: string(b.SamplerPath), ModelRunnerV2: b.ModelRunnerV2},
		PerGPU: PerGPUReport{TotalGiB: GiBs(p.Total), RequestedGiB: GiBs(p.Requested), WeightsGiB: GiBs(p.Weights),
			ActivationGiB: GiBs(p.Activation), NonTorchGiB: GiBs(p.NonTorch), CUDAGraphGiB: GiBs(p.CUDAGraph),
			CUDAGraphInBudget: b.CUDAGraphInBudget, KVCacheGiB: GiBs(p.KVCache), ContextGiB: GiBs(p.Context), UnusedGiB: GiBs(unused)},
		KVCacheTokens:     b.KVTokens,
		KVCacheTokensBand: b.KVTokensBand,
		Evidence:          nonNilTerms(b.Evidence),
		NumGPUBlocks:      b.NumBlocks,
		MaxConcurrency:    math.Round(b.MaxConcurrency*100) / 100,
		MaxFitLen:         b.MaxFitLen,
		Fits:              b.Fits,
		Problems:          nonNil(b.Problems),
		Warnings:          nonNil(b.Warnings),
		Recommended: RecommendedReport{GPUMemoryUtilization: rec.GPUMemoryUtilization, MaxModelLen: rec.MaxModelLen,
			MaxNumSeqs: rec.MaxNumSeqs, Policy: rec.Policy, TypicalContext: rec.TypicalContext,
			KVCacheTokens: rec.Budget.KVTokens, Fits: rec.Budget.Fits, Why: rec.Why},
		Alternatives: alts,
		Notes:        notes,
	}
	if chosen != nil {
		r.Recommended.Alternative, r.Recommended.Changes = chosen.Code, chosen.Changes
	}
	r.Layout = e.LayoutWhy
	r.Answer = answer(r, alts)
	args := recommendedSettings(run, rec)
	r.VLLMArgs = nonNilStrings(args.Args())
	r.Command = args.CommandLine()
	r.Frontier = b.Frontier()
	r.Features = b.Features()
	// A plan always has a GPU worker, so the host plan cannot fail here.
	r.Host, _ = host.Build(b, host.Options{})
	return r
}

// answer is the report's verdict in one line.
func answer(r Report, alts []memory.Alternative) string {
	on := fmt.Sprintf("%s on %s", r.Model.Name, GPUCount(r.GPU.Count, r.GPU.Name))
	if r.Settings.TensorParallelSize > 1 || r.Settings.PipelineParallelSize > 1 {
		on += fmt.Sprintf(", tp %d pp %d", r.Settings.TensorParallelSize, r.Settings.PipelineParallelSize)
	}
	if r.Fits {
		return fmt.Sprintf("FITS: %s serves requests of %s tokens; KV cache %s tokens at --gpu-memory-utilization %.2f",
			on, vllm.Thousands(int64(r.Settings.MaxModelLen)), vllm.Thousands(r.KVCacheTokens), r.Settings.GPUMemoryUtilization)
	}
	if refusedFlagsOnly(r.Problems) {
		return fmt.Sprintf("DOES NOT START: %s: %s", on, r.Problems[0].Message)
	}
	if len(alts) > 0 {
		return fmt.Sprintf("DOES NOT FIT: %s; would fit: %s", on, alts[0].Message)
	}
	return fmt.Sprintf("DOES NOT FIT: %s; nothing tried fits", on)
}

// GPUCount writes a number of GPUs the one way every output does:
// "1 × L4".
func GPUCount(n int, name string) string { return fmt.Sprintf("%d × %s", n, name) }

// recommendedSettings is the user's own flags with the recommended values
// applied: what to run.
func recommendedSettings(user vllm.Settings, rec memory.Recommendation) vllm.Settings {
	s := user
	s.Version = vllm.Version{}
	if rec.MaxModelLen > 0 {
		s.GPUMemoryUtilization = rec.GPUMemoryUtilization
		s.MaxModelLen = rec.MaxModelLen
		s.MaxNumSeqs = rec.MaxNumSeqs
	}
	return s
}

func nonNil(f []memory.Finding) []memory.Finding {
	if f == nil {
		return []memory.Finding{}
	}
	return f
}

func nonNilTerms(t []memory.Term) []memory.Term {
	if t == nil {
		return []memory.Term{}
	}
	return t
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
