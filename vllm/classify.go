package vllm

import (
	"fmt"
	"sort"
	"strings"

	"headroom.dev/headroom/names"
)

// This file classifies every `vllm serve` flag of the releases the rules
// know by what it does to memory: planned on the GPU, planned on the host
// (package host), no memory effect, or "may move memory, not modelled",
// which the plan names in its warnings and notes so that no pasted flag is
// silently dropped. testdata/serve-flags/flags.tsv lists vLLM's flags by
// release; TestEveryFlagClassified walks it against this table.

// FlagEffect says what a flag does to the memory headroom plans.
type FlagEffect string

// The effects.
const (
	// EffectPlanned: the GPU plan models the flag.
	EffectPlanned FlagEffect = "planned"
	// EffectHost: the flag moves host memory or /dev/shm, which the host
	// plan models; the GPU plan is unchanged by it.
	EffectHost FlagEffect = "planned_host"
	// EffectNone: the flag moves no memory (ports, logging, parsers ...).
	EffectNone FlagEffect = "no_memory_effect"
	// EffectNotModelled: the flag may move memory and is not modelled;
	// the plan names it.
	EffectNotModelled FlagEffect = "not_modelled"
)

// flagClass is one flag's class, with why, and the releases that know it
// where the notes give them ([since, until); zero: no bound known).
type flagClass struct {
	effect       FlagEffect
	why          string
	since, until Version
}

var (
	// kvOffloadingFlagSince: --kv-offloading-size and its backend, #32421
	// (merged 2026-01-15, in 0.14).
	kvOffloadingFlagSince = Version{0, 14, 0, ""}
	// swapSpaceRemovedIn: #36216 removed --swap-space; absent in every
	// release from 0.18.0 (docs/features.md §4).
	swapSpaceRemovedIn = Version{0, 18, 0, ""}
)

// Shared reasons.
const (
	whyNone     = "serving, logging or parsing only"
	whyV0       = "a V0 engine flag; V1 does not read it"
	whyHost     = "host memory, in the host plan"
	whyPlanned  = "planned"
	whyParallel = "planned (parallel layout)"
)

// flagClasses classifies each flag by its canonical name. Sources: vLLM's
// argument definitions (vllm/engine/arg_utils.py, the config classes of
// vllm/config/, vllm/entrypoints/openai/cli_args.py) and, for what each
// does to memory, docs/vllm-memory.md and docs/features.md.
var flagClasses = map[string]flagClass{
	// The GPU plan's own flags (engineFlags, featureFlags).
	FlagModel:                     {effect: EffectPlanned, why: "the model"},
	FlagTensorParallelSize:        {effect: EffectPlanned, why: whyParallel},
	FlagPipelineParallelSize:      {effect: EffectPlanned, why: whyParallel},
	FlagDataParallelSize:          {effect: EffectPlanned, why: whyParallel},
	FlagGPUMemoryUtilization:      {effect: EffectPlanned, why: "the budget"},
	FlagDeviceMemoryUtilization:   {effect: EffectPlanned, why: "the budget (an alias of --gpu-memory-utilization, #56547)", since: newSchedulerFlagsSince},
	FlagMaxModelLen:               {effect: EffectPlanned, why: whyPlanned},
	FlagMaxNumSeqs:                {effect: EffectPlanned, why: whyPlanned},
	FlagMaxNumBatchedTokens:       {effect: EffectPlanned, why: whyPlanned},
	FlagDtype:                     {effect: EffectPlanned, why: whyPlanned},
	FlagQuantization:              {effect: EffectPlanned, why: whyPlanned},
	FlagKVCacheDtype:              {effect: EffectPlanned, why: whyPlanned},
	FlagBlockSize:                 {effect: EffectPlanned, why: whyPlanned},
	FlagEnforceEager:              {effect: EffectPlanned, why: "no CUDA graphs"},
	FlagCPUOffloadGB:              {effect: EffectPlanned, why: "weights kept in host memory (and pinned there: the host plan)"},
	FlagMaxCudagraphCaptureSize:   {effect: EffectPlanned, why: "CUDA-graph sizes"},
	FlagNumGPUBlocksOverride:      {effect: EffectPlanned, why: "the KV blocks"},
	FlagLongPrefillTokenThreshold: {effect: EffectNone, why: "scheduling only (simulate reads it)"},
	FlagKVCacheMemory:             {effect: EffectPlanned, why: "a fixed KV pool", since: kvCacheMemoryFlagSince},
	FlagSpeculativeConfig:         {effect: EffectPlanned, why: "the drafter's weights, KV layers and runner"},
	FlagEnableLoRA:                {effect: EffectPlanned, why: "LoRA slots"},
	FlagMaxLoRAs:                  {effect: EffectPlanned, why: "LoRA slots"},
	FlagMaxLoRARank:               {effect: EffectPlanned, why: "LoRA slots"},
	FlagLoRADtype:                 {effect: EffectPlanned, why: "LoRA slots"},
	FlagLoRAExtraVocabSize:        {effect: EffectPlanned, why: "LoRA vocabulary rows (#28382 removed them)", until: loraExtraVocabRemovedIn},
	FlagFullyShardedLoRAs:         {effect: EffectPlanned, why: "LoRA slots under TP"},
	FlagEnableLoRABias:            {effect: EffectPlanned, why: "LoRA bias slots"},
	FlagLimitMMPerPrompt:          {effect: EffectPlanned, why: "the encoder's profile pass"},
	FlagMMProcessorKwargs:         {effect: EffectPlanned, why: "the encoder's profile pass (max_pixels of Qwen2-VL and Qwen2.5-VL)"},
	FlagHFOverrides:               {effect: EffectPlanned, why: "the model's config.json, read with these keys"},
	FlagRopeScaling:               {effect: EffectPlanned, why: "the model's rope_scaling: rotary tables and the longest context"},
	FlagSkipMMProfiling:           {effect: EffectPlanned, why: "no encoder pass in the profile (#22950)"},
	FlagLanguageModelOnly:         {effect: EffectPlanned, why: "no encoder pass in the profile"},
	FlagMaxNumActiveSeqs:          {effect: EffectNone, why: "caps running requests (simulate reads it); the KV cache and graphs stay sized by --max-num-seqs (#56758)", since: newSchedulerFlagsSince},
	FlagMaxNumQueuedReqs:          {effect: EffectNone, why: "bounds the waiting queue (#49445)", since: newSchedulerFlagsSince},
	FlagMaxNumQueuedTokens:        {effect: EffectNone, why: "bounds the waiting queue (#49445)", since: newSchedulerFlagsSince},
	"load-format":                 {effect: EffectNone, why: "how weights are read (values: LoadFormatEffect)"},
	"enable-expert-parallel":      {effect: EffectPlanned, why: "experts placed whole on each rank"},
	"enable-prefix-caching":       {effect: EffectNone, why: "reuse of KV blocks, not their number"},
	FlagNoPrefixCaching:           {effect: EffectNone, why: "reuse of KV blocks, not their number"},
	"enable-chunked-prefill":      {effect: EffectPlanned, why: "the batched-token default"},
	FlagNoChunkedPrefill:          {effect: EffectPlanned, why: "the batched-token default"},
	FlagAsyncScheduling:           {effect: EffectNone, why: "overlaps CPU work (simulate reads it)"},
	FlagNoAsyncScheduling:         {effect: EffectNone, why: "overlaps CPU work (simulate reads it)"},
	FlagStreamInterval:            {effect: EffectNone, why: "tokens sent to a client at once (simulate reads it)"},

	// Host memory (package host).
	FlagKVOffloadingSize:              {effect: EffectHost, why: whyHost, since: kvOffloadingFlagSince},
	FlagKVOffloadingBackend:           {effect: EffectHost, why: whyHost, since: kvOffloadingFlagSince},
	FlagKVTransferConfig:              {effect: EffectHost, why: "a KV connector; the OffloadingConnector's CPU cache is in the host plan"},
	FlagAPIServerCount:                {effect: EffectHost, why: whyHost},
	FlagSafetensorsLoadStrategy:       {effect: EffectHost, why: whyHost},
	FlagMMProcessorCacheGB:            {effect: EffectHost, why: whyHost},
	FlagMMProcessorCacheType:          {effect: EffectHost, why: whyHost},
	FlagMaxCPULoRAs:                   {effect: EffectHost, why: whyHost},
	FlagSwapSpace:                     {effect: EffectHost, why: "V0's CPU swap; V1 allocates none (#27984), removed by #36216", until: swapSpaceRemovedIn},
	"mm-shm-cache-max-object-size-mb": {effect: EffectHost, why: whyHost},
	"model-loader-extra-config":       {effect: EffectHost, why: "a streamer's host buffer (its memory_limit)"},
	"max-parallel-loading-workers":    {effect: EffectHost, why: "weights read in parallel through host memory"},
	"disable-mm-preprocessor-cache":   {effect: EffectHost, why: "the processor cache's old switch (gone by 0.13)"},

	// May move memory, not modelled.
	"compilation-config":                      {effect: EffectNotModelled, why: "compile passes, and the memory of a CUDA-graph mode other than the release's or NONE (its largest capture size is planned; simulate prices the mode)"},
	"cuda-graph-sizes":                        {effect: EffectNotModelled, why: "CUDA-graph capture sizes below the largest (the largest is planned as the capture size)"},
	"cudagraph-capture-sizes":                 {effect: EffectNotModelled, why: "CUDA-graph capture sizes below the largest (the largest is planned as the capture size)"},
	"max-seq-len-to-capture":                  {effect: EffectNotModelled, why: "CUDA graphs of long sequences"},
	"optimization-level":                      {effect: EffectNotModelled, why: "compilation and CUDA-graph defaults"},
	FlagEnableEPLB:                            {effect: EffectPlanned, why: "redundant experts' weights"},
	FlagEPLBConfig:                            {effect: EffectPlanned, why: "redundant experts' weights (num_redundant_experts)"},
	FlagNumRedundantExperts:                   {effect: EffectPlanned, why: "redundant experts' weights"},
	"expert-placement-strategy":               {effect: EffectNotModelled, why: "experts per rank"},
	"all2all-backend":                         {effect: EffectNotModelled, why: "expert-parallel all-to-all buffers"},
	"enable-dbo":                              {effect: EffectNotModelled, why: "two micro-batches' activations"},
	"dbo-decode-token-threshold":              {effect: EffectNotModelled, why: "two micro-batches' activations"},
	"dbo-prefill-token-threshold":             {effect: EffectNotModelled, why: "two micro-batches' activations"},
	FlagDecodeContextParallelSize:             {effect: EffectPlanned, why: "each request's KV sharded by tokens over the ranks"},
	"prefill-context-parallel-size":           {effect: EffectNotModelled, why: "KV sharded across ranks"},
	"disable-custom-all-reduce":               {effect: EffectNotModelled, why: "all-reduce buffers"},
	"distributed-executor-backend":            {effect: EffectNotModelled, why: "processes and their CUDA contexts"},
	FlagMambaCacheDtype:                       {effect: EffectPlanned, why: "linear-attention state size"},
	FlagMambaSSMCacheDtype:                    {effect: EffectPlanned, why: "Mamba SSM state size"},
	FlagMambaBlockSize:                        {effect: EffectPlanned, why: "linear-attention state blocks per request (--mamba-cache-mode all)"},
	FlagMambaCacheMode:                        {effect: EffectPlanned, why: "linear-attention state blocks per request", since: mambaCacheModeSince},
	"calculate-kv-scales":                     {effect: EffectNotModelled, why: "KV scale computation in the profile"},
	FlagDisableSlidingWindow:                  {effect: EffectPlanned, why: "sliding-window layers keep the whole context, and the context is at most the window"},
	FlagDisableHybridKVCacheManager:           {effect: EffectPlanned, why: "sliding layers beside full ones hold the whole context"},
	"kv-sharing-fast-prefill":                 {effect: EffectNotModelled, why: "KV shared across layers"},
	"hf-config-path":                          {effect: EffectNotModelled, why: "the architecture read from another config"},
	"rope-theta":                              {effect: EffectNotModelled, why: "rotary tables"},
	"revision":                                {effect: EffectNotModelled, why: "another checkpoint than the one planned"},
	"code-revision":                           {effect: EffectNotModelled, why: "another model code than the one planned"},
	"model-impl":                              {effect: EffectNotModelled, why: "another implementation (Transformers backend)"},
	"enable-sleep-mode":                       {effect: EffectNotModelled, why: "the CuMem allocator"},
	"logits-processors":                       {effect: EffectNotModelled, why: "custom logits processors (and the V1 runner)"},
	"mm-encoder-tp-mode":                      {effect: EffectNotModelled, why: "the encoder replicated instead of sharded"},
	"enable-multimodal-encoder-data-parallel": {effect: EffectNotModelled, why: "the encoder replicated instead of sharded"},
	"mm-encoder-attn-backend":                 {effect: EffectNotModelled, why: "the encoder's attention kernels"},
	"media-io-kwargs":                         {effect: EffectNotModelled, why: "video frames an item"},
	"video-pruning-rate":                      {effect: EffectNotModelled, why: "video tokens an item"},
	"interleave-mm-strings":                   {effect: EffectNone, why: whyNone},
	"override-attention-dtype":                {effect: EffectNotModelled, why: "attention dtype"},
	"attention-backend":                       {effect: EffectNotModelled, why: "attention kernels and their workspaces"},
	"runner":                                  {effect: EffectNotModelled, why: "pooling runners sample nothing"},
	"convert":                                 {effect: EffectNotModelled, why: "pooling conversion"},
	"task":                                    {effect: EffectNotModelled, why: "pooling tasks sample nothing"},
	"pooler-config":                           {effect: EffectNotModelled, why: "pooling"},
	"override-pooler-config":                  {effect: EffectNotModelled, why: "pooling"},
	"worker-cls":                              {effect: EffectNotModelled, why: "another worker"},
	"worker-extension-cls":                    {effect: EffectNotModelled, why: "worker extensions"},
	"scheduler-cls":                           {effect: EffectNotModelled, why: "another scheduler"},
	"additional-config":                       {effect: EffectNotModelled, why: "platform plugins"},
	"ec-transfer-config":                      {effect: EffectNotModelled, why: "encoder-cache transfer"},
	"kv-events-config":                        {effect: EffectNone, why: "KV cache events"},
	"enable-prompt-embeds":                    {effect: EffectNotModelled, why: "prompt embeddings in the batch"},
	"max-logprobs":                            {effect: EffectNotModelled, why: "logprobs of the sampler"},
	"logprobs-mode":                           {effect: EffectNone, why: whyNone},
	FlagEnableBatchShardedSampling:            {effect: EffectPlanned, why: "the profile's logits split by TP on Model Runner V2 (#50465)", since: batchShardedSamplingSince},
	"device":                                  {effect: EffectNotModelled, why: "another device than a CUDA GPU"},
	"speculative-model":                       {effect: EffectNotModelled, why: "V0's draft model (--speculative-config since)"},
	"num-speculative-tokens":                  {effect: EffectNotModelled, why: "V0's speculative decoding"},
	"speculative-draft-tensor-parallel-size":  {effect: EffectNotModelled, why: "V0's speculative decoding"},
	"speculative-max-model-len":               {effect: EffectNotModelled, why: "V0's speculative decoding"},
	"ngram-prompt-lookup-max":                 {effect: EffectNotModelled, why: "V0's speculative decoding"},
	"ngram-prompt-lookup-min":                 {effect: EffectNotModelled, why: "V0's speculative decoding"},
	"enable-prompt-adapter":                   {effect: EffectNotModelled, why: "V0's prompt adapters"},
	"max-prompt-adapters":                     {effect: EffectNotModelled, why: "V0's prompt adapters"},
	"max-prompt-adapter-token":                {effect: EffectNotModelled, why: "V0's prompt adapters"},
	"prompt-adapters":                         {effect: EffectNotModelled, why: "V0's prompt adapters"},
	"long-lora-scaling-factors":               {effect: EffectNotModelled, why: "long-context LoRA rotary tables"},
	"qlora-adapter-name-or-path":              {effect: EffectNotModelled, why: "a QLoRA adapter merged at load"},
	"default-mm-loras":                        {effect: EffectNone, why: "which adapter a modality uses"},
	"lora-modules":                            {effect: EffectNone, why: "adapters to load (their slots are --max-loras')"},
	"specialize-active-lora":                  {effect: EffectNotModelled, why: "CUDA graphs per active-LoRA count (#32005)"},
	"num-lookahead-slots":                     {effect: EffectNotModelled, why: whyV0},
	"num-scheduler-steps":                     {effect: EffectNotModelled, why: whyV0},
	"preemption-mode":                         {effect: EffectNotModelled, why: "V0's swap preemption"},
	"cpu-offload-params":                      {effect: EffectNotModelled, why: "which weights --cpu-offload-gb moves"},
	"offload-group-size":                      {effect: EffectNotModelled, why: "the weight offloader's staging"},
	"offload-num-in-group":                    {effect: EffectNotModelled, why: "the weight offloader's staging"},
	"offload-prefetch-step":                   {effect: EffectNotModelled, why: "the weight offloader's staging"},
	"max-num-partial-prefills":                {effect: EffectNone, why: "scheduling only"},
	"max-long-partial-prefills":               {effect: EffectNone, why: "scheduling only"},
	"disable-chunked-mm-input":                {effect: EffectNone, why: "scheduling only"},
	"scheduling-policy":                       {effect: EffectNone, why: "scheduling only"},
	"scheduler-delay-factor":                  {effect: EffectNone, why: "scheduling only"},
	"multi-step-stream-outputs":               {effect: EffectNone, why: whyV0},
	"use-v2-block-manager":                    {effect: EffectNone, why: whyV0},
	"disable-async-output-proc":               {effect: EffectNone, why: whyV0},
	"disable-cascade-attn":                    {effect: EffectNone, why: "a kernel choice"},
	"prefix-caching-hash-algo":                {effect: EffectNone, why: "block hashes"},
	"enable-log-outputs":                      {effect: EffectNone, why: whyNone},

	// No memory effect: serving, logging, parsing, tokenizers, auth.
	"host": {effect: EffectNone, why: whyNone}, "port": {effect: EffectNone, why: whyNone},
	"uds": {effect: EffectNone, why: whyNone}, "uvicorn-log-level": {effect: EffectNone, why: whyNone},
	"disable-uvicorn-access-log": {effect: EffectNone, why: whyNone}, "allow-credentials": {effect: EffectNone, why: whyNone},
	"allowed-origins": {effect: EffectNone, why: whyNone}, "allowed-methods": {effect: EffectNone, why: whyNone},
	"allowed-headers": {effect: EffectNone, why: whyNone}, "api-key": {effect: EffectNone, why: whyNone},
	"chat-template": {effect: EffectNone, why: whyNone}, "chat-template-content-format": {effect: EffectNone, why: whyNone},
	"trust-request-chat-template": {effect: EffectNone, why: whyNone}, "response-role": {effect: EffectNone, why: whyNone},
	"ssl-keyfile": {effect: EffectNone, why: whyNone}, "ssl-certfile": {effect: EffectNone, why: whyNone},
	"ssl-ca-certs": {effect: EffectNone, why: whyNone}, "enable-ssl-refresh": {effect: EffectNone, why: whyNone},
	"ssl-cert-reqs": {effect: EffectNone, why: whyNone}, "root-path": {effect: EffectNone, why: whyNone},
	"middleware": {effect: EffectNone, why: whyNone}, "return-tokens-as-token-ids": {effect: EffectNone, why: whyNone},
	"disable-frontend-multiprocessing": {effect: EffectNone, why: whyNone}, "enable-request-id-headers": {effect: EffectNone, why: whyNone},
	"enable-auto-tool-choice": {effect: EffectNone, why: whyNone}, "exclude-tools-when-tool-choice-none": {effect: EffectNone, why: whyNone},
	"tool-call-parser": {effect: EffectNone, why: whyNone}, "tool-parser-plugin": {effect: EffectNone, why: whyNone},
	"tool-server": {effect: EffectNone, why: whyNone}, "log-config-file": {effect: EffectNone, why: whyNone},
	"max-log-len": {effect: EffectNone, why: whyNone}, "disable-fastapi-docs": {effect: EffectNone, why: whyNone},
	"enable-prompt-tokens-details": {effect: EffectNone, why: whyNone}, "enable-server-load-tracking": {effect: EffectNone, why: whyNone},
	"enable-force-include-usage": {effect: EffectNone, why: whyNone}, "enable-tokenizer-info-endpoint": {effect: EffectNone, why: whyNone},
	"h11-max-incomplete-event-size": {effect: EffectNone, why: whyNone}, "h11-max-header-count": {effect: EffectNone, why: whyNone},
	"log-error-stack": {effect: EffectNone, why: whyNone}, "served-model-name": {effect: EffectNone, why: whyNone},
	"disable-log-requests": {effect: EffectNone, why: whyNone}, "enable-log-requests": {effect: EffectNone, why: whyNone},
	"disable-log-stats": {effect: EffectNone, why: whyNone}, "config": {effect: EffectNotModelled, why: "flags of a YAML file, read where headroom reaches it (the command line's working directory; a pod's ConfigMap volume in check, the webhook and audit), never by the page"},
	"headless": {effect: EffectNone, why: whyNone}, "data-parallel-start-rank": {effect: EffectNone, why: whyNone},
	"data-parallel-address": {effect: EffectNone, why: whyNone}, "data-parallel-rpc-port": {effect: EffectNone, why: whyNone},
	"data-parallel-backend": {effect: EffectNone, why: whyNone}, "data-parallel-hybrid-lb": {effect: EffectNone, why: whyNone},
	"data-parallel-external-lb": {effect: EffectNone, why: whyNone}, "data-parallel-size-local": {effect: EffectNone, why: "ranks of this node (the layout is --data-parallel-size)"},
	"data-parallel-rank": {effect: EffectNone, why: whyNone}, "node-rank": {effect: EffectNone, why: whyNone},
	"nnodes": {effect: EffectNone, why: whyNone}, "master-addr": {effect: EffectNone, why: whyNone}, "master-port": {effect: EffectNone, why: whyNone},
	"tokenizer": {effect: EffectNone, why: whyNone}, "tokenizer-mode": {effect: EffectNone, why: whyNone},
	"tokenizer-revision": {effect: EffectNone, why: whyNone}, "trust-remote-code": {effect: EffectNone, why: whyNone},
	"seed": {effect: EffectNone, why: whyNone}, "allowed-local-media-path": {effect: EffectNone, why: whyNone},
	"allowed-media-domains": {effect: EffectNone, why: whyNone}, "skip-tokenizer-init": {effect: EffectNone, why: whyNone},
	"config-format": {effect: EffectNone, why: whyNone}, "hf-token": {effect: EffectNone, why: whyNone},
	"logits-processor-pattern": {effect: EffectNone, why: whyNone}, "generation-config": {effect: EffectNone, why: whyNone},
	"override-generation-config": {effect: EffectNone, why: whyNone}, "io-processor-plugin": {effect: EffectNone, why: whyNone},
	"download-dir": {effect: EffectNone, why: whyNone}, "ignore-patterns": {effect: EffectNone, why: whyNone},
	"use-tqdm-on-load": {effect: EffectNone, why: whyNone}, "pt-load-map-location": {effect: EffectNone, why: whyNone},
	"reasoning-parser": {effect: EffectNone, why: whyNone}, "reasoning-parser-plugin": {effect: EffectNone, why: whyNone},
	"guided-decoding-backend": {effect: EffectNone, why: whyNone}, "structured-outputs-config": {effect: EffectNone, why: whyNone},
	"enable-reasoning": {effect: EffectNone, why: whyNone}, "ray-workers-use-nsight": {effect: EffectNone, why: whyNone},
	"worker-use-ray": {effect: EffectNone, why: whyV0}, "tokenizer-pool-size": {effect: EffectNone, why: whyV0},
	"tokenizer-pool-type": {effect: EffectNone, why: whyV0}, "tokenizer-pool-extra-config": {effect: EffectNone, why: whyV0},
	"show-hidden-metrics-for-version": {effect: EffectNone, why: whyNone}, "otlp-traces-endpoint": {effect: EffectNone, why: whyNone},
	"collect-detailed-traces": {effect: EffectNone, why: whyNone}, "kv-cache-metrics": {effect: EffectNone, why: whyNone},
	"disable-nccl-for-dp-synchronization": {effect: EffectNone, why: whyNone}, "help": {effect: EffectNone, why: whyNone},
}

// LoadFormatEffect classifies a --load-format value: ipc_cache (weights
// another process holds, 0.29+, #54921) is planned at the start-up check;
// the streamers read through host memory (the host plan); dummy,
// safetensors, pt, auto and the rest load the same weights.
func LoadFormatEffect(value string) (FlagEffect, string) {
	switch strings.ToLower(value) {
	case "ipc_cache":
		return EffectPlanned, "weights another process holds: they count as this engine's at the start-up check (#54921)"
	case "runai_streamer", "runai_streamer_sharded", "fastsafetensors", "tensorizer", "sharded_state":
		return EffectHost, "weights streamed through host memory"
	case "bitsandbytes", "gguf":
		return EffectNotModelled, "weights quantized while loading"
	}
	return EffectNone, "the same weights, read another way"
}

// ClassifyFlag says what a flag (canonical name, no dashes) does to
// memory; known is false for a flag the table does not hold, which the
// plan then names as not modelled.
func ClassifyFlag(name string) (effect FlagEffect, why string, known bool) {
	if c, ok := flagClasses[name]; ok {
		return c.effect, c.why, true
	}
	if rest, ok := strings.CutPrefix(name, "no-"); ok && isBoolFlag(name) {
		return ClassifyFlag(rest) // --no-enable-prefix-caching is the switch's
	}
	if base, _, dotted := strings.Cut(name, "."); dotted {
		// --compilation-config.mode, --speculative-config.method: the
		// object's key is classified with the object.
		return ClassifyFlag(base)
	}
	return EffectNotModelled, "not a flag headroom knows", false
}

// FlagNote is one flag a plan names, with why.
type FlagNote struct {
	Flag string `json:"flag"`
	Why  string `json:"why"`
}

// String reads "--flag: why".
func (n FlagNote) String() string { return "--" + n.Flag + ": " + n.Why }

// NotModelled lists the flags given that may move memory and are not
// modelled, sorted by flag: those classified so, flags no table knows,
// and values of planned flags the plan cannot follow (a speculative
// config's custom class or probabilistic draft sampling, multimodal
// profiling sizes, processor kwargs other than max_pixels, a --load-format
// quantizing on load).
func (s Settings) NotModelled() []FlagNote {
	var out []FlagNote
	for name := range s.Set {
		effect, why, _ := ClassifyFlag(name)
		if nearFlag(name) != "" {
			continue // Misspelled: a problem, not a warning
		}
		if name == "load-format" {
			effect, why = LoadFormatEffect(s.LoadFormat())
		}
		if effect == EffectNotModelled {
			out = append(out, FlagNote{Flag: name, Why: why})
		}
	}
	if c := s.Speculative; c != nil {
		if c.Method == SpecCustomClass {
			out = append(out, FlagNote{Flag: FlagSpeculativeConfig, Why: "a custom proposer class (" + c.Model + "): its weights and KV are not known"})
		}
		if c.DraftSampleMethod == "probabilistic" {
			out = append(out, FlagNote{Flag: FlagSpeculativeConfig, Why: "draft_sample_method probabilistic keeps the draft's logits on the GPU"})
		}
	}
	if m := s.LimitMMPerPrompt; m != nil {
		for mod, l := range m.Limits {
			if l.Width > 0 || l.Height > 0 || l.NumFrames > 0 || l.Length > 0 {
				out = append(out, FlagNote{Flag: FlagLimitMMPerPrompt, Why: "the profiling size of " + mod + " items (the model's largest is planned)"})
			}
		}
	}
	if k := s.MMProcessorKwargs; k != nil {
		var other []string
		for _, key := range k.Keys {
			if key != "max_pixels" && key != "min_pixels" {
				other = append(other, key)
			}
		}
		if len(other) > 0 {
			out = append(out, FlagNote{Flag: FlagMMProcessorKwargs, Why: strings.Join(other, ", ") + " may change an item's size"})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Flag != out[j].Flag {
			return out[i].Flag < out[j].Flag
		}
		return out[i].Why < out[j].Why
	})
	return out
}

// Misspelled lists the flags given that no release of vLLM has, each
// with the known flag it is one or two edits from ("did you mean"):
// vLLM's parser stops at them ("unrecognized arguments"), so the server
// does not start. An unknown flag close to none stays a warning
// (NotModelled): the tables may miss a plugin's or a newer release's.
func (s Settings) Misspelled() []FlagNote {
	var out []FlagNote
	for name := range s.Set {
		if near := nearFlag(name); near != "" {
			out = append(out, FlagNote{Flag: name, Why: "did you mean --" + near + "?"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flag < out[j].Flag })
	return out
}

// nearFlag is the known flag an unknown name is one or two edits from
// (one for names under 8 characters), "" when the name is known or near
// none, or near two equally.
func nearFlag(name string) string {
	if _, _, known := ClassifyFlag(name); known || len(name) > 64 {
		return ""
	}
	most := 2
	if len(name) < 8 {
		most = 1
	}
	best, bestD, tie := "", most+1, false
	for k := range flagClasses {
		d := names.Levenshtein(name, k)
		switch {
		case d < bestD:
			best, bestD, tie = k, d, false
		case d == bestD && k != best:
			tie = true
		}
	}
	if bestD > most || tie {
		return ""
	}
	return best
}

// OutsideRelease lists the flags given that the release does not know:
// added after it or removed before it, where the notes name the release.
// vLLM's parser refuses them, so the server does not start.
func (s Settings) OutsideRelease() []FlagNote {
	v := orNewest(s.Version)
	var out []FlagNote
	for name := range s.Set {
		c, ok := flagClasses[name]
		if !ok {
			continue
		}
		switch {
		case !c.since.IsZero() && !v.AtLeast(c.since):
			out = append(out, FlagNote{Flag: name, Why: fmt.Sprintf("added in %s, after vLLM %s", c.since, v)})
		case !c.until.IsZero() && v.AtLeast(c.until):
			out = append(out, FlagNote{Flag: name, Why: fmt.Sprintf("removed in %s", c.until)})
		}
	}
	if s.LoadFormat() == "ipc_cache" && !v.AtLeast(newSchedulerFlagsSince) {
		out = append(out, FlagNote{Flag: "load-format", Why: fmt.Sprintf("ipc_cache added in %s, after vLLM %s", newSchedulerFlagsSince, v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flag < out[j].Flag })
	return out
}
