package vllm

import (
	"reflect"
	"strings"
	"testing"
)

func v(s string) Version { return MustVersion(s) }

func TestNewest(t *testing.T) {
	if got := Newest(); got != v("0.33.0") {
		t.Errorf("Newest() = %v, want 0.33.0", got)
	}
}

func TestDefaultGPUMemoryUtilization(t *testing.T) {
	tests := []struct {
		ver  string
		want float64
	}{
		// PR #38284: 0.92 from 0.21.0, with the graph estimate in the budget.
		{"0.6.4", 0.9}, {"0.11.0", 0.9}, {"0.20.2", 0.9},
		{"0.21.0", 0.92}, {"0.25.0", 0.92}, {"0.27.1", 0.92}, {"0.21.0rc1", 0.92}, {"0.33.0", 0.92},
	}
	for _, tt := range tests {
		if got := DefaultGPUMemoryUtilization(v(tt.ver)); got != tt.want {
			t.Errorf("DefaultGPUMemoryUtilization(%s) = %v, want %v", tt.ver, got, tt.want)
		}
	}
	if got := DefaultGPUMemoryUtilization(Version{}); got != 0.92 {
		t.Errorf("zero version (newest) = %v, want 0.92", got)
	}
}

func TestBooleanRules(t *testing.T) {
	tests := []struct {
		rule   string
		fn     func(Version) bool
		before string // last release without the behaviour
		since  string // first release with it
	}{
		{"PerInstanceBudget", PerInstanceBudget, "0.6.4", "0.6.5"},
		{"V1ByDefault", V1ByDefault, "0.7.3", "0.8.0"},
		{"V0Removed", V0Removed, "0.10.2", "0.11.0"},
		{"CUDAGraphEstimate", CUDAGraphEstimate, "0.12.0", "0.13.0"},
		{"SupportsAutoMaxModelLen", SupportsAutoMaxModelLen, "0.13.0", "0.14.0"},
		{"HybridGDNGraphTransient", HybridGDNGraphTransient, "0.25.1", "0.26.0"},
		{"PersistentMoEWorkspace", PersistentMoEWorkspace, "0.18.1", "0.19.0"},
		{"SupportsKVCacheMemory", SupportsKVCacheMemory, "0.10.1", "0.10.2"},
	}
	for _, tt := range tests {
		if tt.fn(v(tt.before)) {
			t.Errorf("%s(%s) = true, want false", tt.rule, tt.before)
		}
		if !tt.fn(v(tt.since)) {
			t.Errorf("%s(%s) = false, want true", tt.rule, tt.since)
		}
		if !tt.fn(Version{}) {
			t.Errorf("%s(newest) = false, want true", tt.rule)
		}
	}
}

func TestUsesV1(t *testing.T) {
	tests := []struct {
		ver  string
		env  map[string]string
		want bool
	}{
		{"0.6.6", map[string]string{EnvUseV1: "1"}, false}, // no V1 before 0.7.0
		{"0.7.0", nil, false},
		{"0.7.0", map[string]string{EnvUseV1: "1"}, true},
		{"0.7.3", map[string]string{EnvUseV1: "0"}, false},
		{"0.8.0", nil, true},
		{"0.9.2", map[string]string{EnvUseV1: "0"}, false},
		{"0.10.2", map[string]string{EnvUseV1: "false"}, false},
		{"0.10.2", map[string]string{EnvUseV1: "garbage"}, true}, // unreadable: default
		{"0.11.0", map[string]string{EnvUseV1: "0"}, true},       // V0 is gone
	}
	for _, tt := range tests {
		if got := UsesV1(v(tt.ver), tt.env); got != tt.want {
			t.Errorf("UsesV1(%s, %v) = %v, want %v", tt.ver, tt.env, got, tt.want)
		}
	}
}

func TestCUDAGraphsInBudget(t *testing.T) {
	on := map[string]string{EnvEstimateCUDAGraphs: "1"}
	off := map[string]string{EnvEstimateCUDAGraphs: "0"}
	tests := []struct {
		ver  string
		env  map[string]string
		want bool
	}{
		{"0.20.0", nil, false}, // opt-in before 0.21.0
		{"0.21.0", nil, true},  // default on since 0.21.0
		{"0.19.0", nil, false}, // the v0.19.0 logs print the variable as False
		{"0.19.0", on, true},
		{"0.21.0", off, false},
		{"0.21.0", map[string]string{EnvEstimateCUDAGraphs: "False"}, false},
		{"0.21.0", map[string]string{EnvEstimateCUDAGraphs: "maybe"}, true}, // unreadable: default
		{"0.13.0", on, true},
		{"0.12.0", on, false}, // no estimate to subtract yet
		{"0.6.5", on, false},
	}
	for _, tt := range tests {
		if got := CUDAGraphsInBudget(v(tt.ver), tt.env); got != tt.want {
			t.Errorf("CUDAGraphsInBudget(%s, %v) = %v, want %v", tt.ver, tt.env, got, tt.want)
		}
	}
}

func TestLogsKVCacheTokens(t *testing.T) {
	tests := []struct {
		ver  string
		env  map[string]string
		want bool
	}{
		{"0.6.5", nil, false},
		{"0.7.3", map[string]string{EnvUseV1: "1"}, false}, // V1 before PR #13596 logged blocks
		{"0.8.0", nil, true},
		{"0.8.0", map[string]string{EnvUseV1: "0"}, false}, // V0 logs "# GPU blocks"
		{"0.19.0", nil, true},
	}
	for _, tt := range tests {
		if got := LogsKVCacheTokens(v(tt.ver), tt.env); got != tt.want {
			t.Errorf("LogsKVCacheTokens(%s, %v) = %v, want %v", tt.ver, tt.env, got, tt.want)
		}
	}
}

func TestDefaultBlockSize(t *testing.T) {
	for _, ver := range []string{"0.4.0", "0.19.0", "0.32.0"} {
		if got := DefaultBlockSize(v(ver)); got != 16 {
			t.Errorf("DefaultBlockSize(%s) = %d, want 16", ver, got)
		}
	}
}

func TestDefaultBatch(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name        string
		ver         string
		device      string
		total       int64
		maxModelLen int
		tokens      int
		seqs        int
	}{
		// 85029158912 bytes = 79.19 GiB, the H100 of the v0.19.0 calibration
		// data; its log reads "Defaulting max_num_batched_tokens to 8192 for
		// OPENAI_API_SERVER usage context … max_num_seqs to 1024".
		{"H100 torch name", "0.19.0", "NVIDIA H100 80GB HBM3", 85029158912, 8192, 8192, 1024},
		{"H100 catalog name", "0.19.0", "H100-80GB", 85029158912, 131072, 8192, 1024},
		{"H200", "0.19.0", "NVIDIA H200", 150 * gib, 8192, 8192, 1024},
		{"MI300X", "0.19.0", "AMD Instinct MI300X", 191 * gib, 8192, 8192, 1024},
		// A100-80GB has ≥ 70 GiB but is excluded by name.
		{"A100-80GB torch name", "0.19.0", "NVIDIA A100-SXM4-80GB", 85 * 1000 * 1000 * 1000, 8192, 2048, 256},
		{"A100-80GB catalog name", "0.19.0", "A100-80GB", 85 * 1000 * 1000 * 1000, 8192, 2048, 256},
		// L4 has 24 GB, well under 70 GiB.
		{"L4", "0.19.0", "NVIDIA L4", 22 * gib, 8192, 2048, 256},
		{"exactly 70 GiB", "0.19.0", "X", 70 * gib, 8192, 8192, 1024},
		{"just under 70 GiB", "0.19.0", "X", 70*gib - 1, 8192, 2048, 256},
		{"unknown device", "0.19.0", "", 0, 8192, 2048, 256},
		{"first V1 release", "0.8.0", "NVIDIA H100 80GB HBM3", 85029158912, 32768, 8192, 1024},
		// V0: max(max_model_len, 2048) tokens, 256 sequences.
		{"V0 long context", "0.7.3", "NVIDIA H100 80GB HBM3", 85029158912, 8192, 8192, 256},
		{"V0 short context", "0.6.5", "NVIDIA L4", 22 * gib, 1024, 2048, 256},
		{"V0 auto context", "0.6.5", "NVIDIA L4", 22 * gib, AutoMaxModelLen, 2048, 256},
	}
	for _, tt := range tests {
		got := Settings{}.WithDefaults(v(tt.ver), tt.device, tt.total, tt.maxModelLen)
		if got.MaxNumBatchedTokens != tt.tokens || got.MaxNumSeqs != tt.seqs {
			t.Errorf("%s: defaults %d/%d, want %d/%d", tt.name, got.MaxNumBatchedTokens, got.MaxNumSeqs, tt.tokens, tt.seqs)
		}
	}
}

func TestDefaultMaxCudagraphCaptureSize(t *testing.T) {
	tests := []struct {
		ver    string
		seqs   int
		tokens int
		want   int
	}{
		{"0.19.0", 1024, 8192, 512}, // every v0.19.0 calibration row: max_num_seqs 1024 → 512
		{"0.19.0", 256, 2048, 512},  // min(2 × 256, 512)
		{"0.19.0", 64, 2048, 128},   // min(2 × 64, 512)
		{"0.19.0", 1024, 256, 256},  // cut at max_num_batched_tokens
		{"0.10.0", 64, 2048, 128},
		{"0.9.2", 64, 2048, 512}, // before 2 × max_num_seqs
		{"0.9.2", 64, 300, 300},
		{"0.7.3", 256, 8192, 256}, // V0 stops at 256
		{"0.7.3", 100, 8192, 104}, // 100 rounded up to a multiple of 8
		{"0.7.3", 3, 8192, 4},
		{"0.7.3", 0, 0, 256},  // the default 256 seqs
		{"0.19.0", 0, 0, 512}, // the default 256 seqs: min(2 × 256, 512)
	}
	for _, tt := range tests {
		set := Settings{MaxNumSeqs: tt.seqs, MaxNumBatchedTokens: tt.tokens}.WithDefaults(v(tt.ver), "", 0, 8192)
		if got := set.MaxCudagraphCaptureSize; got != tt.want {
			t.Errorf("%s, %d seqs, %d tokens: capture size %d, want %d", tt.ver, tt.seqs, tt.tokens, got, tt.want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	const h100Bytes = 85029158912
	const h100 = "NVIDIA H100 80GB HBM3"
	tests := []struct {
		name   string
		in     Settings
		ver    string
		device string
		total  int64
		maxLen int
		want   Settings
	}{
		{
			name: "v0.19.0 on an H100, nothing given",
			ver:  "0.19.0", device: h100, total: h100Bytes, maxLen: 131072,
			want: Settings{
				TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.9, MaxModelLen: 131072, MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 512,
				Version: v("0.19.0"),
			},
		},
		{
			name: "no version anywhere: newest, on an L4",
			in:   Settings{Model: "m", MaxModelLen: AutoMaxModelLen, Set: set("model", "max-model-len")},
			ver:  "", device: "NVIDIA L4", total: 22 << 30, maxLen: 40960,
			want: Settings{
				Model: "m", TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.92, MaxModelLen: AutoMaxModelLen, MaxNumSeqs: 256, MaxNumBatchedTokens: 2048,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 512,
				Version: v("0.33.0"), Set: set("model", "max-model-len"),
			},
		},
		{
			name: "the settings' own version when none is passed",
			in:   Settings{Version: v("0.24.0"), MaxNumSeqs: 32, GPUMemoryUtilization: 0.8, TensorParallelSize: 4},
			ver:  "", device: h100, total: h100Bytes, maxLen: 8192,
			want: Settings{
				TensorParallelSize: 4, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.8, MaxModelLen: 8192, MaxNumSeqs: 32, MaxNumBatchedTokens: 8192,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 64, // 2 × 32
				Version: v("0.24.0"),
			},
		},
		{
			name: "V0 (0.6.5) on an A100: batch follows the context",
			ver:  "0.6.5", device: "NVIDIA A100-SXM4-80GB", total: 85 * 1000 * 1000 * 1000, maxLen: 4096,
			want: Settings{
				TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.9, MaxModelLen: 4096, MaxNumSeqs: 256, MaxNumBatchedTokens: 4096,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 256,
				Version: v("0.6.5"),
			},
		},
		{
			name: "VLLM_USE_V1=0 on 0.9.2 selects V0 defaults",
			in:   Settings{Env: map[string]string{EnvUseV1: "0"}},
			ver:  "0.9.2", device: h100, total: h100Bytes, maxLen: 16384,
			want: Settings{
				TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.9, MaxModelLen: 16384, MaxNumSeqs: 256, MaxNumBatchedTokens: 16384,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 256,
				Version: v("0.9.2"), Env: map[string]string{EnvUseV1: "0"},
			},
		},
		{
			name: "V1 with chunked prefill turned off needs the whole context in one step",
			in:   Settings{MaxModelLen: 32768, Extra: []string{"--no-enable-chunked-prefill"}},
			ver:  "0.19.0", device: h100, total: h100Bytes, maxLen: 131072,
			want: Settings{
				TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1,
				GPUMemoryUtilization: 0.9, MaxModelLen: 32768, MaxNumSeqs: 1024, MaxNumBatchedTokens: 32768,
				Dtype: "auto", KVCacheDtype: "auto", BlockSize: 16, MaxCudagraphCaptureSize: 512,
				Version: v("0.19.0"), Extra: []string{"--no-enable-chunked-prefill"},
			},
		},
	}
	for _, tt := range tests {
		var ver Version
		if tt.ver != "" {
			ver = v(tt.ver)
		}
		got := tt.in.WithDefaults(ver, tt.device, tt.total, tt.maxLen)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestFusedMoEChunkTokens(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want int
	}{
		{nil, 32768},
		{map[string]string{EnvFusedMoEChunkSize: "16384"}, 16384},
		{map[string]string{EnvFusedMoEChunkSize: " 8192 "}, 8192},
		{map[string]string{EnvFusedMoEChunkSize: "0"}, 32768},   // not positive: the default
		{map[string]string{EnvFusedMoEChunkSize: "16k"}, 32768}, // unreadable: the default
	} {
		if got := FusedMoEChunkTokens(tt.env); got != tt.want {
			t.Errorf("FusedMoEChunkTokens(%v) = %d, want %d", tt.env, got, tt.want)
		}
	}
}

func TestExpertParallel(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want bool
	}{
		{"vllm serve m --tensor-parallel-size 2 --enable-expert-parallel", true},
		{"vllm serve m --enable_expert_parallel -tp 2", true},
		{"vllm serve m -tp 2", false},
		{"vllm serve m --no-enable-expert-parallel", false},
	} {
		s, err := ParseCommand(strings.Fields(tt.cmd))
		if err != nil {
			t.Fatalf("%s: %v", tt.cmd, err)
		}
		if got := s.ExpertParallel(); got != tt.want {
			t.Errorf("%s: ExpertParallel() = %v, want %v", tt.cmd, got, tt.want)
		}
	}
}
