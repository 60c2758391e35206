package admission

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/vllm"
)

// hpaWarning is the warning about an HPA that scales a vLLM server on host
// resources. vLLM's load is in its queue and its KV cache, which CPU does
// not follow: the engine's CPU use stays flat while requests wait.
func hpaWarning(s kube.Scaling, workload string, v vllm.Version) string {
	waiting, _ := vllm.MetricNameAt(vllm.MetricRequestsWaiting, v)
	kv, ok := vllm.MetricNameAt(vllm.MetricKVCacheUsage, v)
	metrics := waiting
	if ok {
		metrics += " and " + kv
	}
	return fmt.Sprintf("HorizontalPodAutoscaler %q scales the vLLM server %s on %s alone; vLLM's load shows in queued requests and KV-cache use, not in %s: scale on %s through a custom or external metric", s.Name, workload, s.HostOnly, s.HostOnly, metrics)
}

// hpaWarnings lists the HPAs of the namespace that scale kind/name on host
// resources alone. Lookup failures are logged and skipped: the check only
// warns.
func (h *Handler) hpaWarnings(ctx context.Context, namespace, kind, name string, v vllm.Version) []string {
	if h.hpas == nil || name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.lookupTimeout)
	defer cancel()
	list, err := h.hpas.ListHPAs(ctx, namespace)
	if err != nil {
		h.log.Warn("cannot list HorizontalPodAutoscalers", "namespace", namespace, "err", err)
		return nil
	}
	var out []string
	for i := range list {
		s := kube.ScalingV2(&list[i])
		if s.HostOnly != "" && s.Targets(kind, name) {
			out = append(out, hpaWarning(s, fmt.Sprintf("%s %q", kind, name), v))
		}
	}
	return out
}

// reviewHPA warns when an HPA being admitted scales a vLLM Deployment or
// StatefulSet on host resources alone. An HPA is never denied.
func (h *Handler) reviewHPA(ctx context.Context, version, namespace string, raw []byte) (decision, error) {
	d := decision{Evaluation: Evaluation{Kind: "HorizontalPodAutoscaler"}}
	var s kube.Scaling
	switch version {
	case "v2":
		var o autoscalingv2.HorizontalPodAutoscaler
		if err := decodeObject(raw, &o); err != nil {
			return d, err
		}
		s = kube.ScalingV2(&o)
	case "v1":
		var o autoscalingv1.HorizontalPodAutoscaler
		if err := decodeObject(raw, &o); err != nil {
			return d, err
		}
		s = kube.ScalingV1(&o)
	default:
		return d, nil
	}
	if s.HostOnly == "" || h.templates == nil || !(s.Targets("Deployment", s.TargetName) || s.Targets("StatefulSet", s.TargetName)) {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.lookupTimeout)
	defer cancel()
	t, err := h.templates.GetPodTemplate(ctx, namespace, s.TargetKind, s.TargetName)
	if err != nil {
		// The target may not exist yet (applied after the HPA).
		h.log.Debug("cannot read the HPA's target", "namespace", namespace, "kind", s.TargetKind, "name", s.TargetName, "err", err)
		return d, nil
	}
	for _, c := range t.Spec.Containers {
		if l, ok, _ := readLaunch(c, nil); ok {
			d.warn(CodeCPUOnlyHPA, "%s", hpaWarning(s, fmt.Sprintf("%s %q", s.TargetKind, s.TargetName), l.settings.Version))
			break
		}
	}
	return d, nil
}
