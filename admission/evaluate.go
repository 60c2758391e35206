package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// Finding codes: stable strings that the audit ranks on and tools match.
// A denial carries the code of the planner's first problem
// (memory.CodeWeightsDontFit, ...); a planner warning its own
// (memory.CodeThinMargin, ...).
const (
	// CodeNotChecked: the memory check could not run (unknown model or
	// GPU, unreadable flags, no GPU requested).
	CodeNotChecked = "not_checked"
	// CodeVersionUnknown: the vLLM image's tag names no release; the
	// newest rules known were used.
	CodeVersionUnknown = "vllm_version_unknown"
	// CodeUpgrade: an update moves a vLLM container to another release
	// (its image tag) with the same flags; the warning says what it costs.
	CodeUpgrade = "vllm_upgrade"
	// CodeSharedGPU: the GPU looks time-sliced or MPS-shared.
	CodeSharedGPU = "shared_gpu"
	// CodeProbe: a startup or liveness probe restarts the server before
	// the model is expected to have loaded.
	CodeProbe = "probe_kills_loading_server"
	// CodeCPUOnlyHPA: an HPA scales the server on CPU or memory alone.
	CodeCPUOnlyHPA = "cpu_only_hpa"
	// CodeUnusedGPUs: the pod gets more GPUs than its flags use.
	CodeUnusedGPUs = "unused_gpus"
	// CodeAutoLen: --max-model-len auto, with the length vLLM will pick.
	CodeAutoLen = "max_model_len_auto"
	// CodeConfigFile: the flags of a --config file are not read: it is
	// not on a ConfigMap volume, or the ConfigMap cannot be read.
	CodeConfigFile = "config_file_not_read"
	// CodeInferenceConfig: a KAITO Workspace's inference ConfigMap cannot
	// be read; KAITO's defaults are planned.
	CodeInferenceConfig = "inference_config_unread"
)

// Finding is one result of the checks: a stable code and the message the
// webhook returns (it names the container or the workspace).
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Engine is one vLLM server of a workload that the planner was asked
// about: a container, or a KAITO Workspace's inference.
type Engine struct {
	// Container is the container's name; "" for a Workspace.
	Container string
	// GPUFrom says where the GPU came from ("node label ...").
	GPUFrom string
	// Input and Budget are the plan; Budget is nil when the server could
	// not be planned (see the evaluation's CodeNotChecked warnings).
	Input  memory.Input
	Budget *memory.Budget
	// Alternatives are what the denial quotes, first the one it names
	// first; nil when the server is not denied.
	Alternatives []memory.Alternative

	// What the mutating webhook needs to patch the container: its index
	// in its pod spec, or path, its JSON pointer, where it is not in one.
	index int
	path  string
	c     corev1.Container
	l     launch
	a     assessment
	// inPod is set for a container of the object's pod spec
	// (PodSpecPath); node is the instance type its pod is pinned to.
	inPod bool
	node  gpu.Selection
}

// ContainerPointer is the JSON pointer of the engine's container in an
// object of kind: in its pod spec, or a KServe model's; false for an
// engine without one of its own (a Workspace, a group's leader).
func (e Engine) ContainerPointer(kind string) (string, bool) {
	switch {
	case e.path != "":
		return e.path, true
	case e.inPod:
		return PodSpecPath(kind) + pointer("containers", index(e.index)), true
	}
	return "", false
}

// Script is where vLLM starts in a container's `sh -c` script: the script
// is item Index of the container's command, or of its args (InArgs), and
// the vLLM command is its bytes [Start, End).
type Script struct {
	InArgs     bool
	Index      int
	Start, End int
}

// Script says where the engine's vLLM command is in its container's shell
// script; false when it is not started from one, or flags cannot be added
// to it (a bare "--" ends its options).
func (e Engine) Script() (Script, bool) {
	s := e.l.script
	if s == nil {
		return Script{}, false
	}
	return Script{InArgs: s.inArgs, Index: s.index, Start: s.start, End: s.end}, true
}

// Appendable reports whether flags added to the end of the container's
// command line (args, or command without args) reach vLLM: it is not a
// shell script and no bare "--" ends vLLM's options.
func (e Engine) Appendable() bool { return e.l.appendable }

// Evaluation is the webhook's verdict on one workload, before any patch:
// what it would deny, what it would warn about, and the plans behind them.
// The validating webhook answers with it, the mutating webhook patches
// from it, and `headroom audit` ranks running workloads by it.
type Evaluation struct {
	Kind string
	// RunsVLLM is false for an object with no vLLM server; the other
	// fields are then empty.
	RunsVLLM bool
	// Bypass is set when the object asks to deploy despite denials.
	Bypass   bool
	Denials  []Finding
	Warnings []Finding
	Engines  []Engine
	// PodFixes are the changes to the pod spec the pod checks propose
	// (memory limit, /dev/shm, a token in a Secret), one per finding.
	PodFixes []PodFix
}

func (e *Evaluation) warn(code, format string, args ...any) {
	e.Warnings = append(e.Warnings, Finding{Code: code, Message: fmt.Sprintf(format, args...)})
}

// Workload is a Pod, or a Deployment or StatefulSet with its pod template.
type Workload struct {
	// Kind is "Pod", "Deployment" or "StatefulSet".
	Kind      string
	Namespace string
	Name      string
	Meta      metav1.ObjectMeta
	// TemplateMeta is the pod template's metadata (empty for a Pod).
	TemplateMeta metav1.ObjectMeta
	Spec         *corev1.PodSpec
	// Node holds the labels of the node a pod of the workload runs on,
	// when known: its GPU feature discovery labels name the GPU where the
	// pod spec does not, and its sharing labels always count. The webhook
	// leaves it empty (it sees pods before they are scheduled).
	Node map[string]string
	// Old is the pod spec before an update, when the object is updated:
	// a vLLM container whose image moves to another release with the same
	// flags is planned on both (CodeUpgrade).
	Old *corev1.PodSpec
}

// Evaluate runs the validating webhook's checks on a workload: each vLLM
// container planned on its GPUs (with the alternatives quoted in a
// denial), its start-up probes, shared GPUs, and, for a Deployment or
// StatefulSet, the HPAs that scale it on CPU alone.
func (h *Handler) Evaluate(ctx context.Context, w Workload) Evaluation {
	return h.evaluatePods(ctx, w, true)
}

// EvaluateWorkspace runs the validating webhook's checks on a KAITO
// Workspace given as JSON. The error is for JSON that is not a Workspace.
func (h *Handler) EvaluateWorkspace(ctx context.Context, namespace string, raw []byte) (Evaluation, error) {
	return h.evaluateWorkspace(ctx, namespace, raw, true)
}
