package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"headroom.dev/headroom/host"
	"headroom.dev/headroom/memory"
)

// Finding codes of the pod's own resources: its memory, its /dev/shm and
// its environment (the host plan, package host).
const (
	// CodeHostMemory: the container's memory limit is below what vLLM
	// holds in host memory; the cgroup OOMKills it (a restart loop).
	CodeHostMemory = "host_memory_limit_too_low"
	// CodeHostMemoryThin: the limit holds the host plan but not its upper
	// end (the largest process baselines reported).
	CodeHostMemoryThin = "host_memory_limit_thin"
	// CodeHostMemoryRequest: no memory limit, and the request is below the
	// host plan: the scheduler may place the pod where that memory is not.
	CodeHostMemoryRequest = "host_memory_request_low"
	// CodeSharedMemorySmall: /dev/shm is a memory-backed emptyDir whose
	// sizeLimit is below what vLLM writes there.
	CodeSharedMemorySmall = "shared_memory_too_small"
	// CodeHFToken: a Hugging Face token is written in a plain env value,
	// readable by whoever can read the object.
	CodeHFToken = "hf_token_in_plain_env"
	// CodeHostMemoryBeyondNodes: vLLM would hold more host memory than
	// any node has (MaxPodMemoryBytes); no memory limit is proposed.
	CodeHostMemoryBeyondNodes = "host_memory_beyond_nodes"
)

// MaxPodMemoryBytes bounds the memory limit the pod checks propose and
// the mutating webhook writes: 8 TiB. The 8-GPU H100, H200 and B200
// machines of the clouds the GPU catalog lists carry 2 to 4 TB of host
// memory, and a two-socket GPU server takes at most 32 DIMMs of 256 GB
// (8 TB). A host plan past it comes from a setting that no node can hold
// (--kv-offloading-size in MiB taken for GiB, a --max-num-seqs of
// billions), and a limit written from it (3814709Gi) would leave the pod
// Pending, its request past every node, with nothing said about why.
const MaxPodMemoryBytes = int64(8) << 40

// PodPolicy decides which of the pod checks deny and which warn.
type PodPolicy string

const (
	// PodPolicyDefault denies what keeps vLLM from starting or serving
	// (a memory limit below the host plan, no /dev/shm where it needs
	// one) and warns on the rest.
	PodPolicyDefault PodPolicy = "default"
	// PodPolicyStrict also denies a probe that restarts the server before
	// it loads and a token in a plain env value.
	PodPolicyStrict PodPolicy = "strict"
	// PodPolicyWarn turns every pod check into a warning.
	PodPolicyWarn PodPolicy = "warn"
)

// ParsePodPolicy reads --pod-checks.
func ParsePodPolicy(s string) (PodPolicy, error) {
	switch p := PodPolicy(strings.TrimSpace(s)); p {
	case "", PodPolicyDefault:
		return PodPolicyDefault, nil
	case PodPolicyStrict, PodPolicyWarn:
		return p, nil
	}
	return "", fmt.Errorf("pod checks %q: give default (deny what stops vLLM: memory limit, /dev/shm), strict (also deny short probes and plain tokens) or warn", s)
}

// podDenies are the codes of the pod checks the default policy denies;
// podStrict those strict adds.
var (
	podDenies = []string{CodeHostMemory, CodeSharedMemory, CodeSharedMemorySmall, CodeHostMemoryBeyondNodes}
	podStrict = []string{CodeProbe, CodeHFToken}
)

// denies reports whether the policy denies a pod check's finding.
func (p PodPolicy) denies(code string) bool {
	switch p {
	case PodPolicyWarn:
		return false
	case PodPolicyStrict:
		return containsString(podDenies, code) || containsString(podStrict, code)
	}
	return containsString(podDenies, code)
}

// podFinding adds a pod check's finding as the policy says: a denial or a
// warning.
func (e *Evaluation) podFinding(p PodPolicy, f Finding) {
	if p.denies(f.Code) {
		e.Denials = append(e.Denials, f)
		return
	}
	e.Warnings = append(e.Warnings, f)
}

// strictProbes makes the probe check's warnings denials under the strict
// policy.
func (e *Evaluation) strictProbes(p PodPolicy) {
	if p != PodPolicyStrict {
		return
	}
	var keep []Finding
	for _, f := range e.Warnings {
		if f.Code == CodeProbe {
			e.Denials = append(e.Denials, f)
			continue
		}
		keep = append(keep, f)
	}
	e.Warnings = keep
}

// PodFix is a change to a pod spec that a pod check proposes: RFC 6902
// operations whose paths are relative to the PodSpec, and the change in
// words.
type PodFix struct {
	Code      string    `json:"code"`
	Container string    `json:"container"`
	Message   string    `json:"message"`
	Ops       []PatchOp `json:"ops"`
}

// PodSpecPath is where the pod spec of an object of kind is, for a JSON
// patch: a Pod's own spec, a KServe InferenceService's custom predictor
// (a pod spec inline), a Deployment's or StatefulSet's template.
func PodSpecPath(kind string) string {
	switch kind {
	case "Pod":
		return "/spec"
	case kindInferenceService:
		return "/spec/predictor"
	}
	return "/spec/template/spec"
}

// Patch is the fixes as one JSON patch on the object whose pod spec is at
// podPath (PodSpecPath).
func Patch(fixes []PodFix, podPath string) []PatchOp {
	var out []PatchOp
	for _, f := range fixes {
		for _, op := range f.Ops {
			op.Path = podPath + op.Path
			out = append(out, op)
		}
	}
	return out
}

// maxMemoryBytes bounds a memory quantity: 1 PiB, more than any node.
const maxMemoryBytes = int64(1) << 50

// memoryQuantity reads one memory quantity of a container; ok is false
// when it is absent. The error is for a value no node can give: zero or
// less, or more than 1 PiB.
func memoryQuantity(rl corev1.ResourceList, container, field string) (int64, bool, error) {
	q, ok := rl[corev1.ResourceMemory]
	if !ok {
		return 0, false, nil
	}
	if q.Sign() <= 0 || q.CmpInt64(maxMemoryBytes) > 0 {
		return 0, true, fmt.Errorf("container %q: %s %s is not a memory size a node has: give a positive size of at most 1Pi, such as 96Gi", container, field, q.String())
	}
	return q.Value(), true, nil
}

// CheckPodQuantities refuses a pod spec whose vLLM containers ask for a
// memory no node has (-1Gi, 1e30): the object is then not read, as one
// that does not decode.
func CheckPodQuantities(spec *corev1.PodSpec) error {
	if spec == nil {
		return nil
	}
	for i, c := range spec.Containers {
		if i == maxContainers {
			break
		}
		if _, ok, _ := readLaunch(c, nil); !ok {
			continue
		}
		if _, _, err := memoryQuantity(c.Resources.Limits, c.Name, "resources.limits.memory"); err != nil {
			return err
		}
		if _, _, err := memoryQuantity(c.Resources.Requests, c.Name, "resources.requests.memory"); err != nil {
			return err
		}
	}
	if spec.Resources != nil {
		if _, _, err := memoryQuantity(spec.Resources.Limits, "(pod)", "spec.resources.limits.memory"); err != nil {
			return err
		}
	}
	return nil
}

// shmState is what a container has at /dev/shm.
type shmState struct {
	// present is false for the container runtime's own 64 MiB.
	present bool
	// volume is the index of the memory-backed emptyDir mounted there
	// (-1 for none), and sizeLimit its sizeLimit (0: none, so the pod's
	// memory bounds it).
	volume    int
	sizeLimit int64
	// what says where it comes from, for messages.
	what string
}

// sharedMemoryOf reads what the container has at /dev/shm: a volume
// mounted there (a memory-backed emptyDir, a hostPath, any other), or the
// host's with hostIPC.
func sharedMemoryOf(spec *corev1.PodSpec, c corev1.Container) shmState {
	st := shmState{volume: -1}
	for _, m := range c.VolumeMounts {
		if strings.TrimRight(m.MountPath, "/") != "/dev/shm" {
			continue
		}
		for j, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			st.present = true
			st.what = fmt.Sprintf("volume %q", v.Name)
			if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
				st.volume = j
				st.what = fmt.Sprintf("emptyDir %q of medium Memory", v.Name)
				if v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() > 0 {
					st.sizeLimit = v.EmptyDir.SizeLimit.Value()
				}
			}
		}
	}
	if !st.present && spec.HostIPC {
		st.present, st.what = true, "the host's (hostIPC)"
	}
	return st
}

// podChecks are the checks of a planned vLLM container against its pod:
// the memory limit against the host plan, /dev/shm against what the
// engine writes there. Each finding proposes its fix. hp is the
// container's host plan.
func podChecks(spec *corev1.PodSpec, ci int, c corev1.Container, label string, hp host.Plan) (findings []Finding, fixes []PodFix) {
	findings, fixes = memoryChecks(spec, ci, c, label, hp)
	if !hp.ShmNeeded {
		return findings, fixes
	}
	st := sharedMemoryOf(spec, c)
	switch {
	case !st.present:
		fix := PodFix{Code: CodeSharedMemory, Container: c.Name,
			Message: fmt.Sprintf("mount an emptyDir of medium Memory with sizeLimit %s at /dev/shm in container %q", hp.ShmSizeLimit, c.Name),
			Ops:     shmOps(spec, ci, c, hp.ShmSizeLimit)}
		findings = append(findings, Finding{Code: CodeSharedMemory, Message: fmt.Sprintf("%s: no /dev/shm volume, so it has the container's own 64 MiB, and vLLM writes %s there (%s): it fails at start-up (\"Insufficient space in /dev/shm\") or NCCL cannot create its segments; to fix: %s",
			label, memory.GiB(hp.ShmBytes), hp.ShmList(), fix.Message)})
		fixes = append(fixes, fix)
	case st.volume >= 0 && st.sizeLimit > 0 && st.sizeLimit < hp.ShmBytes:
		fix := PodFix{Code: CodeSharedMemorySmall, Container: c.Name,
			Message: fmt.Sprintf("set the sizeLimit of volume %q to %s", spec.Volumes[st.volume].Name, hp.ShmSizeLimit),
			Ops:     []PatchOp{{Op: "add", Path: pointer("volumes", index(st.volume), "emptyDir", "sizeLimit"), Value: hp.ShmSizeLimit}}}
		findings = append(findings, Finding{Code: CodeSharedMemorySmall, Message: fmt.Sprintf("%s: /dev/shm is %s with sizeLimit %s, and vLLM writes %s there (%s); to fix: %s",
			label, st.what, quantity(st.sizeLimit), memory.GiB(hp.ShmBytes), hp.ShmList(), fix.Message)})
		fixes = append(fixes, fix)
	}
	return findings, fixes
}

// memoryChecks is the pod checks' memory limit and request of a
// container against its host plan.
func memoryChecks(spec *corev1.PodSpec, ci int, c corev1.Container, label string, hp host.Plan) (findings []Finding, fixes []PodFix) {
	cpath := pointer("containers", index(ci))
	limit, hasLimit, errL := memoryQuantity(c.Resources.Limits, c.Name, "resources.limits.memory")
	request, hasRequest, errR := memoryQuantity(c.Resources.Requests, c.Name, "resources.requests.memory")
	if !hasLimit && spec.Resources != nil {
		limit, hasLimit, errL = memoryQuantity(spec.Resources.Limits, c.Name, "spec.resources.limits.memory")
	}
	terms := topTerms(hp, 3)
	if hp.MemoryLimitBytes > MaxPodMemoryBytes || hp.RequiredBytes > MaxPodMemoryBytes {
		// No fix: a limit past every node is not one to write.
		var largest string
		if t := hp.Largest(1); len(t) == 1 {
			largest = fmt.Sprintf("; the largest, %s, is %s", t[0].Name(), t[0].Detail)
		}
		findings = append(findings, Finding{Code: CodeHostMemoryBeyondNodes, Message: fmt.Sprintf("%s: vLLM would hold %s in host memory (%s), more than any node has (headroom proposes no memory limit past %s): lower the setting that term follows from%s",
			label, memory.GiB(hp.RequiredBytes), terms, quantity(MaxPodMemoryBytes), largest)})
		return findings, nil
	}
	memFix := PodFix{Code: CodeHostMemory, Container: c.Name,
		Message: fmt.Sprintf("set resources.limits.memory and resources.requests.memory of %s to %s", containerName(c, label), hp.MemoryLimit),
		Ops:     memoryOps(cpath, c, hp.MemoryLimit)}
	switch {
	case errL != nil || errR != nil:
		// CheckPodQuantities refuses these before the webhook answers;
		// the audit reads running objects and says it could not check.
		findings = append(findings, Finding{Code: CodeNotChecked, Message: fmt.Sprintf("%s: host memory not checked: %v", label, firstErr(errL, errR))})
	case hasLimit && limit < hp.RequiredBytes:
		findings = append(findings, Finding{Code: CodeHostMemory, Message: fmt.Sprintf("%s: its memory limit %s is below the %s vLLM holds in host memory (%s): the kernel OOMKills it (exit 137), a restart loop; to fix: %s",
			label, quantity(limit), memory.GiB(hp.RequiredBytes), terms, memFix.Message)})
		fixes = append(fixes, memFix)
	case hasLimit && limit < hp.RequiredHighBytes:
		memFix.Code = CodeHostMemoryThin
		findings = append(findings, Finding{Code: CodeHostMemoryThin, Message: fmt.Sprintf("%s: its memory limit %s holds the %s vLLM is planned to hold in host memory (%s), not the %s the largest reported process baselines reach; %s",
			label, quantity(limit), memory.GiB(hp.RequiredBytes), terms, memory.GiB(hp.RequiredHighBytes), memFix.Message)})
		fixes = append(fixes, memFix)
	case !hasLimit && hasRequest && request < hp.RequiredBytes:
		memFix.Code = CodeHostMemoryRequest
		findings = append(findings, Finding{Code: CodeHostMemoryRequest, Message: fmt.Sprintf("%s: its memory request %s is below the %s vLLM holds in host memory (%s): the scheduler may place it where that memory is not, and the kubelet evicts it first under pressure; %s",
			label, quantity(request), memory.GiB(hp.RequiredBytes), terms, memFix.Message)})
		fixes = append(fixes, memFix)
	}
	return findings, fixes
}

// hostCheck plans the host side of a planned vLLM container (package
// host) and checks its pod against it.
func (e *Evaluation) hostCheck(p PodPolicy, spec *corev1.PodSpec, ci int, c corev1.Container, label string, b memory.Budget, env map[string]string) {
	hp, err := host.Build(b, host.Options{Env: env})
	if err != nil {
		e.warn(CodeNotChecked, "%s: host memory not checked: %v", label, err)
		return
	}
	findings, fixes := podChecks(spec, ci, c, label, hp)
	for _, f := range findings {
		e.podFinding(p, f)
	}
	e.PodFixes = append(e.PodFixes, fixes...)
}

// containerName names a container in a fix: by its name, or, for one
// that has none (KServe's model container), by the check's label.
func containerName(c corev1.Container, label string) string {
	if c.Name == "" {
		return label
	}
	return fmt.Sprintf("container %q", c.Name)
}

// groupHostCheck checks one pod template of a multi-node group, or a
// KServe predictor, against the host plan of one of its pods (opts: its
// GPUs, and whether it is a worker without the API server and engine
// core): the memory limit and request only. /dev/shm is not checked here:
// a group has its own check (Ray's object store and NCCL,
// sharedMemoryWarning), and a KServe predictor's volumes come from its
// ServingRuntime, which the object does not show. The fix is said in
// words and not proposed as a patch: these templates each have a path of
// their own in the object, which a pod fix does not carry.
func (e *Evaluation) groupHostCheck(p PodPolicy, spec *corev1.PodSpec, ci int, c corev1.Container, label string, b memory.Budget, opts host.Options) {
	hp, err := host.Build(b, opts)
	if err != nil {
		e.warn(CodeNotChecked, "%s: host memory not checked: %v", label, err)
		return
	}
	findings, _ := memoryChecks(spec, ci, c, label, hp)
	for _, f := range findings {
		e.podFinding(p, f)
	}
}

// tokenCheck adds the Hugging Face token findings of a vLLM container.
func (e *Evaluation) tokenCheck(p PodPolicy, ci int, c corev1.Container, label string) {
	findings, fixes := tokenFindings(ci, c, label)
	for _, f := range findings {
		e.podFinding(p, f)
	}
	e.PodFixes = append(e.PodFixes, fixes...)
}

// hfTokenVars are the environment variables huggingface_hub reads a token
// from (HF_TOKEN; the older HUGGING_FACE_HUB_TOKEN), and LangChain's.
var hfTokenVars = []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN"}

// HFTokenSecret is the Secret the fix points a token variable at.
const HFTokenSecret = "hf-token"

// tokenFindings finds a Hugging Face token written as a plain env value
// of a vLLM container. The message never repeats the value.
func tokenFindings(ci int, c corev1.Container, label string) (findings []Finding, fixes []PodFix) {
	for k, e := range c.Env {
		if e.ValueFrom != nil || strings.TrimSpace(e.Value) == "" || !containsString(hfTokenVars, e.Name) {
			continue
		}
		fix := PodFix{Code: CodeHFToken, Container: c.Name,
			Message: fmt.Sprintf("read %s from a Secret: kubectl create secret generic %s --from-literal=token=...; then valueFrom.secretKeyRef {name: %s, key: token}", e.Name, HFTokenSecret, HFTokenSecret),
			Ops: []PatchOp{{Op: "replace", Path: pointer("containers", index(ci), "env", index(k)),
				Value: corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: HFTokenSecret}, Key: "token"}}}}}}
		findings = append(findings, Finding{Code: CodeHFToken, Message: fmt.Sprintf("%s: %s holds a Hugging Face token as a plain env value: whoever can read the object (or its ReplicaSets, or `kubectl describe`) reads the token; %s", label, e.Name, fix.Message)})
		fixes = append(fixes, fix)
	}
	return findings, fixes
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// memoryOps set the container's memory limit and request to q, creating
// the maps that are absent ("add" replaces a member that exists).
func memoryOps(cpath string, c corev1.Container, q string) []PatchOp {
	r := c.Resources
	if r.Limits == nil && r.Requests == nil && r.Claims == nil {
		return []PatchOp{{Op: "add", Path: cpath + pointer("resources"), Value: map[string]any{
			"limits": map[string]string{"memory": q}, "requests": map[string]string{"memory": q}}}}
	}
	var ops []PatchOp
	for _, m := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		if m.list == nil {
			ops = append(ops, PatchOp{Op: "add", Path: cpath + pointer("resources", m.name), Value: map[string]string{"memory": q}})
			continue
		}
		ops = append(ops, PatchOp{Op: "add", Path: cpath + pointer("resources", m.name, "memory"), Value: q})
	}
	return ops
}

// shmVolume is the name of the volume the fix mounts at /dev/shm: "dshm"
// (vLLM's own examples), or "dshm-N" where the pod has one of that name.
func shmVolume(spec *corev1.PodSpec) string {
	taken := map[string]bool{}
	for _, v := range spec.Volumes {
		taken[v.Name] = true
	}
	name := "dshm"
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("dshm-%d", n)
	}
	return name
}

// shmOps mount a new memory-backed emptyDir of sizeLimit size at /dev/shm
// in the container at index.
func shmOps(spec *corev1.PodSpec, i int, c corev1.Container, size string) []PatchOp {
	name := shmVolume(spec)
	vol := map[string]any{"name": name, "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": size}}
	mount := corev1.VolumeMount{Name: name, MountPath: "/dev/shm"}
	var ops []PatchOp
	if spec.Volumes == nil {
		ops = append(ops, PatchOp{Op: "add", Path: pointer("volumes"), Value: []any{vol}})
	} else {
		ops = append(ops, PatchOp{Op: "add", Path: pointer("volumes") + "/-", Value: vol})
	}
	if c.VolumeMounts == nil {
		ops = append(ops, PatchOp{Op: "add", Path: pointer("containers", index(i), "volumeMounts"), Value: []corev1.VolumeMount{mount}})
	} else {
		ops = append(ops, PatchOp{Op: "add", Path: pointer("containers", index(i), "volumeMounts") + "/-", Value: mount})
	}
	return ops
}

// topTerms names the host plan's largest terms and how each is known.
func topTerms(hp host.Plan, n int) string {
	var parts []string
	for _, t := range hp.Largest(n) {
		parts = append(parts, fmt.Sprintf("%s %s, %s", t.Name(), memory.GiB(t.Bytes), t.Basis))
	}
	return strings.Join(parts, "; ")
}

// quantity writes bytes as Kubernetes writes a memory quantity.
func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
