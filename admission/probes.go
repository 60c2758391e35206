package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/startup"
)

// probeWarning warns when the probe that guards start-up (the startupProbe;
// without one the livenessProbe, which then runs from the start) gives up
// before the window the start-up estimate asks for: the estimate (package
// startup, docs/startup.md) times its margin. The recommended threshold
// gives that window, so the fix passes the check.
func probeWarning(c corev1.Container, est startup.Estimate) string {
	p, name := kube.StartGate(c)
	if p == nil {
		return ""
	}
	window, period, failures := kube.ProbeWindow(p)
	want := est.ProbeWindow()
	if window >= want {
		return ""
	}
	fix := fmt.Sprintf("set its failureThreshold to %d or more", kube.FailureThresholdFor(want, p.InitialDelaySeconds, period))
	if name == "livenessProbe" {
		// A longer liveness window would also slow the detection of a
		// hung server for the pod's whole life; a startup probe does not.
		fix = fmt.Sprintf("add a startupProbe with periodSeconds %d and failureThreshold %d", period, kube.FailureThresholdFor(want, 0, period))
	}
	return fmt.Sprintf("container %q: its %s restarts it after %s (initialDelaySeconds %d + failureThreshold %d × periodSeconds %d), but vLLM is expected to start in about %s, and a probe should allow %g times that, %s: %s (%s: %s says where the weights are read from)",
		c.Name, name, window, p.InitialDelaySeconds, failures, period, est.Summary(), startup.ProbeMargin, want, fix, AnnotationStorage, startup.List())
}

// storageOf reads AnnotationStorage: the class, and a warning when the
// value is not one; without a class, def ("" = startup.DefaultStorage).
func storageOf(ann map[string]string, def startup.Storage) (startup.Storage, string) {
	if def == "" {
		def = startup.DefaultStorage
	}
	raw, ok := ann[AnnotationStorage]
	if !ok {
		return def, ""
	}
	st, err := startup.ParseStorage(raw)
	if err != nil {
		return def, fmt.Sprintf("annotation %s: %v; the probe check assumes %s", AnnotationStorage, err, def)
	}
	return st, ""
}
