package doctor

import (
	"fmt"
	"math"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// Signal weights (see the package doc). An error text that names the
// cause is near-certain; a measured figure past a threshold is strong; a
// prediction of the planner or a circumstance is supporting.
const (
	wNamed      = 0.9
	wStrong     = 0.75
	wMeasured   = 0.6
	wSupporting = 0.45
	wWeak       = 0.3
)

// Thresholds.
const (
	// weightsShare: weights at or above this share of the card are "the
	// service starts near full memory" of the seed's matrix, read from
	// what vLLM measured (not from nvidia-smi, which shows the whole
	// preallocated budget).
	weightsShare = 0.8
	// kvUsageHigh: KV usage at or above this is near full (#18115: at ~91%
	// "the generation speed dramatically breaks").
	kvUsageHigh = 0.9
	// otherMemoryMin is memory held by others that counts (below it:
	// rounding, the CUDA context of a monitoring agent).
	otherMemoryMin = int64(1) << 30
	// fragmentationMin: reserved-but-unallocated memory below this is
	// ordinary allocator slack.
	fragmentationMin = int64(1) << 30
	// idleGPUBytes: a GPU using less than this holds no model.
	idleGPUBytes = int64(2) << 30
	// restartsMany is the restart count that is a crash loop.
	restartsMany = 3
)

func (g *diag) rules() {
	g.oomRules()
	g.logRules()
	g.planRules()
	g.utilizationRules()
	g.gpuRules()
	g.metricRules()
	g.trafficRules()
	g.k8sRules()
	g.hostRules()
	g.versionRules()
}

// util is the deployment's --gpu-memory-utilization (the version's
// default when not given).
func (g *diag) util() float64 {
	if g.base != nil {
		return g.base.Settings.GPUMemoryUtilization
	}
	if u := g.dep.Settings.GPUMemoryUtilization; u > 0 {
		return u
	}
	return vllm.DefaultGPUMemoryUtilization(g.dep.Settings.Version)
}

func (g *diag) oomRules() {
	for _, o := range g.ev.OOMs {
		n := o.OOM
		at := []Line{o.Line, o.PhaseLine}
		switch o.Phase {
		case PhaseLoading:
			g.signal(CodeWeightsTooLarge, wNamed, "CUDA ran out of memory while the weights were loading: they do not fit on the GPU as sharded", at...)
		case PhaseProfiling:
			g.signal(CodeWeightsTooLarge, wStrong, "CUDA ran out of memory in vLLM's profile run: the weights and the activation of one --max-num-batched-tokens step do not fit", at...)
		case PhaseKVAlloc:
			g.signal(CodeUtilizationEdge, wMeasured, "CUDA ran out of memory right after the KV cache was sized: the budget total × utilization leaves nothing for what follows", at...)
		case PhaseCapture:
			g.signal(CodeOutsideBudget, wNamed, "CUDA ran out of memory while capturing CUDA graphs, after the KV cache had taken its budget", at...)
		case PhaseSampler:
			g.signal(CodeOutsideBudget, wNamed, "CUDA ran out of memory in the sampler warm-up (logits for --max-num-seqs rows), which runs outside the budget", at...)
		case PhaseServing:
			// vLLM allocates the whole KV cache at start-up and preempts
			// or queues requests when it is full: a full KV cache never
			// asks CUDA for memory. What failed is a step's own
			// allocation (logits, the sampler, activation) beside the
			// budget, larger than the profile run measured.
			g.signal(CodeOutsideBudget, wMeasured, fmt.Sprintf("CUDA ran out of memory while serving: a step asked for %s with %s free; the KV cache was allocated at start-up (when it is full vLLM preempts or queues requests, it does not allocate), so the allocation that failed is the step's own (logits, sampler, activation), outside the budget and past what the profile run measured", gib(n.Tried), gib(n.Free)), at...)
			if g.utilAboveSafe() {
				g.signal(CodeUtilizationEdge, wSupporting, "the out-of-memory hit at run time: the margin outside total × utilization is too small for the runtime peak", at...)
			}
		default:
			if n.Total > 0 && n.Free*20 < n.Total {
				g.signal(CodeKVCachePressure, wSupporting, fmt.Sprintf("CUDA ran out of memory with %s of %s free: the card was full when a %s allocation came", gib(n.Free), gib(n.Total), gib(n.Tried)), o.Line)
				if g.utilAboveSafe() {
					g.signal(CodeUtilizationEdge, wWeak, "an allocation failed with the card nearly full: no margin outside vLLM's budget", o.Line)
				}
			}
		}
		n.ReservedUnallocated = reservedUnallocated(n)
		if n.ReservedUnallocated > 0 {
			switch {
			case n.Tried > 0 && n.ReservedUnallocated >= n.Tried:
				g.signal(CodeFragmentation, wStrong, fmt.Sprintf("%s is reserved by PyTorch but unallocated, more than the %s that failed: the free memory is in fragments", gib(n.ReservedUnallocated), gib(n.Tried)), o.Line)
			case n.ReservedUnallocated >= fragmentationMin || (n.Total > 0 && n.ReservedUnallocated*20 >= n.Total):
				g.signal(CodeFragmentation, wSupporting, fmt.Sprintf("%s is reserved by PyTorch but unallocated", gib(n.ReservedUnallocated)), o.Line)
			}
		}
		if len(n.Processes) < 2 && n.Total > 0 && n.ProcessInUse > 0 && n.Total-n.Free-n.ProcessInUse > otherMemoryMin {
			g.signal(CodeOtherProcesses, wStrong, fmt.Sprintf("of %s on the GPU, %s is free and this process holds %s: %s is held elsewhere", gib(n.Total), gib(n.Free), gib(n.ProcessInUse), gib(n.Total-n.Free-n.ProcessInUse)), o.Line)
		}
	}
}

// reservedUnallocated is the OOM's reserved-but-unallocated memory;
// PyTorch before 2.1 gives reserved and allocated instead, and the
// difference is the same figure.
func reservedUnallocated(n vllm.OOM) int64 {
	if n.ReservedUnallocated == 0 && n.Allocated > 0 && n.Reserved > n.Allocated {
		return n.Reserved - n.Allocated
	}
	return n.ReservedUnallocated
}

func (g *diag) logRules() {
	for _, l := range g.ev.Logs {
		r := l.Report
		for _, e := range l.Events {
			ev := e.Event
			switch ev.Kind {
			case vllm.LogErrMaxLen, vllm.LogErrV0MaxLen:
				g.signal(CodeMaxModelLen, wNamed, "vLLM refused to start: one request of --max-model-len tokens needs more KV cache than there is", e.Line)
			case vllm.LogErrMaxLenAboveModel:
				g.signal(CodeMaxModelLen, wNamed, "vLLM refused --max-model-len: it is longer than the model's maximum", e.Line)
			case vllm.LogErrNoCacheMemory:
				switch {
				case r.CUDAGraphEstimateBytes > 0 && r.RequestedBytes > 0 && r.CUDAGraphEstimateBytes*4 > r.RequestedBytes:
					g.signal(CodeOutsideBudget, wStrong, fmt.Sprintf("the CUDA-graph estimate (%s) takes over a quarter of the %s budget and leaves nothing for the KV cache (vllm#53013)", gib(r.CUDAGraphEstimateBytes), gib(r.RequestedBytes)), e.Line)
				default:
					g.signal(CodeWeightsTooLarge, wStrong, "vLLM found no memory for the KV cache: weights, activation and non-torch memory fill the whole budget", e.Line)
				}
			case vllm.LogErrFreeMemory:
				free, total := ev.Memory.Free, ev.Memory.Total
				if total > 0 && free > 0 && total-free > 2*otherMemoryMin {
					g.signal(CodeOtherProcesses, wStrong, fmt.Sprintf("at start-up only %s of %s was free: %s is held by other processes", gib(free), gib(total), gib(total-free)), e.Line)
				} else {
					g.signal(CodeUtilizationEdge, wStrong, "vLLM refused to start: the free memory is less than total × --gpu-memory-utilization", e.Line)
				}
			}
		}
		total := r.TotalBytes
		if total == 0 && g.base != nil {
			total = g.base.PerGPU.Total
		}
		if r.WeightsBytes > 0 && total > 0 && float64(r.WeightsBytes) >= weightsShare*float64(total) {
			g.signal(CodeWeightsTooLarge, wMeasured, fmt.Sprintf("vLLM measured %s of weights per GPU, %.0f%% of the %s card", gib(r.WeightsBytes), 100*float64(r.WeightsBytes)/float64(total), gib(total)), weightsLine(l))
		}
		if l.Preemptions > 0 {
			g.signal(CodeKVCachePressure, wMeasured, fmt.Sprintf("vLLM preempted requests %d times for lack of KV cache space", l.Preemptions), l.PreemptionLine)
		}
		if l.MaxKVUsage >= kvUsageHigh {
			g.signal(CodeKVCachePressure, wSupporting, fmt.Sprintf("the engine's statistics show the KV cache %.1f%% full", 100*l.MaxKVUsage), l.KVUsageLine)
		}
	}
}

func kvLine(l *LogFacts) Line {
	for _, e := range l.Events {
		if e.Event.Kind == vllm.LogKVTokens || e.Event.Kind == vllm.LogGPUBlocks {
			return e.Line
		}
	}
	return l.VersionLine
}

func weightsLine(l *LogFacts) Line {
	for _, e := range l.Events {
		if e.Event.Kind == vllm.LogWeights || e.Event.Kind == vllm.LogProfile || e.Event.Kind == vllm.LogMemorySummary {
			return e.Line
		}
	}
	return Line{}
}

// planRules turn the planner's verdict on the deployment into signals:
// predictions, so they support and do not decide.
func (g *diag) planRules() {
	if g.base == nil {
		return
	}
	b := g.base
	why := fmt.Sprintf("the planner predicts (%s on %s, vLLM %s)", g.dep.Model, g.dep.GPU, b.Settings.Version)
	cmd := g.commandLine()
	// at cites the line that sets the offending value where the evidence
	// has one (a manifest's "- --max-model-len=...", the logged args),
	// else the command as a whole.
	at := func(logKey, flag string) Line {
		if l := g.settingLine(logKey, flag); !l.zero() {
			return l
		}
		return cmd
	}
	maxLen := at("max_model_len", vllm.FlagMaxModelLen)
	util := at("gpu_memory_utilization", vllm.FlagGPUMemoryUtilization)
	tp := at("tensor_parallel_size", vllm.FlagTensorParallelSize)
	for _, p := range b.Problems {
		switch p.Code {
		case memory.CodeWeightsDontFit, memory.CodeNoCacheMemory:
			g.predict(CodeWeightsTooLarge, wStrong, why+": "+p.Message, cmd)
		case memory.CodeRequestDoesntFit, memory.CodeMaxLenTooLong:
			g.predict(CodeMaxModelLen, wStrong, why+": "+p.Message, maxLen)
		case memory.CodeGraphsOverflow:
			g.predict(CodeOutsideBudget, wMeasured, why+": "+p.Message, util)
		case memory.CodeHeadsNotDivisible:
			g.predict(CodeTensorParallel, wNamed, why+": "+p.Message, tp)
		case memory.CodeNotEnoughGPUs:
			g.predict(CodeTensorParallel, wMeasured, why+": "+p.Message, tp)
		case memory.CodeFreeMemory:
			g.predict(CodeUtilizationEdge, wMeasured, why+": "+p.Message, util)
		}
	}
	for _, w := range b.Warnings {
		switch w.Code {
		case memory.CodeThinMargin:
			g.predict(CodeUtilizationEdge, wSupporting, why+": "+w.Message, util)
		case memory.CodeLowConcurrency:
			g.predict(CodeMaxModelLen, wWeak, why+": "+w.Message, maxLen)
		}
	}
	if s := b.Model; s.MLA == nil && s.KVHeads > 0 && b.Settings.TensorParallelSize > s.KVHeads {
		g.predict(CodeTensorParallel, wWeak, fmt.Sprintf("--tensor-parallel-size %d is more than the model's %d KV heads: every GPU holds whole KV heads, so the KV cache per token does not shrink past %d GPUs", b.Settings.TensorParallelSize, s.KVHeads, s.KVHeads))
	}
}

// commandLine cites the settings the plan used: the command given, or
// where the evidence showed them.
func (g *diag) commandLine() Line {
	if g.opt.HasSettings {
		return Line{Source: "command line", Text: g.opt.Settings.CommandLine()}
	}
	for _, l := range g.ev.Logs {
		if len(l.SettingsLines) > 0 {
			return l.SettingsLines[0]
		}
	}
	if len(g.ev.Commands) > 0 {
		return g.ev.Commands[0].Line
	}
	for _, c := range g.ev.K8s.Containers {
		if c.HasSettings {
			return c.ArgsLine
		}
	}
	return Line{}
}

// utilizationRules compare the utilization in use with the one computed
// from the sizes (memory.Utilization).
func (g *diag) utilizationRules() {
	u := g.util()
	at := g.settingLine("gpu_memory_utilization", "gpu-memory-utilization")
	oomAtRun := g.oomIn(PhaseServing, PhaseCapture, PhaseSampler, PhaseKVAlloc, "")
	if g.base != nil {
		// memory.UtilizationEdge is the planner's, and so the webhook's,
		// thin-margin rule: doctor flags what the webhook warns about.
		safe, _ := memory.Utilization(*g.base, g.opt.Policy)
		if memory.UtilizationEdge(*g.base) || (g.opt.Policy != memory.PolicyHeadroom && u > safe+0.005) {
			w := wSupporting
			if oomAtRun {
				w = wStrong
			}
			g.predict(CodeUtilizationEdge, w, fmt.Sprintf("--gpu-memory-utilization %.2f is above %.2f, the most that leaves room for the CUDA context, sampler warm-up and fragmentation on this card", u, safe), at)
		}
		return
	}
	if u > 0.9 && g.dep.Settings.GPUMemoryUtilization > 0 {
		// No plan: the seed's rule of thumb (> 0.9 is the edge), for a
		// utilization someone chose (vLLM's own default is not an edge
		// we can judge without the sizes).
		w := wWeak
		if oomAtRun {
			w = wSupporting
		}
		g.predict(CodeUtilizationEdge, w, fmt.Sprintf("--gpu-memory-utilization %.2f leaves %.0f%% of the card for everything outside vLLM's budget", u, 100*(1-u)), at)
	}
}

// utilAboveSafe reports a utilization above the computed safe one, or,
// without a plan, one someone set above 0.9 (the seed's edge).
func (g *diag) utilAboveSafe() bool {
	if g.base != nil {
		safe, _ := memory.Utilization(*g.base, g.opt.Policy)
		return g.util() > safe+0.005
	}
	return g.dep.Settings.GPUMemoryUtilization > 0.9
}

// oomIn reports an OOM in one of the phases ("" = unplaced).
func (g *diag) oomIn(phases ...string) bool {
	for _, o := range g.ev.OOMs {
		for _, p := range phases {
			if o.Phase == p {
				return true
			}
		}
	}
	return false
}

// settingLine cites where a setting was read: the log's settings line, a
// pasted command, the manifest's args.
func (g *diag) settingLine(logKey, flag string) Line {
	for _, l := range g.ev.Logs {
		for _, sl := range l.SettingsLines {
			if strings.Contains(sl.Text, logKey) {
				return sl
			}
		}
	}
	for _, c := range g.ev.Commands {
		if strings.Contains(c.Line.Text, flag) || strings.Contains(c.Line.Text, logKey) {
			return c.Line
		}
	}
	for _, c := range g.ev.K8s.Containers {
		if c.HasSettings && c.Settings.Set[flag] {
			if l, ok := c.FlagLines[flag]; ok {
				return l
			}
			return c.ArgsLine
		}
	}
	return Line{}
}

func (g *diag) gpuRules() {
	g.holderRules()
	for _, gf := range g.ev.GPUs {
		if g.base != nil && gf.Kind != KindSMIDmon {
			used := g.base.Settings.TensorParallelSize * g.base.Settings.PipelineParallelSize * max(g.base.Settings.DataParallelSize, 1)
			idle := 0
			for _, x := range gf.GPUs {
				if x.UsedBytes >= 0 && x.UsedBytes < idleGPUBytes {
					idle++
				}
			}
			if len(gf.GPUs) > used && idle > 0 && idle >= len(gf.GPUs)-used {
				g.signal(CodeTensorParallel, wMeasured, fmt.Sprintf("%d GPUs, but the settings use %d (tensor × pipeline × data parallel): %d sit idle while the others run out", len(gf.GPUs), used, idle), gf.Line)
			}
		}
	}
}

func (g *diag) metricRules() {
	for _, m := range g.ev.Metrics {
		s := m.VLLM
		if s == nil {
			continue
		}
		if s.PreemptionsTotal > 0 {
			g.signal(CodeKVCachePressure, wMeasured, fmt.Sprintf("vllm:num_preemptions_total is %.0f: requests were evicted for lack of KV cache", s.PreemptionsTotal), m.Lines["vllm:num_preemptions_total"])
		}
		if s.KVCacheUsage >= kvUsageHigh {
			name := s.Names[vllm.MetricKVCacheUsage]
			g.signal(CodeKVCachePressure, wSupporting, fmt.Sprintf("%s is %.1f%%", name, 100*s.KVCacheUsage), m.Lines[name])
		}
		if s.RequestsWaiting > 0 && s.KVCacheUsage >= kvUsageHigh {
			g.signal(CodeKVCachePressure, wWeak, fmt.Sprintf("%.0f requests wait while %.0f run", s.RequestsWaiting, s.RequestsRunning), m.Lines["vllm:num_requests_waiting"])
		}
	}
}

// trafficRules size the request logs against the KV cache: the batch the
// scheduler admits (max-num-seqs requests of the p90 length) must fit.
func (g *diag) trafficRules() {
	p := g.ev.Traffic
	if p == nil || p.Requests() == 0 {
		return
	}
	at := Line{Source: strings.Join(g.ev.TrafficSources, ", "), Text: fmt.Sprintf("%s requests; total tokens p50 %s, p90 %s, p99 %s, max %s",
		vllm.Thousands(p.Requests()), vllm.Thousands(p.Total().Quantile(0.5)), vllm.Thousands(p.Total().Quantile(0.9)), vllm.Thousands(p.Total().Quantile(0.99)), vllm.Thousands(p.Total().Max()))}
	if g.base != nil && g.typical > 0 {
		seqs := g.base.Settings.MaxNumSeqs
		need := int64(seqs) * int64(g.typical)
		if need > g.base.KVTokens {
			g.signal(CodeKVCachePressure, wSupporting, fmt.Sprintf("--max-num-seqs %d requests of %s tokens (the traffic's p90) need %s KV tokens; the cache holds %s", seqs, vllm.Thousands(int64(g.typical)), vllm.Thousands(need), vllm.Thousands(g.base.KVTokens)), g.settingLine("max_num_seqs", vllm.FlagMaxNumSeqs), at)
		}
		if mx := p.Total().Max(); mx > int64(g.base.MaxModelLen) && g.base.MaxModelLen > 0 {
			g.signal(CodeMaxModelLen, wWeak, fmt.Sprintf("the longest request (%s tokens) is longer than --max-model-len %d: vLLM refuses it", vllm.Thousands(mx), g.base.MaxModelLen), at)
		}
	}
	w := p.Windows()
	for _, win := range w.Windows {
		if win.Surge {
			g.signal(CodeKVCachePressure, wSupporting, fmt.Sprintf("long requests (L/XL) surged to %.0f%% of traffic in the window from %s (baseline %.0f%%)", 100*win.LongShare, win.Start.Format("2006-01-02 15:04"), 100*w.Baseline), at)
			break
		}
	}
}

func (g *diag) k8sRules() {
	k := g.ev.K8s
	if len(k.ProbeFailures) > 0 {
		g.signal(CodeK8sScheduling, wMeasured, "liveness/startup probes failed: the kubelet restarts vLLM before it finishes starting", k.ProbeFailures...)
	}
	for _, r := range k.Restarts {
		if r.Count >= restartsMany {
			g.signal(CodeK8sScheduling, wWeak, fmt.Sprintf("%s restarted %d times", r.Name, r.Count), r.Line)
		}
	}
	if len(k.CrashLoop) > 0 {
		g.signal(CodeK8sScheduling, wWeak, "the pod is in CrashLoopBackOff", k.CrashLoop...)
	}
	startup := g.startupSeconds()
	window, why, _ := g.probeWindow()
	for _, c := range k.Containers {
		if !c.VLLM {
			continue
		}
		if c.GPUResource == "" {
			g.signal(CodeK8sScheduling, wSupporting, fmt.Sprintf("%s runs vLLM without a GPU limit (nvidia.com/gpu): the scheduler may put it on a shared or no GPU", c.Workload), c.Line)
		}
		gate := startGate(c)
		if gate == nil {
			continue
		}
		switch {
		case startup > 0 && gate.BudgetSeconds < startup:
			g.signal(CodeK8sScheduling, wStrong, fmt.Sprintf("the %s probe gives up after %.0f s, but this vLLM took %.0f s to start", gate.Kind, gate.BudgetSeconds, startup), gate.Line)
		case gate.BudgetSeconds < window.Seconds():
			g.signal(CodeK8sScheduling, wSupporting, fmt.Sprintf("the %s probe gives up after %.0f s, less than the %s a start-up needs (%s)", gate.Kind, gate.BudgetSeconds, window, why), gate.Line)
		}
	}
	for _, h := range k.HPAs {
		if h.CPUOnly {
			g.signal(CodeK8sScheduling, wMeasured, fmt.Sprintf("%s scales on %s only: vLLM is bound by GPU memory and queue depth, not CPU", h.Name, strings.Join(h.Metrics, ", ")), h.Line)
		}
	}
	if len(k.Sharing) > 0 {
		g.signal(CodeK8sScheduling, wStrong, "the GPU is shared (time-slicing): other pods' memory counts against the same card", k.Sharing...)
		g.signal(CodeOtherProcesses, wSupporting, "GPU time-slicing puts other pods' processes on the same card", k.Sharing...)
	}
	for i, l := range k.SchedulingFailures {
		// The scheduler's event names why: the pod never started, and no
		// vLLM setting ran on the GPUs yet.
		reason := k.SchedulingReasons[i]
		w := wMeasured
		if strings.Contains(reason, "Insufficient nvidia.com/gpu") || strings.Contains(reason, "Insufficient amd.com/gpu") {
			w = wStrong
		}
		g.signal(CodeK8sScheduling, w, "the pod was never scheduled, so vLLM never started: "+reason, l)
	}
	// A MIG slice too small for the model.
	for _, h := range k.GPUHints {
		if !strings.HasPrefix(h.Name, "nvidia.com/mig-") {
			continue
		}
		sel, err := gpu.Resolve(h.Name)
		if err != nil {
			continue
		}
		in, ok := g.dep.input(g.dep.Settings)
		if !ok {
			continue
		}
		in.Device, in.Count = sel.Device, 0
		if b, err := memory.Plan(in); err == nil && !b.Fits {
			msg := "the model does not fit"
			if len(b.Problems) > 0 {
				msg = b.Problems[0].Message
			}
			g.signal(CodeK8sScheduling, wNamed, fmt.Sprintf("the MIG slice %s (%s) is too small: %s", sel.Device.MIG, gib(sel.Device.TotalBytes), msg), h.Line)
		}
	}
}

// startupSeconds is how long the logged start-up took (engine init plus
// weight loading), 0 when no log says.
func (g *diag) startupSeconds() float64 {
	best := 0.0
	for _, l := range g.ev.Logs {
		best = math.Max(best, l.InitSeconds+l.LoadSeconds)
	}
	return best
}

// versionRules look for two vLLM releases in the evidence whose memory
// rules differ, and for metric names that belong to another release.
func (g *diag) versionRules() {
	type seen struct {
		v  vllm.Version
		at Line
	}
	var vs []seen
	add := func(v vllm.Version, at Line) {
		if v.IsZero() {
			return
		}
		for _, s := range vs {
			if s.v.Major == v.Major && s.v.Minor == v.Minor && s.v.Patch == v.Patch {
				return
			}
		}
		vs = append(vs, seen{v, at})
	}
	if !g.opt.Version.IsZero() {
		add(g.opt.Version, Line{Source: "--vllm-version", Text: g.opt.Version.String()})
	}
	for _, l := range g.ev.Logs {
		for _, v := range l.Versions {
			add(v, l.VersionLine)
		}
	}
	for _, c := range g.ev.K8s.Containers {
		add(c.Version, c.ImageLine)
	}
	if len(vs) >= 2 {
		a, b := vs[0], vs[len(vs)-1]
		if b.v.Compare(a.v) < 0 {
			a, b = b, a
		}
		if diffs := ruleChanges(a.v, b.v); len(diffs) > 0 {
			g.signal(CodeVersionDrift, wMeasured, fmt.Sprintf("the evidence shows vLLM %s and %s, whose memory rules differ: %s", a.v, b.v, strings.Join(diffs, "; ")), a.at, b.at)
		} else {
			g.signal(CodeVersionDrift, wWeak, fmt.Sprintf("the evidence shows vLLM %s and %s", a.v, b.v), a.at, b.at)
		}
	}
	// Two start-ups of the same model on different releases whose KV
	// caches differ: the drift measured.
	for i, a := range g.ev.Logs {
		for _, b := range g.ev.Logs[i+1:] {
			if len(a.Versions) == 0 || len(b.Versions) == 0 || a.Model == "" || a.Model != b.Model {
				continue
			}
			a, b := a, b
			if b.Versions[len(b.Versions)-1].Compare(a.Versions[len(a.Versions)-1]) < 0 {
				a, b = b, a // the older release first
			}
			va, vb := a.Versions[len(a.Versions)-1], b.Versions[len(b.Versions)-1]
			ta, tb := a.Report.KVTokens, b.Report.KVTokens
			if va == vb || ta == 0 || tb == 0 || a.Settings.GPUMemoryUtilization != b.Settings.GPUMemoryUtilization {
				continue
			}
			if d := float64(ta-tb) / float64(max(ta, tb)); d > 0.005 || d < -0.005 {
				g.signal(CodeVersionDrift, wMeasured, fmt.Sprintf("%s at the same utilization: %s KV tokens on vLLM %s, %s on %s (%+.1f%%)",
					a.Model, vllm.Thousands(ta), va, vllm.Thousands(tb), vb, 100*float64(tb-ta)/float64(ta)), kvLine(a), kvLine(b))
			}
		}
	}
	// Metric names of another release than the logged one.
	var logged vllm.Version
	var loggedAt Line
	for _, l := range g.ev.Logs {
		if n := len(l.Versions); n > 0 {
			logged, loggedAt = l.Versions[n-1], l.VersionLine
		}
	}
	if logged.IsZero() {
		return
	}
	for _, m := range g.ev.Metrics {
		if m.VLLM == nil {
			continue
		}
		for _, name := range m.VLLM.Names {
			n, ok := vllm.LookupMetricName(name)
			if ok && !n.ExportedBy(logged, true) {
				g.signal(CodeVersionDrift, wSupporting, fmt.Sprintf("/metrics has %s, which vLLM %s does not export: the metrics come from another release than the log", name, logged), m.Lines[name], loggedAt)
			}
		}
	}
}

// ruleChanges lists the memory rules that differ between two releases.
func ruleChanges(a, b vllm.Version) []string {
	var out []string
	if x, y := vllm.CUDAGraphsInBudget(a, nil), vllm.CUDAGraphsInBudget(b, nil); x != y {
		out = append(out, fmt.Sprintf("CUDA graphs inside the utilization budget: %t in %s, %t in %s (the same utilization gives a different KV cache)", x, a, y, b))
	}
	if x, y := vllm.DefaultGPUMemoryUtilization(a), vllm.DefaultGPUMemoryUtilization(b); x != y {
		out = append(out, fmt.Sprintf("default --gpu-memory-utilization %.2f in %s, %.2f in %s", x, a, y, b))
	}
	if x, y := vllm.PerInstanceBudget(a), vllm.PerInstanceBudget(b); x != y {
		out = append(out, fmt.Sprintf("utilization is per instance in %s: %t, in %s: %t (memory of other processes shrank the KV cache before)", a, x, b, y))
	}
	if x, y := vllm.DummySampler(a, false, vllm.InstallImage), vllm.DummySampler(b, false, vllm.InstallImage); x != y {
		out = append(out, fmt.Sprintf("the profile run's dummy sampler takes another top-k/top-p path (%s: %s, %s: %s), which changes the activation peak", a, x, b, y))
	}
	if x, y := vllm.UsesV1(a, nil), vllm.UsesV1(b, nil); x != y {
		out = append(out, fmt.Sprintf("the V1 engine (%s: %t, %s: %t) sizes and schedules the cache differently", a, x, b, y))
	}
	return out
}
