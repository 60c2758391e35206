package admission

import (
	"context"
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
	"headroom.dev/headroom/memory"
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
}

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
	catalog       catalogCache
	plans         planCache
	// devices are the catalog's GPUs, which the planner searches for the
	// smallest that fits; copied once rather than for every denial.
	devices []gpu.Device
}

// NewHandler returns a Handler using d.
func NewHandler(d Deps) *Handler {
	h := &Handler{configMaps: d.ConfigMaps, hpas: d.HPAs, templates: d.PodTemplates, now: d.Now, log: d.Log, metrics: d.Metrics, lookupTimeout: d.LookupTimeout}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.lookupTimeout <= 0 {
		h.lookupTimeout = defaultLookupTimeout
	}
	h.devices = gpu.Devices()
	return h
}

// decision is the outcome of reviewing one object.
type decision struct {
	// kind labels metrics and logs.
	kind     string
	denials  []string
	warnings []string
	// notes are what the mutating webhook tells the user it changed.
	notes  []string
	patch  patchBuilder
	bypass bool
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
		return decision{kind: req.Kind.Kind}, nil
	}
	if req.SubResource != "" || len(req.Object.Raw) == 0 {
		return decision{kind: req.Kind.Kind}, nil
	}
	raw := req.Object.Raw
	switch k := req.Kind; {
	case k.Group == "apps" && k.Version == "v1" && k.Kind == "Deployment":
		var o appsv1.Deployment
		if err := decodeObject(raw, &o); err != nil {
			return decision{kind: k.Kind}, err
		}
		return h.reviewPods(ctx, req, podObject{kind: k.Kind, meta: o.ObjectMeta, templateMeta: o.Spec.Template.ObjectMeta, spec: &o.Spec.Template.Spec, podPath: "/spec/template/spec"}, mutate), nil
	case k.Group == "apps" && k.Version == "v1" && k.Kind == "StatefulSet":
		var o appsv1.StatefulSet
		if err := decodeObject(raw, &o); err != nil {
			return decision{kind: k.Kind}, err
		}
		return h.reviewPods(ctx, req, podObject{kind: k.Kind, meta: o.ObjectMeta, templateMeta: o.Spec.Template.ObjectMeta, spec: &o.Spec.Template.Spec, podPath: "/spec/template/spec"}, mutate), nil
	case k.Group == "" && k.Version == "v1" && k.Kind == "Pod":
		var o corev1.Pod
		if err := decodeObject(raw, &o); err != nil {
			return decision{kind: k.Kind}, err
		}
		if ref := metav1.GetControllerOf(&o); ref != nil {
			// Checked when its owner was admitted (package documentation).
			return decision{kind: k.Kind}, nil
		}
		return h.reviewPods(ctx, req, podObject{kind: k.Kind, meta: o.ObjectMeta, spec: &o.Spec, podPath: "/spec"}, mutate), nil
	case k.Group == "kaito.sh" && k.Kind == "Workspace":
		return h.reviewWorkspace(ctx, req.Namespace, raw, mutate)
	case k.Group == "autoscaling" && k.Kind == "HorizontalPodAutoscaler":
		if mutate {
			return decision{kind: k.Kind}, nil
		}
		return h.reviewHPA(ctx, k.Version, req.Namespace, raw)
	}
	return decision{kind: "other"}, nil
}

// podObject is a Pod, or a workload with a pod template.
type podObject struct {
	kind         string
	meta         metav1.ObjectMeta
	templateMeta metav1.ObjectMeta
	spec         *corev1.PodSpec
	// podPath is the JSON pointer of the PodSpec in the object.
	podPath string
}

// annotations merges the pod template's annotations with the object's;
// the object's win. Both are read, so a bypass or a GPU written on either
// counts.
func (o podObject) annotations() map[string]string {
	out := make(map[string]string, len(o.meta.Annotations)+len(o.templateMeta.Annotations))
	for k, v := range o.templateMeta.Annotations {
		out[k] = v
	}
	for k, v := range o.meta.Annotations {
		out[k] = v
	}
	return out
}

// reviewPods checks each vLLM container of a pod spec.
func (h *Handler) reviewPods(ctx context.Context, req *admissionv1.AdmissionRequest, o podObject, mutate bool) decision {
	d := decision{kind: o.kind}
	ann := o.annotations()
	d.bypass = bypassed(ann)
	fix := autofix(ann)
	var plans []string
	found := false
	// The HPA warning names vLLM's metrics as the first server's release
	// exports them.
	var firstVersion vllm.Version
	for i, c := range o.spec.Containers {
		l, ok, err := readLaunch(c)
		if !ok {
			continue
		}
		label := fmt.Sprintf("container %q", c.Name)
		if !found {
			firstVersion = l.settings.Version
		}
		found = true
		if err != nil {
			d.warnings = append(d.warnings, fmt.Sprintf("%s: memory not checked: its vLLM flags cannot be read: %v", label, err))
			continue
		}
		if l.settings.Set["config"] {
			d.warnings = append(d.warnings, label+": flags in its --config file are not read; the check uses the command line alone")
		}
		sub := subject{label: label, settings: l.settings, env: literalEnv(c), gpu: readGPU(ann, o.spec, c)}
		a := h.assess(ctx, req.Namespace, ann, sub, !mutate)
		d.denials = append(d.denials, a.denials...)
		d.warnings = append(d.warnings, a.warnings...)
		if a.planned() {
			if w := probeWarning(c, a.budget.WeightsTotal); w != "" {
				d.warnings = append(d.warnings, w)
			}
		}
		if mutate {
			notes, plan := fixContainer(&d.patch, o.podPath, i, c, l, a, fix)
			d.notes = append(d.notes, notes...)
			if plan != nil {
				plans = append(plans, planLine(c.Name, len(o.spec.Containers), *plan))
			}
		}
	}
	if !found {
		return decision{kind: o.kind}
	}
	if !mutate && (o.kind == "Deployment" || o.kind == "StatefulSet") {
		d.warnings = append(d.warnings, h.hpaWarnings(ctx, req.Namespace, o.kind, req.Name, firstVersion)...)
	}
	if mutate && fix && len(plans) > 0 {
		d.patch.setAnnotation("/metadata", o.meta.Annotations, AnnotationPlan, strings.Join(plans, " | "))
	}
	return d
}

// planLine is one container's part of the plan annotation.
func planLine(name string, containers int, b memory.Budget) string {
	if containers == 1 {
		return summary(b)
	}
	return name + ": " + summary(b)
}

// errNotReview is returned for a body that is not an AdmissionReview.
var errNotReview = errors.New("not an admission.k8s.io/v1 AdmissionReview request")

// decodeObject decodes JSON as the API server does: field names match
// case-sensitively (sigs.k8s.io/json), so "Spec" is not read as "spec"
// and a patch path always names what was read.
func decodeObject(data []byte, v any) error {
	return k8sjson.UnmarshalCaseSensitivePreserveInts(data, v)
}
