package memory

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Alternative is a change of settings or hardware that makes a plan fit.
type Alternative struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Args are the vLLM flags to change, when the change is a flag.
	Args []string `json:"args,omitempty"`
	// GPU names the device, when the change is hardware.
	GPU   string `json:"gpu,omitempty"`
	Count int    `json:"count,omitempty"`
	// Changes says what differs from the plan that failed, one item per
	// flag or hardware fact; Cost is how much that is (see
	// AlternativesFrom), lowest first.
	Changes []string `json:"changes"`
	Cost    int      `json:"cost"`

	// Input is the alternative, planned: it fits.
	Input Input `json:"-"`
}

// Alternative codes, in the order that breaks ties of cost: flags before
// hardware, capacity before precision.
const (
	AltUtilization = "utilization"
	// AltScheduler is a --max-num-batched-tokens (or --max-num-seqs)
	// that vLLM's SchedulerConfig accepts.
	AltScheduler     = "scheduler_limits"
	AltShorter       = "shorter_context"
	AltTensorShards  = "tensor_parallel"
	AltKVCacheFP8    = "kv_cache_fp8"
	AltQuantizeFP8   = "quantize_fp8"
	AltGPUCount      = "gpu_count"
	AltMoreGPUs      = "more_gpus"
	AltBiggerGPU     = "bigger_gpu"
	costFlag         = 1 // a flag the user left at its default
	costExplicitFlag = 2 // a flag the user set: they meant it
	costGPUCount     = 2 // more of the same GPU
	costGPUModel     = 3 // another GPU
)

var altOrder = []string{AltScheduler, AltUtilization, AltShorter, AltTensorShards, AltKVCacheFP8, AltQuantizeFP8, AltGPUCount, AltMoreGPUs, AltBiggerGPU}

// Alternatives says what would make a plan that does not fit start; see
// AlternativesFrom.
func Alternatives(in Input, devices []gpu.Device) []Alternative {
	base, err := Plan(in)
	if err != nil {
		return nil
	}
	return AlternativesFrom(in, base, devices)
}

// AlternativesFrom is Alternatives for a plan already made: base must be
// Plan(in). A caller that has planned in to find the problems does not
// plan it again.
//
// Only the levers of the checks that failed are tried: a GPU count short
// of the parallelism is answered by that many GPUs or fewer shards; a
// tensor-parallel size that does not divide the heads by the nearest one
// that does; a lack of memory by more shards (over more GPUs where the
// count given is short), fp8 weights, an fp8 KV cache, a shorter context
// (when one request does not fit), a utilization of its own, or the
// smallest bigger GPU. Every candidate is planned on the GPUs it would
// run on (the count given, unless it adds GPUs) and shown only if that
// plan fits; where it fits only at the recommended utilization, that flag
// is part of the change. They are ranked by cost, the sum over what
// changes: a flag the user left at its default 1, one they set 2 (they
// meant it), more of the same GPU 2, another GPU 3. The ranking is by how
// little changes: the GPU in use (with flags, or more of it) before
// another GPU (hardwareTier); within a tier by cost; ties keep the user's
// explicit flags, then the order of altOrder (utilization before a
// shorter context, sharding, and the fp8 KV cache and weights).
func AlternativesFrom(in Input, base Budget, devices []gpu.Device) []Alternative {
	if base.Fits {
		return nil
	}
	var countShort, headsOff, tooLong, requestLong, memoryShort, schedulerOff bool
	for _, p := range base.Problems {
		switch p.Code {
		case CodeSchedulerRefused:
			schedulerOff = true
		case CodeNotEnoughGPUs:
			countShort = true
		case CodeHeadsNotDivisible:
			headsOff = true
		case CodeMaxLenTooLong, CodeAutoUnsupported:
			tooLong = true
		case CodeRequestDoesntFit:
			requestLong, memoryShort = true, true
		default:
			memoryShort = true
		}
	}
	set := base.Settings
	tp, pp, dp := set.TensorParallelSize, set.PipelineParallelSize, max(set.DataParallelSize, 1)
	given := in.Count
	if given <= 0 {
		given = tp * pp * dp // the count follows the parallelism
	}
	explicit := func(flag string) bool { return in.Settings.Set[flag] }
	flagCost := func(flag string) int {
		if explicit(flag) {
			return costExplicitFlag
		}
		return costFlag
	}

	var layers []model.LayerParams
	var out []Alternative
	seen := map[string]bool{}
	// try plans a candidate; at the user's utilization first, then at the
	// recommended one, which is then part of the change.
	try := func(a Alternative, mod func(*Input)) {
		// The user's own flags with the change: what they did not set
		// takes its default for the new layout or card.
		c := in
		c.Count = given
		mod(&c)
		if c.Device.Name != in.Device.Name || c.Settings.TensorParallelSize != tp || c.Settings.PipelineParallelSize != pp || c.Settings.Quantization != set.Quantization {
			c.Measured = nil // measured on another card or layout
		}
		b, err := planWith(c, &layers)
		if err != nil {
			return
		}
		if !b.Fits {
			u, _ := Utilization(b, PolicyHeadroom)
			if u == b.Settings.GPUMemoryUtilization {
				return
			}
			c.Settings.GPUMemoryUtilization = u
			if b, err = planWith(c, &layers); err != nil || !b.Fits {
				return
			}
			arg := fmt.Sprintf("%.2f", u)
			a.Args = append(a.Args, "--gpu-memory-utilization", arg)
			a.Changes = append(a.Changes, fmt.Sprintf("--gpu-memory-utilization %.2f -> %s", set.GPUMemoryUtilization, arg))
			a.Cost += flagCost("gpu-memory-utilization")
			a.Message += " and --gpu-memory-utilization " + arg
		}
		key := a.Code + strings.Join(a.Args, " ") + a.GPU + fmt.Sprint(a.Count)
		if seen[key] {
			return
		}
		seen[key] = true
		a.Input = c
		out = append(out, a)
	}
	shardable := func(n int) bool { return TPShards(base.Model, n) }
	// shards plans n shards of the model per pipeline stage it has: a
	// tensor-parallel size n within a node. Past a node (GPUsPerNode), by
	// the multi-node rule (Layout), the tensor-parallel size is the node's
	// GPUs and the pipeline grows by n / GPUsPerNode stages, one node each.
	// On the GPUs given where they are enough, else on as many as it needs.
	perNode := in.gpusPerNode()
	shards := func(n int) {
		ntp, npp := n, pp
		if n > perNode {
			if n%perNode != 0 || !shardable(perNode) {
				return
			}
			ntp, npp = perNode, pp*n/perNode
		}
		need := ntp * npp * dp
		a := Alternative{Code: AltTensorShards}
		var flags []string
		if ntp != tp {
			a.Args = append(a.Args, "--tensor-parallel-size", fmt.Sprint(ntp))
			a.Changes = append(a.Changes, fmt.Sprintf("--tensor-parallel-size %d -> %d", tp, ntp))
			a.Cost += flagCost("tensor-parallel-size")
			flags = append(flags, fmt.Sprintf("--tensor-parallel-size %d", ntp))
		}
		if npp != pp {
			a.Args = append(a.Args, "--pipeline-parallel-size", fmt.Sprint(npp))
			a.Changes = append(a.Changes, fmt.Sprintf("--pipeline-parallel-size %d -> %d", pp, npp))
			a.Cost += flagCost("pipeline-parallel-size")
			flags = append(flags, fmt.Sprintf("--pipeline-parallel-size %d", npp))
		}
		count := given
		if need > given {
			count = need
			a.Code, a.GPU, a.Count = AltMoreGPUs, in.Device.Name, need
			a.Changes = append(a.Changes, fmt.Sprintf("%d -> %d × %s", given, need, in.Device.Name))
			a.Cost += costGPUCount
			where := ""
			if need > perNode {
				where = fmt.Sprintf(" (%d nodes of %d: tensor parallel inside a node, pipeline parallel across nodes)", need/perNode, perNode)
			}
			a.Message = fmt.Sprintf("use %d × %s%s with %s", need, in.Device.Name, where, strings.Join(flags, " "))
		} else {
			a.Message = fmt.Sprintf("%s on the %d × %s given", strings.Join(flags, " "), given, in.Device.Name)
		}
		try(a, func(c *Input) {
			c.Settings.TensorParallelSize, c.Settings.PipelineParallelSize, c.Count = ntp, npp, count
		})
	}
	if countShort {
		need := tp * pp * dp
		try(Alternative{Code: AltGPUCount, GPU: in.Device.Name, Count: need, Cost: costGPUCount,
			Changes: []string{fmt.Sprintf("%d -> %d × %s", given, need, in.Device.Name)},
			Message: fmt.Sprintf("give %d × %s: tensor × pipeline × data parallel = %d × %d × %d needs them", need, in.Device.Name, tp, pp, dp)},
			func(c *Input) { c.Count = need })
		// Fewer shards on the GPUs given: the largest size that divides
		// the heads.
		for n := tp - 1; n >= 1; n-- {
			if shardable(n) && n*pp*dp <= given {
				shards(n)
				break
			}
		}
	}
	if headsOff {
		for n := tp - 1; n >= 1; n-- {
			if shardable(n) {
				shards(n)
				break
			}
		}
		for n := tp + 1; n <= 2*tp; n++ {
			if shardable(n) {
				shards(n)
				break
			}
		}
	}
	if schedulerOff {
		// The smallest batched-token budget vLLM accepts, or as many
		// sequences as the budget the user gave holds.
		need := set.MaxNumSeqs
		if set.Set[vllm.FlagNoChunkedPrefill] && !base.AutoFit {
			need = max(need, base.MaxModelLen)
		}
		arg := strconv.Itoa(need)
		try(Alternative{Code: AltScheduler, Args: []string{"--max-num-batched-tokens", arg}, Cost: flagCost("max-num-batched-tokens"),
			Changes: []string{fmt.Sprintf("--max-num-batched-tokens %d -> %s", set.MaxNumBatchedTokens, arg)},
			Message: "--max-num-batched-tokens " + arg}, func(c *Input) { c.Settings.MaxNumBatchedTokens = need })
		if mnbt := set.MaxNumBatchedTokens; mnbt < set.MaxNumSeqs {
			arg := strconv.Itoa(mnbt)
			try(Alternative{Code: AltScheduler, Args: []string{"--max-num-seqs", arg}, Cost: flagCost("max-num-seqs"),
				Changes: []string{fmt.Sprintf("--max-num-seqs %d -> %s", set.MaxNumSeqs, arg)},
				Message: "--max-num-seqs " + arg}, func(c *Input) { c.Settings.MaxNumSeqs = mnbt })
		}
	}
	if memoryShort {
		// The smallest power-of-two size above tp that fits.
		for _, n := range []int{2, 4, 8, 16} {
			if n <= tp || !shardable(n) {
				continue
			}
			before := len(out)
			shards(n)
			if len(out) > before {
				break
			}
		}
		// Quantizing on load reads the 16-bit weights first
		// (CodeOnlineQuantLoad): no lever where they do not fit.
		if base.Model.Quant == nil && set.Quantization == "" && base.PerGPU.Weights <= base.PerGPU.Total-base.PerGPU.Context {
			try(Alternative{Code: AltQuantizeFP8, Args: []string{"--quantization", "fp8"}, Cost: flagCost("quantization"),
				Changes: []string{"--quantization fp8"},
				Message: "quantize the weights to fp8 on load (--quantization fp8), or serve an FP8/AWQ checkpoint of this model"},
				func(c *Input) { c.Settings.Quantization = "fp8" })
		}
		if base.KVDtypeBytes > 1 {
			try(Alternative{Code: AltKVCacheFP8, Args: []string{"--kv-cache-dtype", "fp8"}, Cost: flagCost("kv-cache-dtype"),
				Changes: []string{fmt.Sprintf("--kv-cache-dtype %s -> fp8", set.KVCacheDtype)},
				Message: "store the KV cache in fp8 (--kv-cache-dtype fp8): half the bytes per token"},
				func(c *Input) { c.Settings.KVCacheDtype = "fp8" })
		}
		if u, _ := Utilization(base, PolicyHeadroom); u != set.GPUMemoryUtilization {
			arg := fmt.Sprintf("%.2f", u)
			try(Alternative{Code: AltUtilization, Args: []string{"--gpu-memory-utilization", arg}, Cost: flagCost("gpu-memory-utilization"),
				Changes: []string{fmt.Sprintf("--gpu-memory-utilization %.2f -> %s", set.GPUMemoryUtilization, arg)},
				Message: "--gpu-memory-utilization " + arg}, func(c *Input) { c.Settings.GPUMemoryUtilization = u })
		}
		if b := biggerGPU(in, given, devices, &layers); b != nil {
			try(Alternative{Code: AltBiggerGPU, GPU: b.Name, Count: given, Cost: costGPUModel,
				Changes: []string{fmt.Sprintf("%s -> %s", in.Device.Name, b.Name)},
				Message: fmt.Sprintf("the smallest GPU that fits with these settings: %d × %s (%s each)", given, b.Name, GiB(b.TotalBytes))},
				func(c *Input) { c.Device = *b })
		}
	}
	if (requestLong || tooLong) && base.MaxFitLen > 0 && base.MaxFitLen < base.MaxModelLen {
		l, at := base.LargestFit()
		a := Alternative{Code: AltShorter, Args: []string{"--max-model-len", fmt.Sprint(l)}, Cost: flagCost("max-model-len"),
			Changes: []string{fmt.Sprintf("--max-model-len %d -> %d", base.MaxModelLen, l)},
			Message: fmt.Sprintf("serve a shorter context: --max-model-len %d (the longest that fits at --gpu-memory-utilization %.2f)", l, set.GPUMemoryUtilization)}
		if at > 0 {
			// The length holds only at the utilization that leaves the
			// CUDA graphs room outside the budget: both are the change.
			arg := fmt.Sprintf("%.2f", at)
			a.Args = append(a.Args, "--gpu-memory-utilization", arg)
			a.Changes = append(a.Changes, fmt.Sprintf("--gpu-memory-utilization %.2f -> %s", set.GPUMemoryUtilization, arg))
			a.Cost += flagCost("gpu-memory-utilization")
			a.Message = fmt.Sprintf("serve a shorter context: --max-model-len %d with --gpu-memory-utilization %s (the longest that fits there; at %.2f the CUDA graphs outside the budget do not fit the card)", l, arg, set.GPUMemoryUtilization)
		}
		try(a, func(c *Input) {
			// The length is headroom's now, not the user's: the
			// recommendation explains it as its own.
			c.Settings.MaxModelLen, c.Settings.Set = l, cloneSet(c.Settings.Set)
			delete(c.Settings.Set, vllm.FlagMaxModelLen)
			if at > 0 {
				c.Settings.GPUMemoryUtilization = at
			}
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ta, tb := hardwareTier(a, in), hardwareTier(b, in); ta != tb {
			return ta < tb
		}
		if a.Cost != b.Cost {
			return a.Cost < b.Cost
		}
		if ea, eb := overrides(a, in), overrides(b, in); ea != eb {
			return ea < eb
		}
		return altRank(a.Code) < altRank(b.Code)
	})
	return out
}

// hardwareTier is the first key of the one ordering of alternatives (plan,
// doctor, the webhook's denials): the GPU in use, with flags or more of
// it (0), before another GPU (1), whatever the flags each adds, so a
// bigger card never ranks above sharding over more of the card in use.
func hardwareTier(a Alternative, in Input) int {
	if a.GPU != "" && a.GPU != in.Device.Name {
		return 1
	}
	return 0
}

// overrides counts the flags the user set that an alternative changes.
func overrides(a Alternative, in Input) int {
	n := 0
	for _, arg := range a.Args {
		if strings.HasPrefix(arg, "--") && in.Settings.Set[strings.TrimPrefix(arg, "--")] {
			n++
		}
	}
	return n
}

func altRank(code string) int {
	for i, c := range altOrder {
		if c == code {
			return i
		}
	}
	return len(altOrder)
}

// biggerGPU is the smallest device larger than in's on which the settings
// fit, count of them; nil when none does.
func biggerGPU(in Input, count int, devices []gpu.Device, layers *[]model.LayerParams) *gpu.Device {
	bigger := make([]gpu.Device, 0, len(devices))
	for _, d := range devices {
		if d.TotalBytes > in.Device.TotalBytes {
			bigger = append(bigger, d)
		}
	}
	sort.SliceStable(bigger, func(i, j int) bool { return bigger[i].TotalBytes < bigger[j].TotalBytes })
	for i := range bigger {
		c := in
		c.Device, c.Count = bigger[i], count
		c.Measured = nil
		if b, err := planWith(c, layers); err == nil && b.Fits {
			return &bigger[i]
		}
	}
	return nil
}
