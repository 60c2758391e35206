package vllm

import (
	"strings"
	"testing"
)

// TestDummySampler walks every boundary of the profile run's sampler path
// on both sides (memory notes §2.7): FlashInfer when installed up to
// 0.11.0, sort 0.11.1–0.16.x (PR #26859), Triton 0.17.0–0.20.x (PR #33538),
// FlashInfer again from 0.21.0 (PR #40376), none on Model Runner V2.
func TestDummySampler(t *testing.T) {
	tests := []struct {
		ver  string
		v2   bool
		inst Install
		want SamplerPath
	}{
		{"0.10.1", false, InstallImage, SamplerFlashInfer},
		{"0.10.1", false, "", SamplerFlashInfer}, // the image is the default install
		{"0.10.1", false, InstallPip, SamplerSort},
		{"0.11.0", false, InstallImage, SamplerFlashInfer},
		{"0.11.1", false, InstallImage, SamplerSort}, // FlashInfer opt-in from here
		{"0.16.0", false, InstallImage, SamplerSort},
		{"0.16.9", false, InstallPip, SamplerSort},
		{"0.17.0", false, InstallImage, SamplerTriton},
		{"0.17.0", false, InstallPip, SamplerTriton},
		{"0.20.2", false, InstallImage, SamplerTriton},
		{"0.21.0", false, InstallImage, SamplerFlashInfer},
		{"0.21.0", false, InstallPip, SamplerTriton},
		{"0.33.0", false, InstallImage, SamplerFlashInfer},
		{"0.25.0", true, InstallImage, SamplerNoTopK},
	}
	for _, tt := range tests {
		if got := DummySampler(v(tt.ver), tt.v2, tt.inst); got != tt.want {
			t.Errorf("DummySampler(%s, v2=%t, %q) = %s, want %s", tt.ver, tt.v2, tt.inst, got, tt.want)
		}
	}
	if !SamplerUsesInstall(v("0.10.1"), false) || SamplerUsesInstall(v("0.16.0"), false) || SamplerUsesInstall(v("0.19.0"), false) {
		t.Error("the install matters up to 0.11.0 and from 0.21.0 only")
	}
}

// TestModelRunnerV2 checks each family's step to Model Runner V2 on both
// sides, and that models with routed experts stay on V1.
func TestModelRunnerV2(t *testing.T) {
	tests := []struct {
		ver, arch string
		moe       bool
		want      bool
	}{
		{"0.21.0", "Qwen3ForCausalLM", false, false},
		{"0.22.0", "Qwen3ForCausalLM", false, true},
		{"0.22.0", "LlamaForCausalLM", false, false},
		{"0.23.0", "LlamaForCausalLM", false, true},
		{"0.23.0", "MistralForCausalLM", false, true},
		{"0.24.1", "Gemma2ForCausalLM", false, false},
		{"0.25.0", "Gemma2ForCausalLM", false, true},
		{"0.25.0", "MixtralForCausalLM", true, false},
		{"0.33.0", "DeepseekV2ForCausalLM", true, false},
	}
	for _, tt := range tests {
		if got := ModelRunnerV2(v(tt.ver), tt.arch, tt.moe); got != tt.want {
			t.Errorf("ModelRunnerV2(%s, %s, moe=%t) = %t, want %t", tt.ver, tt.arch, tt.moe, got, tt.want)
		}
	}
}

// TestCUDAGraphEstimateIsZero: Model Runner V2 reserved no graph memory
// before 0.29 (#49224, #50159); V1 always had a real estimate.
func TestCUDAGraphEstimateIsZero(t *testing.T) {
	if !CUDAGraphEstimateIsZero(v("0.28.2"), true) || CUDAGraphEstimateIsZero(v("0.29.0"), true) || CUDAGraphEstimateIsZero(v("0.25.0"), false) {
		t.Error("want a zero estimate on V2 before 0.29.0 only")
	}
}

func TestParseInstall(t *testing.T) {
	for in, want := range map[string]Install{"": InstallImage, "image": InstallImage, "PIP": InstallPip, " pip ": InstallPip} {
		if got, err := ParseInstall(in); err != nil || got != want {
			t.Errorf("ParseInstall(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseInstall("conda"); err == nil {
		t.Error("ParseInstall(conda): want an error")
	}
}

func TestImageInstall(t *testing.T) {
	tests := []struct {
		image    string
		inst     Install
		ver      string
		official bool
	}{
		{"vllm/vllm-openai:v0.10.1.1", InstallImage, "0.10.1", true},
		{"docker.io/vllm/vllm-openai:0.8.5-cu128", InstallImage, "0.8.5", true},
		{"mirror.example.com/vllm/vllm-openai:latest", InstallImage, "", true},
		{"vllm/vllm-openai@sha256:abcd", InstallImage, "", true},
		{"ghcr.io/acme/llm-server:1.2.3", InstallPip, "", false},
	}
	for _, tt := range tests {
		inst, ver, official := ImageInstall(tt.image)
		want := Version{}
		if tt.ver != "" {
			want = v(tt.ver)
		}
		if inst != tt.inst || ver.Compare(want) != 0 || official != tt.official {
			t.Errorf("ImageInstall(%q) = %q, %v, %t; want %q, %v, %t", tt.image, inst, ver, official, tt.inst, want, tt.official)
		}
	}
}

// FuzzImageInstall: any image reference gives an install and a version
// without panicking; a version read from a tag parses back to itself.
func FuzzImageInstall(f *testing.F) {
	for _, s := range []string{"vllm/vllm-openai:v0.10.1.1", "docker.io/vllm/vllm-openai:0.8.5-cu128", "vllm/vllm-openai@sha256:ab",
		"ghcr.io/x/y:1", "", ":", "vllm/vllm-openai:", "/vllm/vllm-openai:v", "a:b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		inst, v, official := ImageInstall(image)
		if inst != InstallImage && inst != InstallPip {
			t.Fatalf("ImageInstall(%q) install %q", image, inst)
		}
		if !official && (inst != InstallPip || !v.IsZero()) {
			t.Fatalf("ImageInstall(%q): not official but %q, %v", image, inst, v)
		}
		if !v.IsZero() {
			if back, err := ParseVersion(v.String()); err != nil || back.Compare(v) != 0 {
				t.Fatalf("ImageInstall(%q) version %v does not parse back: %v", image, v, err)
			}
		}
	})
}

// FuzzParseInstall: every input is one of the two installs or an error
// that names the flag.
func FuzzParseInstall(f *testing.F) {
	for _, s := range []string{"", "image", "pip", "PIP ", "conda", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		inst, err := ParseInstall(s)
		switch {
		case err != nil && !strings.Contains(err.Error(), "--vllm-install"):
			t.Fatalf("ParseInstall(%q): %v", s, err)
		case err == nil && inst != InstallImage && inst != InstallPip:
			t.Fatalf("ParseInstall(%q) = %q", s, inst)
		}
	})
}
