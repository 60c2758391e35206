package vllm

// Boundary is one release where a memory rule of this package changes,
// with the rule's function and its source: a list for views that compare
// two releases (what an upgrade changes). The versions are the rules' own
// variables, so the list cannot drift from them.
type Boundary struct {
	Since  Version `json:"since"`
	Rule   string  `json:"rule"`
	What   string  `json:"what"`
	Source string  `json:"source"`
}

// Boundaries lists every release boundary of the memory rules, oldest
// first.
func Boundaries() []Boundary {
	return []Boundary{
		{perInstanceBudgetSince, "PerInstanceBudget", "gpu_memory_utilization limits this instance, not the whole GPU", "PR #10511"},
		{v1OptInSince, "UsesV1", "the V1 engine can be chosen (VLLM_USE_V1=1)", "v0.7.0 release"},
		{v1DefaultSince, "V1ByDefault", "the V1 engine is the default; KV size logged in tokens", "v0.8.0 release, PR #13596"},
		{captureTwiceSeqsSince, "WithDefaults", "default CUDA-graph capture size min(2 × max_num_seqs, 512)", "CompilationConfig docstring (unverified boundary)"},
		{textOnlyModeSince, "TextOnlyModeSince", "all multimodal limits 0: no encoder in the profile run", "PR #22299"},
		{kvCacheMemoryFlagSince, "SupportsKVCacheMemory", "--kv-cache-memory-bytes fixes the KV pool", "PR #21489"},
		{v0RemovedIn, "V0Removed", "the V0 engine is gone", "v0.11.0 release"},
		{flashInferSamplerOptInSince, "DummySampler", "the profile's sampler sorts (FlashInfer opt-in): b + 36 B a logit", "PR #26859"},
		{moeLoRASince, "LoRAOnExperts", "LoRA slots on fused-MoE experts", "PR #21229"},
		{loraExtraVocabRemovedIn, "LoRAExtraVocab", "LoRA slots lose their extra vocabulary rows", "PR #28382, PR #28545"},
		{cudagraphEstimateSince, "CUDAGraphEstimate", "the CUDA-graph memory estimate exists (opt-in)", "PR #30515 (unverified release)"},
		{autoMaxModelLenSince, "SupportsAutoMaxModelLen", "--max-model-len auto", "PR #29431"},
		{asyncSchedulingSince, "AsyncScheduling", "async scheduling on by default", "v0.14.0 release notes"},
		{tritonSamplerSince, "DummySampler", "the profile's sampler runs the Triton top-k/top-p kernel: b + 12 B a logit and a cached buffer", "PR #33538"},
		{moeWorkspaceSince, "PersistentMoEWorkspace", "the fused-MoE workspace persists through the profile", "calibration start-ups"},
		{cudagraphInBudgetSince, "CUDAGraphsInBudget", "the CUDA-graph estimate is inside the budget", "PR #38284"},
		{utilizationDefault92Since, "DefaultGPUMemoryUtilization", "default gpu_memory_utilization 0.92", "PR #38284"},
		{flashInferSamplerAgainSince, "DummySampler", "the profile's sampler runs FlashInfer again: b + 12 B a logit", "PR #40376"},
		{runnerV2Qwen3Since, "ModelRunnerV2", "Model Runner V2 for unquantized Qwen3 dense models: no top-k/top-p in the profile", "PR #39337, release notes"},
		{runnerV2LlamaSince, "ModelRunnerV2", "Model Runner V2 for unquantized Llama and Mistral dense models and two MoE architectures", "PR #43458, PR #42667"},
		{runnerV2DenseSince, "ModelRunnerV2", "Model Runner V2 for every model that is neither MoE nor hybrid, quantized included; no CUDA-graph reserve until 0.29", "#44443, #49224, #50159"},
		{hybridGDNGraphTransientSince, "HybridGDNGraphTransient", "hybrid GDN models: a transient counted as graph memory", "issue #50780"},
		{runnerV2GraphsSince, "CUDAGraphEstimateIsZero", "Model Runner V2 estimates CUDA-graph memory", "PR #57865 (unverified)"},
		{newSchedulerFlagsSince, "NewSchedulerFlagsSince", "--device-memory-utilization, --max-num-queued-reqs/-tokens, --max-num-active-seqs and --load-format ipc_cache exist", "PR #56547, #49445, #56758, #54921 (0.29-0.31)"},
		{runnerV2AllSince, "ModelRunnerV2", "Model Runner V2 for every model, MoE and hybrid included", "PR #53183, v0.29.0 release notes"},
		{newestKnown, "Newest", "KV-cache planning moves to kv_cache_planning.py; no size changes", "PR #42309, PR #53558"},
	}
}
