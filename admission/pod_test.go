package admission

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// podPath is where the pod spec of a request's object is.
func podPath(req *admissionv1.AdmissionRequest) string {
	if req.Kind.Kind == "Pod" {
		return "/spec"
	}
	return "/spec/template/spec"
}

// applyPodFixes is the request with fixes applied to its object, as a
// user applies the patch the webhook proposes.
func applyPodFixes(t *testing.T, req *admissionv1.AdmissionRequest, fixes []PodFix) *admissionv1.AdmissionRequest {
	t.Helper()
	ops, err := json.Marshal(Patch(fixes, podPath(req)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := p.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("the proposed patch %s does not apply: %v", ops, err)
	}
	out := *req
	out.Object.Raw = raw
	return &out
}

// withPodFixes checks req and, where the pod checks deny it, checks it
// again with their fixes applied: a change of layout (a larger
// --tensor-parallel-size) may need /dev/shm the pod does not have, and
// the pod check then names that fix.
func withPodFixes(t *testing.T, h *Handler, req *admissionv1.AdmissionRequest) Checked {
	t.Helper()
	c := h.Check(context.Background(), req)
	if len(c.Evaluation.PodFixes) == 0 {
		return c
	}
	return h.Check(context.Background(), applyPodFixes(t, req, c.Evaluation.PodFixes))
}

// editPodSpec is req with its object's pod spec (the pod's, or the
// template's) changed by edit, as JSON decoded into maps.
func editPodSpec(t *testing.T, req *admissionv1.AdmissionRequest, edit func(spec map[string]any)) *admissionv1.AdmissionRequest {
	t.Helper()
	return editObject(t, req, func(o map[string]any) {
		spec, _ := o["spec"].(map[string]any)
		if tmpl, ok := spec["template"].(map[string]any); ok {
			spec, _ = tmpl["spec"].(map[string]any)
		}
		edit(spec)
	})
}

// editObject is req with its object changed by edit, as JSON decoded
// into maps.
func editObject(t *testing.T, req *admissionv1.AdmissionRequest, edit func(o map[string]any)) *admissionv1.AdmissionRequest {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(req.Object.Raw, &o); err != nil {
		t.Fatal(err)
	}
	edit(o)
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	out := *req
	out.Object.Raw = raw
	return &out
}

// variant is req with its pod spec and first container changed by edit.
func variant(t *testing.T, req *admissionv1.AdmissionRequest, edit func(spec, c map[string]any)) *admissionv1.AdmissionRequest {
	t.Helper()
	return editPodSpec(t, req, func(spec map[string]any) { edit(spec, spec["containers"].([]any)[0].(map[string]any)) })
}

func codes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func hasCode(fs []Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

// The pod of the host plan's worked example (host.TestDoneWhenPod):
// Llama-3.1-70B, TP 4 on L40S, --kv-offloading-size 64 on 0.33.0, whose
// pod holds 78.83 GiB (104Gi at the sources' upper end) and writes 64.68
// GiB to /dev/shm. A 32Gi limit and no /dev/shm volume: denied for both,
// and the patch the denial proposes is admitted.
func TestHostDenialAndItsPatch(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	req := fixture(t, "deployment-host").Request
	resp := h.Validate(ctx, req)
	if resp.Allowed {
		t.Fatalf("admitted: %q", resp.Warnings)
	}
	for _, sub := range []string{
		`container "vllm": its memory limit 32Gi is below the 78.83 GiB vLLM holds in host memory (offloaded kv cache 64.00 GiB, mechanism; worker processes 12.00 GiB, report; server processes 2.00 GiB, assumption)`,
		`set resources.limits.memory and resources.requests.memory of container "vllm" to 104Gi`,
		`no /dev/shm volume, so it has the container's own 64 MiB, and vLLM writes 64.68 GiB there`,
		`mount an emptyDir of medium Memory with sizeLimit 65Gi at /dev/shm in container "vllm"`,
	} {
		if !strings.Contains(resp.Result.Message, sub) {
			t.Errorf("denial %q\nlacks %q", resp.Result.Message, sub)
		}
	}
	c := h.Check(ctx, req)
	if got := codes(c.Evaluation.Denials); len(got) != 2 || got[0] != CodeHostMemory || got[1] != CodeSharedMemory {
		t.Fatalf("denials %v, want the memory limit and /dev/shm", got)
	}
	fixed := applyPodFixes(t, req, c.Evaluation.PodFixes)
	if after := h.Validate(ctx, fixed); !after.Allowed {
		t.Fatalf("the proposed patch is denied: %+v", after.Result)
	}
	ps := deploymentPodSpec(t, fixed.Object.Raw)
	v := ps.Volumes[0]
	if v.Name != "dshm" || v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit.String() != "65Gi" ||
		ps.Containers[0].VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("volume %+v, mounts %+v", v, ps.Containers[0].VolumeMounts)
	}
	if m := ps.Containers[0].Resources.Limits[corev1.ResourceMemory]; m.String() != "104Gi" {
		t.Errorf("limit %s, want 104Gi", m.String())
	}
	if g := ps.Containers[0].Resources.Limits["nvidia.com/gpu"]; g.Value() != 4 {
		t.Errorf("the patch lost the GPU limit: %v", ps.Containers[0].Resources.Limits)
	}
}

// What the pod checks deny depends on the policy; the GPU plan's
// denials do not.
func TestPodPolicy(t *testing.T) {
	ctx := context.Background()
	c := fakeCluster(t)
	req := fixture(t, "deployment-host").Request
	warn := NewHandler(Deps{ConfigMaps: c, HPAs: c, PodTemplates: c, PodChecks: PodPolicyWarn})
	if resp := warn.Validate(ctx, req); !resp.Allowed || !contains(resp.Warnings, "its memory limit 32Gi is below") || !contains(resp.Warnings, "no /dev/shm volume") {
		t.Fatalf("warn policy: allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}
	probe := fixture(t, "pod-probe").Request
	if resp := newTestHandler(t).Validate(ctx, probe); !resp.Allowed {
		t.Fatalf("the default policy warns on a short probe: %+v", resp.Result)
	}
	strict := NewHandler(Deps{ConfigMaps: c, HPAs: c, PodTemplates: c, PodChecks: PodPolicyStrict})
	if got := strict.Check(ctx, probe); !hasCode(got.Evaluation.Denials, CodeProbe) {
		t.Fatalf("strict: denials %v, want the probe", codes(got.Evaluation.Denials))
	}
	if got := warn.Check(ctx, fixture(t, "deployment-kv").Request); got.Verdict != VerdictDenied {
		t.Fatalf("the warn policy let a KV cache that does not fit through: %s", got.Verdict)
	}
	for in, want := range map[string]PodPolicy{"": PodPolicyDefault, "strict": PodPolicyStrict, " warn ": PodPolicyWarn} {
		if p, err := ParsePodPolicy(in); err != nil || p != want {
			t.Errorf("ParsePodPolicy(%q) = %q, %v", in, p, err)
		}
	}
	if _, err := ParsePodPolicy("deny"); err == nil {
		t.Error("an unknown policy is taken")
	}
}

// A token in a plain env value is warned about without repeating it, and
// the fix reads it from a Secret.
func TestHFTokenInPlainEnv(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	const token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	req := variant(t, fixture(t, "deployment-fits").Request, func(_, c map[string]any) {
		c["env"] = []any{map[string]any{"name": "OMP_NUM_THREADS", "value": "8"}, map[string]any{"name": "HF_TOKEN", "value": token}}
	})
	resp := h.Validate(ctx, req)
	if !resp.Allowed || !contains(resp.Warnings, "HF_TOKEN holds a Hugging Face token as a plain env value") {
		t.Fatalf("allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}
	for _, w := range resp.Warnings {
		if strings.Contains(w, token) || strings.Contains(w, token[:8]) {
			t.Fatalf("a warning repeats the token: %q", w)
		}
	}
	c := h.Check(ctx, req)
	fixed := applyPodFixes(t, req, c.Evaluation.PodFixes)
	if after := h.Validate(ctx, fixed); contains(after.Warnings, "Hugging Face token") || strings.Contains(string(fixed.Object.Raw), token) {
		t.Fatalf("after the fix: warnings %q, object %s", after.Warnings, fixed.Object.Raw)
	}
	if !strings.Contains(string(fixed.Object.Raw), `"secretKeyRef":{"name":"hf-token","key":"token"}`) || !strings.Contains(string(fixed.Object.Raw), `"OMP_NUM_THREADS"`) {
		t.Fatalf("fixed object %s", fixed.Object.Raw)
	}
}

// /dev/shm: a memory-backed emptyDir too small for the KV region is
// denied and resized; the host's (hostIPC) is enough; a limit between the
// plan and its upper end is a warning.
func TestSharedMemoryAndThinLimit(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	base := fixture(t, "deployment-host").Request
	withShm := func(size string) func(spec, c map[string]any) {
		return func(spec, c map[string]any) {
			spec["volumes"] = []any{map[string]any{"name": "shm", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": size}}}
			c["volumeMounts"] = []any{map[string]any{"name": "shm", "mountPath": "/dev/shm"}}
			c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "104Gi"
		}
	}
	small := variant(t, base, withShm("16Gi"))
	got := h.Check(ctx, small)
	if d := codes(got.Evaluation.Denials); len(d) != 1 || d[0] != CodeSharedMemorySmall || !strings.Contains(got.Evaluation.Denials[0].Message, `set the sizeLimit of volume "shm" to 65Gi`) {
		t.Fatalf("denials %v: %v", d, got.Evaluation.Denials)
	}
	if after := h.Check(ctx, applyPodFixes(t, small, got.Evaluation.PodFixes)); after.Verdict == VerdictDenied {
		t.Fatalf("resized /dev/shm denied: %v", after.Evaluation.Denials)
	}
	hostIPC := variant(t, base, func(spec, c map[string]any) {
		spec["hostIPC"] = true
		c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "104Gi"
	})
	if got := h.Check(ctx, hostIPC); got.Verdict == VerdictDenied {
		t.Fatalf("hostIPC gives the host's /dev/shm: %v", got.Evaluation.Denials)
	}
	// 80Gi holds the 78.83 GiB, not the 103.84 GiB upper end.
	thin := variant(t, base, func(spec, c map[string]any) {
		withShm("65Gi")(spec, c)
		c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "80Gi"
	})
	got = h.Check(ctx, thin)
	if got.Verdict == VerdictDenied || !hasCode(got.Evaluation.Warnings, CodeHostMemoryThin) {
		t.Fatalf("80Gi: %s, warnings %v", got.Verdict, codes(got.Evaluation.Warnings))
	}
	// No limit, a request below the plan: the scheduler is warned about.
	request := variant(t, base, func(spec, c map[string]any) {
		withShm("65Gi")(spec, c)
		delete(c["resources"].(map[string]any)["limits"].(map[string]any), "memory")
	})
	if got := h.Check(ctx, request); !hasCode(got.Evaluation.Warnings, CodeHostMemoryRequest) || got.Verdict == VerdictDenied {
		t.Fatalf("request 32Gi without a limit: %s %v", got.Verdict, codes(got.Evaluation.Warnings))
	}
}

// A memory no node has is bad input: the object is not read, in one
// line naming the field.
func TestBadMemoryQuantities(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	base := fixture(t, "deployment-host").Request
	for _, q := range []string{"-1Gi", "1e30", "0"} {
		req := variant(t, base, func(_, c map[string]any) {
			c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = q
		})
		got := h.Check(ctx, req)
		if got.Verdict != VerdictError || len(got.Response.Warnings) != 1 || !strings.Contains(got.Response.Warnings[0], "resources.limits.memory") || !strings.Contains(got.Response.Warnings[0], "is not a memory size a node has") {
			t.Errorf("memory %s: %s %q", q, got.Verdict, got.Response.Warnings)
		}
	}
	req := variant(t, base, func(_, c map[string]any) {
		c["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "lots"
	})
	if got := h.Check(ctx, req); got.Verdict != VerdictError || !contains(got.Response.Warnings, "quantities must match") {
		t.Errorf("memory lots: %s %q", got.Verdict, got.Response.Warnings)
	}
}

// A one-GPU server without a memory limit needs nothing of its pod.
func TestSmallPodQuiet(t *testing.T) {
	got := newTestHandler(t).Check(context.Background(), fixture(t, "deployment-fits").Request)
	if len(got.Evaluation.PodFixes) != 0 || got.Verdict != VerdictAllowed {
		t.Fatalf("%s, fixes %+v", got.Verdict, got.Evaluation.PodFixes)
	}
}

// withAnnotation is req with one annotation on the object's metadata.
func withAnnotation(t *testing.T, req *admissionv1.AdmissionRequest, key, value string) *admissionv1.AdmissionRequest {
	t.Helper()
	return editObject(t, req, func(o map[string]any) {
		meta := o["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann[key] = value
		meta["annotations"] = ann
	})
}

// With autofix, the mutating webhook applies the pod fixes it can make
// alone (the memory limit, /dev/shm), so the host example's Deployment
// is admitted after it; the Hugging Face token's fix, which needs a
// Secret, stays a warning. Without autofix it changes neither.
func TestAutofixPodFixes(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	const token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	base := variant(t, fixture(t, "deployment-host").Request, func(_, c map[string]any) {
		c["env"] = []any{map[string]any{"name": "HF_TOKEN", "value": token}}
	})
	mutated := func(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionRequest, []string) {
		resp := h.Mutate(ctx, req)
		if !resp.Allowed {
			t.Fatalf("the mutating webhook denied: %+v", resp.Result)
		}
		out := *req
		if len(resp.Patch) > 0 {
			out.Object.Raw = applyPatch(t, req.Object.Raw, resp.Patch)
		}
		return &out, resp.Warnings
	}

	plain, _ := mutated(base)
	if got := h.Check(ctx, plain); !hasCode(got.Evaluation.Denials, CodeHostMemory) || !hasCode(got.Evaluation.Denials, CodeSharedMemory) {
		t.Fatalf("without autofix the pod was changed: denials %v", codes(got.Evaluation.Denials))
	}

	fixed, notes := mutated(withAnnotation(t, base, AnnotationAutofix, "true"))
	for _, sub := range []string{
		`autofix: set resources.limits.memory and resources.requests.memory of container "vllm" to 104Gi`,
		`autofix: mount an emptyDir of medium Memory with sizeLimit 65Gi at /dev/shm in container "vllm"`,
	} {
		if !contains(notes, sub) {
			t.Errorf("notes %q lack %q", notes, sub)
		}
	}
	resp := h.Validate(ctx, fixed)
	if !resp.Allowed {
		t.Fatalf("the autofixed Deployment is denied: %s", resp.Result.Message)
	}
	if !contains(resp.Warnings, "HF_TOKEN holds a Hugging Face token as a plain env value") || contains(notes, "secretKeyRef") {
		t.Errorf("the token: warnings %q, notes %q", resp.Warnings, notes)
	}

	// Two vLLM containers without /dev/shm share one volume: a pod with
	// two volumes of one name is refused by the API server.
	two := editPodSpec(t, withAnnotation(t, base, AnnotationAutofix, "true"), func(spec map[string]any) {
		cs := spec["containers"].([]any)
		b, _ := json.Marshal(cs[0])
		var c2 map[string]any
		if err := json.Unmarshal(b, &c2); err != nil {
			t.Fatal(err)
		}
		c2["name"] = "vllm-2"
		spec["containers"] = append(cs, c2)
	})
	twoFixed, _ := mutated(two)
	ps := deploymentPodSpec(t, twoFixed.Object.Raw)
	if len(ps.Volumes) != 1 || len(ps.Containers) != 2 || len(ps.Containers[0].VolumeMounts) != 1 || len(ps.Containers[1].VolumeMounts) != 1 ||
		ps.Containers[1].VolumeMounts[0].Name != ps.Volumes[0].Name {
		t.Errorf("two containers: volumes %+v, mounts %+v and %+v", ps.Volumes, ps.Containers[0].VolumeMounts, ps.Containers[1].VolumeMounts)
	}
}

// deploymentPodSpec is a Deployment's pod spec.
func deploymentPodSpec(t *testing.T, raw []byte) corev1.PodSpec {
	t.Helper()
	var o struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	return o.Spec.Template.Spec
}
