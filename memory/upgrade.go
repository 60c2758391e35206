package memory

import (
	"fmt"
	"math"
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
	// gains; 0 when the first plan has none): vLLM's rules only, with the
	// terms that move with headroom's own calibration held (Change.Ours).
	KVLoss float64
	// OwnKVTokens, when not 0, is what the later plan gives with
	// headroom's calibration of its own release (After holds the earlier
	// one's): the part of the difference that is ours, not vLLM's.
	OwnKVTokens int64
	// Remedies keep the earlier release's KV cache on the later one when
	// the move loses more than the planner's own error (DriftShare): a
	// pinned pool, a higher utilization.
	Remedies []UpgradeRemedy
}

// UpgradeRemedy is one way to keep the KV cache of the release moved
// from: the flags to set on the release moved to, and the KV tokens the
// plan then gives (it fits).
type UpgradeRemedy struct {
	// Kind is "pin_kv_pool" or "raise_utilization".
	Kind     string   `json:"kind"`
	Args     []string `json:"args"`
	KVTokens int64    `json:"kv_cache_tokens"`
	Why      string   `json:"why"`
}

// The kinds of UpgradeRemedy.
const (
	RemedyPinKVPool        = "pin_kv_pool"
	RemedyRaiseUtilization = "raise_utilization"
)

// Change is one planned term that differs between the two releases.
type Change struct {
	// Term is named as in the plan report's JSON (per_gpu.cudagraph_gib,
	// settings.gpu_memory_utilization, ...); Label in words, for tables.
	Term   string          `json:"term"`
	Label  string          `json:"label"`
	From   string          `json:"from"`
	To     string          `json:"to"`
	Causes []vllm.Boundary `json:"causes"`
	// Unexplained says where the term moves with no rule of its own
	// starting there, when it does.
	Unexplained string `json:"unexplained,omitempty"`
	// Ours is set when the term moves only with headroom's calibration
	// points (no vLLM rule of it starts where it moves): the later plan
	// holds the earlier release's value, out of the upgrade's cost.
	Ours bool `json:"ours,omitempty"`
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

// upgradeTerms read the terms compared, in the order shown, with their
// names in words; bytes reads the planned parts a calibration point can
// move (nil for the others).
var upgradeTerms = []struct {
	name, label string
	get         func(Budget) string
	bytes       func(Budget) int64
}{
	{"settings.gpu_memory_utilization", "default --gpu-memory-utilization", func(b Budget) string { return strconv.FormatFloat(b.Settings.GPUMemoryUtilization, 'f', -1, 64) }, nil},
	{"settings.max_num_seqs", "default --max-num-seqs", func(b Budget) string { return strconv.Itoa(b.Settings.MaxNumSeqs) }, nil},
	{"settings.max_num_batched_tokens", "default --max-num-batched-tokens", func(b Budget) string { return strconv.Itoa(b.Settings.MaxNumBatchedTokens) }, nil},
	{"settings.model_runner_v2", "runs on Model Runner V2", func(b Budget) string { return strconv.FormatBool(b.ModelRunnerV2) }, nil},
	{"settings.sampler_path", "profile run's sampler", func(b Budget) string { return string(b.SamplerPath) }, nil},
	{"per_gpu.cudagraph_in_budget", "CUDA graphs held back inside the budget", func(b Budget) string { return strconv.FormatBool(b.GraphsReserved()) }, nil},
	{"per_gpu.cudagraph_gib", "CUDA graphs (GiB)", func(b Budget) string { return gibText(b.PerGPU.CUDAGraph) }, func(b Budget) int64 { return b.PerGPU.CUDAGraph }},
	{"per_gpu.activation_gib", "activation peak (GiB)", func(b Budget) string { return gibText(b.PerGPU.Activation) }, func(b Budget) int64 { return b.PerGPU.Activation }},
	{"per_gpu.non_torch_gib", "non-torch memory (GiB)", func(b Budget) string { return gibText(b.PerGPU.NonTorch) }, func(b Budget) int64 { return b.PerGPU.NonTorch }},
	{"per_gpu.requested_gib", "utilization budget (GiB)", func(b Budget) string { return gibText(b.PerGPU.Requested) }, nil},
	{"per_gpu.kv_cache_gib", "KV cache (GiB)", func(b Budget) string { return gibText(b.PerGPU.KVCache) }, nil},
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
	// held is the later plan's parts less what headroom's calibration
	// points moved them by, where a step moves a part with no rule of it
	// starting there (step deltas signed from Before to After).
	held, holding := Measured{}, false
	for _, t := range upgradeTerms {
		a, z := t.get(u.Before), t.get(u.After)
		if a == z {
			continue
		}
		c := Change{Term: t.name, Label: t.label, From: a, To: z, Causes: []vllm.Boundary{}}
		var ours int64
		for i := 1; i < len(plans); i++ {
			if t.get(plans[i-1]) == t.get(plans[i]) {
				continue
			}
			bs := stepCauses(plans[i-1], plans[i], starts[i], t.name)
			if len(bs) == 0 {
				c.Unexplained = fmt.Sprintf("changes at %s where no vLLM rule of it starts: headroom's own calibration points differ by release (the nearer release's figure is taken), not vLLM", points[i])
				if t.bytes != nil {
					step := t.bytes(plans[i]) - t.bytes(plans[i-1])
					if down {
						step = -step
					}
					ours += step
				}
			}
			for _, b := range bs {
				if !slices.Contains(c.Causes, b) {
					c.Causes = append(c.Causes, b)
				}
			}
		}
		if ours != 0 && t.bytes(u.After)-ours > 0 {
			c.Ours = len(c.Causes) == 0
			v := t.bytes(u.After) - ours
			switch t.name {
			case "per_gpu.non_torch_gib":
				held.NonTorch = v
			case "per_gpu.activation_gib":
				held.Activation = v
			case "per_gpu.cudagraph_gib":
				held.CUDAGraph = v
			}
			holding = true
		}
		u.Changes = append(u.Changes, c)
	}
	if holding {
		at := in
		at.Settings.Version, at.Measured = u.After.Settings.Version, &held
		b, err := planWith(at, &layers)
		if err != nil {
			return Upgrade{}, err
		}
		u.OwnKVTokens, u.After = u.After.KVTokens, b
		// The other terms read from the later plan as held; a term ours
		// alone keeps the value headroom's own calibration gives it.
		kept := u.Changes[:0]
		for _, c := range u.Changes {
			if !c.Ours {
				for _, t := range upgradeTerms {
					if t.name == c.Term {
						c.To = t.get(u.After)
					}
				}
				if c.To == c.From {
					continue
				}
			}
			kept = append(kept, c)
		}
		u.Changes = kept
	}
	if u.Before.KVTokens > 0 {
		u.KVLoss = float64(u.Before.KVTokens-u.After.KVTokens) / float64(u.Before.KVTokens)
	}
	if u.KVLoss > DriftShare && u.After.NumBlocks > 0 {
		at := in
		at.Settings.Version, at.Measured = u.After.Settings.Version, nil
		if holding {
			at.Measured = &held
		}
		u.Remedies = keepKV(at, u.Before, u.After)
	}
	return u, nil
}

// keepKV finds the ways to keep before's KV tokens on after's release,
// planned on in (after's release and settings): the pool before had,
// pinned (--kv-cache-memory-bytes, where the release has it and it fits),
// and the lowest --gpu-memory-utilization that gives as many tokens, up
// to the highest that leaves room for what vLLM does not budget
// (PolicyHeadroom), where one does.
func keepKV(in Input, before, after Budget) []UpgradeRemedy {
	var out []UpgradeRemedy
	if p, ok := PinPool(in, after, before.KVTokens, fmt.Sprintf("the %s KV tokens of vLLM %s, pinned", vllm.Thousands(before.KVTokens), before.Settings.Version)); ok && p.Fits {
		out = append(out, UpgradeRemedy{Kind: RemedyPinKVPool, Args: []string{p.Flag, strconv.FormatInt(p.Bytes, 10)}, KVTokens: p.KVTokens,
			Why: fmt.Sprintf("pin the KV pool at %s per GPU: vLLM %s then allocates the %s tokens vLLM %s gave, whatever its budget rules", GiB(p.Bytes), after.Settings.Version, vllm.Thousands(p.KVTokens), before.Settings.Version)})
	}
	top, _ := Utilization(after, PolicyHeadroom)
	for c := int(math.Round(after.Settings.GPUMemoryUtilization*100)) + 1; c <= int(math.Round(top*100)); c++ {
		at := in
		at.Settings.GPUMemoryUtilization = float64(c) / 100
		b, err := Plan(at)
		if err != nil || !b.Fits || b.KVTokens < before.KVTokens {
			continue
		}
		u := strconv.FormatFloat(at.Settings.GPUMemoryUtilization, 'f', 2, 64)
		out = append(out, UpgradeRemedy{Kind: RemedyRaiseUtilization, Args: []string{"--" + vllm.FlagGPUMemoryUtilization, u}, KVTokens: b.KVTokens,
			Why: fmt.Sprintf("raise --gpu-memory-utilization to %s on vLLM %s: %s KV tokens, and still room for what vLLM does not budget (at most %.2f)", u, after.Settings.Version, vllm.Thousands(b.KVTokens), top)})
		break
	}
	return out
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
