package doctor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
)

// startGate is the probe that guards a container's start-up, as
// kube.StartGate picks it: its startup probe, or without one its liveness
// probe, which then runs from the start.
func startGate(c ContainerFacts) *ProbeFacts {
	var live *ProbeFacts
	for i := range c.Probes {
		switch c.Probes[i].Kind {
		case "startup":
			return &c.Probes[i]
		case "liveness":
			live = &c.Probes[i]
		}
	}
	return live
}

// noPlanProbeWindow is the window asked for when there is neither a
// logged start-up nor a plan to estimate one from.
const noPlanProbeWindow = 10 * time.Minute

// probeWindow is the window a startup probe should give: the start-up
// estimate check and the webhook use (memory.StartupOf of the plan, with
// startup's margin, at the default storage class, as check assumes
// without an annotation), or, where a log timed the start-up, the same
// margin over what it took when that is longer. computed is false when
// neither is known.
func (g *diag) probeWindow() (window time.Duration, why string, computed bool) {
	if g.base != nil {
		est := memory.StartupOf(*g.base, startup.DefaultStorage)
		window = est.ProbeWindow()
		why = fmt.Sprintf("as check computes it: vLLM is expected to start in about %s, and a probe should allow %g times that", est.Summary(), startup.ProbeMargin)
		computed = true
	}
	if s := g.startupSeconds(); s > 0 {
		took := startup.Estimate{Total: startup.PodStart + time.Duration(math.Round(s))*time.Second}
		if w := took.ProbeWindow(); w > window {
			window, computed = w, true
			why = fmt.Sprintf("this vLLM took %.0f s to load and start its engine, %s with the pod's start, and a probe should allow %g times that", s, took.Total, startup.ProbeMargin)
		}
	}
	if !computed {
		return noPlanProbeWindow, "no plan or logged start-up to size it by: a round figure; give --gpu and the model for the estimate check makes", false
	}
	return window, why, true
}

func (g *diag) k8sRemedies() []Remedy {
	var rs []Remedy
	k := g.ev.K8s
	if len(k.SchedulingFailures) > 0 {
		rs = append(rs, g.schedulingRemedies()...)
	}
	probe, hasProbe := g.probeRemedy()
	if hasProbe {
		rs = append(rs, probe)
	}
	if r, ok := g.crashLoopRemedy(hasProbe); ok {
		rs = append(rs, r)
	}
	for _, c := range k.Containers {
		if c.VLLM && c.GPUResource == "" {
			n := 1
			if g.base != nil {
				n = max(g.base.Settings.TensorParallelSize, 1) * max(g.base.Settings.PipelineParallelSize, 1)
			}
			rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"resources.limits.nvidia.com/gpu", strconv.Itoa(n)},
				Why: fmt.Sprintf("give %s a GPU of its own: a limit of %d nvidia.com/gpu (tensor × pipeline parallel) makes the scheduler place it on GPUs no other pod holds", c.Workload, n)})
			break
		}
	}
	for _, h := range k.HPAs {
		if h.CPUOnly {
			rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"spec.metrics[].pods.metric.name", "vllm:num_requests_waiting"},
				Why: fmt.Sprintf("scale %s on queue depth (vllm:num_requests_waiting) or KV use (vllm:kv_cache_usage_perc) through a custom-metrics adapter instead of CPU", h.Name)})
		}
	}
	if len(k.Sharing) > 0 {
		rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"nodeSelector", labelSharing + "=none"},
			Why: "run vLLM on a GPU that is not time-sliced (or a MIG slice of its own): time-slicing shares memory with no isolation"})
	}
	for _, h := range k.GPUHints {
		if !strings.HasPrefix(h.Name, "nvidia.com/mig-") || g.base == nil {
			continue
		}
		sel, err := gpu.Resolve(h.Name)
		if err != nil {
			continue
		}
		if r, ok := g.biggerMIG(sel.Device); ok {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		pod, container := g.podRef()
		rs = append(rs, Remedy{Action: ActionGiveInput, Args: []string{"kubectl", "describe", "pod", pod},
			Why: fmt.Sprintf("the evidence names no cause the manifests can fix: give the pod's description and the log of its last run (kubectl logs %s -c %s --previous)", pod, container)})
	}
	return rs
}

// probeRemedy sizes a startup probe by probeWindow, with the formulas
// check gives its fix (admission's probe warning): a startup probe that
// exists gets the failureThreshold that covers the window after its
// initial delay; a liveness probe alone gets a startup probe of its period
// beside it, whose threshold covers the whole window. Where the probes
// cover the window but failed, the window is twice what failed.
func (g *diag) probeRemedy() (Remedy, bool) {
	window, why, _ := g.probeWindow()
	for _, c := range g.ev.K8s.Containers {
		if !c.VLLM {
			continue
		}
		gate := startGate(c)
		if gate == nil {
			continue
		}
		need := window.Seconds()
		if gate.BudgetSeconds >= need {
			if len(g.ev.K8s.ProbeFailures) == 0 {
				continue
			}
			need = 2 * gate.BudgetSeconds
			why = fmt.Sprintf("twice the %s probe's %.0f s, which covers the estimate yet failed", gate.Kind, gate.BudgetSeconds)
		}
		period := float64(gate.PeriodSeconds)
		needD := time.Duration(need * float64(time.Second))
		if gate.Kind == "startup" {
			n := int(kube.FailureThresholdFor(needD, gate.DelaySeconds, gate.PeriodSeconds))
			return Remedy{Action: ActionEditManifest, Args: []string{"startupProbe.failureThreshold", strconv.Itoa(n)},
				Why: fmt.Sprintf("the startup probe gives up after %.0f s: initialDelaySeconds %d + failureThreshold %d × periodSeconds %.0f = %.0f s covers %s (%s)",
					gate.BudgetSeconds, gate.DelaySeconds, n, period, float64(gate.DelaySeconds)+float64(n)*period, time.Duration(need)*time.Second, why)}, true
		}
		n := int(kube.FailureThresholdFor(needD, 0, gate.PeriodSeconds))
		return Remedy{Action: ActionEditManifest, Args: []string{"startupProbe.httpGet.path", "/health", "startupProbe.periodSeconds", strconv.Itoa(int(period)), "startupProbe.failureThreshold", strconv.Itoa(n)},
			Why: fmt.Sprintf("a startup probe of %d × %.0fs = %.0f s keeps the liveness probe (%.0f s) off until vLLM is up, %s (%s); a longer liveness window would also slow the detection of a hung server for the pod's whole life",
				n, period, float64(n)*period, gate.BudgetSeconds, time.Duration(need)*time.Second, why)}, true
	}
	return Remedy{}, false
}

// crashLoopRemedy answers restarts: where the evidence says why the
// container dies, the restarts are that failure repeating and its own
// fix ends them; otherwise the log of the last run says why.
func (g *diag) crashLoopRemedy(probeFix bool) (Remedy, bool) {
	k := g.ev.K8s
	many := slices.ContainsFunc(k.Restarts, func(r RestartFact) bool { return r.Count >= restartsMany })
	if len(k.CrashLoop) == 0 && !many {
		return Remedy{}, false
	}
	var causes []string
	switch {
	case probeFix && len(k.ProbeFailures) > 0:
		causes = append(causes, "the probe's kills (the startup probe above ends them)")
	}
	if g.has(CodeHostMemory) {
		causes = append(causes, "the OOMKill ("+CodeHostMemory+": the memory limit)")
	}
	if len(g.ev.OOMs) > 0 {
		causes = append(causes, "the CUDA out-of-memory error")
	}
	for _, l := range g.ev.Logs {
		if len(l.Report.Errors) > 0 {
			causes = append(causes, "vLLM's start-up error in "+l.Source)
			break
		}
	}
	if len(causes) > 0 {
		return Remedy{Action: ActionAdvice, Args: []string{},
			Why: "the restarts are " + strings.Join(causes, " and ") + " repeating: its fix ends the crash loop; restarting or deleting the pod alone brings the same failure back"}, true
	}
	pod, container := g.podRef()
	why := "the container keeps dying and nothing in the evidence says why (no OOMKill, no CUDA error, no probe failure): give the log of its last run, piped into headroom doctor -"
	var predicted []string
	for _, code := range []string{CodeWeightsTooLarge, CodeMaxModelLen, CodeOutsideBudget, CodeUtilizationEdge, CodeTensorParallel} {
		if f := g.findings[code]; f != nil && !f.seen {
			predicted = append(predicted, code)
		}
	}
	if len(predicted) > 0 {
		// A start-up the planner says fails would crash and restart just
		// so; the log tells whether that is what happens.
		why += fmt.Sprintf("; the planner predicts a start-up failure at these settings (%s), which would crash it this way", strings.Join(predicted, ", "))
	}
	return Remedy{Action: ActionGiveInput, Args: []string{"kubectl", "logs", pod, "-c", container, "--previous"}, Why: why}, true
}

// podRef is the pod and vLLM container the evidence names, for a kubectl
// command; placeholders where it names none.
func (g *diag) podRef() (pod, container string) {
	pod, container = "POD", "CONTAINER"
	if rs := g.ev.K8s.Restarts; len(rs) > 0 {
		name := strings.TrimPrefix(rs[0].Name, "Pod/")
		if p, c, ok := strings.Cut(name, "/"); ok {
			return p, c
		}
		pod = name
	}
	for _, c := range g.ev.K8s.Containers {
		if c.VLLM && c.Container != "" {
			container = c.Container
			if pod == "POD" && strings.HasPrefix(c.Workload, "Pod/") {
				pod = strings.TrimPrefix(c.Workload, "Pod/")
			}
			break
		}
	}
	return pod, container
}

// schedulingRemedies answer a pod the scheduler placed nowhere. Short of
// GPUs: the fewest GPUs the plan serves the context on, where fewer than
// asked (memory.FewestShards, tensor parallel within a node), and else
// that many free GPUs on one node. Another reason (a selector no node
// matches, a taint): the scheduler's own words and what to match.
func (g *diag) schedulingRemedies() []Remedy {
	k := g.ev.K8s
	reason := k.SchedulingReasons[len(k.SchedulingReasons)-1]
	if !k.GPUShort {
		return []Remedy{{Action: ActionAdvice, Args: []string{},
			Why: "the scheduler found no node for the pod (" + reason + "): match its nodeSelector, affinity and tolerations to nodes that exist, or add such nodes; no vLLM setting changes where a pod may run"}}
	}
	asked := g.dep.GPUCount
	name := "GPU"
	if g.dep.hasGPU {
		name = g.dep.GPU
	}
	var rs []Remedy
	if g.base != nil {
		asked = max(asked, g.base.Settings.TensorParallelSize*g.base.Settings.PipelineParallelSize)
		in := g.predicted()
		in.Count = 0
		in.Settings.TensorParallelSize, in.Settings.PipelineParallelSize = 0, 1
		in.Settings.Set = without(in.Settings.Set, vllm.FlagTensorParallelSize, vllm.FlagPipelineParallelSize)
		if fb, err := memory.FewestShards(in); err == nil && fb.Fits {
			if n := max(fb.Settings.TensorParallelSize, 1); n < asked {
				rs = append(rs, Remedy{Action: ActionEditManifest,
					Args: []string{"resources.limits.nvidia.com/gpu", strconv.Itoa(n), "args", "--" + vllm.FlagTensorParallelSize + " " + strconv.Itoa(n)},
					Why: fmt.Sprintf("ask for %d GPUs instead of %d: %s serves --max-model-len %d on %d × %s at --tensor-parallel-size %d (%s of weights and %s of KV cache per GPU, %s tokens, %.2f requests of %d tokens at once), and %d free GPUs on one node are easier to find",
						n, asked, g.dep.Model, fb.MaxModelLen, n, name, n, gib(fb.PerGPU.Weights), gib(fb.PerGPU.KVCache), vllm.Thousands(fb.KVTokens), fb.MaxConcurrency, fb.MaxModelLen, n)})
			}
		}
	}
	hw := Remedy{Action: ActionHardware, Args: []string{},
		Why: fmt.Sprintf("or make %d %s free on one node: the scheduler found too few (%s); free them from other pods, or add a node with that many", max(asked, 1), name, reason)}
	if asked > 0 && g.dep.hasGPU {
		hw.Args = []string{fmt.Sprintf("%dx%s", asked, g.dep.GPU)}
	}
	if len(rs) == 0 {
		hw.Why = strings.TrimPrefix(hw.Why, "or ")
	}
	return append(rs, hw)
}

// without is m without the keys drop, copied (the settings' Set map is
// shared with the plan).
func without(m map[string]bool, drop ...string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}
