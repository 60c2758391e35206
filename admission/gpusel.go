package admission

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"headroom.dev/headroom/gpu"
)

// maxGPUs bounds a GPU count read from a resource quantity; no node holds
// more, and it keeps the planner's products small.
const maxGPUs = 4096

// gpuEvidence is what a pod spec says about the GPUs one container gets.
type gpuEvidence struct {
	sel gpu.Selection
	// known is true when sel.Device was resolved.
	known bool
	// from says where the device came from, for messages.
	from string
	// count is the number of GPUs the container requests; 0 when it
	// requests none.
	count int
	// shared says why the GPU looks time-sliced or MPS-shared.
	shared []string
	// unresolved says why the device could not be resolved.
	unresolved string
	// unselected is set when nothing of the pod names its GPU.
	unselected bool
	// node is the instance type the pod is pinned to, where its node
	// selection names one (the one with the fewest GPUs of those it
	// allows); zero when none. A fix that asks for more GPUs than it has,
	// or for another GPU, cannot schedule there.
	node gpu.Selection
}

// nodeConstraints are the node labels a pod requires: its nodeSelector and
// the In expressions of its required node affinity (terms are ORed, so
// their values are merged: the pod may land on any of them).
type nodeConstraints map[string][]string

func readNodeConstraints(spec *corev1.PodSpec) nodeConstraints {
	nc := nodeConstraints{}
	addValue := func(k, v string) {
		if !slices.Contains(nc[k], v) {
			nc[k] = append(nc[k], v)
		}
	}
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		addValue(k, spec.NodeSelector[k])
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Operator != corev1.NodeSelectorOpIn {
					continue
				}
				for _, v := range e.Values {
					addValue(e.Key, v)
				}
			}
		}
	}
	return nc
}

// resourceCount reads a whole GPU count from a quantity; the error says
// what is wrong with it in words that name the resource.
func resourceCount(name string, q resource.Quantity) (int, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("resource %s: %s is a negative number of GPUs", name, q.String())
	}
	// The size first: 1G (10⁹) is whole, but no node holds it.
	if q.Cmp(*resource.NewQuantity(maxGPUs, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("resource %s: %s GPUs is more than any node holds (at most %d)", name, q.String(), maxGPUs)
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("resource %s: %s is not a whole number of GPUs", name, q.String())
	}
	return int(n), nil
}

// readGPU gathers the GPU evidence for container c of a pod: the device from
// the headroom.dev/gpu annotation, a MIG resource, the GFD product label,
// or the instance type (in that order), and the count from the container's
// resource limits (requests when there are no limits). node holds the
// labels of the node a pod runs on, when known (the audit; never the
// webhook, which sees pods before they are scheduled): its GPU feature
// discovery labels name the GPU where the pod spec does not, and its
// sharing labels always count.
func (h *Handler) readGPU(ann map[string]string, spec *corev1.PodSpec, c corev1.Container, node map[string]string) gpuEvidence {
	var ev gpuEvidence
	nc := readNodeConstraints(spec)
	for _, k := range []string{labelSharingStrategy, labelReplicas, gpu.LabelGKESharing} {
		if v, ok := node[k]; ok && !slices.Contains(nc[k], v) {
			nc[k] = append(nc[k], v)
		}
	}
	ev.node = h.pinnedType(nc, node)

	res := c.Resources.Limits
	if len(gpuResources(res)) == 0 {
		res = c.Resources.Requests
	}
	mig := ""
	for _, name := range gpuResources(res) {
		q := res[corev1.ResourceName(name)]
		n, err := resourceCount(name, q)
		if err != nil {
			ev.unresolved = err.Error()
			return ev
		}
		ev.count += n
		switch {
		case name == ResourceSharedGPU:
			ev.shared = append(ev.shared, "it requests "+ResourceSharedGPU+" (a time-sliced or MPS-shared GPU)")
		case strings.HasPrefix(name, resourceMIGPrefix):
			mig = name
		}
	}

	products := nc[gpu.LabelProduct]
	nodeProduct := node[gpu.LabelProduct]
	for _, p := range append(slices.Clone(products), nodeProduct) {
		if strings.HasSuffix(strings.ToUpper(p), "-SHARED") {
			ev.shared = append(ev.shared, fmt.Sprintf("its node's GPU product %q carries GPU feature discovery's -SHARED suffix (time-slicing or MPS)", p))
		}
	}
	for _, s := range nc[labelSharingStrategy] {
		if s != "" && s != "none" {
			ev.shared = append(ev.shared, fmt.Sprintf("it selects nodes with %s=%s", labelSharingStrategy, s))
		}
	}
	for _, s := range nc[gpu.LabelGKESharing] {
		if s != "" {
			ev.shared = append(ev.shared, fmt.Sprintf("it selects nodes with GKE's %s=%s", gpu.LabelGKESharing, s))
		}
	}
	for _, r := range nc[labelReplicas] {
		if n, err := strconv.Atoi(r); err == nil && n > 1 {
			ev.shared = append(ev.shared, fmt.Sprintf("it selects nodes with %s=%d (each GPU is shared by %d pods)", labelReplicas, n, n))
		}
	}

	if v, ok := ann[AnnotationGPU]; ok {
		sel, err := h.gpus.resolve(v)
		if err != nil {
			b, berr := gpu.ParseBytes(v)
			if berr != nil || b <= 0 {
				ev.unresolved = fmt.Sprintf("annotation %s=%q: %v", AnnotationGPU, v, err)
				return ev
			}
			sel = gpu.Selection{Device: gpu.Custom(b), Count: 1}
		}
		ev.sel, ev.known, ev.from = sel, true, fmt.Sprintf("annotation %s=%s", AnnotationGPU, v)
		return ev
	}
	if mig != "" {
		name := mig
		parent := nodeProduct
		if len(products) == 1 {
			parent = products[0]
		}
		if parent != "" {
			// The slice of a known parent: "NVIDIA-A100-SXM4-80GB:1g.10gb".
			name = parent + ":" + strings.TrimPrefix(mig, resourceMIGPrefix)
		}
		sel, err := h.gpus.resolve(name)
		if err != nil && name != mig {
			sel, err = h.gpus.resolve(mig)
		}
		if err != nil {
			ev.unresolved = fmt.Sprintf("MIG resource %s: %v", mig, err)
			return ev
		}
		ev.sel, ev.known, ev.from = sel, true, "resource "+mig
		return ev
	}
	if len(products) == 1 && len(spec.NodeSelector[gpu.LabelProduct]) > 0 {
		// A nodeSelector can carry GFD's memory label too, which sizes a
		// product the catalog does not know.
		labels := map[string]string{}
		for _, k := range []string{gpu.LabelProduct, gpu.LabelMemory, gpu.LabelComputeMajor, gpu.LabelComputeMinor} {
			if v, ok := spec.NodeSelector[k]; ok {
				labels[k] = v
			}
		}
		sel, err := h.gpus.fromLabels(labels)
		if err != nil {
			ev.unresolved = fmt.Sprintf("nodeSelector %s=%s: %v", gpu.LabelProduct, products[0], err)
			return ev
		}
		ev.sel, ev.known, ev.from = sel, true, fmt.Sprintf("nodeSelector %s=%s", gpu.LabelProduct, products[0])
		return ev
	}
	for _, label := range []string{gpu.LabelProduct, gpu.LabelGKEAccelerator, labelInstanceType, labelInstanceTypeBeta} {
		if vals := nc[label]; len(vals) > 0 {
			sel, from, err := h.smallest(label, vals, h.labelResolver(label, nc[gpu.LabelGKEPartition]))
			if err != nil {
				ev.unresolved = err.Error()
				return ev
			}
			if p := nc[gpu.LabelGKEPartition]; label == gpu.LabelGKEAccelerator && len(p) > 0 {
				from += fmt.Sprintf(", partitioned %s=%s", gpu.LabelGKEPartition, strings.Join(p, "|"))
			}
			ev.sel, ev.known, ev.from = sel, true, from
			return ev
		}
	}
	if nodeProduct != "" {
		labels := map[string]string{}
		for _, k := range []string{gpu.LabelProduct, gpu.LabelMemory, gpu.LabelComputeMajor, gpu.LabelComputeMinor} {
			if v, ok := node[k]; ok {
				labels[k] = v
			}
		}
		sel, err := h.gpus.fromLabels(labels)
		if err != nil {
			ev.unresolved = fmt.Sprintf("its node's label %s=%s: %v", gpu.LabelProduct, nodeProduct, err)
			return ev
		}
		ev.sel, ev.known, ev.from = sel, true, fmt.Sprintf("its node's label %s=%s", gpu.LabelProduct, nodeProduct)
		return ev
	}
	if acc := node[gpu.LabelGKEAccelerator]; acc != "" {
		sel, err := h.gpus.gke(acc, node[gpu.LabelGKEPartition])
		if err != nil {
			ev.unresolved = "its node's " + err.Error()
			return ev
		}
		ev.sel, ev.known, ev.from = sel, true, fmt.Sprintf("its node's label %s=%s", gpu.LabelGKEAccelerator, acc)
		return ev
	}
	if it := node[labelInstanceType]; it != "" {
		sel, from, err := h.smallest(labelInstanceType, []string{it}, h.gpus.resolve)
		if err != nil {
			ev.unresolved = "its node's " + err.Error()
			return ev
		}
		ev.sel, ev.known, ev.from = sel, true, "its node's "+from
		return ev
	}
	ev.unresolved = fmt.Sprintf("no %s annotation and no node selection on %s, %s or %s", AnnotationGPU, gpu.LabelProduct, gpu.LabelGKEAccelerator, labelInstanceType)
	ev.unselected = true
	return ev
}

// cliAdvice is what the GPU catalog's errors advise a command-line user:
// flags neither a manifest nor the webhook has.
var cliAdvice = []string{
	" run `headroom gpus` to list all, or give --gpu-memory",
	": run `headroom gpus` to list all, or give --gpu-memory",
	": give the GPU with --gpu or --gpu-memory",
}

// withoutCLIAdvice is a GPU error without the command-line advice; the
// webhook's own follows it (gpuAdvice).
func withoutCLIAdvice(msg string) string {
	for _, a := range cliAdvice {
		msg = strings.ReplaceAll(msg, a, "")
	}
	return msg
}

// gpuAdvice says how a manifest names its GPU: the annotation, by name or
// by memory (a GPU the catalog lacks), or, where the pod selects none, a
// node selector on a label that names it.
func gpuAdvice(unselected bool) string {
	a := fmt.Sprintf("name it with the annotation %s: a GPU (L4, NVIDIA-A100-SXM4-80GB, g6.xlarge; `headroom gpus` lists them) or its memory (24GiB)", AnnotationGPU)
	if unselected {
		a += fmt.Sprintf(", or select its nodes by %s or %s", gpu.LabelProduct, gpu.LabelGKEAccelerator)
	}
	return a
}

// labelResolver resolves the values of a node label that names a GPU:
// GKE's accelerator with the partition the pod selects (the smallest of
// several), the others as any GPU name.
func (h *Handler) labelResolver(label string, partitions []string) func(string) (gpu.Selection, error) {
	if label != gpu.LabelGKEAccelerator {
		return h.gpus.resolve
	}
	if len(partitions) == 0 {
		partitions = []string{""}
	}
	return func(v string) (gpu.Selection, error) {
		var best gpu.Selection
		for i, p := range partitions {
			sel, err := h.gpus.gke(v, p)
			if err != nil {
				return gpu.Selection{}, err
			}
			if i == 0 || sel.Device.TotalBytes < best.Device.TotalBytes {
				best = sel
			}
		}
		return best, nil
	}
}

// pinnedType is the instance type a pod is pinned to: of those its node
// selection allows, the one with the fewest GPUs (its own node's type,
// when known and the pod allows any); zero when a value is not an
// instance type headroom knows, since then nothing is known of the node.
func (h *Handler) pinnedType(nc nodeConstraints, node map[string]string) gpu.Selection {
	vals := append(slices.Clone(nc[labelInstanceType]), nc[labelInstanceTypeBeta]...)
	if len(vals) == 0 && node[labelInstanceType] != "" {
		vals = []string{node[labelInstanceType]}
	}
	var fewest gpu.Selection
	for _, v := range vals {
		sel, err := h.gpus.resolve(v)
		if err != nil || sel.SKU == "" {
			return gpu.Selection{}
		}
		if fewest.SKU == "" || sel.Count < fewest.Count {
			fewest = sel
		}
	}
	return fewest
}

// gpuResources lists the NVIDIA GPU resources in a resource list, sorted.
func gpuResources(res corev1.ResourceList) []string {
	var names []string
	for name := range res {
		n := string(name)
		if n == ResourceGPU || n == ResourceSharedGPU || strings.HasPrefix(n, resourceMIGPrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// smallest resolves the values a node label may take (by resolve) and returns the
// device with the least memory: the scheduler may place the pod on any of
// them, so the plan errs on the safe side.
func (h *Handler) smallest(label string, values []string, resolve func(string) (gpu.Selection, error)) (gpu.Selection, string, error) {
	var best gpu.Selection
	bestValue := ""
	for _, v := range values {
		sel, err := resolve(v)
		if err != nil {
			return gpu.Selection{}, "", fmt.Errorf("node label %s=%s: %v", label, v, err)
		}
		if bestValue == "" || sel.Device.TotalBytes < best.Device.TotalBytes {
			best, bestValue = sel, v
		}
	}
	from := fmt.Sprintf("node label %s=%s", label, bestValue)
	if len(values) > 1 {
		from += fmt.Sprintf(" (the smallest of %d allowed values)", len(values))
	}
	return best, from, nil
}

// maxCachedGPUs bounds the GPU cache; GPU names come from outside.
const maxCachedGPUs = 4096

// gpuCache remembers what the GPU catalog says about a name or a set of
// GPU feature discovery labels. The catalog cannot change while the
// process runs, and an unknown name costs a ranking of every name for the
// suggestions: in an audit, every workload on a node with an unknown GPU
// label paid it again (0.1 ms each).
type gpuCache struct {
	mu      sync.Mutex
	entries map[string]gpuEntry
}

type gpuEntry struct {
	sel gpu.Selection
	err error
}

func (c *gpuCache) get(key string, resolve func() (gpu.Selection, error)) (gpu.Selection, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return e.sel, e.err
	}
	e.sel, e.err = resolve()
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]gpuEntry{}
	}
	if len(c.entries) < maxCachedGPUs {
		c.entries[key] = e
	}
	c.mu.Unlock()
	return e.sel, e.err
}

// resolve is gpu.Resolve(name), remembered.
func (c *gpuCache) resolve(name string) (gpu.Selection, error) {
	return c.get("n\x00"+name, func() (gpu.Selection, error) { return gpu.Resolve(name) })
}

// gke is gpu.FromGKEAccelerator(value, partition), remembered.
func (c *gpuCache) gke(value, partition string) (gpu.Selection, error) {
	return c.get("g\x00"+value+"\x00"+partition, func() (gpu.Selection, error) { return gpu.FromGKEAccelerator(value, partition) })
}

// fromLabels is gpu.FromNodeLabels(labels), remembered by the labels it
// reads.
func (c *gpuCache) fromLabels(labels map[string]string) (gpu.Selection, error) {
	var b strings.Builder
	b.WriteString("l")
	for _, k := range []string{gpu.LabelProduct, gpu.LabelMemory, gpu.LabelComputeMajor, gpu.LabelComputeMinor, gpu.LabelCount} {
		v, ok := labels[k]
		if !ok {
			v = "\x01" // absent, unlike empty
		}
		b.WriteString("\x00" + v)
	}
	return c.get(b.String(), func() (gpu.Selection, error) { return gpu.FromNodeLabels(labels) })
}
