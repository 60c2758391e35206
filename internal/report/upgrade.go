package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// UpgradeReport is `headroom plan --upgrade-to B -o json`: the plan of the
// same deployment on two vLLM releases, every planned term that differs
// with the rule boundaries that move it, and the verdict. Fields may be
// added, never renamed.
type UpgradeReport struct {
	From UpgradeSide `json:"from"`
	To   UpgradeSide `json:"to"`
	// Changes are the terms whose value differs between the two releases,
	// each with its causes (vllm.Boundaries entries).
	Changes []UpgradeChange `json:"changes"`
	// KVLoss is the share of KV-cache tokens the upgrade loses (negative:
	// it gains); MaxKVLoss the share allowed.
	KVLoss    float64 `json:"kv_loss"`
	MaxKVLoss float64 `json:"max_kv_loss"`
	// NewWarnings are the warnings of the plan on To that the plan on From
	// does not have (by code): risks the rules know but do not size, such
	// as Model Runner V2 reserving no CUDA-graph memory before 0.29.
	NewWarnings []memory.Finding `json:"new_warnings"`
	// Verdict is "ok", "stops" (the deployment no longer starts) or
	// "loses-kv" (it loses more than MaxKVLoss); Why says it in words.
	Verdict string   `json:"verdict"`
	Why     string   `json:"why"`
	OK      bool     `json:"ok"`
	Notes   []string `json:"notes,omitempty"`
}

// UpgradeSide is the plan on one release.
type UpgradeSide struct {
	VLLMVersion          string           `json:"vllm_version"`
	GPUMemoryUtilization float64          `json:"gpu_memory_utilization"`
	PerGPU               PerGPUReport     `json:"per_gpu"`
	SamplerPath          string           `json:"sampler_path"`
	ModelRunnerV2        bool             `json:"model_runner_v2"`
	KVCacheTokens        int64            `json:"kv_cache_tokens"`
	MaxModelLen          int              `json:"max_model_len"`
	MaxFitLen            int              `json:"max_fit_model_len"`
	Fits                 bool             `json:"fits"`
	Problems             []memory.Finding `json:"problems"`
}

// UpgradeChange is one planned term that differs between the releases,
// with its causes (memory.Change).
type UpgradeChange = memory.Change

// Upgrade plans the evidence's deployment on its release and on to
// (memory.PlanUpgrade) and gives the verdict: "stops" when to does not
// start it, "loses-kv" when it loses more than maxLoss of the KV tokens.
func Upgrade(e Evidence, to vllm.Version, maxLoss float64) (UpgradeReport, error) {
	// The layout plan chooses for several GPUs, kept on both releases:
	// the same deployment, moved.
	e = withLayout(e)
	in := memory.Input{Model: e.Spec, Device: e.Sel.Device, Count: e.Sel.Count, Settings: e.Settings, GPUsPerNode: e.GPUsPerNode, Draft: e.Draft}
	if e.AutoCount {
		in.Count = 0
	}
	u, err := memory.PlanUpgrade(in, to)
	if err != nil {
		return UpgradeReport{}, err
	}
	before, after := u.Before, u.After
	r := UpgradeReport{From: upgradeSide(before), To: upgradeSide(after), Changes: u.Changes, KVLoss: u.KVLoss, MaxKVLoss: maxLoss}
	r.NewWarnings = []memory.Finding{}
	for _, w := range after.Warnings {
		if !slices.ContainsFunc(before.Warnings, func(o memory.Finding) bool { return o.Code == w.Code }) {
			r.NewWarnings = append(r.NewWarnings, w)
		}
	}
	switch {
	case !after.Fits:
		r.Verdict = "stops"
		why := "the plan does not fit"
		if len(after.Problems) > 0 {
			why = after.Problems[0].Message
		}
		r.Why = fmt.Sprintf("on vLLM %s the deployment does not start: %s", r.To.VLLMVersion, why)
	case before.Fits && r.KVLoss > maxLoss:
		r.Verdict = "loses-kv"
		r.Why = fmt.Sprintf("vLLM %s gives %d KV-cache tokens instead of %d: %.1f%% fewer, more than the %.1f%% allowed (--max-kv-loss)",
			r.To.VLLMVersion, after.KVTokens, before.KVTokens, 100*r.KVLoss, 100*maxLoss)
	default:
		r.Verdict, r.OK = "ok", true
		r.Why = fmt.Sprintf("vLLM %s starts the deployment with %d KV-cache tokens (%d on %s)", r.To.VLLMVersion, after.KVTokens, before.KVTokens, r.From.VLLMVersion)
		if !before.Fits {
			r.Why += "; it did not start on " + r.From.VLLMVersion
		}
	}
	// The evidence's notes (the release read from an image tag, the
	// model's spelling) come first, as in every other report.
	r.Notes = append(r.Notes, e.Notes...)
	if past := vllm.PastRules(to); past != "" {
		r.Notes = append(r.Notes, past)
	}
	if !e.Settings.Set[vllm.FlagGPUMemoryUtilization] {
		r.Notes = append(r.Notes, "--gpu-memory-utilization not given: each release plans with its own default")
	}
	if e.Measured != nil {
		r.Notes = append(r.Notes, "the calibration record is not used here: it holds one release's numbers, and both releases are planned from the rules")
	}
	return r, nil
}

// ParseShare reads the share of KV-cache tokens an upgrade may lose
// (plan's --max-kv-loss, the page's max_kv_loss) as "20%" or "0.2".
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || v < 0 || v > 1 || v != v {
		return 0, fmt.Errorf("%q: give a share between 0%% and 100%%, e.g. 20%% or 0.2", s)
	}
	return v, nil
}

func upgradeSide(b memory.Budget) UpgradeSide {
	p := b.PerGPU
	return UpgradeSide{
		VLLMVersion:          b.Settings.Version.String(),
		GPUMemoryUtilization: b.Settings.GPUMemoryUtilization,
		PerGPU: PerGPUReport{TotalGiB: GiBs(p.Total), RequestedGiB: GiBs(p.Requested), WeightsGiB: GiBs(p.Weights),
			ActivationGiB: GiBs(p.Activation), NonTorchGiB: GiBs(p.NonTorch), CUDAGraphGiB: GiBs(p.CUDAGraph),
			CUDAGraphInBudget: b.GraphsReserved(), KVCacheGiB: GiBs(p.KVCache), ContextGiB: GiBs(p.Context), UnusedGiB: GiBs(b.Unused())},
		SamplerPath:   string(b.SamplerPath),
		ModelRunnerV2: b.ModelRunnerV2,
		KVCacheTokens: b.KVTokens,
		MaxModelLen:   b.MaxModelLen,
		MaxFitLen:     b.MaxFitLen,
		Fits:          b.Fits,
		Problems:      nonNil(b.Problems),
	}
}
