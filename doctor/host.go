package doctor

import (
	"fmt"
	"strings"

	"headroom.dev/headroom/host"
	"headroom.dev/headroom/vllm"
)

// Finding codes of the host side: the pod's memory limit and /dev/shm.
// An OOMKilled container (exit 137 with reason OOMKilled) ran out of its
// cgroup's memory, not the GPU's: the answer is the pod's limit or the
// host-side settings, never --gpu-memory-utilization.
const (
	CodeHostMemory   = "host_memory_limit"
	CodeSharedMemory = "shared_memory"
)

// HostFacts are the host-memory failures the logs name.
type HostFacts struct {
	// CgroupOOM cites the kernel's "Memory cgroup out of memory: Killed
	// process" (dmesg, #57469).
	CgroupOOM []Line `json:"cgroup_oom,omitempty"`
	// Shm cites /dev/shm running out: vLLM's start-up check (#50358),
	// NCCL's segment (production-stack #276), Ray's object store
	// (gpustack #5014).
	Shm []Line `json:"shm,omitempty"`
}

// hostLines are the texts of host-memory failures, each with its source.
var (
	cgroupOOMTexts = []string{
		"Memory cgroup out of memory: Killed process", // the kernel's OOM killer in a cgroup (#57469)
	}
	shmTexts = []string{
		"Insufficient space in /dev/shm",                             // vLLM's check_shm_free_space (#50358)
		"Error while creating shared memory segment /dev/shm/nccl-",  // NCCL (production-stack #276)
		"System memory request exceeds memory available in /dev/shm", // Ray's raylet (gpustack #5014)
	}
)

// hostLine records a host-memory failure in a line of text. It does not
// consume the line: the same line may also be a log event.
func (s *textScanner) hostLine(l string) {
	for _, t := range cgroupOOMTexts {
		if strings.Contains(l, t) {
			s.e.Host.CgroupOOM = append(s.e.Host.CgroupOOM, s.here())
			s.in.addKind(KindHost)
			return
		}
	}
	for _, t := range shmTexts {
		if strings.Contains(l, t) {
			s.e.Host.Shm = append(s.e.Host.Shm, s.here())
			s.in.addKind(KindHost)
			return
		}
	}
}

// maxMemoryLimit bounds a memory limit read from a manifest: past 1 PiB
// no node has it, and the number is not a limit.
const maxMemoryLimit = int64(1) << 50

// vllmMemoryLimit is the memory limit of the vLLM container, 0 when none
// is read.
func (g *diag) vllmMemoryLimit() (int64, Line) {
	for _, c := range g.ev.K8s.Containers {
		if c.VLLM && c.MemoryLimit > 0 && c.MemoryLimit <= maxMemoryLimit {
			return c.MemoryLimit, c.MemoryLine
		}
	}
	return 0, Line{}
}

// hostPlan is the host plan of the deployment, when it is planned.
func (g *diag) hostPlan() (host.Plan, bool) {
	if g.base == nil {
		return host.Plan{}, false
	}
	hp, err := host.Build(*g.base, host.Options{Env: g.in.Env})
	return hp, err == nil
}

// hostRules tell an OOMKilled container (its cgroup's limit) from a CUDA
// out-of-memory error (the GPU), and name the host-side cause with the
// host plan's numbers.
func (g *diag) hostRules() {
	k := g.ev.K8s
	killed := append(append([]Line(nil), k.OOMKilled...), g.ev.Host.CgroupOOM...)
	hp, planned := g.hostPlan()
	if len(killed) > 0 {
		for _, l := range k.OOMKilled {
			g.signal(CodeHostMemory, wStrong, "the container was OOMKilled (exit 137): it ran past its memory limit, host memory, not the GPU's", l)
		}
		for _, l := range g.ev.Host.CgroupOOM {
			g.signal(CodeHostMemory, wStrong, "the kernel killed a process of the pod's memory cgroup: host memory, not the GPU's", l)
		}
		if len(g.ev.OOMs) > 0 {
			g.signal(CodeHostMemory, wWeak, "the logs also hold a CUDA out-of-memory error: that one is the GPU's, with causes of its own below; the kill is the limit's")
		}
		limit, at := g.vllmMemoryLimit()
		switch {
		case !planned:
		case limit > 0 && limit < hp.RequiredBytes:
			g.signal(CodeHostMemory, wMeasured, fmt.Sprintf("the memory limit %s is below the %s this vLLM holds in host memory: %s", gib(limit), gib(hp.RequiredBytes), hostTerms(hp)), at)
		case limit > 0 && limit < hp.RequiredHighBytes:
			g.signal(CodeHostMemory, wSupporting, fmt.Sprintf("the memory limit %s holds the %s planned in host memory but not the %s of the largest reported process baselines: %s", gib(limit), gib(hp.RequiredBytes), gib(hp.RequiredHighBytes), hostTerms(hp)), at)
		case limit > 0:
			g.notes = append(g.notes, fmt.Sprintf("OOMKilled although the memory limit %s holds the host plan's %s (%s at the sources' upper end): something the plan does not model holds the rest (another process in the container, a page cache the kernel could not drop, a load format's staging)", gib(limit), gib(hp.RequiredBytes), gib(hp.RequiredHighBytes)))
		}
	}
	for _, l := range g.ev.Host.Shm {
		reason := "/dev/shm ran out: a container's own is 64 MiB, and vLLM's message queues, NCCL and the offloaded KV cache live there"
		if planned && hp.ShmNeeded {
			reason = fmt.Sprintf("/dev/shm ran out: this vLLM writes %s there (%s), and a container's own is 64 MiB", gib(hp.ShmBytes), hp.ShmList())
		}
		g.signal(CodeSharedMemory, wStrong, reason, l)
	}
}

// hostTerms names the host plan's largest unreclaimable terms, how each
// is known and its arithmetic.
func hostTerms(hp host.Plan) string {
	var parts []string
	for _, t := range hp.Largest(3) {
		parts = append(parts, fmt.Sprintf("%s %s (%s: %s)", t.Name(), gib(t.Bytes), t.Basis, t.Detail))
	}
	return strings.Join(parts, "; ")
}

// hostRemedies set the limit to the host plan's, or lower its largest
// term; without a plan, or where the plan is within the limit, they say
// the value is a starting point.
func (g *diag) hostRemedies() []Remedy {
	limit, _ := g.vllmMemoryLimit()
	hp, planned := g.hostPlan()
	var rs []Remedy
	switch {
	case planned && (limit == 0 || hp.MemoryLimitBytes > limit):
		rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"resources.limits.memory", hp.MemoryLimit, "resources.requests.memory", hp.MemoryLimit},
			Why: fmt.Sprintf("the host plan: %s held (%s at the sources' upper end, rounded up to a GiB): %s; GPU settings do not change it", gib(hp.RequiredBytes), gib(hp.RequiredHighBytes), hostTerms(hp))})
		set := g.base.Settings
		if size, from := set.KVOffloadBytes(); size > 0 && limit > 0 {
			// The offloaded KV cache is what the user sized; the rest of
			// the plan stays when it shrinks.
			rest := hp.RequiredBytes - offloadedKV(hp)
			if room := limit - rest; room >= 1<<30 && room < size {
				rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--" + vllm.FlagKVOffloadingSize, fmt.Sprintf("%d", room>>30)},
					Why: fmt.Sprintf("or keep the limit and offload less KV cache than %s (%s): the rest of the plan holds %s of the %s limit", from, gib(size), gib(rest), gib(limit))})
			}
		}
	case limit > 0:
		to := fmt.Sprintf("%dGi", roundUp(2*limit, 1<<30)>>30)
		why := fmt.Sprintf("raise the memory limit (%s now); doubling is a starting point, not a computed value", gib(limit))
		if planned {
			why += fmt.Sprintf(": the host plan's %s is within it, so what holds the rest is not modelled", gib(hp.RequiredHighBytes))
		}
		rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"resources.limits.memory", to}, Why: why})
	default:
		rs = append(rs, Remedy{Action: ActionEditManifest, Args: []string{"resources.limits.memory"},
			Why: "OOMKilled is the container's host-memory limit: raise resources.limits.memory; GPU settings do not change it"})
	}
	return rs
}

// offloadedKV is the host plan's offloaded KV cache.
func offloadedKV(hp host.Plan) int64 {
	for _, t := range hp.Terms {
		if t.Term == host.TermOffloadedKV {
			return t.Bytes
		}
	}
	return 0
}

// shmRemedies mount /dev/shm of the host plan's size.
func (g *diag) shmRemedies() []Remedy {
	size := "1Gi"
	why := "mount an emptyDir of medium Memory at /dev/shm (its pages count against the memory limit)"
	if hp, ok := g.hostPlan(); ok && hp.ShmNeeded {
		size = hp.ShmSizeLimit
		why = fmt.Sprintf("mount an emptyDir of medium Memory at /dev/shm: this vLLM writes %s there (%s); its pages count against the memory limit", gib(hp.ShmBytes), hp.ShmList())
	}
	return []Remedy{{Action: ActionEditManifest, Args: []string{"volumes[].emptyDir.medium", "Memory", "volumes[].emptyDir.sizeLimit", size, "volumeMounts[].mountPath", "/dev/shm"}, Why: why}}
}
