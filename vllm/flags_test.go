package vllm

import (
	"reflect"
	"strings"
	"testing"
)

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Settings
	}{
		{
			name: "vllm serve with both flag forms and an alias",
			line: "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --tensor-parallel-size=2 -tp 2 --gpu-memory-utilization 0.92 --enforce-eager",
			want: Settings{
				Model: "meta-llama/Llama-3.1-8B-Instruct", MaxModelLen: 32768, TensorParallelSize: 2,
				GPUMemoryUtilization: 0.92, EnforceEager: true,
				Set: set("model", "max-model-len", "tensor-parallel-size", "gpu-memory-utilization", "enforce-eager"),
			},
		},
		{
			name: "python -m api_server with --model",
			line: "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct --dtype bfloat16 -q awq --port 8000",
			want: Settings{
				Model: "Qwen/Qwen2.5-7B-Instruct", Dtype: "bfloat16", Quantization: "awq",
				Extra: []string{"--port", "8000"},
				Set:   set("model", "dtype", "quantization", "port"),
			},
		},
		{
			name: "python3 with interpreter options",
			line: "python3 -u -X dev -m vllm.entrypoints.openai.api_server --model m --max-num-seqs 64",
			want: Settings{Model: "m", MaxNumSeqs: 64, Set: set("model", "max-num-seqs")},
		},
		{
			name: "python -m cli.main serve",
			line: "python3.12 -m vllm.entrypoints.cli.main serve m -pp 2",
			want: Settings{Model: "m", PipelineParallelSize: 2, Set: set("model", "pipeline-parallel-size")},
		},
		{
			name: "path to vllm, environment, prompt",
			line: "$ VLLM_USE_V1=0 CUDA_VISIBLE_DEVICES=0,1 /opt/venv/bin/vllm serve m -tp=2",
			want: Settings{
				Model: "m", TensorParallelSize: 2, Set: set("model", "tensor-parallel-size"),
				Env: map[string]string{"VLLM_USE_V1": "0", "CUDA_VISIBLE_DEVICES": "0,1"},
			},
		},
		{
			name: "env, exec and nohup are skipped",
			line: "exec env FOO=bar nohup vllm serve m",
			want: Settings{Model: "m", Set: set("model"), Env: map[string]string{"FOO": "bar"}},
		},
		{
			name: "KAITO's entry point",
			line: "python3 /workspace/vllm/inference_api.py --model=/workspace/vllm/weights --kaito-config-file=/mnt/config/inference_config.yaml --gpu-memory-utilization=0.84 --tensor-parallel-size=2",
			want: Settings{
				Model: "/workspace/vllm/weights", GPUMemoryUtilization: 0.84, TensorParallelSize: 2,
				Extra: []string{"--kaito-config-file=/mnt/config/inference_config.yaml"},
				Set:   set("model", "kaito-config-file", "gpu-memory-utilization", "tensor-parallel-size"),
			},
		},
		{
			name: "flags only",
			line: "--model m --max-num-batched-tokens 16K",
			want: Settings{Model: "m", MaxNumBatchedTokens: 16384, Set: set("model", "max-num-batched-tokens")},
		},
		{
			name: "snake_case spellings",
			line: "vllm serve m --max_model_len=16k --gpu_memory_utilization 0.8 --kv_cache_dtype fp8 --block_size 32",
			// 16k = 16 × 1000 (lowercase k is decimal in vLLM's human_readable_int)
			want: Settings{
				Model: "m", MaxModelLen: 16000, GPUMemoryUtilization: 0.8, KVCacheDtype: "fp8", BlockSize: 32,
				Set: set("model", "max-model-len", "gpu-memory-utilization", "kv-cache-dtype", "block-size"),
			},
		},
		{
			name: "data parallel, attached quantization, -O3",
			line: "vllm serve m -dp 4 -qfp8 -O3",
			want: Settings{
				Model: "m", DataParallelSize: 4, Quantization: "fp8", Extra: []string{"-O3"},
				Set: set("model", "data-parallel-size", "quantization", "compilation-config"),
			},
		},
		{
			name: "compilation config JSON and dotted form stay in Extra",
			line: `vllm serve m -O '{"cudagraph_mode": "PIECEWISE"}' --compilation-config.max_cudagraph_capture_size 128`,
			want: Settings{
				Model: "m",
				Extra: []string{"-O", `{"cudagraph_mode": "PIECEWISE"}`, "--compilation-config.max_cudagraph_capture_size", "128"},
				Set:   set("model", "compilation-config"),
			},
		},
		{
			name: "kv cache memory, both spellings; the last one wins",
			line: "vllm serve m --kv-cache-memory=20G --kv-cache-memory-bytes 8000000000",
			want: Settings{Model: "m", KVCacheMemoryBytes: 8000000000, Set: set("model", "kv-cache-memory-bytes")},
		},
		{
			name: "kv cache memory, binary suffix",
			line: "vllm serve m --kv-cache-memory=20G",
			// 20G = 20 × 2^30 = 21474836480
			want: Settings{Model: "m", KVCacheMemoryBytes: 21474836480, Set: set("model", "kv-cache-memory-bytes")},
		},
		{
			name: "last occurrence wins, as with argparse",
			line: "vllm serve m -tp 2 --tensor-parallel-size 4",
			want: Settings{Model: "m", TensorParallelSize: 4, Set: set("model", "tensor-parallel-size")},
		},
		{
			name: "boolean flags do not take the model as a value",
			line: "vllm serve --trust-remote-code m --enable-prefix-caching --no-enable-chunked-prefill --served-model-name a b --chat-template ./t.jinja",
			want: Settings{
				Model: "m",
				Extra: []string{"--trust-remote-code", "--enable-prefix-caching", "--no-enable-chunked-prefill", "--served-model-name", "a", "b", "--chat-template", "./t.jinja"},
				Set:   set("model", "trust-remote-code", "enable-prefix-caching", "no-enable-chunked-prefill", "served-model-name", "chat-template"),
			},
		},
		{
			name: "unknown flag followed by a value, and by a flag",
			line: "vllm serve m --swap-space 4 --disable-something --port=8000",
			want: Settings{
				Model: "m", Extra: []string{"--swap-space", "4", "--disable-something", "--port=8000"},
				Set: set("model", "swap-space", "disable-something", "port"),
			},
		},
		{
			name: "positional model wins over --model",
			line: "vllm serve positional --model flag",
			want: Settings{Model: "positional", Set: set("model")},
		},
		{
			name: "max-model-len auto",
			line: "vllm serve m --max-model-len auto",
			want: Settings{Model: "m", MaxModelLen: AutoMaxModelLen, Set: set("model", "max-model-len")},
		},
		{
			name: "max-model-len -1 is auto",
			line: "vllm serve m --max-model-len -1",
			want: Settings{Model: "m", MaxModelLen: AutoMaxModelLen, Set: set("model", "max-model-len")},
		},
		{
			name: "enforce-eager=false is given but off",
			line: "vllm serve m --enforce-eager=false --cpu-offload-gb 0",
			want: Settings{Model: "m", Set: set("model", "enforce-eager", "cpu-offload-gb")},
		},
		{
			name: "no-enforce-eager after enforce-eager",
			line: "vllm serve m --enforce-eager --no-enforce-eager",
			want: Settings{Model: "m", Set: set("model", "enforce-eager")},
		},
		{
			name: "cpu offload, capture size",
			line: "vllm serve m --cpu-offload-gb 4.5 --max-cudagraph-capture-size 256 --enforce-eager=TRUE",
			want: Settings{
				Model: "m", CPUOffloadGiB: 4.5, MaxCudagraphCaptureSize: 256, EnforceEager: true,
				Set: set("model", "cpu-offload-gb", "max-cudagraph-capture-size", "enforce-eager"),
			},
		},
		{
			name: "vllm serve without a model",
			line: "vllm serve",
			want: Settings{},
		},
		{
			name: "after a bare -- everything is positional",
			line: "vllm serve --swap-space -- m",
			want: Settings{Model: "m", Extra: []string{"--swap-space"}, Set: set("model", "swap-space")},
		},
		{
			name: "pasted multi-line command with log redirection",
			line: "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 vllm serve \\\n  meta-llama/Llama-3.1-8B-Instruct \\\n  --max-model-len 8192 \\\n  --gpu-memory-utilization=0.95 2>&1 | tee vllm.log",
			want: Settings{
				Model: "meta-llama/Llama-3.1-8B-Instruct", MaxModelLen: 8192, GPUMemoryUtilization: 0.95,
				Set: set("model", "max-model-len", "gpu-memory-utilization"),
				Env: map[string]string{"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words, err := SplitCommandLine(tt.line)
			if err != nil {
				t.Fatalf("SplitCommandLine: %v", err)
			}
			got, err := ParseCommand(words)
			if err != nil {
				t.Fatalf("ParseCommand: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCommand(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestHumanReadableTokens(t *testing.T) {
	// vLLM's human_readable_int: lowercase suffixes are powers of 1000 and
	// may have decimals, uppercase ones powers of 1024 and may not.
	tests := []struct {
		raw  string
		want int
	}{
		{"32768", 32768},
		{"32k", 32000},     // 32 × 1000
		{"32K", 32768},     // 32 × 1024
		{"128K", 131072},   // 128 × 1024
		{"1m", 1000000},    // 1 × 10^6
		{"1M", 1048576},    // 1 × 2^20
		{"25.6k", 25600},   // 25.6 × 1000
		{"1.001k", 1000},   // int(1.001 × 1000) = int(1000.9999999999999) = 1000, as in Python
		{"32_768", 32768},  // Python's int() takes digit separators
		{" 4096 ", 4096},   // and surrounding space
		{"+2048", 2048},    // and a sign
		{"0.5k", 500},      // 0.5 × 1000
		{"2g", 2000000000}, // 2 × 10^9, still below 2^31
		{"1G", 1073741824}, // 2^30
		{"AUTO", AutoMaxModelLen},
	}
	for _, tt := range tests {
		s, err := ParseFlags([]string{"--max-model-len", tt.raw})
		if err != nil {
			t.Errorf("--max-model-len %q: %v", tt.raw, err)
			continue
		}
		if s.MaxModelLen != tt.want {
			t.Errorf("--max-model-len %q = %d, want %d", tt.raw, s.MaxModelLen, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		line string
		want []string // substrings of the error
	}{
		{"vllm serve m --max-model-len abc", []string{"--max-model-len", `"abc"`, "not a number or 'auto'"}},
		{"vllm serve m --max-model-len 0", []string{"--max-model-len", "positive number of tokens"}},
		{"vllm serve m --max-model-len -5", []string{"--max-model-len", "-5"}},
		{"vllm serve m --max-model-len 1.5K", []string{"--max-model-len", `"1.5K"`}},
		{"vllm serve m --max-model-len 5000000000", []string{"--max-model-len", `"5000000000"`}},
		{"vllm serve m --max-model-len", []string{"--max-model-len needs a value"}},
		{"vllm serve m --max-model-len --enforce-eager", []string{"--max-model-len needs a value"}},
		{"vllm serve m --max-model-len $MAX_LEN", []string{"--max-model-len", "variable"}},
		{"vllm serve m --gpu-memory-utilization 1.5", []string{"--gpu-memory-utilization", "1.5", "(0, 1]"}},
		{"vllm serve m --gpu-memory-utilization 0", []string{"--gpu-memory-utilization", "(0, 1]"}},
		{"vllm serve m --gpu-memory-utilization NaN", []string{"--gpu-memory-utilization", "not a number"}},
		{"vllm serve m --gpu-memory-utilization 90%", []string{"--gpu-memory-utilization", `"90%"`}},
		{"vllm serve m -tp two", []string{"-tp", `"two"`, "whole number"}},
		{"vllm serve m -tp 0", []string{"-tp", "1 or more"}},
		{"vllm serve m --max-num-seqs -3", []string{"--max-num-seqs", "1 or more"}},
		{"vllm serve m --max-num-seqs 99999999999", []string{"--max-num-seqs", "99999999999", "past the 1048576"}},
		{"vllm serve m --block-size 7", []string{"--block-size", "only 1, 8, 16, 32, 64, 128, 256", "not 7"}},
		{"vllm serve m --enable-lora --max-lora-rank 7", []string{"--max-lora-rank", "320, 512", "not 7"}},
		{"vllm serve m --max-num-batched-tokens 8KB", []string{"--max-num-batched-tokens", `"8KB"`, "number of tokens"}},
		{"vllm serve m --kv-cache-memory 20GiB", []string{"--kv-cache-memory", `"20GiB"`, "byte count"}},
		{"vllm serve m --kv-cache-memory-bytes 0", []string{"--kv-cache-memory-bytes", "positive"}},
		{"vllm serve m --cpu-offload-gb -1", []string{"--cpu-offload-gb", "negative"}},
		{"vllm serve m --dtype fp16", []string{"--dtype", `"fp16"`, "auto, half, float16, bfloat16, float, float32"}},
		{"vllm serve m --quantization=", []string{"--quantization needs a value"}},
		{"vllm serve m --enforce-eager=maybe", []string{"--enforce-eager", `"maybe"`, "true or false"}},
		{"vllm serve m --no-enforce-eager=true", []string{"--no-enforce-eager takes no value"}},
		{"vllm serve m n", []string{`unexpected argument "n"`, `"m"`}},
		{"vllm serve m --trust-remote-code true", []string{`"true"`, "--trust-remote-code", "takes no value"}},
		{"vllm serve m \u2013\u2013max-model-len 4096", []string{"typographic dash"}},
		{"vllm bench serve", []string{"vllm serve", `"bench"`}},
		{"vllm", []string{"vllm serve", "nothing"}},
		{"python -m vllm.entrypoints.cli.main bench", []string{"serve", `"bench"`}},
		{"python train.py", []string{"script", `"train.py"`}},
		{"python -m mymodule", []string{"mymodule", "not a vLLM server"}},
		{"python -c 'import vllm'", []string{"-c", "inline code"}},
		{"python -m", []string{"-m needs a module"}},
		{"python -u", []string{"without -m"}},
		{"docker run --gpus all vllm/vllm-openai --model m", []string{"docker", "follow the image name"}},
		{"sglang serve m", []string{`"sglang"`, "not a vLLM launch command"}},
		{"FOO=1", []string{"empty command"}},
		{"", []string{"empty command"}},
	}
	for _, tt := range tests {
		words, err := SplitCommandLine(tt.line)
		if err != nil {
			t.Fatalf("SplitCommandLine(%q): %v", tt.line, err)
		}
		_, err = ParseCommand(words)
		if err == nil {
			t.Errorf("ParseCommand(%q): no error", tt.line)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("ParseCommand(%q): error spans lines: %q", tt.line, msg)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("ParseCommand(%q) = %q, want it to mention %q", tt.line, msg, w)
			}
		}
	}
}

func TestParseFlagsManifestArgs(t *testing.T) {
	// A Kubernetes args array: values are separate items and may contain spaces.
	args := []string{"--model", "/models/llama", "--served-model-name", "llama 8b", "--max-model-len=8192", "--gpu-memory-utilization", "0.9", "--enable-chunked-prefill"}
	got, err := ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Model: "/models/llama", MaxModelLen: 8192, GPUMemoryUtilization: 0.9,
		Extra: []string{"--served-model-name", "llama 8b", "--enable-chunked-prefill"},
		Set:   set("model", "served-model-name", "max-model-len", "gpu-memory-utilization", "enable-chunked-prefill"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// The scheduler's flags the simulator reads: the two counts parse into
// Settings (and render back), the negative boolean forms are recorded in
// Set, snake_case included; 0 is vLLM's "no cap" for the threshold.
func TestSchedulerFlags(t *testing.T) {
	s, err := ParseFlags([]string{"m", "--num-gpu-blocks-override", "100",
		"--long_prefill_token_threshold=0", "--no-enable-prefix-caching", "--no_enable_chunked_prefill"})
	if err != nil {
		t.Fatal(err)
	}
	if s.NumGPUBlocksOverride != 100 || s.LongPrefillTokenThreshold != 0 || !s.Set[FlagNoPrefixCaching] || !s.Set[FlagNoChunkedPrefill] {
		t.Errorf("got override %d, threshold %d, set %v", s.NumGPUBlocksOverride, s.LongPrefillTokenThreshold, s.Set)
	}
	// Token counts read as --max-model-len does: lower-case k is 1000.
	if s, err = ParseFlags([]string{"m", "--long-prefill-token-threshold", "2k"}); err != nil || s.LongPrefillTokenThreshold != 2000 {
		t.Errorf("2k: %d, %v", s.LongPrefillTokenThreshold, err)
	}
	if !strings.Contains(s.CommandLine(), "--long-prefill-token-threshold 2000") {
		t.Errorf("not rendered: %s", s.CommandLine())
	}
	if _, err := ParseFlags([]string{"m", "--num-gpu-blocks-override", "lots"}); err == nil {
		t.Error("a non-number override parsed")
	}
}
