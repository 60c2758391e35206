package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestProbeWindow(t *testing.T) {
	tests := []struct {
		p    corev1.Probe
		want time.Duration
	}{
		// Kubernetes' defaults: 0 + 3 × 10 s.
		{corev1.Probe{}, 30 * time.Second},
		{corev1.Probe{InitialDelaySeconds: 60, PeriodSeconds: 5, FailureThreshold: 12}, 120 * time.Second},
		{corev1.Probe{PeriodSeconds: 10, FailureThreshold: 60}, 600 * time.Second},
	}
	for _, tc := range tests {
		if got, _, _ := ProbeWindow(&tc.p); got != tc.want {
			t.Errorf("ProbeWindow(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestStartGate(t *testing.T) {
	live, start := &corev1.Probe{PeriodSeconds: 1}, &corev1.Probe{PeriodSeconds: 2}
	if p, n := StartGate(corev1.Container{LivenessProbe: live, StartupProbe: start}); p != start || n != "startupProbe" {
		t.Errorf("with both: %v %s", p, n)
	}
	if p, n := StartGate(corev1.Container{LivenessProbe: live}); p != live || n != "livenessProbe" {
		t.Errorf("liveness only: %v %s", p, n)
	}
	if p, _ := StartGate(corev1.Container{ReadinessProbe: live}); p != nil {
		t.Errorf("a readiness probe does not restart: %v", p)
	}
}
