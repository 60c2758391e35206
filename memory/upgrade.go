package memory

import (
	"fmt"
	"slices"
	"strconv"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Upgrade is one deployment planned on two vLLM releases: both plans and
// every planned term that differs, each with the release boundaries
// (vllm.Boundaries) that move it. Front ends (plan --upgrade-to, the
// webhook on an image change) render it; none computes a change itself.
type Upgrade struct {
	Before, After Budget
	Changes       []Change
	// KVLoss is the share of KV-cache tokens the move loses (negative: it
	// gains; 0 when the first plan has none).
	KVLoss float64
}

// Change is one planned term that differs between the two releases.
type Change struct {
	// Term is named as in the plan report's JSON (per_gpu.cudagraph_gib,
	// settings.gpu_memory_utilization, ...).
	Term   string          `json:"term"`
	From   string          `json:"from"`
	To     string          `json:"to"`
	Causes []vllm.Boundary `json:"causes"`
	// Unexplained says where the term moves with no rule of its own
	// starting there, when it does.
	Unexplained string `json:"unexplained,omitempty"`
}

// termRules are the version rules (vllm.Boundary.Rule) that move each
// term. A term with none (the KV cache) moves through the others.
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
}

func gibText(b int64) string { return strconv.FormatFloat(float64(b)/gib, 'f', 2, 64) }

// upgradeTerms read the terms compared, in the order shown.
var upgradeTerms = []struct {
	name string
	get  func(Budget) string
}{
	{"settings.gpu_memory_utilization", func(b Budget) string { return strconv.FormatFloat(b.Settings.GPUMemoryUtilization, 'f', -1, 64) }},
	{"settings.max_num_seqs", func(b Budget) string { return strconv.Itoa(b.Settings.MaxNumSeqs) }},
	{"settings.max_num_batched_tokens", func(b Budget) string { return strconv.Itoa(b.Settings.MaxNumBatchedTokens) }},
	{"settings.model_runner_v2", func(b Budget) string { return strconv.FormatBool(b.ModelRunnerV2) }},
	{"settings.sampler_path", func(b Budget) string { return string(b.SamplerPath) }},
	{"per_gpu.cudagraph_in_budget", func(b Budget) string { return strconv.FormatBool(b.GraphsReserved()) }},
	{"per_gpu.cudagraph_gib", func(b Budget) string { return gibText(b.PerGPU.CUDAGraph) }},
	{"per_gpu.activation_gib", func(b Budget) string { return gibText(b.PerGPU.Activation) }},
	{"per_gpu.non_torch_gib", func(b Budget) string { return gibText(b.PerGPU.NonTorch) }},
	{"per_gpu.requested_gib", func(b Budget) string { return gibText(b.PerGPU.Requested) }},
	{"per_gpu.kv_cache_gib", func(b Budget) string { return gibText(b.PerGPU.KVCache) }},
}

// GraphsReserved reports whether the KV budget holds back the CUDA-graph
// estimate: the release puts it in the budget and the estimate is not the
// zero of Model Runner V2 before 0.29.
func (b Budget) GraphsReserved() bool { return b.CUDAGraphInBudget && !b.CUDAGraphEstimateZero }

// PlanUpgrade plans in on its release (zero: the newest) and on to, and
// says what the move changes and why. Every release boundary between the
// two is planned too, so that each change is put on the boundary where it
// happens: the rules are constant between boundaries.
func PlanUpgrade(in Input, to vllm.Version) (Upgrade, error) {
	from := in.Settings.Version
	if from.IsZero() {
		from = vllm.Newest()
	}
	if to.IsZero() {
		to = vllm.Newest()
	}
	down := to.Compare(from) < 0
	lo, hi := from, to
	if down {
		lo, hi = to, from
	}
	// The releases planned, oldest first: lo, every boundary in (lo, hi],
	// and hi; with each, the boundaries that start there.
	points := []vllm.Version{lo}
	starts := [][]vllm.Boundary{nil}
	for _, b := range vllm.Boundaries() {
		if b.Since.Compare(lo) <= 0 || b.Since.Compare(hi) > 0 {
			continue
		}
		if last := len(points) - 1; points[last].Compare(b.Since) == 0 {
			starts[last] = append(starts[last], b)
			continue
		}
		points = append(points, b.Since)
		starts = append(starts, []vllm.Boundary{b})
	}
	// Two releases the rules do not tell apart (0.33.0 and 0.33.0rc1)
	// are still two ends, each planned and labelled as given.
	if len(points) == 1 || points[len(points)-1].Compare(hi) != 0 {
		points = append(points, hi)
		starts = append(starts, nil)
	}
	// The ends are the releases as given (a suffix such as rc1 kept).
	points[0], points[len(points)-1] = lo, hi
	plans := make([]Budget, len(points))
	var layers []model.LayerParams
	for i, v := range points {
		at := in
		at.Settings.Version = v
		b, err := planWith(at, &layers)
		if err != nil {
			return Upgrade{}, err
		}
		plans[i] = b
	}
	u := Upgrade{Before: plans[0], After: plans[len(plans)-1], Changes: []Change{}}
	if down {
		u.Before, u.After = u.After, u.Before
	}
	for _, t := range upgradeTerms {
		a, z := t.get(u.Before), t.get(u.After)
		if a == z {
			continue
		}
		c := Change{Term: t.name, From: a, To: z, Causes: []vllm.Boundary{}}
		for i := 1; i < len(plans); i++ {
			if t.get(plans[i-1]) == t.get(plans[i]) {
				continue
			}
			bs := stepCauses(plans[i-1], plans[i], starts[i], t.name)
			if len(bs) == 0 {
				c.Unexplained = fmt.Sprintf("changes at %s where no rule of this term starts: the planner's calibration points differ by release (the nearer release's is taken)", points[i])
			}
			for _, b := range bs {
				if !slices.Contains(c.Causes, b) {
					c.Causes = append(c.Causes, b)
				}
			}
		}
		u.Changes = append(u.Changes, c)
	}
	if u.Before.KVTokens > 0 {
		u.KVLoss = float64(u.Before.KVTokens-u.After.KVTokens) / float64(u.Before.KVTokens)
	}
	return u, nil
}

// stepCauses are the boundaries starting at one release (starts, between
// plans a and z) that move a term that changes there: those whose rule
// moves it; for a term no rule moves by itself (the KV cache), the causes
// of every other term that moved at that step, or else every boundary of
// the step. A term with rules of its own that moves where none of them
// starts gets none: the caller says so.
func stepCauses(a, z Budget, starts []vllm.Boundary, term string) []vllm.Boundary {
	var out []vllm.Boundary
	add := func(rules []string) {
		for _, b := range starts {
			if slices.Contains(rules, b.Rule) && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	add(termRules[term])
	if len(termRules[term]) > 0 {
		return out
	}
	for _, t := range upgradeTerms {
		if len(termRules[t.name]) > 0 && t.get(a) != t.get(z) {
			add(termRules[t.name])
		}
	}
	if len(out) == 0 {
		return starts
	}
	return out
}

// CausesText names a change's causes in one line: "the CUDA-graph estimate is
// inside the budget (0.21.0, PR #38284)"; the unexplained reason when none.
func (c Change) CausesText() string {
	s := ""
	for i, b := range c.Causes {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s (%s, %s)", b.What, b.Since, b.Source)
	}
	if s == "" {
		return c.Unexplained
	}
	return s
}
