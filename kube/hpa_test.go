package kube

import (
	"slices"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

func resourceMetric(r corev1.ResourceName) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: r}}
}

func TestScalingV2(t *testing.T) {
	pods := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "vllm:num_requests_waiting"}}}
	tests := []struct {
		name     string
		metrics  []autoscalingv2.MetricSpec
		hostOnly string
		desc     []string
	}{
		{"no metrics: the 80% CPU default", nil, "cpu", []string{"resource/cpu (default)"}},
		{"cpu", []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU)}, "cpu", []string{"resource/cpu"}},
		{"cpu and memory", []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU), resourceMetric(corev1.ResourceMemory), resourceMetric(corev1.ResourceCPU)}, "cpu and memory", []string{"resource/cpu", "resource/memory", "resource/cpu"}},
		{"a queue metric", []autoscalingv2.MetricSpec{resourceMetric(corev1.ResourceCPU), pods}, "", []string{"resource/cpu", "pods/vllm:num_requests_waiting"}},
		{"a metric with no source", []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}}, "", nil},
	}
	for _, tc := range tests {
		h := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: tc.metrics}}
		s := ScalingV2(h)
		if s.HostOnly != tc.hostOnly || !slices.Equal(s.Metrics, tc.desc) {
			t.Errorf("%s: host-only %q metrics %q, want %q %q", tc.name, s.HostOnly, s.Metrics, tc.hostOnly, tc.desc)
		}
	}
}

func TestScalingV1Targets(t *testing.T) {
	h := &autoscalingv1.HorizontalPodAutoscaler{Spec: autoscalingv1.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "llm", APIVersion: "apps/v1"}}}
	s := ScalingV1(h)
	if s.HostOnly != "cpu" || !s.Targets("Deployment", "llm") || s.Targets("StatefulSet", "llm") || s.Targets("Deployment", "other") {
		t.Errorf("%+v", s)
	}
	s.TargetAPI = "example.com/v1"
	if s.Targets("Deployment", "llm") {
		t.Error("a Deployment of another API group is not an apps/v1 workload")
	}
}
