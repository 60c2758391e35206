// Package vllm holds what headroom knows about the vLLM engine itself: the
// settings (flags) that shape its memory, parsing and rendering of a `vllm
// serve` command line, and the rules that change between vLLM versions
// (defaults, what counts inside the utilization budget, log lines). It does no
// arithmetic on memory budgets.
package vllm

// Settings are the vLLM engine flags that shape GPU memory. A zero value means
// "not given": the version's default applies and Set does not hold the flag.
type Settings struct {
	// Model is the served model (the positional argument of `vllm serve`, or --model).
	Model string `json:"model,omitempty"`

	TensorParallelSize   int `json:"tensor_parallel_size"`
	PipelineParallelSize int `json:"pipeline_parallel_size"`
	DataParallelSize     int `json:"data_parallel_size,omitempty"`

	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	// MaxModelLen is the context length; 0 = the model's maximum; AutoMaxModelLen = "auto".
	MaxModelLen         int    `json:"max_model_len"`
	MaxNumSeqs          int    `json:"max_num_seqs"`
	MaxNumBatchedTokens int    `json:"max_num_batched_tokens"`
	Dtype               string `json:"dtype"`          // auto, bfloat16, float16, float32
	Quantization        string `json:"quantization"`   // "" = from the checkpoint
	KVCacheDtype        string `json:"kv_cache_dtype"` // auto, fp8, fp8_e4m3, fp8_e5m2 ...
	BlockSize           int    `json:"block_size"`
	EnforceEager        bool   `json:"enforce_eager,omitempty"`
	// KVCacheMemoryBytes is --kv-cache-memory-bytes: a fixed KV size per GPU that
	// replaces the utilization budget.
	KVCacheMemoryBytes int64 `json:"kv_cache_memory_bytes,omitempty"`
	// CPUOffloadGiB is --cpu-offload-gb: weights kept in host memory per GPU.
	CPUOffloadGiB           float64 `json:"cpu_offload_gb,omitempty"`
	MaxCudagraphCaptureSize int     `json:"max_cudagraph_capture_size,omitempty"`
	// NumGPUBlocksOverride and LongPrefillTokenThreshold are the scheduler's
	// (0 = not given); the simulator reads them.
	NumGPUBlocksOverride      int `json:"num_gpu_blocks_override,omitempty"`
	LongPrefillTokenThreshold int `json:"long_prefill_token_threshold,omitempty"`
	// StreamInterval is --stream-interval (0 = not given, 1: every token
	// sent as it is sampled); the simulator reads it.
	StreamInterval int `json:"stream_interval,omitempty"`

	// Speculative is --speculative-config; nil without speculative
	// decoding (speculative.go).
	Speculative *SpeculativeConfig `json:"speculative_config,omitempty"`
	// LoRA slots: --max-loras, --max-lora-rank, --lora-dtype and
	// --lora-extra-vocab-size (0 or "": not given), allocated when
	// --enable-lora is given (LoRASlots; features.go).
	MaxLoRAs           int    `json:"max_loras,omitempty"`
	MaxLoRARank        int    `json:"max_lora_rank,omitempty"`
	LoRADtype          string `json:"lora_dtype,omitempty"`
	LoRAExtraVocabSize int    `json:"lora_extra_vocab_size,omitempty"`
	// LimitMMPerPrompt is --limit-mm-per-prompt and MMProcessorKwargs
	// --mm-processor-kwargs; nil when not given.
	LimitMMPerPrompt  *MMLimits          `json:"limit_mm_per_prompt,omitempty"`
	MMProcessorKwargs *MMProcessorKwargs `json:"mm_processor_kwargs,omitempty"`
	// HFOverrides is --hf-overrides and RopeScaling --rope-scaling, keys
	// vLLM sets on the model's config before reading it (ModelOverrides);
	// nil when not given.
	HFOverrides *JSONObject `json:"hf_overrides,omitempty"`
	RopeScaling *JSONObject `json:"rope_scaling,omitempty"`
	// EPLBConfig is --eplb-config and NumRedundantExperts
	// --num-redundant-experts (RedundantExperts); nil or 0 when not given.
	EPLBConfig          *JSONObject `json:"eplb_config,omitempty"`
	NumRedundantExperts int         `json:"num_redundant_experts,omitempty"`
	// MambaCacheDtype and MambaSSMCacheDtype are the linear-attention
	// states' dtypes (StateDtypeBytes); "" when not given.
	MambaCacheDtype string `json:"mamba_cache_dtype,omitempty"`
	// MambaCacheMode and MambaBlockSize are --mamba-cache-mode and
	// --mamba-block-size ("" and 0: not given; MambaStateBlocks).
	MambaCacheMode string `json:"mamba_cache_mode,omitempty"`
	MambaBlockSize int    `json:"mamba_block_size,omitempty"`
	// DecodeContextParallelSize is --decode-context-parallel-size (0: not
	// given, 1).
	DecodeContextParallelSize int    `json:"decode_context_parallel_size,omitempty"`
	MambaSSMCacheDtype        string `json:"mamba_ssm_cache_dtype,omitempty"`
	// MaxNumActiveSeqs, MaxNumQueuedReqs and MaxNumQueuedTokens are the
	// scheduler's caps of 0.29+ (0 = not given; features.go).
	MaxNumActiveSeqs   int `json:"max_num_active_seqs,omitempty"`
	MaxNumQueuedReqs   int `json:"max_num_queued_reqs,omitempty"`
	MaxNumQueuedTokens int `json:"max_num_queued_tokens,omitempty"`

	// Host memory and /dev/shm (0, "" or nil: not given; host.go): the
	// CPU KV cache, the API servers, how safetensors are read, the
	// multimodal processor cache and the LoRA adapters in host memory.
	KVOffloadingGiB         float64           `json:"kv_offloading_size,omitempty"`
	KVOffloadingBackend     string            `json:"kv_offloading_backend,omitempty"`
	KVTransfer              *KVTransferConfig `json:"kv_transfer_config,omitempty"`
	APIServerCount          int               `json:"api_server_count,omitempty"`
	SafetensorsLoadStrategy string            `json:"safetensors_load_strategy,omitempty"`
	MMProcessorCacheGiB     float64           `json:"mm_processor_cache_gb,omitempty"`
	MMProcessorCacheType    string            `json:"mm_processor_cache_type,omitempty"`
	MaxCPULoRAs             int               `json:"max_cpu_loras,omitempty"`

	// Version is the vLLM version the rules are taken from.
	Version Version `json:"vllm_version"`
	// Install is how vLLM was installed (not a vLLM flag: headroom's
	// --vllm-install or --vllm-image); "" is the official image. It
	// decides whether FlashInfer's kernels are there (DummySampler).
	Install Install `json:"vllm_install,omitempty"`

	// ConfigFile is the --config file whose flags were read into these
	// settings (ParseFlagsWith); nil when none was, and then a --config is
	// in Extra.
	ConfigFile *ConfigFile `json:"config_file,omitempty"`

	// Extra holds flags headroom does not reason about, kept verbatim so a
	// rendered command line loses nothing.
	Extra []string `json:"extra,omitempty"`
	// Set records which flags (vLLM's long names without dashes, e.g.
	// "max-model-len") the user gave explicitly. Aliases and snake_case
	// spellings are recorded under the long name (-tp as
	// "tensor-parallel-size"), and flags kept in Extra are recorded too. A
	// flag given with its zero value (--cpu-offload-gb 0, --enforce-eager=false)
	// is in Set although Args does not render it.
	Set map[string]bool `json:"-"`

	// Env holds the environment assignments written before the command
	// (`VLLM_USE_V1=0 vllm serve ...`). Some of vLLM's memory rules are
	// switched by environment variables (see CUDAGraphsInBudget, UsesV1).
	Env map[string]string `json:"env,omitempty"`
}

// AutoMaxModelLen is MaxModelLen's value for `--max-model-len auto` (or -1).
const AutoMaxModelLen = -1
