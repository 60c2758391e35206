package kube

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Kubernetes' values for unset probe fields (API reference, Probe:
// periodSeconds defaults to 10, failureThreshold to 3, initialDelaySeconds
// to 0).
const (
	DefaultProbePeriod  = 10
	DefaultProbeFailure = 3
)

// ProbeWindow is how long a probe lets a container start before the
// kubelet acts on it: initialDelaySeconds + failureThreshold ×
// periodSeconds, with Kubernetes' defaults for unset fields (the per-probe
// timeouts only add to it and are left out). It also returns the period
// and failure threshold it used.
func ProbeWindow(p *corev1.Probe) (window time.Duration, period, failures int32) {
	period, failures = p.PeriodSeconds, p.FailureThreshold
	if period <= 0 {
		period = DefaultProbePeriod
	}
	if failures <= 0 {
		failures = DefaultProbeFailure
	}
	return time.Duration(int64(p.InitialDelaySeconds)+int64(failures)*int64(period)) * time.Second, period, failures
}

// StartGate is the probe that guards a container's start-up: its
// startupProbe, or without one its livenessProbe, which then runs from the
// start. name is "startupProbe" or "livenessProbe"; p is nil when the
// container has neither.
func StartGate(c corev1.Container) (p *corev1.Probe, name string) {
	if c.StartupProbe != nil {
		return c.StartupProbe, "startupProbe"
	}
	if c.LivenessProbe != nil {
		return c.LivenessProbe, "livenessProbe"
	}
	return nil, ""
}

// FailureThresholdFor is the failureThreshold a probe of this
// initialDelaySeconds and periodSeconds needs for its window to cover
// window: ⌈(window − delay) / period⌉, at least 1. A new startupProbe has
// no delay. One formula for the webhook's fix and doctor's remedy.
func FailureThresholdFor(window time.Duration, delay, period int32) int32 {
	if period <= 0 {
		period = DefaultProbePeriod
	}
	n := math.Ceil((window.Seconds() - float64(delay)) / float64(period))
	return int32(max(n, 1))
}
