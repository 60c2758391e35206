package doctor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// needPlan is the remedy given when the planner has nothing to compute
// with: it says what to add.
func (g *diag) needPlan() Remedy {
	return Remedy{Action: ActionGiveInput, Args: []string{}, Why: g.planWhat()}
}

func (g *diag) remedies() {
	for code, f := range g.findings {
		var rs []Remedy
		switch code {
		case CodeKVCachePressure:
			rs = g.kvRemedies()
		case CodeMaxModelLen:
			rs = g.maxLenRemedies()
		case CodeUtilizationEdge:
			rs = g.utilRemedies()
		case CodeWeightsTooLarge:
			rs = g.weightsRemedies()
		case CodeOutsideBudget:
			rs = g.outsideRemedies()
		case CodeFragmentation:
			rs = g.fragmentationRemedies()
		case CodeOtherProcesses:
			rs = g.otherRemedies()
		case CodeTensorParallel:
			rs = g.tpRemedies()
		case CodeK8sScheduling:
			rs = g.k8sRemedies()
		case CodeVersionDrift:
			rs = g.versionRemedies()
		case CodeHostMemory:
			rs = g.hostRemedies()
		case CodeSharedMemory:
			rs = g.shmRemedies()
		}
		f.Remedies = rs
	}
}

// with plans the deployment with a change to its settings. Figures
// measured by a start-up log stay only while the change leaves what they
// depend on as it was: the sharding (tensor and pipeline parallel) and the
// weights' format.
func (g *diag) with(change func(*vllm.Settings)) (memory.Budget, bool) {
	if g.base == nil {
		return memory.Budget{}, false
	}
	in := g.in
	in.Settings = g.base.Settings
	change(&in.Settings)
	if !sameLayout(g.base.Settings, in.Settings) {
		in.Measured = nil
	} else if m := in.Measured; m != nil && !sameProfile(g.base.Settings, in.Settings) {
		// The profile run measured another batch: its activation, and
		// the KV cache it left, no longer hold.
		c := *m
		c.Activation, c.AvailableKV, c.Utilization = 0, 0, 0
		in.Measured = &c
	} else if m != nil && m.KVTokens > 0 && in.Settings.KVCacheDtype != g.base.Settings.KVCacheDtype {
		// Another KV dtype packs other tokens into the same bytes: the
		// measured cache holds as bytes, not as a count of tokens.
		c := *m
		if c.AvailableKV <= 0 {
			c.AvailableKV, c.Utilization = g.base.PerGPU.KVCache, g.base.Settings.GPUMemoryUtilization
		}
		c.KVTokens = 0
		in.Measured = &c
	}
	b, err := memory.Plan(in)
	return b, err == nil
}

// measuredHere reports whether the base plan's KV cache is the one a
// start-up log measured, at the same utilization, so the log's own
// estimates hold for it.
func (g *diag) measuredHere() bool {
	return g.base != nil && g.base.Origins.KVCache == memory.OriginMeasured
}

// sameLayout reports whether two settings shard and store the weights
// alike, so figures measured under one hold for the other.
func sameLayout(a, b vllm.Settings) bool {
	return a.TensorParallelSize == b.TensorParallelSize && a.PipelineParallelSize == b.PipelineParallelSize &&
		a.Quantization == b.Quantization && a.Dtype == b.Dtype && a.CPUOffloadGiB == b.CPUOffloadGiB
}

// sameProfile reports whether vLLM's profile run (its dummy batch, the
// sampler rows, CUDA graphs) is the same under both settings, so the
// non-KV memory it measured holds for the other.
func sameProfile(a, b vllm.Settings) bool {
	return a.MaxNumBatchedTokens == b.MaxNumBatchedTokens && a.MaxNumSeqs == b.MaxNumSeqs &&
		a.EnforceEager == b.EnforceEager && a.MaxCudagraphCaptureSize == b.MaxCudagraphCaptureSize
}

// predicted is the deployment's input without measured figures, for
// alternatives that change the layout (more GPUs, quantization).
func (g *diag) predicted() memory.Input {
	in := g.in
	in.Measured = nil
	return in
}

// typicalContext is the context max-num-seqs is sized for: the traffic's
// p90 total tokens. Without a request log it is 0 and max-num-seqs keeps
// the value in use, the one rule of memory.MaxNumSeqsRule.
func (g *diag) typicalContext() (int, string) {
	if g.typical > 0 {
		return g.typical, "the p90 of the request logs"
	}
	return 0, ""
}

func (g *diag) kvRemedies() []Remedy {
	if g.base == nil {
		return []Remedy{g.needPlan()}
	}
	var rs []Remedy
	b := g.base
	cur := b.Settings.MaxNumSeqs
	if typ, from := g.typicalContext(); typ > 0 && g.rec != nil && g.rec.MaxModelLen > 0 {
		// The one recommendation of the report (memory.Recommend with
		// the traffic's typical context): its max-num-seqs holds only at
		// its utilization, so a different one is part of the change.
		r := g.rec
		n, rb := r.MaxNumSeqs, r.Budget
		need := int64(n) * int64(typ)
		if n < cur && rb.KVTokens > 0 && need <= rb.KVTokens {
			var args []string
			if r.GPUMemoryUtilization != b.Settings.GPUMemoryUtilization {
				args = append(args, "--gpu-memory-utilization", fmt.Sprintf("%.2f", r.GPUMemoryUtilization))
			}
			args = append(args, "--max-num-seqs", strconv.Itoa(n))
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: args,
				Why: fmt.Sprintf("--max-num-seqs %d -> %d: %d requests of %s tokens (%s) need %s KV tokens, and the KV cache holds %s (%s per GPU at --gpu-memory-utilization %.2f). Fewer requests at once also shrink the runtime activation and sampler peak",
					cur, n, n, vllm.Thousands(int64(typ)), from, vllm.Thousands(need), vllm.Thousands(rb.KVTokens), gib(rb.PerGPU.KVCache), r.GPUMemoryUtilization)})
		}
	}
	if typ, _ := g.typicalContext(); typ == 0 {
		rs = append(rs, Remedy{Action: ActionGiveInput, Args: []string{},
			Why: fmt.Sprintf("size --max-num-seqs by the traffic: give the request log too (headroom doctor ... requests.log) or run headroom plan --profile FILE; without a traffic --max-num-seqs %d stays (the value in use, vLLM's default unless set), as plan keeps it", cur)})
	}
	if b.KVDtypeBytes > 1 && b.Settings.KVCacheDtype != "fp8" {
		// The one lever that grows the cache on the same card without
		// giving up context: a trade of precision the user chooses, so
		// it is offered, not put in the suggested command.
		if nb, ok := g.with(func(s *vllm.Settings) { s.KVCacheDtype = "fp8" }); ok && nb.Fits && nb.KVTokens > b.KVTokens {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--kv-cache-dtype", "fp8"}, alt: true,
				Why: fmt.Sprintf("or store the KV cache in fp8 (half the bytes a token, a small loss of precision): %s tokens instead of %s on the same card, %.2f requests of %d tokens at once instead of %.2f",
					vllm.Thousands(nb.KVTokens), vllm.Thousands(b.KVTokens), nb.MaxConcurrency, nb.MaxModelLen, b.MaxConcurrency)})
		}
	}
	if p := g.ev.Traffic; p != nil && p.Requests() > 0 {
		p99 := p.Total().Quantile(0.99)
		target := roundUp(p99, 1024)
		if target < int64(b.MaxModelLen) {
			if nb, ok := g.with(func(s *vllm.Settings) { s.MaxModelLen = int(target) }); ok && nb.Fits {
				rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--max-model-len", strconv.FormatInt(target, 10)},
					Why: fmt.Sprintf("--max-model-len %d -> %d: 99%% of requests need at most %s tokens; one request of %d tokens no longer ties up %s of KV cache (%.2f requests of the new maximum fit at once, %.2f of the old)",
						b.MaxModelLen, target, vllm.Thousands(p99), b.MaxModelLen, gib(int64(b.MaxModelLen)*b.KVBytesPerToken), nb.MaxConcurrency, b.MaxConcurrency)})
			}
		}
		if pools := g.pools(); len(pools) == 2 {
			short, long := pools[0], pools[1]
			rs = append(rs, Remedy{Action: ActionSplitPools, Args: short.Args,
				Why: fmt.Sprintf("serve short and long requests from separate pools: %s (%.0f%% of requests, up to %s tokens): %s; %s (%.0f%%, up to %s tokens): %s",
					short.Name, 100*short.Share, vllm.Thousands(short.MaxTokens), strings.Join(short.Args, " "),
					long.Name, 100*long.Share, vllm.Thousands(long.MaxTokens), strings.Join(long.Args, " "))})
		}
	}
	if g.rec != nil && g.rec.GPUMemoryUtilization < b.Settings.GPUMemoryUtilization-0.005 && g.oomIn("") {
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--gpu-memory-utilization", fmt.Sprintf("%.2f", g.rec.GPUMemoryUtilization)},
			Why: fmt.Sprintf("--gpu-memory-utilization %.2f -> %.2f: the runtime peak needs room outside the budget; %s", b.Settings.GPUMemoryUtilization, g.rec.GPUMemoryUtilization, utilWhy(g.rec))})
	}
	if !b.Settings.Set["enable-prefix-caching"] && !vllm.UsesV1(b.Settings.Version, b.Settings.Env) {
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--enable-prefix-caching"},
			Why: "requests that share a prompt prefix share its KV blocks (on by default in the V1 engine; off in this V0 release)"})
	}
	return rs
}

func roundUp(n, step int64) int64 { return (n + step - 1) / step * step }

// utilWhy is memory.Recommend's reason for its utilization.
func utilWhy(r *memory.Recommendation) string {
	for _, w := range r.Why {
		if strings.HasPrefix(w, "gpu-memory-utilization ") {
			return strings.TrimPrefix(w, "gpu-memory-utilization ")
		}
	}
	return ""
}

// pools splits the traffic into short and long pools with their flags.
func (g *diag) pools() []traffic.Pool {
	if g.base == nil {
		return nil
	}
	ps, err := traffic.Split(g.ev.Traffic, g.in, memory.Options{Policy: g.opt.Policy})
	if err != nil {
		return nil
	}
	return ps
}

func (g *diag) maxLenRemedies() []Remedy {
	var rs []Remedy
	var logEst int
	var logLen int
	for _, l := range g.ev.Logs {
		if l.Report.HasEstimate {
			logEst, logLen = l.Report.EstimatedMaxLen, l.Report.MaxModelLen
		}
		if l.Report.ModelMaxLen > 0 && logEst == 0 {
			logEst, logLen = l.Report.ModelMaxLen, 0
		}
	}
	if g.base != nil {
		b := g.base
		fit, at := b.LargestFit()
		if fit > 0 && fit < b.MaxModelLen {
			why := fmt.Sprintf("--max-model-len %d -> %d: the longest block-aligned context whose KV fits in the %s KV cache per GPU at --gpu-memory-utilization %.2f", b.MaxModelLen, fit, gib(b.PerGPU.KVCache), b.Settings.GPUMemoryUtilization)
			if at > 0 {
				why = fmt.Sprintf("--max-model-len %d -> %d: the longest block-aligned context that fits at --gpu-memory-utilization %.2f (at %.2f the CUDA graphs captured outside the budget do not fit the card)", b.MaxModelLen, fit, at, b.Settings.GPUMemoryUtilization)
			}
			if b.ColdStartAllowance() > 0 && fit < b.FitLen() {
				why += ", on a first start with a cold torch.compile cache too (a new pod's, unless ~/.cache/vllm is on a volume)"
			}
			switch b.Origins.KVCache {
			case memory.OriginMeasured:
				why += fmt.Sprintf(" (as vLLM measured it; %s B of KV per token)", vllm.Thousands(b.KVBytesPerToken))
			case memory.OriginDerived:
				why += fmt.Sprintf(" (from the non-KV memory vLLM measured; %s B of KV per token)", vllm.Thousands(b.KVBytesPerToken))
			}
			if logEst > 0 && g.measuredHere() && logEst < fit {
				// The engine's own search outranks arithmetic on the
				// GiB it rounded to two decimals.
				fit = logEst
				why = fmt.Sprintf("--max-model-len %d -> %d: vLLM's own estimate for the %s KV cache it measured", b.MaxModelLen, fit, gib(b.PerGPU.KVCache))
			} else if logEst > 0 {
				why += fmt.Sprintf(" (vLLM's own estimate: %d)", logEst)
			}
			args := []string{"--max-model-len", strconv.Itoa(fit)}
			if at > 0 && fit != logEst {
				// The length holds only at the utilization that leaves
				// the CUDA graphs room outside the budget.
				args = append(args, "--gpu-memory-utilization", fmt.Sprintf("%.2f", at))
			}
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: args, Why: why})
		}
		for _, a := range memory.Alternatives(g.predicted(), gpu.Devices()) {
			switch a.Code {
			case memory.AltKVCacheFP8, memory.AltMoreGPUs, memory.AltTensorShards:
				rs = append(rs, alternative(a))
			}
		}
		if vllm.SupportsAutoMaxModelLen(b.Settings.Version) {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--max-model-len", "auto"},
				Why: fmt.Sprintf("vLLM %s fits the context to the memory itself at start-up", b.Settings.Version)})
		}
		return rs
	}
	if logEst > 0 {
		why := fmt.Sprintf("vLLM estimated that %d tokens fit", logEst)
		if logLen > 0 {
			why = fmt.Sprintf("--max-model-len %d -> %d: %s", logLen, logEst, why)
		}
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--max-model-len", strconv.Itoa(logEst)}, Why: why})
	}
	return append(rs, g.needPlan())
}

func alternative(a memory.Alternative) Remedy {
	if len(a.Args) > 0 {
		return Remedy{Action: ActionSetFlag, Args: a.Args, Why: a.Message}
	}
	args := []string{}
	if a.GPU != "" {
		args = append(args, a.GPU)
	}
	return Remedy{Action: ActionHardware, Args: args, Why: a.Message}
}

func (g *diag) utilRemedies() []Remedy {
	if g.base == nil || g.rec == nil {
		return []Remedy{g.needPlan()}
	}
	b, r := g.base, g.rec
	cur := b.Settings.GPUMemoryUtilization
	var rs []Remedy
	if r.GPUMemoryUtilization < cur-0.005 {
		nb, ok := g.with(func(s *vllm.Settings) { s.GPUMemoryUtilization = r.GPUMemoryUtilization })
		why := fmt.Sprintf("--gpu-memory-utilization %.2f -> %.2f: %s", cur, r.GPUMemoryUtilization, utilWhy(r))
		if ok {
			why += fmt.Sprintf("; the KV cache becomes %s (%s tokens, %.2f requests of %d tokens at once)", gib(nb.PerGPU.KVCache), vllm.Thousands(nb.KVTokens), nb.MaxConcurrency, nb.MaxModelLen)
		}
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--gpu-memory-utilization", fmt.Sprintf("%.2f", r.GPUMemoryUtilization)}, Why: why})
	}
	if len(rs) > 0 && vllm.SupportsKVCacheMemory(b.Settings.Version) && r.Budget.PerGPU.KVCache > 0 {
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--" + vllm.FlagKVCacheMemory, strconv.FormatInt(r.Budget.PerGPU.KVCache, 10)},
			Why: fmt.Sprintf("or fix the KV cache at %s per GPU (what the recommended utilization gives); vLLM then ignores --gpu-memory-utilization", gib(r.Budget.PerGPU.KVCache))})
	}
	if len(rs) == 0 {
		rs = append(rs, Remedy{Action: ActionAdvice, Args: []string{},
			Why: fmt.Sprintf("--gpu-memory-utilization %.2f is within the computed %.2f: %s", cur, r.GPUMemoryUtilization, utilWhy(r))})
	}
	return rs
}

func (g *diag) weightsRemedies() []Remedy {
	if g.base == nil {
		return []Remedy{g.needPlan()}
	}
	var rs []Remedy
	for _, a := range memory.Alternatives(g.predicted(), gpu.Devices()) {
		rs = append(rs, alternative(a))
	}
	if len(rs) == 0 {
		// The planner thinks it fits (measured figures may say
		// otherwise): say what each lever gives.
		b := g.base
		if b.Model.Quant == nil && b.Settings.Quantization == "" {
			if nb, ok := g.with(func(s *vllm.Settings) { s.Quantization = "fp8" }); ok {
				rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--quantization", "fp8"},
					Why: fmt.Sprintf("fp8 weights: %s per GPU instead of %s, the KV cache grows to %s", gib(nb.PerGPU.Weights), gib(b.PerGPU.Weights), gib(nb.PerGPU.KVCache))})
			}
		}
		tp := b.Settings.TensorParallelSize
		if n := tp * 2; memory.TPShards(b.Model, n) {
			if nb, ok := g.with(func(s *vllm.Settings) { s.TensorParallelSize = n }); ok {
				rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--tensor-parallel-size", strconv.Itoa(n)},
					Why: fmt.Sprintf("shard over %d GPUs: %s of weights per GPU instead of %s; the KV cache grows to %s per GPU (%s tokens)", n, gib(nb.PerGPU.Weights), gib(b.PerGPU.Weights), gib(nb.PerGPU.KVCache), vllm.Thousands(nb.KVTokens))})
			}
		}
	}
	if bt := g.base.Settings.MaxNumBatchedTokens; g.oomIn(PhaseProfiling) && bt > 2048 {
		if nb, ok := g.with(func(s *vllm.Settings) { s.MaxNumBatchedTokens = 2048 }); ok {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--max-num-batched-tokens", "2048"},
				Why: fmt.Sprintf("--max-num-batched-tokens %d -> 2048: the profile run's activation falls from %s to %s", bt, gib(g.base.PerGPU.Activation), gib(nb.PerGPU.Activation))})
		}
	}
	return rs
}

func (g *diag) outsideRemedies() []Remedy {
	if o, ok := g.servingOOM(); ok {
		return g.runtimeRemedies(o)
	}
	if g.base == nil || g.rec == nil {
		return []Remedy{g.needPlan()}
	}
	b, r := g.base, g.rec
	var rs []Remedy
	if r.GPUMemoryUtilization < b.Settings.GPUMemoryUtilization-0.005 {
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--gpu-memory-utilization", fmt.Sprintf("%.2f", r.GPUMemoryUtilization)},
			Why: fmt.Sprintf("--gpu-memory-utilization %.2f -> %.2f: %s", b.Settings.GPUMemoryUtilization, r.GPUMemoryUtilization, utilWhy(r))})
	}
	v := b.Settings.Version
	if vllm.CUDAGraphEstimate(v) && !vllm.CUDAGraphsInBudget(v, b.Settings.Env) {
		rs = append(rs, Remedy{Action: ActionSetEnv, Args: []string{vllm.EnvEstimateCUDAGraphs + "=1"},
			Why: fmt.Sprintf("vLLM %s estimates CUDA-graph memory but leaves it outside the budget unless asked; with the estimate inside, the KV cache shrinks by ~%s and capture cannot run past the card", v, gib(b.PerGPU.CUDAGraph))})
	}
	if g.oomIn(PhaseSampler) {
		seqs := b.Settings.MaxNumSeqs
		if n := max(seqs/4, 1); n < seqs {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--max-num-seqs", strconv.Itoa(n)},
				Why: fmt.Sprintf("--max-num-seqs %d -> %d: the sampler warm-up holds logits for max-num-seqs rows (%d × %s vocabulary × 4 bytes = %s), outside the budget", seqs, n, seqs, vllm.Thousands(int64(b.Model.Vocab)), gib(int64(seqs)*int64(b.Model.Vocab)*4))})
		}
	}
	if !b.Settings.EnforceEager {
		if nb, ok := g.with(func(s *vllm.Settings) { s.EnforceEager = true }); ok {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--enforce-eager"},
				Why: fmt.Sprintf("no CUDA graphs at all (%s saved; decoding is slower); the card then holds %s of %s", gib(b.PerGPU.CUDAGraph), gib(nb.Footprint), gib(nb.PerGPU.Total))})
		}
	}
	return rs
}

func (g *diag) fragmentationRemedies() []Remedy {
	sleep := false
	for _, l := range g.ev.Logs {
		sleep = sleep || l.SleepMode
	}
	var unalloc, tried int64
	for _, o := range g.ev.OOMs {
		unalloc, tried = max(unalloc, reservedUnallocated(o.OOM)), max(tried, o.OOM.Tried)
	}
	set := g.dep.Settings
	if safe, why := vllm.ExpandableSegmentsSafe(set.TensorParallelSize, set.PipelineParallelSize, sleep); !safe {
		rs := []Remedy{{Action: ActionAdvice, Args: []string{}, Why: fmt.Sprintf("expandable segments are not safe here (%s=%s: %s); lower the utilization instead", vllm.AllocConfEnv, vllm.ExpandableSegments, why)}}
		return append(rs, g.utilRemedies()...)
	}
	return []Remedy{{Action: ActionSetEnv, Args: []string{vllm.AllocConfEnv + "=" + vllm.ExpandableSegments},
		Why: fmt.Sprintf("%s sat reserved but unallocated when %s could not be allocated; expandable segments let PyTorch grow and reuse segments instead of fragmenting", gib(unalloc), gib(tried))}}
}

func (g *diag) tpRemedies() []Remedy {
	if g.base == nil {
		return []Remedy{g.needPlan()}
	}
	b := g.base
	count := g.dep.GPUCount
	for _, gf := range g.ev.GPUs {
		count = max(count, len(gf.GPUs))
	}
	var rs []Remedy
	heads := b.Model.Heads
	best := 0
	for n := max(count, b.Settings.TensorParallelSize); n >= 1; n-- {
		if heads%n == 0 && n*b.Settings.PipelineParallelSize <= max(count, 1) {
			best = n
			break
		}
	}
	if best > 0 && best != b.Settings.TensorParallelSize {
		nb, ok := g.with(func(s *vllm.Settings) { s.TensorParallelSize = best })
		why := fmt.Sprintf("--tensor-parallel-size %d -> %d: divides the model's %d heads and uses the GPUs there are", b.Settings.TensorParallelSize, best, heads)
		if ok {
			why += fmt.Sprintf("; %s of weights and %s of KV cache per GPU (%s tokens)", gib(nb.PerGPU.Weights), gib(nb.PerGPU.KVCache), vllm.Thousands(nb.KVTokens))
		}
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--tensor-parallel-size", strconv.Itoa(best)}, Why: why})
	}
	if len(rs) == 0 {
		rs = append(rs, Remedy{Action: ActionAdvice, Args: []string{},
			Why: fmt.Sprintf("keep --tensor-parallel-size %d; more shards do not shrink the per-GPU KV cache of each request once every GPU holds whole KV heads", b.Settings.TensorParallelSize)})
	}
	return rs
}

// biggerMIG finds the smallest MIG slice of the same GPU that fits.
func (g *diag) biggerMIG(cur gpu.Device) (Remedy, bool) {
	slices := gpu.MIGSlices()
	sort.SliceStable(slices, func(i, j int) bool { return slices[i].TotalBytes < slices[j].TotalBytes })
	for _, d := range slices {
		if d.Parent != cur.Parent || d.TotalBytes <= cur.TotalBytes || strings.Contains(d.MIG, "+") {
			continue
		}
		in := g.in
		in.Device, in.Count = d, 0
		if b, err := memory.Plan(in); err == nil && b.Fits {
			return Remedy{Action: ActionEditManifest, Args: []string{"resources.limits", "nvidia.com/mig-" + d.MIG + ": 1"},
				Why: fmt.Sprintf("the smallest %s MIG slice that fits is %s (%s): KV cache %s, %s tokens", d.Parent, d.MIG, gib(d.TotalBytes), gib(b.PerGPU.KVCache), vllm.Thousands(b.KVTokens))}, true
		}
	}
	return Remedy{}, false
}

func (g *diag) versionRemedies() []Remedy {
	var rs []Remedy
	if g.base != nil && g.rec != nil && g.rec.MaxModelLen > 0 {
		args := []string{"--gpu-memory-utilization", fmt.Sprintf("%.2f", g.rec.GPUMemoryUtilization),
			"--max-model-len", strconv.Itoa(g.rec.MaxModelLen), "--max-num-seqs", strconv.Itoa(g.rec.MaxNumSeqs)}
		rs = append(rs, Remedy{Action: ActionSetFlag, Args: args,
			Why: fmt.Sprintf("re-tune for vLLM %s instead of carrying the old settings over: %s", g.base.Settings.Version, strings.Join(g.rec.Why, "; "))})
	}
	pin := "pin the image to the release the settings were tuned on, and upgrade with a load test (headroom plan --vllm-version NEW)"
	if len(rs) > 0 {
		pin = "or " + pin
	}
	rs = append(rs, Remedy{Action: ActionPinVersion, Args: []string{}, Why: pin})
	if g.base == nil {
		rs = append(rs, g.needPlan())
	}
	return rs
}
