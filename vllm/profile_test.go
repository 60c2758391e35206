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

// TestModelRunnerV2 checks each step of Model Runner V2's default on both
// sides (docs/vllm-profile.md, "Which runner"), and the environment's
// override.
func TestModelRunnerV2(t *testing.T) {
	qwen3 := RunnerModel{Architecture: "Qwen3ForCausalLM"}
	llama := RunnerModel{Architecture: "LlamaForCausalLM"}
	gemma2 := RunnerModel{Architecture: "Gemma2ForCausalLM"}
	mixtral := RunnerModel{Architecture: "MixtralForCausalLM", MoE: true}
	dsv2 := RunnerModel{Architecture: "DeepseekV2ForCausalLM", MoE: true}
	dsv3 := RunnerModel{Architecture: "DeepseekV3ForCausalLM", MoE: true}
	qwen3AWQ := RunnerModel{Architecture: "Qwen3ForCausalLM", Quantized: true}
	qwen35 := RunnerModel{Architecture: "Qwen3_5ForConditionalGeneration", Hybrid: true}
	tests := []struct {
		ver  string
		m    RunnerModel
		env  map[string]string
		want bool
	}{
		{"0.21.0", qwen3, nil, false},
		{"0.22.0", qwen3, nil, true},
		{"0.22.0", qwen3AWQ, nil, false}, // quantized models stay on V1 before 0.25
		{"0.22.0", llama, nil, false},
		{"0.23.0", llama, nil, true},
		{"0.23.0", RunnerModel{Architecture: "MistralForCausalLM"}, nil, true},
		{"0.22.0", dsv2, nil, false},
		{"0.23.0", dsv2, nil, true}, // on the MoE allowlist from 0.23
		{"0.23.0", mixtral, nil, false},
		{"0.24.1", gemma2, nil, false},
		{"0.24.1", qwen3AWQ, nil, false},
		{"0.25.0", gemma2, nil, true},
		{"0.25.0", qwen3AWQ, nil, true}, // quantized included from 0.25
		{"0.25.0", mixtral, nil, false},
		{"0.28.0", dsv3, nil, false}, // DeepseekV3 is not on the 0.25–0.28 allowlist
		{"0.28.0", dsv2, nil, true},
		{"0.28.0", qwen35, nil, false}, // hybrid, not allowlisted
		{"0.29.0", dsv3, nil, true},    // every model from 0.29
		{"0.29.0", mixtral, nil, true},
		{"0.29.0", qwen35, nil, true},
		{"0.33.0", dsv2, nil, true},
		// The environment: =1 opts in at any release; =0 opts out from
		// 0.22, where the variable became tri-state; before, 0 was the
		// default and changes nothing.
		{"0.19.0", llama, map[string]string{EnvUseV2ModelRunner: "1"}, true},
		{"0.19.0", llama, map[string]string{EnvUseV2ModelRunner: "0"}, false},
		{"0.29.0", dsv3, map[string]string{EnvUseV2ModelRunner: "0"}, false},
		{"0.25.0", mixtral, map[string]string{EnvUseV2ModelRunner: "1"}, true},
	}
	for _, tt := range tests {
		if got := ModelRunnerV2(v(tt.ver), tt.m, tt.env); got != tt.want {
			t.Errorf("ModelRunnerV2(%s, %+v, %v) = %t, want %t", tt.ver, tt.m, tt.env, got, tt.want)
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
