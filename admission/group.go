package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
)

// Finding codes of a vLLM server that spans pods.
const (
	// CodeParallelismMismatch: tensor × pipeline parallel needs more GPUs
	// than the group has: vLLM does not start.
	CodeParallelismMismatch = "parallelism_mismatch"
	// CodeIdleGroupGPUs: tensor × pipeline parallel uses fewer GPUs than
	// the group holds: the rest sit idle. The webhook denies it as it
	// denies a mismatch; it starts, so the audit ranks it at risk.
	CodeIdleGroupGPUs = "idle_group_gpus"
	// CodeTPAcrossNodes: tensor parallelism spans pods, so its all-reduce of
	// every layer crosses the network.
	CodeTPAcrossNodes = "tensor_parallel_across_nodes"
	// CodeSharedMemory: a pod of a multi-node group has no memory-backed
	// /dev/shm for Ray and NCCL.
	CodeSharedMemory = "no_shared_memory"
)

// maxGroupPods bounds the pods of one group read from an object.
const maxGroupPods = 1024

// group is a vLLM server that spans pods: a LeaderWorkerSet's group (a
// leader running Ray's head and `vllm serve`, workers joining Ray), or a
// KServe InferenceService's head and workers.
type group struct {
	// kind is "LeaderWorkerSet" or "InferenceService": the fixes name
	// their fields.
	kind string
	// pods is the number of pods of one group, leader included.
	pods int
	// leaderGPUs and workerGPUs are the GPUs each pod requests.
	leaderGPUs, workerGPUs int
	// nodeGPUs, when set, is the node size past which the planner's
	// alternatives shard with pipeline parallelism; 0 means a pod's GPUs
	// (perPod): a pod of a multi-node group has a node to itself.
	nodeGPUs int
}

// node is the node size the multi-node rule shards past.
func (g group) node() int {
	if g.nodeGPUs > 0 {
		return g.nodeGPUs
	}
	return g.perPod()
}

// gpus is what the group holds: the leader's and its workers'.
func (g group) gpus() int { return g.leaderGPUs + (g.pods-1)*g.workerGPUs }

// perPod is the GPUs of one node of the group: a worker's, or the
// leader's where it has none; the multi-node rule shards past it.
func (g group) perPod() int {
	if g.workerGPUs > 0 {
		return g.workerGPUs
	}
	return g.leaderGPUs
}

// podsFor is the pod count whose GPUs are exactly n; 0 when none is.
func (g group) podsFor(n int) int {
	per := g.perPod()
	switch {
	case n == g.leaderGPUs && n > 0:
		return 1
	case per <= 0 || n < g.leaderGPUs || (n-g.leaderGPUs)%per != 0:
		return 0
	}
	p := 1 + (n-g.leaderGPUs)/per
	if p > maxGroupPods {
		return 0
	}
	return p
}

// shape says what the group is, for messages: "2 pods × 8 × H100-80GB".
func (g group) shape(device string) string {
	if g.leaderGPUs == g.workerGPUs || g.pods == 1 {
		return fmt.Sprintf("%d %s × %d × %s", g.pods, plural(g.pods, "pod", "pods"), g.leaderGPUs, device)
	}
	return fmt.Sprintf("a leader with %d and %d %s with %d × %s", g.leaderGPUs, g.pods-1, plural(g.pods-1, "worker", "workers"), g.workerGPUs, device)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// layoutFix is the change that shards tp × pp over the group, in the
// fields the kind reads its parallelism from.
func (g group) layoutFix(tp, pp int) string {
	if g.kind == kindInferenceService {
		if pp > 1 {
			return fmt.Sprintf("workerSpec.tensorParallelSize: %d and workerSpec.pipelineParallelSize: %d", tp, pp)
		}
		return fmt.Sprintf("%s: %d in the predictor's resources and no workerSpec", ResourceGPU, tp)
	}
	return strings.TrimPrefix(memory.LayoutFlags(tp, pp), "set ") + " in the leader's vllm command"
}

// resizeFix is the change to a group of pods pods.
func (g group) resizeFix(pods int) string {
	if g.kind == kindInferenceService {
		return fmt.Sprintf("workerSpec.pipelineParallelSize: %d", pods)
	}
	return fmt.Sprintf("size: %d", pods)
}

// describe says an alternative of the planner in the group's terms: a
// change of GPU count is a change of pods (LeaderWorkerSet size, KServe's
// workerSpec), with the flags that go with it.
func (g group) describe(a memory.Alternative, given int, device string) string {
	if a.Count == 0 || a.Count == given || a.GPU != device {
		return a.Message
	}
	set := a.Input.Settings
	tp, pp := max(set.TensorParallelSize, 1), max(set.PipelineParallelSize, 1)
	var rest []string
	for i := 0; i+1 < len(a.Args); i += 2 {
		if a.Args[i] == "--tensor-parallel-size" || a.Args[i] == "--pipeline-parallel-size" {
			continue
		}
		rest = append(rest, a.Args[i]+" "+a.Args[i+1])
	}
	var fix string
	if g.kind == kindInferenceService {
		// KServe gives every pod tensorParallelSize GPUs and runs
		// pipelineParallelSize pods.
		fix = g.layoutFix(tp, pp)
		if len(rest) > 0 {
			fix += " and " + strings.Join(rest, " ") + " in args"
		}
		return fmt.Sprintf("%s (%d × %s)", fix, a.Count, device)
	}
	pods := g.podsFor(a.Count)
	if pods == 0 {
		return a.Message
	}
	fix = fmt.Sprintf("%s (%d × %s)", g.resizeFix(pods), a.Count, device)
	var flags []string
	for i := 0; i+1 < len(a.Args); i += 2 {
		flags = append(flags, a.Args[i]+" "+a.Args[i+1])
	}
	if len(flags) > 0 {
		fix += " and " + strings.Join(flags, " ") + " in the leader's vllm command"
	}
	if tp <= g.perPod() && pp > 1 {
		fix += ": tensor parallel inside a pod, pipeline parallel across pods"
	}
	return fix
}

// checks are what a group adds to its plan: tensor × pipeline parallel
// against the group's GPUs, and tensor parallelism across pods. in was
// planned as b on the GPUs its parallelism needs.
func (g group) checks(h *Handler, label string, spec model.Spec, in memory.Input, b memory.Budget) (denials, warnings []Finding) {
	set := b.Settings
	tp, pp, dp := set.TensorParallelSize, set.PipelineParallelSize, max(set.DataParallelSize, 1)
	need, have := tp*pp*dp, g.gpus()
	device := in.Device.Name
	if need != have {
		what := fmt.Sprintf("%s: the group has %d GPUs (%s) but --tensor-parallel-size %d × --pipeline-parallel-size %d", label, have, g.shape(device), tp, pp)
		if dp > 1 {
			what += fmt.Sprintf(" × --data-parallel-size %d", dp)
		}
		what += fmt.Sprintf(" = %d", need)
		if need > have {
			what += ": vLLM does not start (Ray cannot place that many GPU workers on the group's GPUs)"
		} else {
			what += fmt.Sprintf(": %d of its GPUs sit idle", have-need)
		}
		var fixes []string
		if p := g.podsFor(need); p > 0 && p != g.pods {
			fixes = append(fixes, g.resizeFix(p))
		}
		if ltp, lpp, ok := memory.Layout(have, g.perPod(), spec); ok && dp == 1 && (ltp != tp || lpp != pp) {
			alt := in
			alt.Count, alt.Settings.TensorParallelSize, alt.Settings.PipelineParallelSize = have, ltp, lpp
			if ab, err := h.plans.plan(planKey(alt), alt); err == nil && ab.Fits {
				fixes = append(fixes, g.layoutFix(ltp, lpp))
			}
		}
		if len(fixes) > 0 {
			what += ". To fix: " + strings.Join(fixes, "; or ")
		}
		code := CodeParallelismMismatch
		if need < have {
			code = CodeIdleGroupGPUs
		}
		denials = append(denials, Finding{Code: code, Message: what})
	}
	if per := g.perPod(); g.pods > 1 && per > 0 && tp > per {
		msg := fmt.Sprintf("%s: --tensor-parallel-size %d spans pods of %d GPUs: its all-reduce of every layer crosses the network; vLLM's multi-node guide keeps tensor parallel inside a node and pipeline parallel across nodes", label, tp, per)
		if ltp, lpp, ok := memory.Layout(tp*pp, per, spec); ok {
			msg += ": " + g.layoutFix(ltp, lpp)
		}
		warnings = append(warnings, Finding{Code: CodeTPAcrossNodes, Message: msg})
	}
	return denials, warnings
}

// devShmMounted reports whether a container mounts a memory-backed
// emptyDir at /dev/shm.
func devShmMounted(spec *corev1.PodSpec, c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/dev/shm" {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
				return true
			}
		}
	}
	return false
}

// sharedMemoryWarning is the warning for a pod of a multi-node group whose
// container has no memory-backed /dev/shm. Ray keeps its object store in
// /dev/shm and moves it to /tmp when /dev/shm is too small ("The object
// store is using /tmp instead of /dev/shm ... This will harm performance!",
// ray/_private/services.py), and NCCL sets up its buffers there; a
// container's own /dev/shm is 64 MiB (the container runtimes' default).
// vLLM's LeaderWorkerSet example mounts an emptyDir of medium Memory there
// in the leader and the workers.
func sharedMemoryWarning(label string) Finding {
	return Finding{Code: CodeSharedMemory, Message: label + ": no memory-backed /dev/shm: Ray's object store and NCCL's buffers live there, and a container's own is 64 MiB; mount an emptyDir of medium Memory at /dev/shm (its size counts against the pod's memory limit)"}
}
