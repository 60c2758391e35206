package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sjson "sigs.k8s.io/json"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
)

// defaultLookupTimeout bounds each read from the API server during one
// admission; the webhook configurations give the whole call 10 s.
const defaultLookupTimeout = 2 * time.Second

// Deps are the handler's dependencies. Nil lookups disable the checks that
// need them (a ConfigMap named by an annotation is then reported as
// unreadable).
type Deps struct {
	ConfigMaps   ConfigMapGetter
	HPAs         HPALister
	PodTemplates PodTemplateGetter
	// Now is the clock latencies are measured with; nil means time.Now.
	Now func() time.Time
	// Log receives one line per admission; nil discards.
	Log *slog.Logger
	// Metrics counts admissions; nil counts nothing.
	Metrics *Metrics
	// LookupTimeout bounds each API read; 0 means 2 s.
	LookupTimeout time.Duration
	// Storage is the storage class assumed for the start-up estimate of
	// workloads without AnnotationStorage ("" = startup.DefaultStorage).
	Storage startup.Storage
	// PodChecks is what the pod checks deny (ParsePodPolicy); "" is
	// PodPolicyDefault.
	PodChecks PodPolicy
	// ReviewBytes is how many bytes of review bodies are read and checked
	// at once; 0 means DefaultReviewBytes. Each review counts at least
	// ReviewFloorBytes; ReviewQueue more wait (at most ReviewWait); past
	// that a review gets 429 and the failurePolicy decides.
	ReviewBytes int64
}

// The webhook's memory budget is the chart's limit, 256 MiB, with
// GOMEMLIMIT at 200 MiB: the runtime lets the heap grow to that soft limit
// under load (GOGC=400), and the rest is the binary, stacks and buffers. A
// review holds its body (at most 4 MiB), the decoded object and its
// checks' findings, about 22 times its body at the largest (45 MiB of heap
// for a 2 MB Deployment of 10,000 containers, of which the first
// maxContainers are checked). So reviews are admitted by their bodies'
// bytes, not by count: DefaultReviewBytes at once is four 1.1 MB reviews
// (about 100 MiB of heap) or one of the largest, and the same budget lets
// 80 ordinary reviews (a few KiB, counted as ReviewFloorBytes each) work
// together. A count would be wrong both ways: four slots held by reviews
// waiting on a hung API server (LookupTimeout each) made every other
// review wait past ReviewWait, while four 4 MiB bodies outgrow the budget.
const (
	DefaultReviewBytes = 5 << 20
	ReviewFloorBytes   = 64 << 10
	// ReviewQueue is how many reviews may wait for the budget: a burst of
	// a thousand small reviews waits (each holds a connection and a
	// goroutine, not its body) instead of being refused.
	ReviewQueue = 2048
	// ReviewWait is the longest a review waits for the budget: well within
	// the 10 s the webhook configurations give a call.
	ReviewWait = 5 * time.Second
)

// Handler answers AdmissionReviews. Beyond its dependencies it keeps only
// caches of catalog lookups and of plans, both of pure functions of their
// keys; one Handler serves any number of requests at once.
type Handler struct {
	configMaps    ConfigMapGetter
	hpas          HPALister
	templates     PodTemplateGetter
	now           func() time.Time
	log           *slog.Logger
	metrics       *Metrics
	lookupTimeout time.Duration
	storage       startup.Storage
	podPolicy     PodPolicy
	catalog       catalogCache
	gpus          gpuCache
	plans         planCache
	// gate admits reviews within the memory budget.
	gate *graceful.ByteGate
	// devices are the catalog's GPUs, which the planner searches for the
	// smallest that fits; copied once rather than for every denial.
	devices []gpu.Device
}

// NewHandler returns a Handler using d.
func NewHandler(d Deps) *Handler {
	h := &Handler{configMaps: d.ConfigMaps, hpas: d.HPAs, templates: d.PodTemplates, now: d.Now, log: d.Log, metrics: d.Metrics, lookupTimeout: d.LookupTimeout, podPolicy: d.PodChecks}
	if h.now == nil {
		h.now = time.Now
	}
	h.storage = d.Storage
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.lookupTimeout <= 0 {
		h.lookupTimeout = defaultLookupTimeout
	}
	h.devices = gpu.Devices()
	n := d.ReviewBytes
	if n <= 0 {
		n = DefaultReviewBytes
	}
	h.gate = graceful.NewByteGate("reviews", n, ReviewFloorBytes, ReviewQueue, ReviewWait)
	return h
}

// decision is the outcome of reviewing one object: the evaluation (whose
// Kind labels metrics and logs) and, from the mutating webhook, a patch.
type decision struct {
	Evaluation
	// notes are what the mutating webhook tells the user it changed.
	notes []string
	patch patchBuilder
}

// bypassed reports whether the object asks to deploy despite denials.
func bypassed(ann map[string]string) bool {
	return ann[AnnotationBypass] == "true" || ann[AnnotationKAITOBypass] == "true"
}

// autofix reports whether the object opted in to flag fills.
func autofix(ann map[string]string) bool { return ann[AnnotationAutofix] == "true" }

// decide reviews one request. mutate selects the patches (the mutating
// webhook) over the verdict.
func (h *Handler) decide(ctx context.Context, req *admissionv1.AdmissionRequest, mutate bool) (decision, error) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return decision{Evaluation: Evaluation{Kind: req.Kind.Kind}}, nil
	}
	if req.SubResource != "" || len(req.Object.Raw) == 0 {
		return decision{Evaluation: Evaluation{Kind: req.Kind.Kind}}, nil
	}
	raw := req.Object.Raw
	switch k := req.Kind; {
	case k.Group == "apps" && k.Version == "v1" && k.Kind == "Deployment":
		var o appsv1.Deployment
		if err := decodeObject(raw, &o); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		if err := CheckPodQuantities(&o.Spec.Template.Spec); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		w := Workload{Kind: k.Kind, Namespace: req.Namespace, Name: req.Name, Meta: o.ObjectMeta, TemplateMeta: o.Spec.Template.ObjectMeta, Spec: &o.Spec.Template.Spec}
		var old appsv1.Deployment
		if oldObject(req, &old) {
			w.Old = &old.Spec.Template.Spec
		}
		return h.reviewPods(ctx, w, PodSpecPath(k.Kind), mutate), nil
	case k.Group == "apps" && k.Version == "v1" && k.Kind == "StatefulSet":
		var o appsv1.StatefulSet
		if err := decodeObject(raw, &o); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		if err := CheckPodQuantities(&o.Spec.Template.Spec); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		w := Workload{Kind: k.Kind, Namespace: req.Namespace, Name: req.Name, Meta: o.ObjectMeta, TemplateMeta: o.Spec.Template.ObjectMeta, Spec: &o.Spec.Template.Spec}
		var old appsv1.StatefulSet
		if oldObject(req, &old) {
			w.Old = &old.Spec.Template.Spec
		}
		return h.reviewPods(ctx, w, PodSpecPath(k.Kind), mutate), nil
	case k.Group == "" && k.Version == "v1" && k.Kind == "Pod":
		var o corev1.Pod
		if err := decodeObject(raw, &o); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		if ref := metav1.GetControllerOf(&o); ref != nil {
			// Checked when its owner was admitted (package documentation).
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, nil
		}
		if err := CheckPodQuantities(&o.Spec); err != nil {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, err
		}
		w := Workload{Kind: k.Kind, Namespace: req.Namespace, Name: req.Name, Meta: o.ObjectMeta, Spec: &o.Spec}
		var old corev1.Pod
		if oldObject(req, &old) {
			// A pod's image may be updated in place (the kubelet restarts
			// the container on the new release).
			w.Old = &old.Spec
		}
		return h.reviewPods(ctx, w, PodSpecPath(k.Kind), mutate), nil
	case k.Group == "kaito.sh" && k.Kind == "Workspace":
		return h.reviewWorkspace(ctx, req.Namespace, raw, mutate)
	case k.Group == lwsGroup && k.Version == "v1" && k.Kind == kindLeaderWorkerSet:
		return h.reviewLeaderWorkerSet(ctx, req.Namespace, raw, mutate)
	case k.Group == kserveGroup && k.Version == "v1beta1" && k.Kind == kindInferenceService:
		return h.reviewInferenceService(ctx, req.Namespace, raw, mutate)
	case k.Group == "autoscaling" && k.Kind == "HorizontalPodAutoscaler":
		if mutate {
			return decision{Evaluation: Evaluation{Kind: k.Kind}}, nil
		}
		return h.reviewHPA(ctx, k.Version, req.Namespace, raw)
	}
	return decision{Evaluation: Evaluation{Kind: "other"}}, nil
}

// annotations merges the pod template's annotations with the object's;
// the object's win. Both are read, so a bypass or a GPU written on either
// counts.
func (w Workload) annotations() map[string]string {
	out := make(map[string]string, len(w.Meta.Annotations)+len(w.TemplateMeta.Annotations))
	for k, v := range w.TemplateMeta.Annotations {
		out[k] = v
	}
	for k, v := range w.Meta.Annotations {
		out[k] = v
	}
	return out
}

// reviewPods evaluates a pod spec and, for the mutating webhook, patches
// each planned container; podPath is the JSON pointer of the PodSpec in
// the object.
func (h *Handler) reviewPods(ctx context.Context, w Workload, podPath string, mutate bool) decision {
	d := decision{Evaluation: h.evaluatePods(ctx, w, !mutate)}
	if !mutate || !d.RunsVLLM {
		return d
	}
	fix := autofix(w.annotations())
	var plans []string
	for _, s := range d.Engines {
		notes, plan := fixContainer(&d.patch, podPath+pointer("containers", index(s.index)), s.c, s.l, s.a, fix)
		d.notes = append(d.notes, notes...)
		if plan != nil {
			plans = append(plans, planLine(s.c.Name, len(w.Spec.Containers), *plan))
		}
	}
	if fix {
		d.notes = append(d.notes, autofixPod(&d.patch, podPath, d.PodFixes)...)
	}
	if fix && len(plans) > 0 {
		d.patch.setAnnotation("/metadata", w.Meta.Annotations, AnnotationPlan, strings.Join(plans, " | "))
	}
	return d
}

// podAutofixes are the pod checks' fixes autofix applies: the memory
// limit and request the host plan needs, and a /dev/shm of the size
// tensor parallelism writes. The Hugging Face token's fix is not among
// them: it points the variable at a Secret the webhook cannot create, so
// applied blindly it would turn a warning into a pod that does not start.
var podAutofixes = map[string]bool{
	CodeHostMemory: true, CodeHostMemoryThin: true, CodeHostMemoryRequest: true,
	CodeSharedMemory: true, CodeSharedMemorySmall: true,
}

// autofixPod adds the pod fixes autofix applies to the patch, each
// operation once: two vLLM containers of one pod that both lack /dev/shm
// propose the same volume, and a pod with two volumes of one name is
// refused by the API server.
func autofixPod(p *patchBuilder, podPath string, fixes []PodFix) (notes []string) {
	seen := map[string]bool{}
	for _, f := range fixes {
		if !podAutofixes[f.Code] {
			continue
		}
		for _, op := range Patch([]PodFix{f}, podPath) {
			v, _ := json.Marshal(op.Value) // values the checks built: maps, strings, mounts
			key := op.Op + " " + op.Path + " " + string(v)
			if seen[key] {
				continue
			}
			seen[key] = true
			p.ops = append(p.ops, op)
		}
		notes = append(notes, "autofix: "+f.Message)
	}
	return notes
}

// maxContainers bounds the vLLM containers of one pod spec the webhook
// examines. A pod runs one vLLM server, or a few with sidecars; the bound
// keeps a review of 10,000 containers (2 MB, within what the API server
// stores) from planning, warning about and patching each one, which took
// the webhook past its memory limit.
const maxContainers = 64

// evaluatePods checks each vLLM container of a pod spec. checks adds what
// only the validating webhook reports: the planner's alternatives in a
// denial and the HPAs that scale the workload.
func (h *Handler) evaluatePods(ctx context.Context, w Workload, checks bool) Evaluation {
	e := Evaluation{Kind: w.Kind}
	ann := w.annotations()
	e.Bypass = bypassed(ann)
	// The HPA warning names vLLM's metrics as the first server's release
	// exports them.
	var firstVersion vllm.Version
	examined, skipped := 0, 0
	for i, c := range w.Spec.Containers {
		if examined == maxContainers {
			// Past the bound a container is only counted: what the webhook
			// holds and answers stays the size of maxContainers' reviews.
			if _, ok, _ := readLaunch(c, nil); ok {
				skipped++
			}
			continue
		}
		l, ok, err := readLaunch(c, h.configReader(ctx, w.Namespace, w.Spec, c))
		if !ok {
			continue
		}
		examined++
		label := fmt.Sprintf("container %q", c.Name)
		if err == nil {
			if bad := releaseAnnotation(ann, &l); bad != "" {
				e.warn(CodeVersionUnknown, "%s: %s", label, bad)
			}
		}
		if !e.RunsVLLM {
			firstVersion = l.settings.Version
		}
		e.RunsVLLM = true
		e.tokenCheck(h.podPolicy, i, c, label)
		if err != nil {
			e.warn(CodeNotChecked, "%s: memory not checked: its vLLM flags cannot be read: %v", label, err)
			continue
		}
		if l.versionNote != "" {
			e.warn(CodeVersionUnknown, "%s: %s", label, l.versionNote)
		}
		e.configUnread(label, l)
		sub := subject{label: label, settings: l.settings, env: literalEnv(c), gpu: h.readGPU(ann, w.Spec, c, w.Node)}
		a := h.assess(ctx, w.Namespace, ann, sub, checks)
		e.Denials = append(e.Denials, a.denials...)
		e.Warnings = append(e.Warnings, a.warnings...)
		if checks && w.Old != nil && a.planned() {
			if msg := upgradeWarning(w.Old, c.Name, l, a); msg != "" {
				e.warn(CodeUpgrade, "%s: %s", label, msg)
			}
		}
		if a.planned() {
			st, bad := storageOf(ann, h.storage)
			if bad != "" {
				e.warn(CodeProbe, "%s: %s", label, bad)
			}
			if msg := probeWarning(c, memory.StartupOf(*a.budget, st)); msg != "" {
				e.warn(CodeProbe, "%s", msg)
			}
			e.hostCheck(h.podPolicy, w.Spec, i, c, label, *a.budget, l.envOf(c))
		}
		e.Engines = append(e.Engines, Engine{Container: c.Name, GPUFrom: sub.gpu.from, Input: a.in, Budget: a.budget, Alternatives: a.alts, index: i, c: c, l: l, a: a, inPod: true, node: sub.gpu.node})
	}
	if !e.RunsVLLM {
		return Evaluation{Kind: w.Kind}
	}
	if skipped > 0 {
		e.warn(CodeNotChecked, "%d more vLLM containers not checked: the webhook examines at most %d of a pod", skipped, maxContainers)
	}
	e.strictProbes(h.podPolicy)
	if checks && (w.Kind == "Deployment" || w.Kind == "StatefulSet") {
		for _, msg := range h.hpaWarnings(ctx, w.Namespace, w.Kind, w.Name, firstVersion) {
			e.warn(CodeCPUOnlyHPA, "%s", msg)
		}
	}
	return e
}

// planLine is one container's part of the plan annotation.
func planLine(name string, containers int, b memory.Budget) string {
	if containers == 1 {
		return PlanSummary(b)
	}
	return name + ": " + PlanSummary(b)
}

// errNotReview is returned for a body that is not an AdmissionReview.
var errNotReview = errors.New("not an admission.k8s.io/v1 AdmissionReview request")

// decodeObject decodes JSON as the API server does: field names match
// case-sensitively (sigs.k8s.io/json), so "Spec" is not read as "spec"
// and a patch path always names what was read.
func decodeObject(data []byte, v any) error {
	return k8sjson.UnmarshalCaseSensitivePreserveInts(data, v)
}
