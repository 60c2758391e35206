package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/vllm"
)

// hpaScaling is what the check needs of an HPA: its target and whether it
// scales on host resources (CPU, memory) alone.
type hpaScaling struct {
	name       string
	targetKind string
	targetName string
	targetAPI  string
	// hostOnly names the resources ("cpu", "cpu and memory") when every
	// metric is a CPU or memory resource metric; "" otherwise.
	hostOnly string
}

// scalingOfV2 reads an autoscaling/v2 HPA. With no metrics the controller
// scales on 80% CPU (the API's documented default).
func scalingOfV2(h *autoscalingv2.HorizontalPodAutoscaler) hpaScaling {
	s := hpaScaling{name: h.Name, targetKind: h.Spec.ScaleTargetRef.Kind, targetName: h.Spec.ScaleTargetRef.Name, targetAPI: h.Spec.ScaleTargetRef.APIVersion}
	if len(h.Spec.Metrics) == 0 {
		s.hostOnly = "cpu"
		return s
	}
	var names []string
	for _, m := range h.Spec.Metrics {
		var r corev1.ResourceName
		switch {
		case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
			r = m.Resource.Name
		case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
			r = m.ContainerResource.Name
		default:
			return s
		}
		if r != corev1.ResourceCPU && r != corev1.ResourceMemory {
			return s
		}
		if !slices.Contains(names, string(r)) {
			names = append(names, string(r))
		}
	}
	s.hostOnly = strings.Join(names, " and ")
	return s
}

// scalingOfV1 reads an autoscaling/v1 HPA, which can only scale on CPU.
func scalingOfV1(h *autoscalingv1.HorizontalPodAutoscaler) hpaScaling {
	return hpaScaling{name: h.Name, targetKind: h.Spec.ScaleTargetRef.Kind, targetName: h.Spec.ScaleTargetRef.Name, targetAPI: h.Spec.ScaleTargetRef.APIVersion, hostOnly: "cpu"}
}

// targets reports whether the HPA scales the apps/v1 workload kind/name.
func (s hpaScaling) targets(kind, name string) bool {
	group, _, _ := strings.Cut(s.targetAPI, "/")
	return s.targetKind == kind && s.targetName == name && group == "apps"
}

// hpaWarning is the warning about an HPA that scales a vLLM server on host
// resources. vLLM's load is in its queue and its KV cache, which CPU does
// not follow: the engine's CPU use stays flat while requests wait.
func hpaWarning(s hpaScaling, workload string, v vllm.Version) string {
	waiting, _ := vllm.MetricNameAt(vllm.MetricRequestsWaiting, v)
	kv, ok := vllm.MetricNameAt(vllm.MetricKVCacheUsage, v)
	metrics := waiting
	if ok {
		metrics += " and " + kv
	}
	return fmt.Sprintf("HorizontalPodAutoscaler %q scales the vLLM server %s on %s alone; vLLM's load shows in queued requests and KV-cache use, not in %s: scale on %s through a custom or external metric", s.name, workload, s.hostOnly, s.hostOnly, metrics)
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
		s := scalingOfV2(&list[i])
		if s.hostOnly != "" && s.targets(kind, name) {
			out = append(out, hpaWarning(s, fmt.Sprintf("%s %q", kind, name), v))
		}
	}
	return out
}

// reviewHPA warns when an HPA being admitted scales a vLLM Deployment or
// StatefulSet on host resources alone. An HPA is never denied.
func (h *Handler) reviewHPA(ctx context.Context, version, namespace string, raw []byte) (decision, error) {
	d := decision{kind: "HorizontalPodAutoscaler"}
	var s hpaScaling
	switch version {
	case "v2":
		var o autoscalingv2.HorizontalPodAutoscaler
		if err := decodeObject(raw, &o); err != nil {
			return d, err
		}
		s = scalingOfV2(&o)
	case "v1":
		var o autoscalingv1.HorizontalPodAutoscaler
		if err := decodeObject(raw, &o); err != nil {
			return d, err
		}
		s = scalingOfV1(&o)
	default:
		return d, nil
	}
	if s.hostOnly == "" || h.templates == nil || !(s.targets("Deployment", s.targetName) || s.targets("StatefulSet", s.targetName)) {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.lookupTimeout)
	defer cancel()
	t, err := h.templates.GetPodTemplate(ctx, namespace, s.targetKind, s.targetName)
	if err != nil {
		// The target may not exist yet (applied after the HPA).
		h.log.Debug("cannot read the HPA's target", "namespace", namespace, "kind", s.targetKind, "name", s.targetName, "err", err)
		return d, nil
	}
	for _, c := range t.Spec.Containers {
		if l, ok, _ := readLaunch(c); ok {
			d.warnings = append(d.warnings, hpaWarning(s, fmt.Sprintf("%s %q", s.targetKind, s.targetName), l.settings.Version))
			break
		}
	}
	return d, nil
}
