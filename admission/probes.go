package admission

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/memory"
)

// Expected start-up time of a vLLM server, for the probe check. vLLM must
// fetch or read its weights, load them, profile, compile and capture CUDA
// graphs before its health endpoint answers. The per-GiB rate is KAITO's:
// its startup-probe timeout grows by 18 s per GiB of weights
// (readinessTimeoutForModelSize in presets/workspace/models/vllm_model.go,
// docs/kaito.md §1), a rate that covers a fetch from network storage. The
// fixed part is our own rounded figure for engine start (CUDA init,
// profiling, torch.compile and graph capture) of a small model; it is not a
// measurement. The check warns, never denies, so a rough figure is enough.
const (
	loadBase    = 60 * time.Second
	loadPerGiB  = 18 * time.Second
	bytesPerGiB = 1 << 30
)

// expectedStart estimates how long vLLM takes to serve after the container
// starts, from the model's weight bytes.
func expectedStart(weightBytes int64) time.Duration {
	gib := float64(weightBytes) / bytesPerGiB
	return loadBase + time.Duration(math.Ceil(gib*loadPerGiB.Seconds()))*time.Second
}

// probeWarning warns when the probe that guards start-up (the startupProbe;
// without one the livenessProbe, which then runs from the start) gives up
// before the model is expected to have loaded.
func probeWarning(c corev1.Container, weightBytes int64) string {
	p, name := kube.StartGate(c)
	if p == nil {
		return ""
	}
	window, period, failures := kube.ProbeWindow(p)
	want := expectedStart(weightBytes)
	if window >= want {
		return ""
	}
	need := int64(math.Ceil((want.Seconds() - float64(p.InitialDelaySeconds)) / float64(period)))
	fix := fmt.Sprintf("set its failureThreshold to %d or more", need)
	if name == "livenessProbe" {
		// A longer liveness window would also slow the detection of a
		// hung server for the pod's whole life; a startup probe does not.
		fix = fmt.Sprintf("add a startupProbe with periodSeconds %d and failureThreshold %d", period, int64(math.Ceil(want.Seconds()/float64(period))))
	}
	return fmt.Sprintf("container %q: its %s restarts it after %s (initialDelaySeconds %d + failureThreshold %d × periodSeconds %d), but vLLM is expected to need about %s to load %s of weights and start (%s + %s per GiB); %s",
		c.Name, name, window, p.InitialDelaySeconds, failures, period, want, memory.GiB(weightBytes), loadBase, loadPerGiB, fix)
}
