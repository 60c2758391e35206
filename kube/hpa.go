package kube

import (
	"slices"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// Scaling is what headroom reads of an HPA: its target and the metrics it
// scales on.
type Scaling struct {
	Name       string
	TargetKind string
	TargetName string
	TargetAPI  string
	// Metrics describe each metric: "resource/cpu", "container_resource/memory",
	// "pods/NAME", "object/NAME", "external/NAME"; "resource/cpu (default)"
	// when the HPA names none.
	Metrics []string
	// HostOnly names the host resources ("cpu", "cpu and memory") when every
	// metric is a CPU or memory resource metric, and is "" otherwise. A vLLM
	// server's load is in its queue and its KV cache, which CPU does not
	// follow: the engine's CPU use stays flat while requests wait.
	HostOnly string
}

// ScalingV2 reads an autoscaling/v2 HPA. With no metrics the controller
// scales on 80% average CPU (the API's documented default).
func ScalingV2(h *autoscalingv2.HorizontalPodAutoscaler) Scaling {
	s := Scaling{Name: h.Name, TargetKind: h.Spec.ScaleTargetRef.Kind, TargetName: h.Spec.ScaleTargetRef.Name, TargetAPI: h.Spec.ScaleTargetRef.APIVersion}
	if len(h.Spec.Metrics) == 0 {
		s.Metrics, s.HostOnly = []string{"resource/cpu (default)"}, "cpu"
		return s
	}
	var host []string
	hostOnly := true
	for _, m := range h.Spec.Metrics {
		var r corev1.ResourceName
		switch {
		case m.Resource != nil:
			r = m.Resource.Name
			s.Metrics = append(s.Metrics, "resource/"+string(r))
		case m.ContainerResource != nil:
			r = m.ContainerResource.Name
			s.Metrics = append(s.Metrics, "container_resource/"+string(r))
		case m.Pods != nil:
			s.Metrics = append(s.Metrics, "pods/"+m.Pods.Metric.Name)
		case m.Object != nil:
			s.Metrics = append(s.Metrics, "object/"+m.Object.Metric.Name)
		case m.External != nil:
			s.Metrics = append(s.Metrics, "external/"+m.External.Metric.Name)
		}
		if r != corev1.ResourceCPU && r != corev1.ResourceMemory {
			hostOnly = false
			continue
		}
		if !slices.Contains(host, string(r)) {
			host = append(host, string(r))
		}
	}
	if hostOnly {
		s.HostOnly = strings.Join(host, " and ")
	}
	return s
}

// ScalingV1 reads an autoscaling/v1 HPA, which can only scale on CPU.
func ScalingV1(h *autoscalingv1.HorizontalPodAutoscaler) Scaling {
	return Scaling{Name: h.Name, TargetKind: h.Spec.ScaleTargetRef.Kind, TargetName: h.Spec.ScaleTargetRef.Name, TargetAPI: h.Spec.ScaleTargetRef.APIVersion,
		Metrics: []string{"resource/cpu"}, HostOnly: "cpu"}
}

// Targets reports whether the HPA scales the apps/v1 workload kind/name.
func (s Scaling) Targets(kind, name string) bool {
	group, _, _ := strings.Cut(s.TargetAPI, "/")
	return s.TargetKind == kind && s.TargetName == name && group == "apps"
}
