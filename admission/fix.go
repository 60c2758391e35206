package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// Allocator settings the mutating webhook adds.
const (
	envAllocConf = "PYTORCH_CUDA_ALLOC_CONF"
	// allocConfValue lets PyTorch grow segments instead of fragmenting
	// reserved memory (KAITO issue #976: 737 MiB reserved but unallocated
	// at the OOM on a 16 GB GPU; vLLM issue #41158 asks for it by default).
	allocConfValue = "expandable_segments:True"
)

// allocConfSafe reports whether PYTORCH_CUDA_ALLOC_CONF=expandable_segments
// can be added to a container, and why not. Not with more than one GPU per
// server: vLLM crashed with it at tensor-parallel size > 1 (custom
// all-reduce IPC, KAITO issue #1077, which removed it in PR #1120);
// pipeline parallelism is left out too, as untested. Not with
// --enable-sleep-mode, whose memory pool allocator PyTorch refuses to
// combine with expandable segments (unverified across releases; it costs
// nothing to leave out). Never over a value the user set, and not when
// envFrom may set it: an env entry would override that.
func allocConfSafe(c corev1.Container, l launch, set vllm.Settings) bool {
	if hasEnv(c, envAllocConf) || len(c.EnvFrom) > 0 {
		return false
	}
	if _, ok := l.settings.Env[envAllocConf]; ok {
		return false
	}
	if l.settings.Set["enable-sleep-mode"] {
		return false
	}
	return max(set.TensorParallelSize, 1) == 1 && max(set.PipelineParallelSize, 1) == 1
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
		// user's it may be shorter.
		at := in
		at.Settings.MaxModelLen = 0
		b, err := memory.Plan(at)
		if err != nil {
			return fills{}, err
		}
		maxLen = min(maxLen, b.MaxFitLen)
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

// fixContainer adds the container's patches: the allocator setting (always,
// where safe) and, with autofix, the missing flags. It returns notes for the
// mutating webhook's warnings and the plan to summarise (nil when the
// container was not planned).
func fixContainer(p *patchBuilder, podPath string, i int, c corev1.Container, l launch, a assessment, autofix bool) (notes []string, plan *memory.Budget) {
	cpath := podPath + pointer("containers", index(i))
	set := l.settings
	if a.planned() {
		set = a.budget.Settings
	}
	if allocConfSafe(c, l, set) {
		appendList(p, cpath+pointer("env"), c.Env != nil, corev1.EnvVar{Name: envAllocConf, Value: allocConfValue})
	}
	if !autofix || !a.planned() {
		return nil, a.budget
	}
	f, err := recommendFills(a)
	if err != nil {
		return []string{fmt.Sprintf("container %q: autofix skipped: %v", c.Name, err)}, a.budget
	}
	if len(f.args) == 0 {
		return nil, &f.plan
	}
	if !l.appendable {
		why := "its flags end with a bare \"--\""
		if l.shell {
			why = "vLLM starts from a shell script"
		}
		return []string{fmt.Sprintf("container %q: autofix cannot add flags because %s; add %v yourself", c.Name, why, f.args)}, a.budget
	}
	appendList(p, cpath+pointer("args"), c.Args != nil, f.args...)
	return []string{fmt.Sprintf("container %q: autofix added %v", c.Name, f.args)}, &f.plan
}
