package admission

import (
	"context"
	"fmt"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// subject is one vLLM server to check: a container of a pod, or a KAITO
// Workspace.
type subject struct {
	// label names it in messages: `container "vllm"`, `workspace`.
	label    string
	settings vllm.Settings
	env      map[string]string
	gpu      gpuEvidence
	// defaults, when set, fills settings the platform chooses (KAITO's
	// flags) once the model is known.
	defaults func(spec model.Spec, s *vllm.Settings)
	// group is set for a server that spans pods; gpu.count is then the
	// GPUs its parallelism uses, and the group's own checks run.
	group *group
}

// assessment is what the planner says about a subject.
type assessment struct {
	denials  []Finding
	warnings []Finding
	// in and budget are set when the subject was planned.
	in     memory.Input
	budget *memory.Budget
	// key names in in plans, the cache it was planned through; "" when
	// in is not to be remembered.
	key   string
	plans *planCache
	// alts are the alternatives quoted in a denial, in the webhook's
	// order (memory.AlternativesFrom); nil without one.
	alts []memory.Alternative
}

// planned reports whether the planner ran.
func (a assessment) planned() bool { return a.budget != nil }

// maxAlternatives bounds the fixes quoted in a denial.
const maxAlternatives = 3

// assess resolves the subject's model and GPU and runs the planner. What
// cannot be resolved becomes a warning: the webhook fails open. explain
// adds the planner's alternatives to a denial; the mutating webhook, which
// never denies, skips that search.
func (h *Handler) assess(ctx context.Context, namespace string, ann map[string]string, sub subject, explain bool) assessment {
	var a assessment
	warn := func(code, format string, args ...any) {
		a.warnings = append(a.warnings, Finding{Code: code, Message: sub.label + ": " + fmt.Sprintf(format, args...)})
	}
	for _, why := range sub.gpu.shared {
		warn(CodeSharedGPU, "the GPU looks shared: %s; vLLM sizes its KV cache from the whole card's memory, so another process on the same GPU makes it run out of memory", why)
	}
	spec, err := h.resolveModel(ctx, namespace, ann, sub.settings.Model)
	if err == nil {
		spec, err = memory.ServedModel(spec, sub.settings)
	}
	if err != nil {
		warn(CodeNotChecked, "memory not checked: %v", err)
		return a
	}
	if !sub.gpu.known {
		warn(CodeNotChecked, "memory not checked: cannot tell which GPU it gets (%s); %s", withoutCLIAdvice(sub.gpu.unresolved), gpuAdvice(sub.gpu.unselected))
		return a
	}
	if sub.gpu.count <= 0 {
		warn(CodeNotChecked, "memory not checked: it requests no GPU (resources.limits %q); vLLM needs one", ResourceGPU)
		return a
	}
	set := sub.settings
	if sub.defaults != nil {
		sub.defaults(spec, &set)
	}
	in := memory.Input{Model: spec, Device: sub.gpu.sel.Device, Count: sub.gpu.count, Settings: set, Env: mergeEnv(set.Env, sub.env)}
	if c := set.Speculative; c != nil && c.NeedsDraftModel() {
		// The draft from the catalog, as plan reads it offline; one the
		// catalog lacks is named by the plan's own warning.
		if d, err := h.catalog.lookup(c.Model); err == nil {
			in.Draft = &d
		}
	}
	if sub.group != nil {
		in.GPUsPerNode = sub.group.node()
	}
	key := ""
	if _, fromConfigMap := ann[AnnotationModelConfig]; !fromConfigMap {
		key = planKey(in)
	}
	b, err := h.plans.plan(key, in)
	if err != nil {
		warn(CodeNotChecked, "memory not checked: %v", err)
		return a
	}
	a.in, a.budget, a.key, a.plans = in, &b, key, &h.plans

	dev := sub.gpu.sel.Device
	size := memory.GiB(dev.TotalBytes)
	if dev.Estimated {
		size += " estimated"
	}
	what := fmt.Sprintf("%s on %d × %s (%s, from %s)", spec.ID, sub.gpu.count, dev.Name, size, sub.gpu.from)
	// memory.Plan resolves --max-model-len auto to the length vLLM will
	// pick, so its problems are what vLLM would fail on.
	var problems []string
	for _, p := range b.Problems {
		problems = append(problems, p.Message)
	}
	if len(problems) > 0 {
		msg := fmt.Sprintf("%s: %s: %s", sub.label, what, strings.Join(problems, "; "))
		var fixes []string
		var alts []memory.Alternative
		if explain {
			alts = h.plans.alternatives(key, in, b, h.devices)
			if sub.group == nil {
				alts = pinnedAlternatives(alts, in, sub.gpu.node)
			}
		}
		a.alts = alts
		for _, alt := range alts {
			if len(fixes) == maxAlternatives {
				break
			}
			if sub.group != nil {
				fixes = append(fixes, sub.group.describe(alt, in.Count, dev.Name))
				continue
			}
			fixes = append(fixes, alt.Message)
		}
		if len(fixes) > 0 {
			msg += ". To fix: " + strings.Join(fixes, "; or ")
		}
		a.denials = append(a.denials, Finding{Code: b.Problems[0].Code, Message: msg})
	}
	for _, w := range b.Warnings {
		warn(w.Code, "%s: %s", what, w.Message)
	}
	if b.AutoFit && len(problems) == 0 {
		warn(CodeAutoLen, "--max-model-len auto: vLLM will serve about %d tokens of context here", b.MaxModelLen)
	}
	if sub.group != nil {
		d, w := sub.group.checks(h, sub.label, spec, in, b)
		a.denials = append(a.denials, d...)
		a.warnings = append(a.warnings, w...)
		return a
	}
	// b.Settings carries vLLM's defaults: every size is at least 1.
	if used := b.Settings.TensorParallelSize * b.Settings.PipelineParallelSize * b.Settings.DataParallelSize; sub.gpu.count > used {
		hint := ""
		if tp := sub.gpu.count / b.Settings.PipelineParallelSize; memory.TPShards(spec, tp) {
			hint = fmt.Sprintf("; set --tensor-parallel-size %d to shard the model over all of them", tp)
		}
		warn(CodeUnusedGPUs, "it gets %d GPUs but its flags use %d%s", sub.gpu.count, used, hint)
	}
	return a
}

// mergeEnv combines the environment written before the command (in a
// shell script) with the container's; the command line's wins, as in a
// shell.
func mergeEnv(command, container map[string]string) map[string]string {
	if len(command) == 0 {
		return container
	}
	out := make(map[string]string, len(command)+len(container))
	for k, v := range container {
		out[k] = v
	}
	for k, v := range command {
		out[k] = v
	}
	return out
}

// PlanSummary is the one-line plan written to headroom.dev/plan.
func PlanSummary(b memory.Budget) string {
	p := b.PerGPU
	verdict := "fits"
	if !b.Fits {
		verdict = "does not fit"
	}
	return fmt.Sprintf("%s on %d × %s, TP %d PP %d, vLLM %s: per GPU weights %s, KV cache %s (%d tokens, %.1f × %d-token requests) at --gpu-memory-utilization %.2f; %s",
		b.Model.ID, b.Count, b.Device.Name, b.Settings.TensorParallelSize, b.Settings.PipelineParallelSize, b.Settings.Version,
		memory.GiB(p.Weights), memory.GiB(p.KVCache), b.KVTokens, b.MaxConcurrency, b.MaxModelLen, b.Settings.GPUMemoryUtilization, verdict)
}
