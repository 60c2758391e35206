package vllm

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds the rules that decide what vLLM's profile run does by
// release: which model runner runs it, which top-k/top-p implementation
// its dummy sampler uses, and whether the CUDA-graph estimate it takes is
// real. The bytes each path costs are the memory package's arithmetic;
// here are only the boundaries, each with its source (docs/vllm-profile.md
// gathers them).

// Version boundaries of the profile-run rules (never written).
var (
	// flashInferSamplerOptInSince: PR #26859 made FlashInfer's top-k/top-p
	// sampler opt-in; the first release after it is 0.11.1.
	flashInferSamplerOptInSince = Version{0, 11, 1, ""}
	// tritonSamplerSince: PR #33538 replaced the sort by a Triton
	// top-k/top-p kernel in 0.17.0; the logged activation of Qwen3-14B on
	// an H100 fell from 5.64 GiB (0.16.0) to 2.23 GiB (0.17.0).
	tritonSamplerSince = Version{0, 17, 0, ""}
	// flashInferSamplerAgainSince: PR #40376 made FlashInfer's sampler the
	// default again, for models on the V1 model runner, in 0.21.0.
	flashInferSamplerAgainSince = Version{0, 21, 0, ""}
	// Model Runner V2 became the default for dense models by family:
	// Qwen3 dense from 0.22, Llama and Mistral dense from 0.23, every dense
	// model from 0.25 (vLLM release notes, #44443).
	runnerV2Qwen3Since  = Version{0, 22, 0, ""}
	runnerV2LlamaSince  = Version{0, 23, 0, ""}
	runnerV2DenseSince  = Version{0, 25, 0, ""}
	runnerV2GraphsSince = Version{0, 29, 0, ""}
	// runnerV2AllSince: Model Runner V2 became the default for every
	// model, MoE and hybrid included (#53183, merged 2026-08-27; the 0.29.0
	// release notes).
	runnerV2AllSince = Version{0, 29, 0, ""}
	// hybridGDNGraphTransientSince: issue #50780, 0.26.0.
	hybridGDNGraphTransientSince = Version{0, 26, 0, ""}
)

// ProfileBoundaries are the releases where the profile run's peak changes
// for a model (moe: with routed experts): the sampler path's boundaries,
// Model Runner V2's steps, and for MoE models the persistent fused-MoE
// workspace (PersistentMoEWorkspace). Two releases with none of them in
// between profile alike.
func ProfileBoundaries(moe bool) []Version {
	b := []Version{flashInferSamplerOptInSince, tritonSamplerSince, flashInferSamplerAgainSince,
		runnerV2Qwen3Since, runnerV2LlamaSince, runnerV2DenseSince, runnerV2AllSince}
	if moe {
		return append(b, moeWorkspaceSince)
	}
	return b
}

// SamplerPath is the top-k/top-p implementation the dummy sampler of the
// profile run takes. The dummy batch asks for temperature 0.5, top-p 0.9
// and top-k = vocabulary − 1, so the implementation decides how many bytes
// per logit are alive at the profile's peak.
type SamplerPath string

// The sampler paths.
const (
	// SamplerSort is PyTorch's full sort of every row (values, int64
	// indices, an int64 reverse index, the radix sort's buffers).
	SamplerSort SamplerPath = "sort"
	// SamplerFlashInfer is FlashInfer's fused top-k/top-p sampling.
	SamplerFlashInfer SamplerPath = "flashinfer"
	// SamplerTriton is vLLM's Triton top-k/top-p kernel, in place, with a
	// cached float32 buffer of one vocabulary row per SM.
	SamplerTriton SamplerPath = "triton"
	// SamplerNoTopK is Model Runner V2's dummy sampler: its dummy batch
	// sets no sampling parameters, so no top-k/top-p runs at all.
	SamplerNoTopK SamplerPath = "none"
)

// Install is how vLLM was installed, which decides whether optional
// kernels (FlashInfer) are there.
type Install string

// The installs.
const (
	// InstallImage is vLLM's official image (vllm/vllm-openai), which
	// ships FlashInfer. The planner assumes it when nothing says otherwise.
	InstallImage Install = "image"
	// InstallPip is `pip install vllm` without FlashInfer.
	InstallPip Install = "pip"
)

// ParseInstall reads --vllm-install: "image" (the official image, with
// FlashInfer) or "pip" (a pip install without it); "" is the image.
func ParseInstall(s string) (Install, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "image", "docker", "container":
		return InstallImage, nil
	case "pip", "wheel", "pip-no-flashinfer":
		return InstallPip, nil
	}
	return "", fmt.Errorf("--vllm-install %q: use image (vLLM's official image, with FlashInfer) or pip (installed without FlashInfer)", s)
}

// OrDefault is the install, or the official image when none is given.
func (i Install) OrDefault() Install {
	if i == "" {
		return InstallImage
	}
	return i
}

// FlashInfer reports whether the install has FlashInfer.
func (i Install) FlashInfer() bool { return i.OrDefault() == InstallImage }

// officialImageRepo is vLLM's OpenAI-server image on Docker Hub.
const officialImageRepo = "vllm/vllm-openai"

// ImageInstall reads a container image reference (--vllm-image): vLLM's
// official image from any registry or mirror is InstallImage, and its tag
// names the release when it is one ("v0.10.1.1", "0.8.5-cu128"); any other
// image is taken as a pip install on another base (ok false: the caller
// says so). version is zero when the tag names none ("latest").
func ImageInstall(image string) (inst Install, version Version, official bool) {
	r := ReadImage(image)
	if !r.Official {
		return InstallPip, Version{}, false
	}
	return InstallImage, r.Version, true
}

// RunnerModel is what vLLM's choice of model runner reads of a model.
type RunnerModel struct {
	// Architecture is the config's first architecture (Qwen3ForCausalLM).
	Architecture string
	// MoE: the model has routed experts.
	MoE bool
	// Quantized: the checkpoint carries a quantization_config (quantizing
	// on the fly with --quantization does not count: vLLM reads the
	// model config's quantization, which then is the flag's).
	Quantized bool
	// Hybrid: some layers keep a linear-attention state (Mamba, gated
	// delta-net) instead of a KV cache.
	Hybrid bool
}

// EnvUseV2ModelRunner picks the model runner: "1" Model Runner V2, "0" the
// V1 runner. Up to 0.21 a boolean defaulting to 0 (V2 only when set to 1);
// from 0.22 (#39337) unset lets the config decide.
const EnvUseV2ModelRunner = "VLLM_USE_V2_MODEL_RUNNER"

// runnerV2MoEAllowlist0_23 are the architectures with routed experts that
// defaulted to Model Runner V2 from 0.23 (#42667, merged 2026-06-12, read
// from the 0.23 development tree; in the 0.23.0 tag: likely, unverified).
var runnerV2MoEAllowlist0_23 = []string{"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM"}

// runnerV2Allowlist0_25 are the MoE and hybrid architectures on the
// allowlist of 0.25–0.28 (_is_default_v2_model_runner_model, seen verbatim
// in a 0.26–0.28-era copy; the exact list per release is unverified).
var runnerV2Allowlist0_25 = []string{"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM", "KimiK3ForCausalLM", "LongcatFlashNgramForCausalLM", "DeepseekV4ForCausalLM"}

// ModelRunnerV2 reports whether vLLM runs the model on Model Runner V2
// (docs/vllm-profile.md, "Which runner"). VLLM_USE_V2_MODEL_RUNNER decides
// when set (to 1 at any release; to 0 from 0.22, where it became
// tri-state); otherwise the release's default:
//
//	≤ 0.21      never
//	0.22        Qwen3ForCausalLM, not MoE, not quantized (#39337)
//	0.23–0.24   + LlamaForCausalLM, MistralForCausalLM (#43458) and the MoE
//	            DeepseekV2ForCausalLM, Qwen2MoeForCausalLM (#42667); not
//	            quantized
//	0.25–0.28   every model that is not MoE and not hybrid, quantized
//	            included (#44443), plus an allowlist of MoE and hybrid
//	            architectures
//	0.29 –      every model (#53183: "Model Runner V2 is the default for all
//	            models")
//
// What forces the V1 runner whatever the default (some speculative
// methods, custom logits processors) is the caller's to add.
func ModelRunnerV2(v Version, m RunnerModel, env map[string]string) bool {
	v = orNewest(v)
	if on, ok := envBool(env, EnvUseV2ModelRunner); ok && (on || v.AtLeast(runnerV2Qwen3Since)) {
		return on
	}
	switch {
	case v.AtLeast(runnerV2AllSince):
		return true
	case v.AtLeast(runnerV2DenseSince):
		return (!m.MoE && !m.Hybrid) || slices.Contains(runnerV2Allowlist0_25, m.Architecture)
	case m.Quantized:
		return false
	case v.AtLeast(runnerV2LlamaSince):
		if m.MoE {
			return slices.Contains(runnerV2MoEAllowlist0_23, m.Architecture)
		}
		return !m.Hybrid && (m.Architecture == "LlamaForCausalLM" || m.Architecture == "MistralForCausalLM" || m.Architecture == "Qwen3ForCausalLM")
	case v.AtLeast(runnerV2Qwen3Since):
		return !m.MoE && !m.Hybrid && m.Architecture == "Qwen3ForCausalLM"
	}
	return false
}

// FlagEnableBatchShardedSampling splits the sampler's logits by tensor
// parallelism on Model Runner V2 (#50465, merged 2026-08; named in the
// 0.29.0 release notes as #51718): each rank computes its shard of the
// vocabulary, then an all-to-all over the batch leaves it min(S, T) / TP
// rows of the whole vocabulary, so the profile's logits are 1/TP of the
// all-gathered ones. Opt-in: _validate_batch_sharded_sampling refuses it
// without Model Runner V2, at TP 1, or with fewer sequences than ranks.
const FlagEnableBatchShardedSampling = "enable-batch-sharded-sampling"

// batchShardedSamplingSince is the first release with the flag.
var batchShardedSamplingSince = Version{0, 29, 0, ""}

// BatchShardedSampling reports --enable-batch-sharded-sampling on a
// release that has it.
func (s Settings) BatchShardedSampling() bool {
	return orNewest(s.Version).AtLeast(batchShardedSamplingSince) && s.extraBool(FlagEnableBatchShardedSampling)
}

// BatchShardedSamplingRefused says why a release that has
// --enable-batch-sharded-sampling refuses it for these settings on this
// runner, or "" when it takes it (an older release does not know the flag
// at all: the flag classification says so).
func BatchShardedSamplingRefused(s Settings, runnerV2 bool) string {
	switch {
	case !runnerV2:
		return "it needs Model Runner V2, and the V1 runner runs this model"
	case s.TensorParallelSize < 2:
		return "it needs tensor parallelism (TP 2 or more)"
	case s.MaxNumSeqs < s.TensorParallelSize:
		return fmt.Sprintf("it needs --max-num-seqs (%d) of at least the TP size (%d)", s.MaxNumSeqs, s.TensorParallelSize)
	}
	return ""
}

// DummySampler is the top-k/top-p path the profile run's dummy sampler
// takes on CUDA with default settings (memory notes §2.7):
//
//	≤ 0.11.0 (V1)    FlashInfer when installed (the official image), else sort
//	0.11.1 – 0.16.x  sort (FlashInfer opt-in, PR #26859)
//	0.17.0 – 0.20.x  Triton (PR #33538)
//	0.21.0 –         FlashInfer again on the V1 runner (PR #40376); without
//	                 FlashInfer the Triton kernel, which these releases
//	                 still have (unverified)
//	Model Runner V2  none: its dummy batch sets no top-k/top-p
func DummySampler(v Version, runnerV2 bool, inst Install) SamplerPath {
	v = orNewest(v)
	switch {
	case runnerV2:
		return SamplerNoTopK
	case v.AtLeast(flashInferSamplerAgainSince):
		if inst.FlashInfer() {
			return SamplerFlashInfer
		}
		return SamplerTriton
	case !v.AtLeast(flashInferSamplerOptInSince):
		if inst.FlashInfer() {
			return SamplerFlashInfer
		}
		return SamplerSort
	case v.AtLeast(tritonSamplerSince):
		return SamplerTriton
	}
	return SamplerSort
}

// SamplerUsesInstall reports whether the release's default sampler path
// depends on FlashInfer being installed (so the plan must say which
// install it assumed).
func SamplerUsesInstall(v Version, runnerV2 bool) bool {
	return DummySampler(v, runnerV2, InstallImage) != DummySampler(v, runnerV2, InstallPip)
}

// CUDAGraphEstimateIsZero reports whether the CUDA-graph estimate the
// profile takes is zero although graphs are captured: Model Runner V2's
// profile_cudagraph_memory() returned 0 until 0.29, so no graph memory was
// reserved inside the budget and capture could run out of memory at
// start-up (issues #49224, #50159; from 0.29 it profiles graph memory
// itself, PR #57865, unverified).
func CUDAGraphEstimateIsZero(v Version, runnerV2 bool) bool {
	return runnerV2 && !orNewest(v).AtLeast(runnerV2GraphsSince)
}

// HybridGDNGraphTransient reports whether the CUDA-graph profiler counts a
// transient that grows with max_num_batched_tokens as graph memory for
// hybrid gated-delta-net models (Qwen3.5/3.6-style linear attention): from
// 0.26.0 their KV pool came out 18–24% smaller (issue #50780, open when
// read). The size of the transient is not known to us; the planner warns.
func HybridGDNGraphTransient(v Version) bool {
	return orNewest(v).AtLeast(hybridGDNGraphTransientSince)
}
