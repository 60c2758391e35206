package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"headroom.dev/headroom/host"
)

// kindLeaderWorkerSet is the kind of sigs.k8s.io/lws.
//
// The LeaderWorkerSet types are imported (sigs.k8s.io/lws/api/leaderworkerset/v1):
// that package needs only k8s.io/api and apimachinery, and its pod
// templates are the core ones the webhook already reads.
const kindLeaderWorkerSet = "LeaderWorkerSet"

// lwsGroup is its API group.
var lwsGroup = lwsv1.GroupVersion.Group

// lwsTemplate is the pod template a LeaderWorkerSet's leaders run: the
// leader template, or the worker template when it has none (LWS's rule),
// with its JSON pointer.
func lwsLeader(o *lwsv1.LeaderWorkerSet) (*corev1.PodTemplateSpec, string) {
	t := &o.Spec.LeaderWorkerTemplate
	if t.LeaderTemplate != nil {
		return t.LeaderTemplate, "/spec/leaderWorkerTemplate/leaderTemplate"
	}
	return &t.WorkerTemplate, "/spec/leaderWorkerTemplate/workerTemplate"
}

// reviewLeaderWorkerSet checks a LeaderWorkerSet and, for the mutating
// webhook, patches its leader's vLLM command.
func (h *Handler) reviewLeaderWorkerSet(ctx context.Context, namespace string, raw []byte, mutate bool) (decision, error) {
	var o lwsv1.LeaderWorkerSet
	if err := decodeObject(raw, &o); err != nil {
		return decision{Evaluation: Evaluation{Kind: kindLeaderWorkerSet}}, err
	}
	d := decision{Evaluation: h.evaluateLeaderWorkerSet(ctx, namespace, &o, nil, !mutate)}
	if !mutate || !d.RunsVLLM {
		return d, nil
	}
	leader, path := lwsLeader(&o)
	ann := lwsAnnotations(&o, leader)
	fix := autofix(ann)
	var plans []string
	for _, s := range d.Engines {
		notes, plan := fixContainer(&d.patch, path+"/spec"+pointer("containers", index(s.index)), s.c, s.l, s.a, fix)
		d.notes = append(d.notes, notes...)
		if plan != nil {
			plans = append(plans, PlanSummary(*plan))
		}
	}
	if fix && len(plans) > 0 {
		d.patch.setAnnotation("/metadata", o.Annotations, AnnotationPlan, strings.Join(plans, " | "))
	}
	return d, nil
}

// lwsAnnotations are the object's annotations over its leader template's.
func lwsAnnotations(o *lwsv1.LeaderWorkerSet, leader *corev1.PodTemplateSpec) map[string]string {
	return Workload{Meta: o.ObjectMeta, TemplateMeta: leader.ObjectMeta}.annotations()
}

// EvaluateLeaderWorkerSet runs the validating webhook's checks on a
// LeaderWorkerSet. node holds the labels of the node one of its pods runs
// on, when known (the audit; see Workload.Node).
func (h *Handler) EvaluateLeaderWorkerSet(ctx context.Context, namespace string, o *lwsv1.LeaderWorkerSet, node map[string]string) Evaluation {
	return h.evaluateLeaderWorkerSet(ctx, namespace, o, node, true)
}

// evaluateLeaderWorkerSet plans one group of a LeaderWorkerSet: the vLLM
// command of its leader (`vllm serve` in the container's command, or
// inside its `sh -c` script after Ray's start, as vLLM's LWS example writes
// it) on the GPUs of the whole group, size pods of them.
func (h *Handler) evaluateLeaderWorkerSet(ctx context.Context, namespace string, o *lwsv1.LeaderWorkerSet, node map[string]string, explain bool) Evaluation {
	e := Evaluation{Kind: kindLeaderWorkerSet}
	leader, _ := lwsLeader(o)
	ann := lwsAnnotations(o, leader)
	e.Bypass = bypassed(ann)
	g := group{kind: kindLeaderWorkerSet, pods: 1}
	if s := o.Spec.LeaderWorkerTemplate.Size; s != nil {
		g.pods = int(*s)
	}
	workers := &o.Spec.LeaderWorkerTemplate.WorkerTemplate
	wann := Workload{Meta: o.ObjectMeta, TemplateMeta: workers.ObjectMeta}.annotations()
	var workerGPU gpuEvidence
	for _, c := range workers.Spec.Containers {
		if ev := h.readGPU(wann, &workers.Spec, c, node); ev.count > workerGPU.count || !workerGPU.known && ev.known {
			workerGPU = ev
		}
	}
	g.workerGPUs = workerGPU.count
	for i, c := range leader.Spec.Containers {
		l, ok, err := readLaunch(c, h.configReader(ctx, namespace, &leader.Spec, c))
		if !ok {
			continue
		}
		label := fmt.Sprintf("leader container %q", c.Name)
		e.RunsVLLM = true
		if err != nil {
			e.warn(CodeNotChecked, "%s: memory not checked: its vLLM flags cannot be read: %v", label, err)
			continue
		}
		if bad := releaseAnnotation(ann, &l); bad != "" {
			e.warn(CodeVersionUnknown, "%s: %s", label, bad)
		}
		if g.pods < 1 || g.pods > maxGroupPods {
			e.warn(CodeNotChecked, "%s: memory not checked: leaderWorkerTemplate.size %d is not a pod count from 1 to %d", label, g.pods, maxGroupPods)
			break
		}
		e.configUnread(label, l)
		ev := h.readGPU(ann, &leader.Spec, c, node)
		g.leaderGPUs = ev.count
		if !ev.known && workerGPU.known {
			ev.sel, ev.known, ev.from = workerGPU.sel, true, "the worker template's "+workerGPU.from
		}
		if g.gpus() > 0 {
			set := l.settings
			ev.count = max(set.TensorParallelSize, 1) * max(set.PipelineParallelSize, 1) * max(set.DataParallelSize, 1)
			if ev.count > maxGPUs {
				ev.count = g.gpus()
			}
		}
		sub := subject{label: label, settings: l.settings, env: literalEnv(c), gpu: ev, group: &g}
		a := h.assess(ctx, namespace, ann, sub, explain)
		e.Denials = append(e.Denials, a.denials...)
		e.Warnings = append(e.Warnings, a.warnings...)
		if a.planned() && g.pods > 1 {
			if g.leaderGPUs > 0 {
				e.groupHostCheck(h.podPolicy, &leader.Spec, i, c, label, *a.budget, host.Options{GPUs: g.leaderGPUs, Env: l.envOf(c)})
			}
			for wi, wc := range workers.Spec.Containers {
				if n := h.readGPU(wann, &workers.Spec, wc, node).count; n > 0 {
					e.groupHostCheck(h.podPolicy, &workers.Spec, wi, wc, fmt.Sprintf("worker container %q", wc.Name), *a.budget, host.Options{GPUs: n, Worker: true, Env: l.envOf(wc)})
				}
			}
		}
		if g.pods > 1 {
			if !devShmMounted(&leader.Spec, c) {
				e.Warnings = append(e.Warnings, sharedMemoryWarning(label))
			}
			for _, wc := range workers.Spec.Containers {
				if h.readGPU(wann, &workers.Spec, wc, node).count > 0 && !devShmMounted(&workers.Spec, wc) {
					e.Warnings = append(e.Warnings, sharedMemoryWarning(fmt.Sprintf("worker container %q", wc.Name)))
				}
			}
		}
		e.Engines = append(e.Engines, Engine{Container: c.Name, GPUFrom: ev.from, Input: a.in, Budget: a.budget, index: i, c: c, l: l, a: a})
		// One vLLM server per group: the leader's first.
		break
	}
	return e
}
