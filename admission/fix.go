package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// allocConfSafe reports whether the mutating webhook may add
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to a container: where
// vLLM's rule allows it (vllm.ExpandableSegmentsSafe), never over a value
// the user set, and not when envFrom may set it: an env entry would
// override that.
func allocConfSafe(c corev1.Container, l launch, set vllm.Settings) bool {
	if hasEnv(c, vllm.AllocConfEnv) || len(c.EnvFrom) > 0 {
		return false
	}
	if _, ok := l.settings.Env[vllm.AllocConfEnv]; ok {
		return false
	}
	safe, _ := vllm.ExpandableSegmentsSafe(set.TensorParallelSize, set.PipelineParallelSize, l.settings.Set["enable-sleep-mode"])
	return safe
}

// fills are the flags autofix adds and the plan they give.
type fills struct {
	args []string
	plan memory.Budget
}

// recommendFills picks the values of the flags the user left out: the
// recommended --gpu-memory-utilization and the longest --max-model-len
// that fits (at the user's utilization when the user set one). A fill that
// would turn a plan that fits into one that does not is dropped.
func recommendFills(a assessment) (fills, error) {
	in := a.in
	set := in.Settings
	needLen, needUtil := !set.Set[vllm.FlagMaxModelLen], !set.Set[vllm.FlagGPUMemoryUtilization]
	if !needLen && !needUtil {
		return fills{plan: *a.budget}, nil
	}
	// Only the utilization and the length are filled: the max-num-seqs
	// half of Recommend would be two plans thrown away, and in is planned.
	rec, err := memory.RecommendContext(in, *a.budget, memory.Options{})
	if err != nil {
		return fills{}, err
	}
	util, maxLen := rec.GPUMemoryUtilization, rec.MaxModelLen
	if !needUtil {
		// Recommend sizes the context at its own utilization; at the
		// user's it may be shorter. a.budget is planned at the user's
		// utilization with no --max-model-len (needLen), so its MaxFitLen
		// is that length.
		maxLen = min(maxLen, a.budget.MaxFitLen)
	}
	try := func(withUtil bool) (fills, error) {
		var f fills
		out := in
		if needLen && maxLen > 0 {
			out.Settings.MaxModelLen = maxLen
			f.args = append(f.args, fmt.Sprintf("--%s=%d", vllm.FlagMaxModelLen, maxLen))
		}
		if withUtil {
			out.Settings.GPUMemoryUtilization = util
			f.args = append(f.args, fmt.Sprintf("--%s=%.2f", vllm.FlagGPUMemoryUtilization, util))
		}
		var err error
		f.plan, err = memory.Plan(out)
		return f, err
	}
	f, err := try(needUtil)
	if err != nil {
		return fills{}, err
	}
	if needUtil && !f.plan.Fits && a.budget.Fits {
		return try(false)
	}
	return f, nil
}

// fixContainer adds the patches of the container at cpath (a JSON pointer): the allocator setting (always,
// where safe) and, with autofix, the missing flags. It returns notes for the
// mutating webhook's warnings and the plan to summarise (nil when the
// container was not planned).
func fixContainer(p *patchBuilder, cpath string, c corev1.Container, l launch, a assessment, autofix bool) (notes []string, plan *memory.Budget) {
	set := l.settings
	if a.planned() {
		set = a.budget.Settings
	}
	if allocConfSafe(c, l, set) {
		appendList(p, cpath+pointer("env"), c.Env != nil, corev1.EnvVar{Name: vllm.AllocConfEnv, Value: vllm.ExpandableSegments})
	}
	if !autofix || !a.planned() {
		return nil, a.budget
	}
	f, err := a.plans.fills(a)
	if err != nil {
		return []string{fmt.Sprintf("container %q: autofix skipped: %v", c.Name, err)}, a.budget
	}
	if len(f.args) == 0 {
		return nil, &f.plan
	}
	if l.script != nil {
		// vLLM starts inside `sh -c SCRIPT` (a LeaderWorkerSet's leader
		// starts Ray, then `vllm serve`): the flags go into the script,
		// right after the vLLM command.
		field := "command"
		if l.script.inArgs {
			field = "args"
		}
		p.replace(cpath+pointer(field, index(l.script.index)), l.script.withFlags(f.args))
		return []string{fmt.Sprintf("container %q: autofix added %v to the vllm command of its script", c.Name, f.args)}, &f.plan
	}
	if !l.appendable {
		return []string{fmt.Sprintf("container %q: autofix cannot add flags because its flags end with a bare \"--\"; add %v yourself", c.Name, f.args)}, a.budget
	}
	appendList(p, cpath+pointer("args"), c.Args != nil, f.args...)
	return []string{fmt.Sprintf("container %q: autofix added %v", c.Name, f.args)}, &f.plan
}
