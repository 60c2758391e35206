package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// oldObject decodes an update's old object into o; false when the request
// is no update or carries none that decodes (the check is then skipped:
// an old object is the API server's, never the user's to fix).
func oldObject(req *admissionv1.AdmissionRequest, o any) bool {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return false
	}
	return decodeObject(req.OldObject.Raw, o) == nil
}

// upgradeWarning prices an update that moves a vLLM container to another
// release (its image tag) with the same flags and environment: both
// releases are planned (memory.PlanUpgrade) and the warning names the KV
// tokens the move loses or gains, the largest context, and each rule that
// changes with its release and source. "" when the container is new, its
// release is the same, or its flags changed too (then the change is not
// the release's alone).
func upgradeWarning(old *corev1.PodSpec, name string, l launch, a assessment) string {
	var prev *corev1.Container
	for i := range old.Containers {
		if old.Containers[i].Name == name {
			prev = &old.Containers[i]
		}
	}
	if prev == nil {
		return ""
	}
	pl, ok, err := readLaunch(*prev, nil)
	if !ok || err != nil {
		return ""
	}
	from, to := pl.settings.Version, l.settings.Version
	if from.IsZero() {
		from = vllm.Newest()
	}
	if to.IsZero() {
		to = vllm.Newest()
	}
	if from.Compare(to) == 0 || !slices.Equal(pl.settings.Args(), l.settings.Args()) ||
		!maps.Equal(pl.envOf(*prev), a.in.Env) {
		return ""
	}
	in := a.in
	in.Settings.Version = from
	u, err := memory.PlanUpgrade(in, to)
	if err != nil {
		return ""
	}
	b, z := u.Before, u.After
	var sb strings.Builder
	fmt.Fprintf(&sb, "the image moves vLLM %s -> %s with the same flags: KV cache %d -> %d tokens", from, to, b.KVTokens, z.KVTokens)
	switch {
	case z.KVTokens < b.KVTokens:
		fmt.Fprintf(&sb, " (%d lost, %.1f%%)", b.KVTokens-z.KVTokens, 100*u.KVLoss)
	case z.KVTokens > b.KVTokens:
		fmt.Fprintf(&sb, " (%d gained)", z.KVTokens-b.KVTokens)
	}
	fmt.Fprintf(&sb, ", largest context %d -> %d tokens", b.MaxFitLen, z.MaxFitLen)
	if b.Fits && !z.Fits {
		sb.WriteString("; it no longer starts")
	}
	var causes []string
	for _, c := range u.Changes {
		if c.Term == "per_gpu.kv_cache_gib" || c.Term == "per_gpu.requested_gib" {
			continue
		}
		causes = append(causes, fmt.Sprintf("%s %s -> %s: %s", c.Label, c.From, c.To, c.CausesText()))
	}
	if len(causes) > 0 {
		sb.WriteString("; because " + strings.Join(causes, "; "))
	}
	return sb.String()
}
