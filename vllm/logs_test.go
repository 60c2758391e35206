package vllm

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// g converts a GiB figure as vLLM prints it to bytes: round(x × 2^30).
func g(x float64) int64 { return int64(math.Round(x * (1 << 30))) }

// mib converts MiB to bytes.
func mib(x float64) int64 { return int64(math.Round(x * (1 << 20))) }

func TestParseLogLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want LogEvent
	}{
		{"version api server", "(APIServer pid=1) INFO 11-22 10:00:01 [api_server.py:1805] vLLM API server version 0.19.0",
			LogEvent{Kind: LogVersion, Version: Version{0, 19, 0, ""}, Device: -1, Message: "vLLM API server version 0.19.0"}},
		{"version V0 engine", "INFO 11-22 12:00:03 llm_engine.py:249] Initializing an LLM engine (v0.4.0.post1) with config: model='m'",
			LogEvent{Kind: LogVersion, Version: Version{0, 4, 0, ".post1"}, Args: "model='m'", Device: -1, Message: "Initializing an LLM engine (v0.4.0.post1) with config: model='m'"}},
		{"weights V1", "INFO 11-22 10:00:23 [gpu_model_runner.py:2392] Model loading took 14.99 GiB memory and 4.830211 seconds",
			LogEvent{Kind: LogWeights, Memory: MemoryFigures{Weights: g(14.99)}, Seconds: 4.830211, Device: -1, Message: "Model loading took 14.99 GiB memory and 4.830211 seconds"}},
		{"weights V1 0.8", "INFO 03-01 10:00:23 [gpu_model_runner.py:1100] Model loading took 14.9889 GiB and 5.120000 seconds",
			LogEvent{Kind: LogWeights, Memory: MemoryFigures{Weights: g(14.9889)}, Seconds: 5.12, Device: -1, Message: "Model loading took 14.9889 GiB and 5.120000 seconds"}},
		{"weights V0 GB", "INFO 11-22 12:00:09 model_runner.py:1077] Loading model weights took 12.5523 GB",
			LogEvent{Kind: LogWeights, Memory: MemoryFigures{Weights: g(12.5523)}, Device: -1, Message: "Loading model weights took 12.5523 GB"}},
		{"available KV", "(EngineCore_DP0 pid=212) INFO 11-22 10:01:02 [gpu_worker.py:298] Available KV cache memory: 58.11 GiB",
			LogEvent{Kind: LogAvailableKV, Memory: MemoryFigures{AvailableKV: g(58.11)}, Device: -1, Message: "Available KV cache memory: 58.11 GiB"}},
		{"KV tokens with separators", "INFO 11-22 10:01:02 [kv_cache_utils.py:1087] GPU KV cache size: 476,016 tokens",
			LogEvent{Kind: LogKVTokens, Tokens: 476016, Device: -1, Message: "GPU KV cache size: 476,016 tokens"}},
		{"KV tokens plain", "GPU KV cache size: 19776 tokens",
			LogEvent{Kind: LogKVTokens, Tokens: 19776, Device: -1, Message: "GPU KV cache size: 19776 tokens"}},
		{"concurrency", "INFO [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 58.11x",
			LogEvent{Kind: LogConcurrency, MaxModelLen: 8192, Concurrency: 58.11, Device: -1, Message: "Maximum concurrency for 8,192 tokens per request: 58.11x"}},
		{"V0 blocks", "INFO 11-22 12:00:12 gpu_executor.py:113] # GPU blocks: 7109, # CPU blocks: 512",
			LogEvent{Kind: LogGPUBlocks, Blocks: 7109, CPUBlocks: 512, Device: -1, Message: "# GPU blocks: 7109, # CPU blocks: 512"}},
		{"V0 cuda blocks", "INFO gpu_executor.py:122] # cuda blocks: 2,048, # CPU blocks: 128",
			LogEvent{Kind: LogGPUBlocks, Blocks: 2048, CPUBlocks: 128, Device: -1, Message: "# cuda blocks: 2,048, # CPU blocks: 128"}},
		{"cache config blocks", "(APIServer pid=1) INFO [loggers.py:142] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 29751",
			LogEvent{Kind: LogGPUBlocks, Blocks: 29751, Device: -1, Message: "num_gpu_blocks is: 29751"}},
		{"graph estimate", "INFO [gpu_worker.py:312] Estimated CUDA graph memory: 0.84 GiB total",
			LogEvent{Kind: LogCUDAGraphEstimate, Memory: MemoryFigures{CUDAGraphEstimate: g(0.84)}, Device: -1, Message: "Estimated CUDA graph memory: 0.84 GiB total"}},
		{"graph pool", "INFO CUDA graph pool memory: 0.91 GiB (actual), 0.84 GiB (estimated), difference: 0.07 GiB (8.3%).",
			LogEvent{Kind: LogCUDAGraphPool, Memory: MemoryFigures{CUDAGraph: g(0.91), CUDAGraphEstimate: g(0.84)}, Device: -1, Message: "CUDA graph pool memory: 0.91 GiB (actual), 0.84 GiB (estimated), difference: 0.07 GiB (8.3%)."}},
		{"graph capture", "INFO [gpu_model_runner.py:3118] Graph capturing finished in 7 secs, took 0.91 GiB",
			LogEvent{Kind: LogGraphCapture, Seconds: 7, Memory: MemoryFigures{CUDAGraph: g(0.91)}, Device: -1, Message: "Graph capturing finished in 7 secs, took 0.91 GiB"}},
		{"graph capture old, no memory", "INFO model_runner.py:1001] Graph capturing finished in 5 secs.",
			LogEvent{Kind: LogGraphCapture, Seconds: 5, Device: -1, Message: "Graph capturing finished in 5 secs."}},
		{"V1 profile", "DEBUG [gpu_worker.py:276] Memory profiling takes 17.94 seconds. Total non KV cache memory: 17.12GiB; torch peak memory increase: 1.89GiB; non-torch forward increase memory: 0.25GiB; weights memory: 14.99GiB.",
			LogEvent{Kind: LogProfile, Seconds: 17.94, Memory: MemoryFigures{NonKV: g(17.12), Activation: g(1.89), NonTorch: g(0.25), Weights: g(14.99)}, Device: -1,
				Message: "Memory profiling takes 17.94 seconds. Total non KV cache memory: 17.12GiB; torch peak memory increase: 1.89GiB; non-torch forward increase memory: 0.25GiB; weights memory: 14.99GiB."}},
		{"budget 0.7 era", "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
			LogEvent{Kind: LogBudget, Memory: MemoryFigures{Total: g(79.19), Requested: g(71.27)}, Utilization: 0.9, Device: -1, Message: "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB"}},
		{"breakdown 0.7 era", "model weights take 14.99GiB; non_torch_memory takes 0.25GiB; PyTorch activation peak memory takes 1.89GiB; the rest of the memory reserved for KV Cache is 54.14GiB.",
			LogEvent{Kind: LogBreakdown, Memory: MemoryFigures{Weights: g(14.99), NonTorch: g(0.25), Activation: g(1.89), AvailableKV: g(54.14)}, Device: -1,
				Message: "model weights take 14.99GiB; non_torch_memory takes 0.25GiB; PyTorch activation peak memory takes 1.89GiB; the rest of the memory reserved for KV Cache is 54.14GiB."}},
		{"V0 profile results", "INFO worker.py:232] Memory profiling results: total_gpu_memory=79.19GiB initial_memory_usage=13.06GiB peak_torch_memory=14.94GiB memory_usage_post_profile=13.37GiB non_torch_memory=0.79GiB kv_cache_size=55.54GiB gpu_memory_utilization=0.90",
			LogEvent{Kind: LogV0Profile, Memory: MemoryFigures{Total: g(79.19), PeakTorch: g(14.94), NonTorch: g(0.79), AvailableKV: g(55.54)}, Utilization: 0.9, Device: -1,
				Message: "Memory profiling results: total_gpu_memory=79.19GiB initial_memory_usage=13.06GiB peak_torch_memory=14.94GiB memory_usage_post_profile=13.37GiB non_torch_memory=0.79GiB kv_cache_size=55.54GiB gpu_memory_utilization=0.90"}},
		{"summary", "INFO [gpu_worker.py:420] Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95, 75.23 GiB). Actual usage is 14.99 GiB for weight, 1.89 GiB for peak activation, 0.25 GiB for non-torch memory, and 0.84 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=62245123686` to fit into requested memory.",
			LogEvent{Kind: LogMemorySummary, Memory: MemoryFigures{Free: g(78.68), Total: g(79.19), Requested: g(75.23), Weights: g(14.99), Activation: g(1.89), NonTorch: g(0.25), CUDAGraph: g(0.84)}, Utilization: 0.95, Device: -1,
				Message: "Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is (0.95, 75.23 GiB). Actual usage is 14.99 GiB for weight, 1.89 GiB for peak activation, 0.25 GiB for non-torch memory, and 0.84 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=62245123686` to fit into requested memory."}},
		// KAITO PR #2156: qwen3-8b on an A10 gets 20,272 of 40,960.
		{"auto-fit reduced", "INFO [kv_cache_utils.py:800] Auto-fit max_model_len: reduced from 40960 to 20272 to fit in available GPU memory (2.47 GiB available for KV cache)",
			LogEvent{Kind: LogAutoFit, MaxModelLen: 40960, EstimatedMaxLen: 20272, HasEstimate: true, Memory: MemoryFigures{AvailableKV: g(2.47)}, Device: -1,
				Message: "Auto-fit max_model_len: reduced from 40960 to 20272 to fit in available GPU memory (2.47 GiB available for KV cache)"}},
		{"auto-fit full", "INFO Auto-fit max_model_len: using the full model context length 131072, which fits in available GPU memory (58.11 GiB available for KV cache)",
			LogEvent{Kind: LogAutoFit, MaxModelLen: 131072, EstimatedMaxLen: 131072, HasEstimate: true, Memory: MemoryFigures{AvailableKV: g(58.11)}, Device: -1,
				Message: "Auto-fit max_model_len: using the full model context length 131072, which fits in available GPU memory (58.11 GiB available for KV cache)"}},
		{"ready", "(APIServer pid=1) INFO:     Application startup complete.",
			LogEvent{Kind: LogReady, Device: -1, Message: "Application startup complete."}},
		{"ready uvicorn", "INFO:     Uvicorn running on socket ('0.0.0.0', 8000) (Press CTRL+C to quit)",
			LogEvent{Kind: LogReady, Device: -1, Message: "Uvicorn running on socket ('0.0.0.0', 8000) (Press CTRL+C to quit)"}},
		// vllm #19407: Llama-4-Scout TP8, 240 GiB needed vs 88.38 GiB available, estimate 3,861,424.
		{"max len error with estimate", "(EngineCore_DP0 pid=7) ERROR 06-10 10:11:12 [core.py:515] ValueError: To serve at least one request with the models's max seq len (10485760), (240.00 GiB KV cache is needed, which is larger than the available KV cache memory (88.38 GiB). Based on the available memory, the estimated maximum model length is 3861424. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			LogEvent{Kind: LogErrMaxLen, MaxModelLen: 10485760, EstimatedMaxLen: 3861424, HasEstimate: true, Memory: MemoryFigures{KVNeeded: g(240), AvailableKV: g(88.38)}, Device: -1,
				Message: "ValueError: To serve at least one request with the models's max seq len (10485760), (240.00 GiB KV cache is needed, which is larger than the available KV cache memory (88.38 GiB). Based on the available memory, the estimated maximum model length is 3861424. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."}},
		{"max len error without estimate", "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.47 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			LogEvent{Kind: LogErrMaxLen, MaxModelLen: 131072, Memory: MemoryFigures{KVNeeded: g(16), AvailableKV: g(2.47)}, Device: -1,
				Message: "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (2.47 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."}},
		{"V0 max len error", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20272). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			LogEvent{Kind: LogErrV0MaxLen, MaxModelLen: 32768, Tokens: 20272, Device: -1,
				Message: "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (20272). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."}},
		{"no cache memory", "ERROR 01-02 03:04:05 [core.py:1] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
			LogEvent{Kind: LogErrNoCacheMemory, Device: -1, Message: "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."}},
		// Verbatim from memory/testdata/vllm-0.19.0-h100.csv (Kimi-Dev-72B, TP 4).
		{"free memory error", "ValueError: Free memory on device cuda:1 (60.85/79.19 GiB) on startup is less than desired GPU memory utilization (0.95, 75.23 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			LogEvent{Kind: LogErrFreeMemory, Memory: MemoryFigures{Free: g(60.85), Total: g(79.19), Requested: g(75.23)}, Utilization: 0.95, Device: 1,
				Message: "ValueError: Free memory on device cuda:1 (60.85/79.19 GiB) on startup is less than desired GPU memory utilization (0.95, 75.23 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."}},
		{"free memory error, no device", "ValueError: Free memory on device (10.00/23.55 GiB) on startup is less than desired GPU memory utilization (0.9, 21.20 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			LogEvent{Kind: LogErrFreeMemory, Memory: MemoryFigures{Free: g(10), Total: g(23.55), Requested: g(21.2)}, Utilization: 0.9, Device: -1,
				Message: "ValueError: Free memory on device (10.00/23.55 GiB) on startup is less than desired GPU memory utilization (0.9, 21.20 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."}},
		{"above model max", "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig Value error, User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=131072 or model_max_length=None in model's config.json).",
			LogEvent{Kind: LogErrMaxLenAboveModel, MaxModelLen: 200000, EstimatedMaxLen: 131072, HasEstimate: true, Device: -1,
				Message: "User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=131072 or model_max_length=None in model's config.json)."}},
		{"argparse", "vllm serve: error: argument --max-model-len: invalid int value: 'auto'",
			LogEvent{Kind: LogErrArgument, Device: -1, Message: "error: argument --max-model-len: invalid int value: 'auto'"}},
		{"engine init", "(EngineCore_DP0 pid=301) ERROR [core.py:708] RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
			LogEvent{Kind: LogErrEngineInit, Device: -1, Message: "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"}},
		// The settings and run-time lines below are from the doctor corpus
		// (doctor/testdata/corpus), written after vLLM 0.19.0 and 0.6.3.
		{"non-default args", "(APIServer pid=1) INFO 11-22 10:00:01 [utils.py:326] non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.98}",
			LogEvent{Kind: LogArgs, Args: "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.98}", Device: -1,
				Message: "non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': 0.98}"}},
		{"V0 namespace args", "INFO 06-20 11:58:02 api_server.py:529] args: Namespace(host=None, port=8000, model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=32768, max_num_seqs=256, gpu_memory_utilization=0.9)",
			LogEvent{Kind: LogNamespaceArgs, Args: "host=None, port=8000, model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=32768, max_num_seqs=256, gpu_memory_utilization=0.9", Device: -1,
				Message: "args: Namespace(host=None, port=8000, model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=32768, max_num_seqs=256, gpu_memory_utilization=0.9)"}},
		{"engine config with version", "(EngineCore_DP0 pid=301) INFO 11-22 11:00:14 [core.py:90] Initializing a V1 LLM engine (v0.19.0) with config: model='moonshotai/Kimi-Dev-72B', tensor_parallel_size=4",
			LogEvent{Kind: LogVersion, Version: Version{0, 19, 0, ""}, Args: "model='moonshotai/Kimi-Dev-72B', tensor_parallel_size=4", Device: -1,
				Message: "Initializing a V1 LLM engine (v0.19.0) with config: model='moonshotai/Kimi-Dev-72B', tensor_parallel_size=4"}},
		{"engine config without version", "INFO llm_engine.py:72] Initializing an LLM engine with config: model='facebook/opt-125m', dtype=torch.float16, max_seq_len=2048",
			LogEvent{Kind: LogEngineConfig, Args: "model='facebook/opt-125m', dtype=torch.float16, max_seq_len=2048", Device: -1,
				Message: "LLM engine with config: model='facebook/opt-125m', dtype=torch.float16, max_seq_len=2048"}},
		{"V0 preemption", "WARNING 06-20 12:05:14 scheduler.py:1439] Sequence group chatcmpl-8a1f0c2e is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance.",
			LogEvent{Kind: LogPreemption, Device: -1, Message: "Sequence group chatcmpl-8a1f0c2e is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance."}},
		// 31.4% = 0.314; V1 names the queue "Waiting".
		{"V1 stats", "(APIServer pid=1) INFO 11-22 10:10:42 [loggers.py:123] Engine 000: Avg prompt throughput: 8210.1 tokens/s, Avg generation throughput: 1130.9 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 31.4%, Prefix cache hit rate: 41.0%",
			LogEvent{Kind: LogStats, KVUsage: 0.314, Running: 24, Device: -1,
				Message: "Avg prompt throughput: 8210.1 tokens/s, Avg generation throughput: 1130.9 tokens/s, Running: 24 reqs, Waiting: 0 reqs, GPU KV cache usage: 31.4%, Prefix cache hit rate: 41.0%"}},
		// V0 names the queue "Pending"; 99.6% = 0.996.
		{"V0 stats", "INFO 06-20 12:05:20 metrics.py:349] Avg prompt throughput: 30412.9 tokens/s, Avg generation throughput: 1802.0 tokens/s, Running: 58 reqs, Swapped: 0 reqs, Pending: 37 reqs, GPU KV cache usage: 99.6%, CPU KV cache usage: 0.0%.",
			LogEvent{Kind: LogStats, KVUsage: 0.996, Running: 58, Waiting: 37, Device: -1,
				Message: "Avg prompt throughput: 30412.9 tokens/s, Avg generation throughput: 1802.0 tokens/s, Running: 58 reqs, Swapped: 0 reqs, Pending: 37 reqs, GPU KV cache usage: 99.6%, CPU KV cache usage: 0.0%."}},
		{"capture progress bar", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  61%|██████    | 41/67 [00:02<00:01, 19.87it/s]",
			LogEvent{Kind: LogCaptureStart, Device: -1, Message: "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  61%|██████    | 41/67 [00:02<00:01, 19.87it/s]"}},
		{"V0 capture", "INFO 11-22 12:00:15 model_runner.py:1402] Capturing cudagraphs for decoding.",
			LogEvent{Kind: LogCaptureStart, Device: -1, Message: "Capturing cudagraphs for decoding."}},
		{"engine dead", "(APIServer pid=1) ERROR 11-23 16:40:19 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
			LogEvent{Kind: LogEngineDead, Device: -1, Message: "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."}},
		{"engine fatal error", "(EngineCore_DP0 pid=140) ERROR 11-23 16:40:19 [core.py:787] EngineCore encountered a fatal error.",
			LogEvent{Kind: LogEngineDead, Device: -1, Message: "EngineCore encountered a fatal error."}},
		{"init time", "(EngineCore_DP0 pid=212) INFO 11-22 10:00:49 [core.py:218] init engine (profile, create kv cache, warmup model) took 26.14 seconds",
			LogEvent{Kind: LogInitTime, Seconds: 26.14, Device: -1, Message: "init engine (profile, create kv cache, warmup model) took 26.14 seconds"}},
		{"ANSI colour", "\x1b[1;36m(EngineCore_DP0 pid=212)\x1b[0;0m \x1b[32mINFO\x1b[0m 11-22 10:01:02 [gpu_worker.py:298] Available KV cache memory: 3.02 GiB\r",
			LogEvent{Kind: LogAvailableKV, Memory: MemoryFigures{AvailableKV: g(3.02)}, Device: -1, Message: "Available KV cache memory: 3.02 GiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLogLine(tt.line)
			if !ok {
				t.Fatalf("not recognised: %q", tt.line)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseLogLineOOM(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		device int
		want   OOM
	}{
		// PyTorch ≥ 2.1 text (c10/cuda/CUDACachingAllocator.cpp).
		{"pytorch 2 with pid", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.23 GiB is free. Process 4711 has 77.95 GiB memory in use. Of the allocated memory 75.60 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
			0, OOM{Tried: g(2), Total: g(79.19), Free: g(1.23), ProcessInUse: g(77.95), Processes: []ProcessMemory{{4711, g(77.95)}}, Allocated: g(75.6), ReservedUnallocated: g(1.12)}},
		{"pytorch 2 this process, graphs, two other processes", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 3 has a total capacity of 23.55 GiB of which 512.00 KiB is free. Process 11 has 2.00 GiB memory in use. Including non-PyTorch memory, this process has 21.40 GiB memory in use. Of the allocated memory 19.10 GiB is allocated by PyTorch, with 1.04 GiB allocated in private pools (e.g., CUDA Graphs), and 900.00 MiB is reserved by PyTorch but unallocated.",
			3, OOM{Tried: mib(786), Total: g(23.55), Free: 512 << 10, ProcessInUse: g(21.4), Processes: []ProcessMemory{{11, g(2)}}, Allocated: g(19.1), PrivatePools: g(1.04), ReservedUnallocated: mib(900)}},
		// Verbatim from doctor/testdata/corpus/seed001-oom.txt (the "current allocated" variant).
		{"seed", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 2.00 GiB is free. Including non-blocking allocations, current allocated: 77.15 GiB.",
			0, OOM{Tried: g(2), Total: g(79.15), Free: g(2), Allocated: g(77.15)}},
		{"pytorch 1", "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.19 MiB free; 14.65 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
			0, OOM{Tried: mib(20), Total: g(15.78), Allocated: g(14.56), Free: mib(3.19), Reserved: g(14.65)}},
		{"cuda error", "RuntimeError: CUDA error: out of memory", -1, OOM{}},
		// vLLM's own text when the sampler warm-up runs out (gpu_model_runner.py).
		{"sampler warm-up", "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.", -1, OOM{}},
		{"bytes unit", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512 bytes. GPU 1 has a total capacity of 79.19 GiB of which 0 bytes is free.",
			1, OOM{Tried: 512, Total: g(79.19)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLogLine(tt.line)
			if !ok || got.Kind != LogErrOOM {
				t.Fatalf("got %+v, %v; want an OOM event", got, ok)
			}
			if got.Device != tt.device {
				t.Errorf("device %d, want %d", got.Device, tt.device)
			}
			if !reflect.DeepEqual(*got.OOM, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *got.OOM, tt.want)
			}
			if !strings.Contains(got.Message, "out of memory") || strings.HasPrefix(got.Message, " ") {
				t.Errorf("message %q", got.Message)
			}
		})
	}
}

func TestParseLogLineIgnores(t *testing.T) {
	for _, line := range []string{
		"",
		"INFO 11-22 10:00:09 [arg_utils.py:1812] Defaulting max_num_batched_tokens to 8192 for OPENAI_API_SERVER usage context.",
		"(APIServer pid=1) INFO:     Waiting for application startup.",
		"Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:04<00:00,  1.02s/it]",
		"GPU KV cache size: lots of tokens",
		"Available KV cache memory: -3 GiB",
		"Maximum concurrency for 8192 tokens per request: x",
		"ERROR 11-22 some other error: with a colon",
		"Model loading took 99999999999999999999 GiB memory and 1 seconds",
	} {
		if ev, ok := ParseLogLine(line); ok {
			t.Errorf("ParseLogLine(%q) = %+v; want nothing", line, ev)
		}
	}
}

func readLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/logs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLogScannerV019(t *testing.T) {
	var sc LogScanner
	var kinds []LogKind
	sc.OnEvent = func(ev LogEvent) { kinds = append(kinds, ev.Kind) }
	if _, err := sc.ReadFrom(strings.NewReader(readLog(t, "v0.19.0-llama-3.1-8b-h100.log"))); err != nil {
		t.Fatal(err)
	}
	r := sc.Report()
	// The calibration row's figures (see testdata/logs/README.md).
	want := StartupReport{
		Version:                Version{0, 19, 0, ""},
		WeightsBytes:           g(14.99),
		ActivationBytes:        g(1.89),
		NonTorchBytes:          g(0.25),
		NonKVBytes:             g(17.12),
		CUDAGraphBytes:         g(0.91),
		CUDAGraphEstimateBytes: g(0.84),
		AvailableKVBytes:       g(58.11),
		KVTokens:               476016,
		NumGPUBlocks:           29751,
		MaxConcurrency:         58.11,
		ConcurrencyLen:         8192,
		Loading:                true,
		Profiled:               true,
		Ready:                  true,
		// 24 lines, one of which holds three progress-bar updates split by
		// "\r": 24 + 2 lines read.
		Lines: 26,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}
	wantKinds := []LogKind{LogVersion, LogArgs, LogVersion, LogLoading, LogWeights, LogProfile, LogAvailableKV, LogCUDAGraphEstimate,
		LogKVTokens, LogConcurrency, LogCaptureStart, LogGraphCapture, LogCUDAGraphPool, LogInitTime, LogGPUBlocks, LogReady}
	if !reflect.DeepEqual(kinds, wantKinds) {
		t.Errorf("events %v\nwant   %v", kinds, wantKinds)
	}
}

func TestLogScannerFreeMemoryError(t *testing.T) {
	var sc LogScanner
	sc.Write([]byte(readLog(t, "v0.19.0-kimi-dev-72b-tp4-free-memory.log")))
	r := sc.Report()
	if r.Ready || len(r.Errors) != 2 {
		t.Fatalf("report %+v", r)
	}
	first, ok := r.FirstError()
	if !ok || first.Kind != LogErrFreeMemory || first.Device != 1 || first.Memory.Free != g(60.85) {
		t.Errorf("first error %+v", first)
	}
	if r.FreeBytes != g(60.85) || r.RequestedBytes != g(75.23) || r.Utilization != 0.95 {
		t.Errorf("free %d requested %d util %v", r.FreeBytes, r.RequestedBytes, r.Utilization)
	}
	if !r.HasError(LogErrEngineInit) || r.HasError(LogErrOOM) {
		t.Errorf("errors %+v", r.Errors)
	}
}

func TestLogScannerV0(t *testing.T) {
	var sc LogScanner
	sc.ReadFrom(strings.NewReader(readLog(t, "v0.6.4-v0-llama-2-7b.log")))
	r := sc.Report()
	if r.Version != (Version{0, 6, 4, ""}) || r.WeightsBytes != g(12.5523) || r.AvailableKVBytes != g(55.54) ||
		r.NumGPUBlocks != 7109 || r.KVTokens != 0 || r.PeakTorchBytes != g(14.94) || r.NonTorchBytes != g(0.79) ||
		r.TotalBytes != g(79.19) || r.CUDAGraphBytes != g(0.31) || r.MaxConcurrency != 27.77 || !r.Ready {
		t.Errorf("report %+v", r)
	}
}

// TestLogScannerSplitWrites feeds the log in pieces that cut lines (and a
// "\r\n" pair) anywhere: the result must equal reading it whole.
func TestLogScannerSplitWrites(t *testing.T) {
	text := strings.ReplaceAll(readLog(t, "v0.19.0-llama-3.1-8b-h100.log"), "\n", "\r\n")
	var whole LogScanner
	whole.Write([]byte(text))
	whole.Flush()
	want := whole.Report()
	for _, size := range []int{1, 2, 3, 7, 64, 1000} {
		var sc LogScanner
		for i := 0; i < len(text); i += size {
			sc.Write([]byte(text[i:min(i+size, len(text))]))
		}
		sc.Flush()
		if got := sc.Report(); !reflect.DeepEqual(got, want) {
			t.Errorf("writes of %d bytes: got %+v\nwant %+v", size, got, want)
		}
		var rd LogScanner
		rd.ReadFrom(iotest.OneByteReader(strings.NewReader(text)))
		if got := rd.Report(); !reflect.DeepEqual(got, want) {
			t.Errorf("one-byte reads: got %+v\nwant %+v", got, want)
		}
	}
	if want.KVTokens != 476016 || !want.Ready {
		t.Errorf("whole read lost lines: %+v", want)
	}
}

// TestLogScannerLastLineWithoutNewline: a process that dies mid-line still
// has its last words read.
func TestLogScannerLastLineWithoutNewline(t *testing.T) {
	var sc LogScanner
	sc.ReadFrom(strings.NewReader("INFO x\nValueError: No available memory for the cache blocks. Try increasing"))
	if r := sc.Report(); !r.HasError(LogErrNoCacheMemory) || r.Lines != 2 {
		t.Errorf("report %+v", r)
	}
}

// TestLogScannerLongLine: a line far over MaxLineLen is cut, not kept whole.
func TestLogScannerLongLine(t *testing.T) {
	var seen []int
	sc := LogScanner{OnLine: func(l string) { seen = append(seen, len(l)) }}
	long := "GPU KV cache size: 1,024 tokens " + strings.Repeat("x", 3*MaxLineLen)
	sc.Write([]byte(long + "\nApplication startup complete.\n"))
	sc.ReadFrom(strings.NewReader(long + "\n"))
	r := sc.Report()
	if len(seen) != 3 || seen[0] != MaxLineLen || seen[1] != len("Application startup complete.") || seen[2] != MaxLineLen {
		t.Errorf("line lengths %v", seen)
	}
	if r.KVTokens != 1024 || !r.Ready {
		t.Errorf("report %+v", r)
	}
}

// TestStartupReportWorkers: with several workers the report keeps the
// busiest worker's parts and the smallest KV figures (vLLM sizes every
// worker's cache to the minimum).
func TestStartupReportWorkers(t *testing.T) {
	var sc LogScanner
	for _, l := range []string{
		"(Worker_PP0 pid=1) INFO Model loading took 7.51 GiB memory and 3.0 seconds",
		"(Worker_PP1 pid=2) INFO Model loading took 8.02 GiB memory and 3.1 seconds",
		"(Worker_PP0 pid=1) INFO Available KV cache memory: 66.54 GiB",
		"(Worker_PP1 pid=2) INFO Available KV cache memory: 65.90 GiB",
		"ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (8.00 GiB). Based on the available memory, the estimated maximum model length is 65536. Try",
		"ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (7.90 GiB). Based on the available memory, the estimated maximum model length is 64704. Try",
		"ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (7.90 GiB). Based on the available memory, the estimated maximum model length is 64704. Try",
	} {
		sc.Line(l)
	}
	r := sc.Report()
	if r.WeightsBytes != g(8.02) || r.AvailableKVBytes != g(7.9) || r.EstimatedMaxLen != 64704 || !r.HasEstimate || r.MaxModelLen != 131072 {
		t.Errorf("report %+v", r)
	}
	if len(r.Errors) != 2 {
		t.Errorf("repeated error lines are kept once: %d errors", len(r.Errors))
	}
}

func TestLogScannerAutoFit(t *testing.T) {
	var sc LogScanner
	sc.Line("INFO Auto-fit max_model_len: reduced from 40960 to 20272 to fit in available GPU memory (2.47 GiB available for KV cache)")
	sc.Line("INFO Application startup complete.")
	r := sc.Report()
	if r.AutoFit == nil || *r.AutoFit != (AutoFit{From: 40960, To: 20272}) || r.AvailableKVBytes != g(2.47) || !r.Ready {
		t.Errorf("report %+v", r)
	}
	// Report returns a copy.
	r.AutoFit.To = 1
	if sc.Report().AutoFit.To != 20272 {
		t.Error("Report shares AutoFit")
	}
}

func TestVersionFromOutput(t *testing.T) {
	tests := []struct {
		out  string
		want Version
	}{
		{"0.19.0\n", Version{0, 19, 0, ""}},
		{"INFO 11-22 10:00:00 [__init__.py:216] Automatically detected platform cuda.\n0.11.0+cu128\n", Version{0, 11, 0, "+cu128"}},
		{"vllm 0.6.4.post1", Version{0, 6, 4, ".post1"}},
		{"\x1b[32m0.10.1.1\x1b[0m\n\n", Version{0, 10, 1, ".1"}},
	}
	for _, tt := range tests {
		got, err := VersionFromOutput(tt.out)
		if err != nil || got != tt.want {
			t.Errorf("VersionFromOutput(%q) = %+v, %v; want %+v", tt.out, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "usage: vllm [-h] {serve,complete,chat}\nvllm: error: unrecognized arguments: --version", "dev build 2024-11-22"} {
		if v, err := VersionFromOutput(bad); err == nil {
			t.Errorf("VersionFromOutput(%q) = %v; want an error", bad, v)
		}
	}
}

// TestLogPatternsCompile compiles every pattern that is compiled on first
// use, so that a bad one fails here and not in a user's run.
func TestLogPatternsCompile(t *testing.T) {
	if len(lazyPatterns) != 55 {
		t.Fatalf("%d lazily compiled patterns, logs.go has 55", len(lazyPatterns))
	}
	for _, re := range lazyPatterns {
		if re() == nil {
			t.Fatal("nil pattern")
		}
	}
}

// TestThousands writes counts as vLLM's log does (testdata/logs/
// v0.19.0-llama-3.1-8b-h100.log: "GPU KV cache size: 476,016 tokens"), and
// count reads each back.
func TestThousands(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {8192, "8,192"}, {476016, "476,016"},
		{1234567, "1,234,567"}, {-123, "-123"}, {-7420, "-7,420"}, {math.MaxInt64, "9,223,372,036,854,775,807"},
	} {
		if got := Thousands(c.n); got != c.want {
			t.Errorf("Thousands(%d) = %q, want %q", c.n, got, c.want)
		}
		if c.n >= 0 && c.n <= 1<<53 {
			if back, ok := count(c.want); !ok || back != c.n {
				t.Errorf("count(%q) = %d, %t", c.want, back, ok)
			}
		}
	}
	ev, ok := ParseLogLine("(EngineCore_DP0 pid=212) INFO 11-22 10:00:42 [kv_cache_utils.py:1087] GPU KV cache size: " + Thousands(476016) + " tokens")
	if !ok || ev.Tokens != 476016 {
		t.Errorf("the log line with Thousands(476016) reads as %+v, %t", ev, ok)
	}
}

// V0's preemption warning names the engine's running total; a log cut to
// its last lines still gives it (vLLM 0.6.3 scheduler.py).
func TestPreemptionCount(t *testing.T) {
	ev, ok := ParseLogLine("WARNING 06-20 12:05:22 scheduler.py:1439] Sequence group chatcmpl-2c9b11d7 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=51")
	if !ok || ev.Kind != LogPreemption || ev.Preemptions != 51 {
		t.Errorf("got %+v, %t; want a preemption with count 51", ev, ok)
	}
	ev, ok = ParseLogLine("WARNING 01-01 00:00:00 scheduler.py:100] Preempted request req-1 for lack of KV cache space")
	if !ok || ev.Kind != LogPreemption || ev.Preemptions != 0 {
		t.Errorf("got %+v, %t; want a preemption without a count", ev, ok)
	}
}
