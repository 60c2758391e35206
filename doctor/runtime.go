package doctor

import (
	"fmt"
	"math"
	"strconv"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// A CUDA out-of-memory error while serving is a step's own allocation
// beside vLLM's budget: the KV cache was allocated whole at start-up, and
// when it is full the scheduler preempts or queues. The remedies follow
// from the error's own figures: room for the allocation that failed
// outside the budget, or a smaller step.

// servingOOM is the out-of-memory error of the serving phase with the
// largest failed allocation.
func (g *diag) servingOOM() (OOMFacts, bool) {
	var best OOMFacts
	found := false
	for _, o := range g.ev.OOMs {
		if o.Phase == PhaseServing && (!found || o.OOM.Tried > best.OOM.Tried) {
			best, found = o, true
		}
	}
	return best, found
}

// stepAlign is the granularity of a --max-num-batched-tokens remedy:
// vLLM's own defaults (2048, 8192, 16384) are multiples of it.
const stepAlign = 256

// rowsMatch is how close (a share of the allocation) rows × vocabulary ×
// bytes must come to the failed allocation to name it: the message
// prints it to two decimals of a GiB or MiB.
const rowsMatch = 0.01

func (g *diag) runtimeRemedies(o OOMFacts) []Remedy {
	n := o.OOM
	if g.base == nil {
		return []Remedy{g.needPlan()}
	}
	b := g.base
	total := n.Total
	if total <= 0 {
		total = b.PerGPU.Total
	}
	short := n.Tried - n.Free
	if n.Tried <= 0 || total <= 0 || short <= 0 {
		return []Remedy{{Action: ActionAdvice, Args: []string{},
			Why: "the out-of-memory message gives no allocation and free memory to size a change by: lower --gpu-memory-utilization or --max-num-batched-tokens a step at a time"}}
	}
	var rs []Remedy
	u := g.util()
	// Lowering the budget by Δ of the card frees Δ × total at the same
	// moment of the next run (the KV cache shrinks by as much): it must
	// cover what was missing and the fragmentation reserve the planner
	// keeps free beside the budget (memory.ReserveBytes).
	reserve := memory.ReserveBytes(total)
	u2 := math.Floor((u*float64(total)-float64(short+reserve))/float64(total)*100) / 100
	why := fmt.Sprintf("the step asked for %s with %s free, %s short; %.2f less of the %s card (%s) leaves that outside the budget with the %s fragmentation reserve (150 MiB + 1%% of the card)",
		gib(n.Tried), gib(n.Free), gib(short), u-u2, gib(total), gib(int64((u-u2)*float64(total))), gib(reserve))
	if r := g.rec; r != nil && r.GPUMemoryUtilization < u2 {
		// The planner's margin (CUDA context, sampler warm-up, graphs
		// outside the budget) asks for more still: one value, the lower.
		why = fmt.Sprintf("%s; the planner's margin asks for more: %s", why, utilWhy(r))
		u2 = r.GPUMemoryUtilization
	}
	if u2 > 0 && u2 < u-0.005 {
		if nb, ok := g.with(func(s *vllm.Settings) { s.GPUMemoryUtilization = u2 }); ok && nb.Fits {
			rs = append(rs, Remedy{Action: ActionSetFlag, Args: []string{"--" + vllm.FlagGPUMemoryUtilization, fmt.Sprintf("%.2f", u2)},
				Why: fmt.Sprintf("--gpu-memory-utilization %.2f -> %.2f: %s; the KV cache becomes %s (%s tokens, %.2f requests of %d tokens at once)",
					u, u2, why, gib(nb.PerGPU.KVCache), vllm.Thousands(nb.KVTokens), nb.MaxConcurrency, nb.MaxModelLen)})
		}
	}
	if r, ok := g.smallerStep(n); ok {
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		rs = append(rs, Remedy{Action: ActionAdvice, Args: []string{},
			Why: fmt.Sprintf("the step asked for %s with %s free, and no lower utilization or smaller step planned here still serves --max-model-len %d: give the GPU more room (another GPU, --tensor-parallel-size) or a shorter context", gib(n.Tried), gib(n.Free), b.MaxModelLen)})
	}
	return rs
}

// smallerStep shrinks what a step allocates so that the failed allocation
// fits in what was free: the allocation grows with the rows it holds,
// the tokens of a step (--max-num-batched-tokens: activation, and the
// logits of every prompt token when prompt logprobs are asked) or the
// requests sampled (--max-num-seqs: the sampler's logits). Where rows ×
// vocabulary × dtype bytes gives the allocation, the remedy says which;
// otherwise it is the step's tokens, which every part of the peak grows
// with.
func (g *diag) smallerStep(n vllm.OOM) (Remedy, bool) {
	b := g.base
	set := b.Settings
	flag, cur, what := vllm.FlagMaxNumBatchedTokens, set.MaxNumBatchedTokens, ""
	if vocab := int64(b.Model.Vocab); vocab > 0 {
		for _, c := range []struct {
			flag string
			rows int
			name string
		}{{vllm.FlagMaxNumBatchedTokens, set.MaxNumBatchedTokens, "tokens"}, {vllm.FlagMaxNumSeqs, set.MaxNumSeqs, "requests"}} {
			for _, bytes := range []int64{int64(b.DtypeBytes), 4} {
				want := int64(c.rows) * vocab * bytes
				if c.rows > 0 && bytes > 0 && math.Abs(float64(want-n.Tried)) <= rowsMatch*float64(n.Tried) {
					flag, cur = c.flag, c.rows
					what = fmt.Sprintf(" (%s = %s %s × %s vocabulary × %d B: the logits of a whole step)", gib(n.Tried), vllm.Thousands(int64(c.rows)), c.name, vllm.Thousands(vocab), bytes)
					break
				}
			}
			if what != "" {
				break
			}
		}
	}
	if cur <= 0 {
		return Remedy{}, false
	}
	// The allocation scales with the rows: at most free/tried of them.
	next := int(float64(cur) * float64(n.Free) / float64(n.Tried))
	floor := 1
	if flag == vllm.FlagMaxNumBatchedTokens {
		// vLLM refuses fewer batched tokens than sequences.
		next, floor = next/stepAlign*stepAlign, max(set.MaxNumSeqs, stepAlign)
	}
	if next < floor || next >= cur {
		return Remedy{}, false
	}
	nb, ok := g.with(func(s *vllm.Settings) {
		if flag == vllm.FlagMaxNumSeqs {
			s.MaxNumSeqs = next
		} else {
			s.MaxNumBatchedTokens = next
		}
	})
	if !ok || !nb.Fits {
		return Remedy{}, false
	}
	return Remedy{Action: ActionSetFlag, Args: []string{"--" + flag, strconv.Itoa(next)},
		Why: fmt.Sprintf("or keep the budget and shrink the step: --%s %d -> %d scales the %s that failed%s to %s, within the %s that was free; the KV cache stays %s tokens",
			flag, cur, next, gib(n.Tried), what, gib(int64(float64(n.Tried)*float64(next)/float64(cur))), gib(n.Free), vllm.Thousands(nb.KVTokens))}, true
}
