package report

import (
	"fmt"
	"slices"
	"strconv"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// DefaultMaxKVLoss is the share of KV-cache tokens an upgrade may lose
// before the preflight fails (plan --max-kv-loss): 20%, a loss an operator
// notices as lost concurrency but that is smaller than the release-to-
// release steps the version rules know (the CUDA-graph estimate of 0.21.0
// takes more on a large MoE model, issue #45178).
const DefaultMaxKVLoss = 0.20

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

// UpgradeChange is one planned term that differs between the releases.
type UpgradeChange struct {
	// Term is named as in the plan report's JSON (per_gpu.cudagraph_gib,
	// settings.gpu_memory_utilization, ...).
	Term   string          `json:"term"`
	From   string          `json:"from"`
	To     string          `json:"to"`
	Causes []vllm.Boundary `json:"causes"`
	// Unexplained says why no boundary is named, when none is.
	Unexplained string `json:"unexplained,omitempty"`
}

// termRules are the version rules (vllm.Boundary.Rule) that can move each
// term: a change of a term at a boundary is put on the boundary's rules
// that move it, or on every rule of that boundary when none does.
var termRules = map[string][]string{
	"settings.gpu_memory_utilization": {"DefaultGPUMemoryUtilization", "PerInstanceBudget"},
	"settings.max_num_seqs":           {"V1ByDefault", "UsesV1", "V0Removed"},
	"settings.max_num_batched_tokens": {"V1ByDefault", "UsesV1", "V0Removed"},
	"settings.sampler_path":           {"DummySampler", "ModelRunnerV2"},
	"settings.model_runner_v2":        {"ModelRunnerV2"},
	"per_gpu.cudagraph_in_budget":     {"CUDAGraphsInBudget", "CUDAGraphEstimate", "CUDAGraphEstimateIsZero", "ModelRunnerV2"},
	"per_gpu.cudagraph_gib":           {"CUDAGraphEstimate", "CUDAGraphsInBudget", "CUDAGraphEstimateIsZero", "ModelRunnerV2", "WithDefaults", "HybridGDNGraphTransient"},
	"per_gpu.activation_gib":          {"DummySampler", "PersistentMoEWorkspace", "ModelRunnerV2", "V1ByDefault", "UsesV1"},
	"per_gpu.requested_gib":           {"DefaultGPUMemoryUtilization", "PerInstanceBudget"},
	"per_gpu.non_torch_gib":           {"V1ByDefault", "UsesV1", "V0Removed"},
	"per_gpu.kv_cache_gib":            nil,
}

// upgradeTerms reads the terms compared, in the order shown.
var upgradeTerms = []struct {
	name string
	get  func(memory.Budget) string
}{
	{"settings.gpu_memory_utilization", func(b memory.Budget) string { return fmtFloat(b.Settings.GPUMemoryUtilization) }},
	{"settings.max_num_seqs", func(b memory.Budget) string { return strconv.Itoa(b.Settings.MaxNumSeqs) }},
	{"settings.max_num_batched_tokens", func(b memory.Budget) string { return strconv.Itoa(b.Settings.MaxNumBatchedTokens) }},
	{"settings.model_runner_v2", func(b memory.Budget) string { return strconv.FormatBool(b.ModelRunnerV2) }},
	{"settings.sampler_path", func(b memory.Budget) string { return string(b.SamplerPath) }},
	{"per_gpu.cudagraph_in_budget", func(b memory.Budget) string {
		return strconv.FormatBool(b.CUDAGraphInBudget && !b.CUDAGraphEstimateZero)
	}},
	{"per_gpu.cudagraph_gib", func(b memory.Budget) string { return fmtFloat(GiBs(b.PerGPU.CUDAGraph)) }},
	{"per_gpu.activation_gib", func(b memory.Budget) string { return fmtFloat(GiBs(b.PerGPU.Activation)) }},
	{"per_gpu.non_torch_gib", func(b memory.Budget) string { return fmtFloat(GiBs(b.PerGPU.NonTorch)) }},
	{"per_gpu.requested_gib", func(b memory.Budget) string { return fmtFloat(GiBs(b.PerGPU.Requested)) }},
	{"per_gpu.kv_cache_gib", func(b memory.Budget) string { return fmtFloat(GiBs(b.PerGPU.KVCache)) }},
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Upgrade plans the evidence's deployment on its release and on to, and
// says what moving to `to` changes and why. Every release boundary
// (vllm.Boundaries) between the two is planned too, so that each change is
// put on the boundary where it happens: the rules are constant between
// boundaries. maxLoss is the share of KV tokens the upgrade may lose.
func Upgrade(e Evidence, to vllm.Version, maxLoss float64) (UpgradeReport, error) {
	from := e.Settings.Version
	if from.IsZero() {
		from = vllm.Newest()
	}
	lo, hi := from, to
	down := to.Compare(from) < 0
	if down {
		lo, hi = to, from
	}
	// The releases planned, oldest first: lo, every boundary in (lo, hi],
	// and hi; at each, the boundaries that start there.
	points := []vllm.Version{lo}
	starts := [][]vllm.Boundary{nil}
	for _, b := range vllm.Boundaries() {
		if b.Since.Compare(lo) <= 0 || b.Since.Compare(hi) > 0 {
			continue
		}
		if last := points[len(points)-1]; last.Compare(b.Since) == 0 {
			starts[len(starts)-1] = append(starts[len(starts)-1], b)
			continue
		}
		points = append(points, b.Since)
		starts = append(starts, []vllm.Boundary{b})
	}
	if points[len(points)-1].Compare(hi) != 0 {
		points = append(points, hi)
		starts = append(starts, nil)
	}
	plans := make([]memory.Budget, len(points))
	for i, v := range points {
		ev := e
		ev.Settings.Version = v
		if i == 0 || i == len(points)-1 {
			// The ends are the user's releases as written (a suffix such
			// as rc1 kept) and take their own calibration record.
			if (i == 0) == down {
				ev.Settings.Version = to
			} else {
				ev.Settings.Version = from
			}
		}
		in := memory.Input{Model: ev.Spec, Device: ev.Sel.Device, Count: ev.Sel.Count, Settings: ev.Settings, GPUsPerNode: ev.GPUsPerNode}
		if ev.AutoCount {
			in.Count = 0
		}
		b, err := memory.Plan(in)
		if err != nil {
			return UpgradeReport{}, err
		}
		plans[i] = b
	}
	first, last := plans[0], plans[len(plans)-1]
	before, after := first, last
	if down {
		before, after = last, first
	}
	r := UpgradeReport{From: upgradeSide(before), To: upgradeSide(after), MaxKVLoss: maxLoss, Changes: []UpgradeChange{}}
	for _, t := range upgradeTerms {
		a, z := t.get(before), t.get(after)
		if a == z {
			continue
		}
		c := UpgradeChange{Term: t.name, From: a, To: z, Causes: []vllm.Boundary{}}
		for i := 1; i < len(plans); i++ {
			bs := stepCauses(plans[i-1], plans[i], starts[i], t.name)
			if len(bs) == 0 && t.get(plans[i-1]) != t.get(plans[i]) {
				c.Unexplained = fmt.Sprintf("changes at %s where no rule of this term starts: the planner's calibration points differ by release (the nearer release's is taken)", points[i])
			}
			for _, b := range bs {
				if !slices.Contains(c.Causes, b) {
					c.Causes = append(c.Causes, b)
				}
			}
		}
		r.Changes = append(r.Changes, c)
	}
	if before.KVTokens > 0 {
		r.KVLoss = float64(before.KVTokens-after.KVTokens) / float64(before.KVTokens)
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
		r.Why = fmt.Sprintf("vLLM %s gives %d KV-cache tokens instead of %d: %.0f%% fewer, more than the %.0f%% allowed (--max-kv-loss)",
			r.To.VLLMVersion, after.KVTokens, before.KVTokens, 100*r.KVLoss, 100*maxLoss)
	default:
		r.Verdict, r.OK = "ok", true
		r.Why = fmt.Sprintf("vLLM %s starts the deployment with %d KV-cache tokens (%d on %s)", r.To.VLLMVersion, after.KVTokens, before.KVTokens, r.From.VLLMVersion)
		if !before.Fits {
			r.Why += "; it did not start on " + r.From.VLLMVersion
		}
	}
	if !e.Settings.Set[vllm.FlagGPUMemoryUtilization] {
		r.Notes = append(r.Notes, "--gpu-memory-utilization not given: each release plans with its own default")
	}
	return r, nil
}

// stepCauses are the boundaries starting at one release (starts, between
// plans a and z) that move a term: none when the term is the same on both
// sides; those whose rule moves it; for a term no rule moves by itself
// (the KV cache), the causes of every other term that moved at that step,
// or else every boundary of the step. A term with rules of its own that
// moves where none of them starts gets none: the caller says so.
func stepCauses(a, z memory.Budget, starts []vllm.Boundary, term string) []vllm.Boundary {
	var out []vllm.Boundary
	add := func(b vllm.Boundary) {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	for _, t := range upgradeTerms {
		if t.name != term {
			continue
		}
		if t.get(a) == t.get(z) {
			return nil
		}
	}
	for _, b := range starts {
		if slices.Contains(termRules[term], b.Rule) {
			add(b)
		}
	}
	if len(out) == 0 && len(termRules[term]) == 0 {
		for _, t := range upgradeTerms {
			if len(termRules[t.name]) == 0 || t.get(a) == t.get(z) {
				continue
			}
			for _, b := range starts {
				if slices.Contains(termRules[t.name], b.Rule) {
					add(b)
				}
			}
		}
	}
	if len(out) == 0 && len(termRules[term]) == 0 {
		return starts
	}
	return out
}

func upgradeSide(b memory.Budget) UpgradeSide {
	p := b.PerGPU
	return UpgradeSide{
		VLLMVersion:          b.Settings.Version.String(),
		GPUMemoryUtilization: b.Settings.GPUMemoryUtilization,
		PerGPU: PerGPUReport{TotalGiB: GiBs(p.Total), RequestedGiB: GiBs(p.Requested), WeightsGiB: GiBs(p.Weights),
			ActivationGiB: GiBs(p.Activation), NonTorchGiB: GiBs(p.NonTorch), CUDAGraphGiB: GiBs(p.CUDAGraph),
			CUDAGraphInBudget: b.CUDAGraphInBudget && !b.CUDAGraphEstimateZero, KVCacheGiB: GiBs(p.KVCache), ContextGiB: GiBs(p.Context), UnusedGiB: GiBs(b.Unused())},
		SamplerPath:   string(b.SamplerPath),
		ModelRunnerV2: b.ModelRunnerV2,
		KVCacheTokens: b.KVTokens,
		MaxModelLen:   b.MaxModelLen,
		MaxFitLen:     b.MaxFitLen,
		Fits:          b.Fits,
		Problems:      nonNil(b.Problems),
	}
}
