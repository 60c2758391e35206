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

// ⌈(window − delay) / period⌉: 210 s at 10 s a probe is 21, 18 after a
// 30 s delay, 7 at 30 s a probe; an unset period is Kubernetes' 10 s; a
// window the delay already covers needs one.
func TestFailureThresholdFor(t *testing.T) {
	for _, c := range []struct {
		window        time.Duration
		delay, period int32
		want          int32
	}{{210 * time.Second, 0, 10, 21}, {210 * time.Second, 30, 10, 18}, {210 * time.Second, 0, 30, 7}, {205 * time.Second, 0, 0, 21}, {10 * time.Second, 60, 10, 1}} {
		if got := FailureThresholdFor(c.window, c.delay, c.period); got != c.want {
			t.Errorf("%v, delay %d, period %d: %d, want %d", c.window, c.delay, c.period, got, c.want)
		}
	}
}
