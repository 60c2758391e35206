package vllm

import (
	"strings"
	"testing"
)

func TestKVCacheDtypeBytes(t *testing.T) {
	tests := []struct {
		kv    string
		model int
		want  int
	}{
		{"auto", 2, 2}, {"", 2, 2}, {"auto", 4, 4},
		{"fp8", 2, 1}, {"fp8_e4m3", 2, 1}, {"fp8_e5m2", 2, 1}, {"fp8_inc", 2, 1}, {"fp8_ds_mla", 2, 1},
		{"bfloat16", 4, 2}, {"float16", 4, 2}, {"half", 4, 2}, {"FP8", 2, 1},
		{"float32", 2, 4},
	}
	for _, tt := range tests {
		got, err := KVCacheDtypeBytes(tt.kv, tt.model)
		if err != nil || got != tt.want {
			t.Errorf("KVCacheDtypeBytes(%q, %d) = %d, %v; want %d", tt.kv, tt.model, got, err, tt.want)
		}
	}
	_, err := KVCacheDtypeBytes("int3", 2)
	if err == nil || !strings.Contains(err.Error(), `"int3"`) || !strings.Contains(err.Error(), "fp8_e4m3") {
		t.Errorf("KVCacheDtypeBytes(int3) error = %v, want one naming the value and listing the valid ones", err)
	}
	if _, err := KVCacheDtypeBytes("auto", 0); err == nil {
		t.Error("KVCacheDtypeBytes(auto, 0): no error for an unknown model dtype")
	}
}

// TestDtypeBytesAgainstCalibration checks the bytes per element against
// the v0.19.0 H100 calibration rows (lines of
// calibration/vllm-0.19.0-h100.csv) of meta-llama/Llama-3.1-8B-Instruct
// (bfloat16 checkpoint; 32 layers × 8 KV heads × 128 head size × 2 for K
// and V = 65536 elements per token).
func TestDtypeBytesAgainstCalibration(t *testing.T) {
	tests := []struct {
		row      string
		dtype    string
		kvDtype  string
		kvGiB    float64 // available_kv_cache_gib
		kvTokens float64 // gpu_kv_cache_tokens
	}{
		// 58.11 GiB / 476016 tokens = 131077 B/token ≈ 65536 × 2
		{"line 27", "auto", "auto", 58.11, 476016},
		// 58.11 GiB / 952032 tokens = 65538 B/token ≈ 65536 × 1
		{"line 20", "auto", "fp8", 58.11, 952032},
		// 58.11 GiB / 476016 tokens ≈ 65536 × 2 (float16 over a bf16 checkpoint)
		{"line 23", "float16", "auto", 58.11, 476016},
		// 42.8 GiB / 175296 tokens = 262167 B/token ≈ 65536 × 4
		{"line 24", "float32", "auto", 42.8, 175296},
	}
	for _, tt := range tests {
		model, err := DtypeBytes(tt.dtype, "bfloat16")
		if err != nil {
			t.Fatal(err)
		}
		kv, err := KVCacheDtypeBytes(tt.kvDtype, model)
		if err != nil {
			t.Fatal(err)
		}
		perToken := tt.kvGiB * (1 << 30) / tt.kvTokens
		measured := perToken / 65536
		if measured < float64(kv)*0.99 || measured > float64(kv)*1.01 {
			t.Errorf("%s (--dtype %s, --kv-cache-dtype %s): %d bytes per element, the log implies %.3f", tt.row, tt.dtype, tt.kvDtype, kv, measured)
		}
	}
}

func TestResolveDtype(t *testing.T) {
	tests := []struct {
		dtype, checkpoint string
		want              string
		bytes             int
	}{
		{"auto", "bfloat16", "bfloat16", 2},
		{"auto", "torch.bfloat16", "bfloat16", 2},
		{"", "float16", "float16", 2},
		{"auto", "float32", "bfloat16", 2}, // float32 checkpoints are downcast under auto
		{"auto", "", "bfloat16", 2},        // no torch_dtype counts as float32 (gpt-oss)
		{"float32", "bfloat16", "float32", 4},
		{"float", "bfloat16", "float32", 4},
		{"half", "bfloat16", "float16", 2},
		{"bfloat16", "float32", "bfloat16", 2},
	}
	for _, tt := range tests {
		got, err := ResolveDtype(tt.dtype, tt.checkpoint)
		if err != nil || got != tt.want {
			t.Errorf("ResolveDtype(%q, %q) = %q, %v; want %q", tt.dtype, tt.checkpoint, got, err, tt.want)
		}
		b, err := DtypeBytes(tt.dtype, tt.checkpoint)
		if err != nil || b != tt.bytes {
			t.Errorf("DtypeBytes(%q, %q) = %d, %v; want %d", tt.dtype, tt.checkpoint, b, err, tt.bytes)
		}
	}
	if _, err := DtypeBytes("fp16", "bfloat16"); err == nil || !strings.Contains(err.Error(), "--dtype") {
		t.Errorf("DtypeBytes(fp16) error = %v, want a --dtype error", err)
	}
	if _, err := DtypeBytes("auto", "int8"); err == nil || !strings.Contains(err.Error(), `"int8"`) {
		t.Errorf("DtypeBytes(auto, int8) error = %v, want one naming the checkpoint dtype", err)
	}
}
