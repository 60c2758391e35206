package audit

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"time"

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
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

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
	// MetricsProgress, when set, is called as each pod's /metrics read
	// ends (Live): done of total, LiveReads at a time.
	MetricsProgress func(done, total int)
	// MetricsTimeout bounds one pod's /metrics read; 0 is
	// DefaultMetricsTimeout.
	MetricsTimeout time.Duration
	// Now stamps calibration records; nil is time.Now.
	Now func() time.Time
}

func (a *auditor) now() time.Time {
	if a.opt.Now != nil {
		return a.opt.Now()
	}
	return time.Now()
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
	// LeaderWorkerSets (sigs.k8s.io/lws) and KServe InferenceServices,
	// where their CRDs are installed.
	lwsResource  = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	isvcResource = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}
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
	// The pods are listed and decoded, page by page, while the
	// Deployments are listed; a page's objects are dropped once decoded.
	var decoded []*corev1.Pod
	var decoding sync.WaitGroup
	decoding.Go(func() {
		a.listPages(ctx, podsResource, "", func(page []unstructured.Unstructured) {
			out := make([]*corev1.Pod, len(page))
			forEach(len(page), func(i int) {
				var p corev1.Pod
				if err := fromUnstructured(&page[i], &p); err != nil {
					a.cannotRead(&page[i], err)
					return
				}
				slim(&p.ObjectMeta)
				out[i] = &p
			})
			decoded = append(decoded, out...)
		})
	})
	deployments := a.list(ctx, deploymentsResource, opt.Selector)
	decoding.Wait()
	a.podsByNS = map[string][]*corev1.Pod{}
	for _, p := range decoded {
		if p != nil {
			a.podsByNS[p.Namespace] = append(a.podsByNS[p.Namespace], p)
		}
	}

	// Workloads are evaluated while the next kind is listed: listing waits
	// on the API server and decodes, evaluating is CPU work, one workload
	// independent of the next, and the webhook's handler serves concurrent
	// callers. The ranking below orders the results whatever order they
	// finish in.
	p := a.pipeline(opt.Progress)
	for _, list := range a.podsByNS {
		for _, pod := range list {
			if !sel.Matches(labels.Set(pod.Labels)) || ownedByWorkload(pod.OwnerReferences) {
				continue
			}
			p.run(func() { a.pod(ctx, pod) })
		}
	}
	for _, u := range deployments {
		p.run(func() { a.deployment(ctx, u) })
	}
	for _, u := range a.list(ctx, statefulSetsResource, opt.Selector) {
		p.run(func() { a.statefulSet(ctx, u) })
	}
	for _, ws := range a.workspaces(ctx, opt.Selector) {
		p.run(func() { a.workspace(ctx, ws) })
	}
	for _, u := range a.listOptional(ctx, lwsResource, opt.Selector) {
		p.run(func() {
			a.group(ctx, u, func(ctx context.Context, namespace string, obj map[string]any, node map[string]string) (admission.Evaluation, error) {
				var o lwsv1.LeaderWorkerSet
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &o); err != nil {
					return admission.Evaluation{}, err
				}
				return a.handler.EvaluateLeaderWorkerSet(ctx, namespace, &o, node), nil
			}, lwsNameLabel)
		})
	}
	for _, u := range a.listOptional(ctx, isvcResource, opt.Selector) {
		p.run(func() { a.group(ctx, u, a.handler.EvaluateInferenceService, kserveNameLabel) })
	}
	p.wait()
	a.readLive(ctx)
	a.report.rank()
	return a.report, nil
}

// slim drops what the audit never reads of an object and what makes up
// most of a listed pod's bytes: its managed fields and kubectl's copy of
// the last applied object.
func slim(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	delete(m.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
}

// workers is one goroutine per CPU: decoding and evaluating workloads is
// CPU work. On the shared 2-core machine of BenchmarkAudit500, the audit of
// 500 workloads took 2.6-2.8× the time of listing them one after the
// other, 2.1-2.4× with the evaluation on both cores, and 1.8-2.0× with it
// (and the pods' decoding) overlapping the lists.
func workers() int { return goruntime.GOMAXPROCS(0) }

// forEach runs f(0) ... f(n-1) on the workers.
func forEach(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers(), max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// pipeline runs jobs on the workers as they are queued; progress, when
// set, is told of each job done once all are queued (wait), so that its
// total is the audit's.
type pipeline struct {
	jobs     chan func()
	wg       sync.WaitGroup
	mu       sync.Mutex
	queued   int
	done     int
	all      bool
	progress func(done, total int)
}

func (a *auditor) pipeline(progress func(done, total int)) *pipeline {
	p := &pipeline{jobs: make(chan func(), 256), progress: progress}
	for range workers() {
		p.wg.Go(func() {
			for job := range p.jobs {
				job()
				p.mu.Lock()
				p.done++
				if p.all && p.progress != nil {
					p.progress(p.done, p.queued)
				}
				p.mu.Unlock()
			}
		})
	}
	return p
}

func (p *pipeline) run(job func()) {
	p.mu.Lock()
	p.queued++
	p.mu.Unlock()
	p.jobs <- job
}

// wait marks the queue complete and waits for its jobs.
func (p *pipeline) wait() {
	p.mu.Lock()
	p.all = true
	if p.progress != nil && p.done > 0 {
		p.progress(p.done, p.queued)
	}
	p.mu.Unlock()
	close(p.jobs)
	p.wg.Wait()
}

// auditor holds one audit's state.
type auditor struct {
	client   dynamic.Interface
	ns       string
	opt      Options
	handler  *admission.Handler
	nodes    map[string]map[string]string
	podsByNS map[string][]*corev1.Pod
	// mu guards report.Workloads while workers evaluate.
	mu     sync.Mutex
	report Report
	// held are the workloads whose pods' /metrics are still to be read.
	held []*heldWorkload
}

// list lists a resource in the audited namespaces (listPages); a failure
// is a cluster finding and what was read before it.
func (a *auditor) list(ctx context.Context, r schema.GroupVersionResource, selector string) []unstructured.Unstructured {
	items, notFound := a.listItems(ctx, r, selector)
	if notFound {
		a.listFailed(r, fmt.Errorf("the API server does not serve %s", r.GroupResource()))
	}
	return items
}

// where names the audited namespaces.
func (a *auditor) where() string {
	if a.ns == metav1.NamespaceAll {
		return "all namespaces"
	}
	return "namespace " + a.ns
}

func (a *auditor) listFailed(r schema.GroupVersionResource, err error) {
	msg := fmt.Sprintf("cannot list %s in %s: %v", r.Resource, a.where(), oneLine(err))
	if apierrors.IsForbidden(err) {
		msg += "; grant the audit's read-only role (README, headroom audit) or audit another namespace"
	}
	a.mu.Lock()
	a.report.Cluster = append(a.report.Cluster, Finding{Level: LevelNotChecked, Code: "cannot_list", Message: msg})
	a.mu.Unlock()
}

// readNodes reads every node's labels; without them GPUs come from pod
// specs alone.
func (a *auditor) readNodes(ctx context.Context) {
	a.nodes = map[string]map[string]string{}
	cut, err := pages(ctx, a.client.Resource(nodesResource), "", func(page []unstructured.Unstructured) {
		for _, n := range page {
			a.nodes[n.GetName()] = n.GetLabels()
		}
	})
	if err != nil {
		a.report.Cluster = append(a.report.Cluster, Finding{Level: LevelInfo, Code: "cannot_list_nodes",
			Message: fmt.Sprintf("cannot list nodes (%s): GPUs come from pod specs alone", oneLine(err))})
	}
	if cut {
		a.cut("nodes", "the cluster")
	}
}

// workspaces lists KAITO Workspaces, at the first API version the
// cluster serves; none when KAITO is not installed.
func (a *auditor) workspaces(ctx context.Context, selector string) []unstructured.Unstructured {
	for _, r := range workspaceResources {
		if items, notFound := a.listItems(ctx, r, selector); !notFound {
			return items
		}
	}
	return nil
}

// listOptional lists a resource whose CRD may not be installed: none then.
func (a *auditor) listOptional(ctx context.Context, r schema.GroupVersionResource, selector string) []unstructured.Unstructured {
	items, _ := a.listItems(ctx, r, selector)
	return items
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

// ownedByAudited reports whether a Deployment or StatefulSet was made by
// an object the audit plans itself: a KAITO Workspace, a LeaderWorkerSet
// (its leaders' StatefulSet), a leader pod (a group's workers'
// StatefulSet), or a KServe InferenceService (its raw Deployments).
func ownedByAudited(refs []metav1.OwnerReference) bool {
	for _, r := range refs {
		group, _, _ := strings.Cut(r.APIVersion, "/")
		switch {
		case r.Kind == "Workspace" && group == "kaito.sh",
			r.Kind == "LeaderWorkerSet" && group == lwsResource.Group,
			r.Kind == "InferenceService" && group == isvcResource.Group,
			r.Kind == "Pod" && r.APIVersion == "v1":
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
	a.mu.Lock()
	a.report.Workloads = append(a.report.Workloads, w)
	a.mu.Unlock()
}

func (a *auditor) deployment(ctx context.Context, u unstructured.Unstructured) {
	var d appsv1.Deployment
	if err := fromUnstructured(&u, &d); err != nil {
		a.cannotRead(&u, err)
		return
	}
	if ownedByAudited(d.OwnerReferences) {
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
	if ownedByAudited(s.OwnerReferences) {
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

// The labels of a group's pods: LWS's leaderworkerset.sigs.k8s.io/name on
// every pod of every group (api/leaderworkerset/v1: SetNameLabelKey), and
// KServe's serving.kserve.io/inferenceservice on the predictor's pods
// (pkg/constants: InferenceServicePodLabelKey).
const (
	lwsNameLabel    = "leaderworkerset.sigs.k8s.io/name"
	kserveNameLabel = "serving.kserve.io/inferenceservice"
)

// group audits a LeaderWorkerSet or an InferenceService with the webhook's
// evaluation of its kind; its pods are those labelled with its name, and
// the labels of the node the first of them runs on name the GPU where its
// spec does not.
func (a *auditor) group(ctx context.Context, u unstructured.Unstructured, evaluate func(context.Context, string, map[string]any, map[string]string) (admission.Evaluation, error), nameLabel string) {
	var pods []*corev1.Pod
	for _, p := range a.podsByNS[u.GetNamespace()] {
		if p.Labels[nameLabel] == u.GetName() {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var node map[string]string
	for _, p := range pods {
		if n, ok := a.nodes[p.Spec.NodeName]; ok {
			node = n
			break
		}
	}
	e, err := evaluate(ctx, u.GetNamespace(), u.Object, node)
	if err != nil {
		a.cannotRead(&u, err)
		return
	}
	a.evaluated(ctx, admission.Workload{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}, e, pods)
}

// evaluated turns the webhook's evaluation into the audit's findings.
func (a *auditor) evaluated(ctx context.Context, wl admission.Workload, e admission.Evaluation, pods []*corev1.Pod) {
	if !e.RunsVLLM {
		return
	}
	w := Workload{Kind: wl.Kind, Namespace: wl.Namespace, Name: wl.Name}
	for _, f := range e.Denials {
		level := LevelWillNotStart
		if f.Code == admission.CodeIdleGroupGPUs {
			level = LevelRisk // it starts, on part of its GPUs
		}
		w.add(level, f.Code, f.Message)
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
			w.add(LevelInfo, CodeSeqsBeyondCache, label(wl.Kind, eng.Container)+msg)
		}
	}
	var reads []*liveRead
	for _, p := range pods {
		w.Pods = append(w.Pods, a.podState(&w, p, e.Engines))
		if a.opt.Live && a.opt.Metrics != nil && p.Status.Phase == corev1.PodRunning {
			reads = append(reads, &liveRead{pod: len(w.Pods) - 1, p: p, engines: e.Engines})
		}
	}
	if len(reads) > 0 {
		// Its pods' /metrics are read with every other workload's, in
		// parallel, once all are evaluated (readLive).
		h := &heldWorkload{w: w, reads: reads}
		a.mu.Lock()
		a.held = append(a.held, h)
		a.mu.Unlock()
		return
	}
	w.finish()
	a.mu.Lock()
	a.report.Workloads = append(a.report.Workloads, w)
	a.mu.Unlock()
}

// label names an engine in a finding as the webhook's messages do.
func label(kind, container string) string {
	switch {
	case kind == "InferenceService":
		return "predictor: "
	case container == "":
		return "workspace: "
	case kind == "LeaderWorkerSet":
		return fmt.Sprintf("leader container %q: ", container)
	}
	return fmt.Sprintf("container %q: ", container)
}

// CodeSeqsBeyondCache: --max-num-seqs requests of the full --max-model-len
// need more KV cache than there is; past what the cache holds vLLM queues
// or preempts. It is information, not a risk: without the traffic the
// planner keeps max-num-seqs (memory.MaxNumSeqsRule), as plan and the
// webhook do.
const CodeSeqsBeyondCache = "max_num_seqs_beyond_kv_cache"

// seqsBeyondCache says how many requests of the full context the KV cache
// holds, when that is fewer than --max-num-seqs; it names no other value,
// since none is recommended without traffic.
func seqsBeyondCache(b memory.Budget) string {
	if b.MaxModelLen <= 0 || b.MaxConcurrency >= float64(b.Settings.MaxNumSeqs) {
		return ""
	}
	return fmt.Sprintf("--max-num-seqs %d: the KV cache (%d tokens at --gpu-memory-utilization %.2f) holds %.2f requests of the full --max-model-len %d at once; vLLM queues or preempts past what it holds. max-num-seqs is %s",
		b.Settings.MaxNumSeqs, b.KVTokens, b.Settings.GPUMemoryUtilization, b.MaxConcurrency, b.MaxModelLen, memory.MaxNumSeqsRule)
}

// warningLevel ranks the webhook's warnings.
func warningLevel(code string) string {
	switch code {
	case admission.CodeNotChecked:
		return LevelNotChecked
	case admission.CodeSharedGPU, admission.CodeProbe, admission.CodeCPUOnlyHPA, admission.CodeSharedMemory, memory.CodeThinMargin, memory.CodeLowConcurrency,
		// The pod checks' warnings (--pod-checks warn makes all of them
		// warnings): a limit the host plan's upper end passes, a request
		// without a limit, /dev/shm, a token in a plain env value.
		admission.CodeHostMemory, admission.CodeHostMemoryThin, admission.CodeHostMemoryRequest, admission.CodeSharedMemorySmall, admission.CodeHFToken:
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
