package vllm

import (
	"reflect"
	"testing"
)

func TestArgsOrderAndForms(t *testing.T) {
	s := Settings{
		Model:                   "ignored/by-args",
		TensorParallelSize:      2,
		PipelineParallelSize:    2,
		DataParallelSize:        2,
		GPUMemoryUtilization:    0.92,
		MaxModelLen:             AutoMaxModelLen,
		MaxNumSeqs:              128,
		MaxNumBatchedTokens:     4096,
		Dtype:                   "bfloat16",
		Quantization:            "-odd",
		KVCacheDtype:            "fp8",
		BlockSize:               32,
		EnforceEager:            true,
		KVCacheMemoryBytes:      21474836480,
		CPUOffloadGiB:           1.5,
		MaxCudagraphCaptureSize: 256,
		Version:                 MustVersion("0.19.0"),
		Extra:                   []string{"--trust-remote-code", "--port", "8000"},
	}
	want := []string{
		"--tensor-parallel-size", "2",
		"--pipeline-parallel-size", "2",
		"--data-parallel-size", "2",
		"--gpu-memory-utilization", "0.92",
		"--max-model-len", "auto",
		"--max-num-seqs", "128",
		"--max-num-batched-tokens", "4096",
		"--dtype", "bfloat16",
		"--quantization=-odd", // a value that reads as a flag is attached
		"--kv-cache-dtype", "fp8",
		"--block-size", "32",
		"--enforce-eager",
		"--kv-cache-memory-bytes", "21474836480",
		"--cpu-offload-gb", "1.5",
		"--max-cudagraph-capture-size", "256",
		"--trust-remote-code", "--port", "8000",
	}
	if got := s.Args(); !reflect.DeepEqual(got, want) {
		t.Errorf("Args()\n got %q\nwant %q", got, want)
	}
	if got := (Settings{}).Args(); len(got) != 0 {
		t.Errorf("Args() of zero settings = %q, want none", got)
	}
}

func TestCommandLine(t *testing.T) {
	s := Settings{
		Model:                "meta-llama/Llama-3.1-8B-Instruct",
		MaxModelLen:          32768,
		GPUMemoryUtilization: 0.9,
		Extra:                []string{"-O", `{"level": 3}`, "--served-model-name", "my model"},
		Env:                  map[string]string{"VLLM_USE_V1": "1", "HF_HOME": "/data/hf cache"},
	}
	want := `HF_HOME='/data/hf cache' VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.9 --max-model-len 32768 -O '{"level": 3}' --served-model-name 'my model'`
	if got := s.CommandLine(); got != want {
		t.Errorf("CommandLine()\n got %s\nwant %s", got, want)
	}
	if got, want := (Settings{Model: "-weird"}).CommandLine(), "vllm serve --model=-weird"; got != want {
		t.Errorf("CommandLine() = %s, want %s", got, want)
	}
}

// TestRoundTrip checks ParseCommand(CommandLine(s)) == s, Set included,
// for settings parsed from real-looking command lines.
func TestRoundTrip(t *testing.T) {
	lines := []string{
		"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --tensor-parallel-size=2 -tp 2 --gpu-memory-utilization 0.92 --enforce-eager",
		"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 vllm serve Qwen/Qwen3-8B --max-model-len auto --kv-cache-dtype fp8_e4m3 --max-num-seqs 64 -q fp8",
		"python -m vllm.entrypoints.openai.api_server --model m --trust-remote-code --served-model-name a b --chat-template '{{ x }}' -O3",
		"vllm serve m --kv-cache-memory 20G --cpu-offload-gb 2.25 --block-size 32 --dtype half --max-num-batched-tokens 16k -pp 2 -dp 2 --max-cudagraph-capture-size 128",
		"vllm serve --foo bar --max_model_len=128K --port=8000 --swap-space 4",
		"vllm serve -- -dash-model",
	}
	for _, line := range lines {
		words, err := SplitCommandLine(line)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseCommand(words)
		if err != nil {
			t.Fatalf("ParseCommand(%q): %v", line, err)
		}
		rendered := s.CommandLine()
		words2, err := SplitCommandLine(rendered)
		if err != nil {
			t.Fatalf("SplitCommandLine(%q): %v", rendered, err)
		}
		s2, err := ParseCommand(words2)
		if err != nil {
			t.Fatalf("ParseCommand(%q): %v", rendered, err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Errorf("round trip of %q through %q\n got %+v\nwant %+v", line, rendered, s2, s)
		}
		// Args alone, without the command, read back by ParseFlags.
		args := s.Args()
		if s.Model != "" {
			args = append([]string{"--model=" + s.Model}, args...)
		}
		s3, err := ParseFlags(args)
		if err != nil {
			t.Fatalf("ParseFlags(Args()) of %q: %v", line, err)
		}
		s3.Env = s.Env
		if !reflect.DeepEqual(s, s3) {
			t.Errorf("ParseFlags(Args()) of %q\n got %+v\nwant %+v", line, s3, s)
		}
	}
}

// TestShellJoin: SplitCommandLine gives back the words ShellJoin joined,
// quotes and all; plain flags stay as they are.
func TestShellJoin(t *testing.T) {
	words := []string{"--max-model-len", "32768", "--hf-overrides", `{"rope_scaling": {"factor": 4}}`, "", "it's", "a b", "$HOME", "--served-model-name=llama:8b"}
	line := ShellJoin(words)
	want := `--max-model-len 32768 --hf-overrides '{"rope_scaling": {"factor": 4}}' '' 'it'\''s' 'a b' '$HOME' --served-model-name=llama:8b`
	if line != want {
		t.Errorf("ShellJoin\n got %s\nwant %s", line, want)
	}
	back, err := SplitCommandLine(line)
	if err != nil || !reflect.DeepEqual(back, words) {
		t.Errorf("SplitCommandLine(%s) = %q, %v", line, back, err)
	}
}
