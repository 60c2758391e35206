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
	// Remedies keep the KV tokens of From on To when the move loses some:
	// a pinned pool (-o args --pin-kv), a higher utilization (-o args).
	Remedies []memory.UpgradeRemedy `json:"remedies"`
	// OwnKVTokens, when set, is what To's plan gives with headroom's own
	// calibration points for To: the difference from to.kv_cache_tokens
	// is headroom's, not vLLM's, and left out of kv_loss.
	OwnKVTokens int64 `json:"own_calibration_kv_cache_tokens,omitempty"`
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
	r := UpgradeReport{From: upgradeSide(before), To: upgradeSide(after), Changes: u.Changes, KVLoss: u.KVLoss, MaxKVLoss: maxLoss,
		Remedies: append([]memory.UpgradeRemedy{}, u.Remedies...), OwnKVTokens: u.OwnKVTokens}
	r.NewWarnings = []memory.Finding{}
	for _, w := range after.Warnings {
		if !slices.ContainsFunc(before.Warnings, func(o memory.Finding) bool { return o.Code == w.Code }) {
			r.NewWarnings = append(r.NewWarnings, w)
		}
	}
	lost := fmt.Sprintf("%s KV-cache tokens instead of %s: %.1f%% fewer", vllm.Thousands(after.KVTokens), vllm.Thousands(before.KVTokens), 100*r.KVLoss)
	switch {
	case !after.Fits:
		r.Verdict = UpgradeStops
		why := "the plan does not fit"
		if len(after.Problems) > 0 {
			why = after.Problems[0].Message
		}
		r.Why = fmt.Sprintf("on vLLM %s the deployment does not start: %s", r.To.VLLMVersion, why)
	case before.Fits && r.KVLoss > maxLoss:
		r.Verdict = UpgradeLosesKV
		r.Why = fmt.Sprintf("vLLM %s gives %s, more than the %.0f%% --max-kv-loss allows", r.To.VLLMVersion, lost, 100*maxLoss)
	case before.Fits && r.KVLoss > memory.DriftShare:
		r.Verdict, r.OK = UpgradeOK, true
		r.Why = fmt.Sprintf("vLLM %s starts the deployment with %s, within the %.0f%% --max-kv-loss allows", r.To.VLLMVersion, lost, 100*maxLoss)
	default:
		r.Verdict, r.OK = UpgradeOK, true
		r.Why = fmt.Sprintf("vLLM %s starts the deployment with %s KV-cache tokens (%s on %s)", r.To.VLLMVersion, vllm.Thousands(after.KVTokens), vllm.Thousands(before.KVTokens), r.From.VLLMVersion)
		if !before.Fits {
			r.Why += "; it did not start on " + r.From.VLLMVersion
		}
	}
	if r.KVLoss > memory.DriftShare && before.Fits && after.Fits {
		switch len(r.Remedies) {
		case 0:
			r.Why += "; neither a pinned KV pool nor a higher utilization that leaves vLLM its margins keeps them"
		default:
			kinds := make([]string, len(r.Remedies))
			for i, m := range r.Remedies {
				kinds[i] = map[string]string{memory.RemedyPinKVPool: "a pinned KV pool", memory.RemedyRaiseUtilization: "a higher utilization"}[m.Kind]
			}
			r.Why += "; " + strings.Join(kinds, " or ") + " keeps them (remedies)"
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
	if r.OwnKVTokens != 0 {
		var terms []string
		for _, c := range r.Changes {
			if c.Unexplained != "" {
				terms = append(terms, c.Label)
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("headroom's own calibration points differ between the two releases (%s): with vLLM %s's own, its plan gives %s KV tokens; that difference is headroom's, not vLLM's, and is left out of the upgrade's cost",
			strings.Join(terms, ", "), r.To.VLLMVersion, vllm.Thousands(r.OwnKVTokens)))
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

// The verdicts of an upgrade preflight (UpgradeReport.Verdict).
const (
	UpgradeOK      = "ok"
	UpgradeStops   = "stops"
	UpgradeLosesKV = "loses-kv"
)

// UpgradeArgs are the vLLM flags to run the deployment with on the release
// moved to: the user's, with the remedy that keeps the KV cache of the
// release moved from when the move loses some (a pinned pool with pin,
// else a higher utilization; none when neither is needed or found). pin
// without a pinned pool to offer is an error that says why.
func UpgradeArgs(e Evidence, r UpgradeReport, pin bool) ([]string, error) {
	want := memory.RemedyRaiseUtilization
	if pin {
		want = memory.RemedyPinKVPool
	}
	for _, m := range r.Remedies {
		if m.Kind == want {
			s, err := withArgs(e.Settings, m.Args)
			if err != nil {
				return nil, err
			}
			return nonNilStrings(s.Args()), nil
		}
	}
	if pin {
		if r.KVLoss <= 0 {
			return nil, fmt.Errorf("vLLM %s loses no KV cache against %s: nothing to pin (drop --pin-kv)", r.To.VLLMVersion, r.From.VLLMVersion)
		}
		return nil, fmt.Errorf("no pinned KV pool keeps the %s tokens on vLLM %s: it has no --%s (0.10.2 and newer do), or the pool does not fit beside the rest", vllm.Thousands(r.From.KVCacheTokens), r.To.VLLMVersion, vllm.FlagKVCacheMemory)
	}
	return nonNilStrings(e.Settings.Args()), nil
}
