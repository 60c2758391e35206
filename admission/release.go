package admission

import (
	"fmt"

	"headroom.dev/headroom/vllm"
)

// Where a planned server's vLLM release came from (Engine.Release).
const (
	ReleaseFromAnnotation = "annotation " + AnnotationVLLMVersion
	ReleaseFromImage      = "image tag"
	ReleaseFromRuntime    = "serving runtime"
	ReleaseAssumed        = "assumed"
)

// releaseAnnotation applies AnnotationVLLMVersion to a container's launch:
// an in-house image's tag names no vLLM release, so the workload declares
// the one it runs. The annotation wins over a tag that names another
// release (it is the user's own statement; check prints where each
// object's release came from). It returns a warning when the value is not
// a release: the launch keeps what the tag gave, or the newest rules.
func releaseAnnotation(ann map[string]string, l *launch) string {
	raw, ok := ann[AnnotationVLLMVersion]
	if !ok {
		return ""
	}
	v, err := vllm.ParseRelease(raw)
	if err != nil {
		return fmt.Sprintf("annotation %s: %v; planned for %s", AnnotationVLLMVersion, err, releaseText(l.settings.Version))
	}
	l.settings.Version, l.versionNote, l.versionFrom = v, "", ReleaseFromAnnotation
	return ""
}

// releaseText names a release for a message: the newest the rules know
// when it is zero.
func releaseText(v vllm.Version) string {
	if v.IsZero() {
		return fmt.Sprintf("vLLM %s (the newest release headroom knows)", vllm.Newest())
	}
	return "vLLM " + v.String()
}

// Release is the vLLM release the server was planned for and where it came
// from: ReleaseFromAnnotation, ReleaseFromImage, ReleaseFromRuntime, or
// ReleaseAssumed (no source named one; the newest rules were used).
func (e Engine) Release() (vllm.Version, string) {
	v := e.Input.Settings.Version
	if e.Budget == nil {
		// Not planned (no GPU, an unknown model): the launch still says
		// which release it would have been planned for.
		v = e.l.settings.Version
	}
	if e.Budget != nil && !e.Budget.Settings.Version.IsZero() {
		v = e.Budget.Settings.Version
	}
	if v.IsZero() || e.l.versionFrom == "" {
		return orNewest(v), ReleaseAssumed
	}
	return v, e.l.versionFrom
}

func orNewest(v vllm.Version) vllm.Version {
	if v.IsZero() {
		return vllm.Newest()
	}
	return v
}
