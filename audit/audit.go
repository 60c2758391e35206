package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/memory"
)

// Options say what to audit.
type Options struct {
	// Namespace is the namespace audited unless AllNamespaces is set.
	Namespace     string
	AllNamespaces bool
	// Selector is a label selector (kubectl's -l syntax) the audited
	// objects must match.
	Selector string
	// Live reads each running pod's /metrics through Metrics.
	Live    bool
	Metrics MetricsGetter
	// Progress, when set, is called after each workload is evaluated.
	Progress func(done, total int)
}

// The resources the audit reads.
var (
	deploymentsResource  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	statefulSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	podsResource         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesResource        = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	// KAITO serves Workspaces as v1beta1 and, in older releases, v1alpha1
	// (docs/kaito.md); the fields read have the same shape in both.
	workspaceResources = []schema.GroupVersionResource{
		{Group: "kaito.sh", Version: "v1beta1", Resource: "workspaces"},
		{Group: "kaito.sh", Version: "v1alpha1", Resource: "workspaces"},
	}
)

// Run audits the cluster behind client. Its only error is a selector that
// does not parse; everything the cluster returns that cannot be read
// becomes a finding.
func Run(ctx context.Context, client dynamic.Interface, opt Options) (Report, error) {
	sel, err := labels.Parse(opt.Selector)
	if err != nil {
		return Report{}, fmt.Errorf("label selector %q: %v", opt.Selector, err)
	}
	ns := opt.Namespace
	scope := "namespace " + ns
	if opt.AllNamespaces {
		ns, scope = metav1.NamespaceAll, "all namespaces"
	}
	if opt.Selector != "" {
		scope += ", selector " + opt.Selector
	}
	a := &auditor{client: client, ns: ns, opt: opt, report: Report{Scope: scope}}
	cluster := admission.Cluster{Client: client}
	a.handler = admission.NewHandler(admission.Deps{ConfigMaps: cluster, HPAs: &hpaCache{list: cluster.ListHPAs}})

	a.readNodes(ctx)
	pods := a.list(ctx, podsResource, "")
	a.podsByNS = map[string][]*corev1.Pod{}
	for i := range pods {
		var p corev1.Pod
		if err := fromUnstructured(&pods[i], &p); err != nil {
			a.cannotRead(&pods[i], err)
			continue
		}
		a.podsByNS[p.Namespace] = append(a.podsByNS[p.Namespace], &p)
	}

	var jobs []func()
	for _, u := range a.list(ctx, deploymentsResource, opt.Selector) {
		jobs = append(jobs, func() { a.deployment(ctx, u) })
	}
	for _, u := range a.list(ctx, statefulSetsResource, opt.Selector) {
		jobs = append(jobs, func() { a.statefulSet(ctx, u) })
	}
	for _, ws := range a.workspaces(ctx, opt.Selector) {
		jobs = append(jobs, func() { a.workspace(ctx, ws) })
	}
	for _, list := range a.podsByNS {
		for _, p := range list {
			if !sel.Matches(labels.Set(p.Labels)) || ownedByWorkload(p.OwnerReferences) {
				continue
			}
			jobs = append(jobs, func() { a.pod(ctx, p) })
		}
	}
	for i, job := range jobs {
		job()
		if opt.Progress != nil {
			opt.Progress(i+1, len(jobs))
		}
	}
	a.report.rank()
	return a.report, nil
}

// auditor holds one audit's state.
type auditor struct {
	client   dynamic.Interface
	ns       string
	opt      Options
	handler  *admission.Handler
	nodes    map[string]map[string]string
	podsByNS map[string][]*corev1.Pod
	report   Report
}

// list lists a resource in the audited namespaces; a failure is a cluster
// finding and an empty list.
func (a *auditor) list(ctx context.Context, r schema.GroupVersionResource, selector string) []unstructured.Unstructured {
	l, err := a.client.Resource(r).Namespace(a.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		a.listFailed(r, err)
		return nil
	}
	return l.Items
}

func (a *auditor) listFailed(r schema.GroupVersionResource, err error) {
	where := "namespace " + a.ns
	if a.ns == metav1.NamespaceAll {
		where = "all namespaces"
	}
	msg := fmt.Sprintf("cannot list %s in %s: %v", r.Resource, where, err)
	if apierrors.IsForbidden(err) {
		msg += "; grant the audit's read-only role (README, headroom audit) or audit another namespace"
	}
	a.report.Cluster = append(a.report.Cluster, Finding{Level: LevelNotChecked, Code: "cannot_list", Message: msg})
}

// readNodes reads every node's labels; without them GPUs come from pod
// specs alone.
func (a *auditor) readNodes(ctx context.Context) {
	l, err := a.client.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		a.report.Cluster = append(a.report.Cluster, Finding{Level: LevelInfo, Code: "cannot_list_nodes",
			Message: fmt.Sprintf("cannot list nodes (%v): GPUs come from pod specs alone", err)})
		return
	}
	a.nodes = make(map[string]map[string]string, len(l.Items))
	for _, n := range l.Items {
		a.nodes[n.GetName()] = n.GetLabels()
	}
}

// workspaces lists KAITO Workspaces, at the first API version the
// cluster serves; none when KAITO is not installed.
func (a *auditor) workspaces(ctx context.Context, selector string) []unstructured.Unstructured {
	for _, r := range workspaceResources {
		l, err := a.client.Resource(r).Namespace(a.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			a.listFailed(r, err)
			return nil
		}
		return l.Items
	}
	return nil
}

// ownedByWorkload reports whether a pod belongs to a workload the audit
// plans on its own: a ReplicaSet's (a Deployment's) or a StatefulSet's.
func ownedByWorkload(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && (r.Kind == "ReplicaSet" || r.Kind == "StatefulSet") {
			return true
		}
	}
	return false
}

// ownedByWorkspace reports whether a Deployment or StatefulSet was made
// by a KAITO Workspace, which is audited instead.
func ownedByWorkspace(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		group, _, _ := strings.Cut(r.APIVersion, "/")
		if r.Kind == "Workspace" && group == "kaito.sh" {
			return true
		}
	}
	return false
}

func fromUnstructured(u *unstructured.Unstructured, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out)
}

// cannotRead records an object that does not decode.
func (a *auditor) cannotRead(u *unstructured.Unstructured, err error) {
	w := Workload{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	w.add(LevelNotChecked, "cannot_read", fmt.Sprintf("the object cannot be read as a %s: %v", u.GetKind(), oneLine(err)))
	w.finish()
	a.report.Workloads = append(a.report.Workloads, w)
}

func (a *auditor) deployment(ctx context.Context, u unstructured.Unstructured) {
	var d appsv1.Deployment
	if err := fromUnstructured(&u, &d); err != nil {
		a.cannotRead(&u, err)
		return
	}
	if ownedByWorkspace(d.OwnerReferences) {
		return
	}
	a.podWorkload(ctx, "Deployment", d.ObjectMeta, d.Spec.Template, d.Spec.Selector)
}

func (a *auditor) statefulSet(ctx context.Context, u unstructured.Unstructured) {
	var s appsv1.StatefulSet
	if err := fromUnstructured(&u, &s); err != nil {
		a.cannotRead(&u, err)
		return
	}
	if ownedByWorkspace(s.OwnerReferences) {
		return
	}
	a.podWorkload(ctx, "StatefulSet", s.ObjectMeta, s.Spec.Template, s.Spec.Selector)
}

func (a *auditor) pod(ctx context.Context, p *corev1.Pod) {
	w := admission.Workload{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Meta: p.ObjectMeta, Spec: &p.Spec, Node: a.nodes[p.Spec.NodeName]}
	a.evaluated(ctx, w, a.handler.Evaluate(ctx, w), []*corev1.Pod{p})
}

// podWorkload evaluates a Deployment or StatefulSet with the labels of the
// node its first scheduled pod runs on.
func (a *auditor) podWorkload(ctx context.Context, kind string, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, selector *metav1.LabelSelector) {
	var pods []*corev1.Pod
	if s, err := metav1.LabelSelectorAsSelector(selector); err == nil && !s.Empty() {
		for _, p := range a.podsByNS[meta.Namespace] {
			if s.Matches(labels.Set(p.Labels)) {
				pods = append(pods, p)
			}
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	w := admission.Workload{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Meta: meta, TemplateMeta: tmpl.ObjectMeta, Spec: &tmpl.Spec}
	for _, p := range pods {
		if n, ok := a.nodes[p.Spec.NodeName]; ok {
			w.Node = n
			break
		}
	}
	a.evaluated(ctx, w, a.handler.Evaluate(ctx, w), pods)
}

func (a *auditor) workspace(ctx context.Context, u unstructured.Unstructured) {
	raw, err := u.MarshalJSON()
	if err != nil {
		a.cannotRead(&u, err)
		return
	}
	e, err := a.handler.EvaluateWorkspace(ctx, u.GetNamespace(), raw)
	if err != nil {
		a.cannotRead(&u, err)
		return
	}
	// KAITO labels the pods it makes with the Workspace's name
	// (kaito.sh/workspace).
	var pods []*corev1.Pod
	for _, p := range a.podsByNS[u.GetNamespace()] {
		if p.Labels[kaitoWorkspaceLabel] == u.GetName() {
			pods = append(pods, p)
		}
	}
	a.evaluated(ctx, admission.Workload{Kind: "Workspace", Namespace: u.GetNamespace(), Name: u.GetName()}, e, pods)
}

// kaitoWorkspaceLabel is the label KAITO's controller puts on a
// Workspace's pods (pkg/utils/consts: WorkspaceNameLabel).
const kaitoWorkspaceLabel = "kaito.sh/workspace"

// evaluated turns the webhook's evaluation into the audit's findings.
func (a *auditor) evaluated(ctx context.Context, wl admission.Workload, e admission.Evaluation, pods []*corev1.Pod) {
	if !e.RunsVLLM {
		return
	}
	w := Workload{Kind: wl.Kind, Namespace: wl.Namespace, Name: wl.Name}
	for _, f := range e.Denials {
		w.add(LevelWillNotStart, f.Code, f.Message)
	}
	for _, f := range e.Warnings {
		w.add(warningLevel(f.Code), f.Code, f.Message)
	}
	for _, eng := range e.Engines {
		if eng.Budget == nil {
			continue
		}
		b := eng.Budget
		w.Engines = append(w.Engines, Engine{Container: eng.Container, Model: b.Model.ID, GPU: b.Device.Name, GPUCount: b.Count, GPUFrom: eng.GPUFrom,
			Fits: b.Fits, MaxModelLen: b.MaxModelLen, MaxNumSeqs: b.Settings.MaxNumSeqs, KVTokens: b.KVTokens, Concurrency: b.MaxConcurrency, Summary: admission.PlanSummary(*b),
			PerGPU: b.PerGPU, UnusedBytes: b.Unused(), CUDAGraphInBudget: b.CUDAGraphInBudget})
		if msg := seqsBeyondCache(*b); b.Fits && msg != "" {
			w.add(LevelRisk, CodeSeqsBeyondCache, label(eng.Container)+msg)
		}
	}
	for _, p := range pods {
		w.Pods = append(w.Pods, a.podState(ctx, &w, p, e.Engines))
	}
	w.finish()
	a.report.Workloads = append(a.report.Workloads, w)
}

func label(container string) string {
	if container == "" {
		return "workspace: "
	}
	return fmt.Sprintf("container %q: ", container)
}

// CodeSeqsBeyondCache: --max-num-seqs requests of a typical context need
// more KV cache than there is; under full load vLLM preempts.
const CodeSeqsBeyondCache = "max_num_seqs_beyond_kv_cache"

// seqsBeyondCache says when max-num-seqs requests of a typical context
// (memory.DefaultTypicalContext) do not fit in the KV cache at once.
func seqsBeyondCache(b memory.Budget) string {
	typical := memory.DefaultTypicalContext(b.MaxModelLen)
	seqs := memory.SeqsAt(b, typical)
	if seqs >= b.Settings.MaxNumSeqs {
		return ""
	}
	return fmt.Sprintf("--max-num-seqs %d: the KV cache (%d tokens) holds only %d requests of a typical %d tokens (a quarter of --max-model-len %d) at once; under full load vLLM preempts and recomputes the rest: set --max-num-seqs %d",
		b.Settings.MaxNumSeqs, b.KVTokens, seqs, typical, b.MaxModelLen, seqs)
}

// warningLevel ranks the webhook's warnings.
func warningLevel(code string) string {
	switch code {
	case admission.CodeNotChecked:
		return LevelNotChecked
	case admission.CodeSharedGPU, admission.CodeProbe, admission.CodeCPUOnlyHPA, memory.CodeThinMargin, memory.CodeLowConcurrency:
		return LevelRisk
	}
	return LevelInfo
}

func oneLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// hpaCache lists each namespace's HPAs once per audit: the webhook's
// check asks for every Deployment and StatefulSet.
type hpaCache struct {
	list func(ctx context.Context, namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, error)
	mu   sync.Mutex
	seen map[string]hpaList
}

type hpaList struct {
	items []autoscalingv2.HorizontalPodAutoscaler
	err   error
}

// ListHPAs implements admission.HPALister.
func (c *hpaCache) ListHPAs(ctx context.Context, namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.seen[namespace]; ok {
		return l.items, l.err
	}
	items, err := c.list(ctx, namespace)
	if c.seen == nil {
		c.seen = map[string]hpaList{}
	}
	c.seen[namespace] = hpaList{items, err}
	return items, err
}
