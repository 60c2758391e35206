package memory

import (
	"fmt"
	"math"

	"headroom.dev/headroom/vllm"
)

// Utilization policies.
const (
	// PolicyHeadroom computes the highest utilization that leaves room for
	// everything vLLM does not budget, from those sizes.
	PolicyHeadroom = "headroom"
	// PolicyKAITO reproduces KAITO's per-GPU curve (kaito.md §4a):
	// min(0.95, floor((1 − 1.5 GiB / per-GPU memory) × 100) / 100).
	PolicyKAITO = "kaito"
)

// ParsePolicy reads a policy as the user names it: "" is PolicyHeadroom;
// a name neither policy has is an error saying which there are.
func ParsePolicy(name string) (string, error) {
	switch name {
	case "":
		return PolicyHeadroom, nil
	case PolicyHeadroom, PolicyKAITO:
		return name, nil
	}
	return "", fmt.Errorf("unknown policy %q: use headroom or kaito", name)
}

// RedundancyBytes is the buffer vLLM itself keeps when it suggests an
// explicit --kv-cache-memory ("150 MiB redundancy buffer",
// vllm/v1/worker/gpu_worker.py, vllm-memory.md §2.4).
const RedundancyBytes = 150 * mib

// FragmentationDivisor: the allocator's fragmentation takes a hundredth of
// the card (1%), kept free beside RedundancyBytes.
const FragmentationDivisor = 100

// maxUtilization caps recommendations: vLLM's own auto-tuner starts its
// search at 0.98 (peers.md §2.1).
const maxUtilization = 0.98

// ReserveBytes is the slack a card needs beyond what vLLM accounts for:
// the redundancy buffer plus 1% of the card for allocator fragmentation.
// The alert rules of package monitoring compare a GPU's free memory with it.
func ReserveBytes(total int64) int64 {
	return RedundancyBytes + total/FragmentationDivisor
}

// Options steer recommendations.
type Options struct {
	// Policy is PolicyHeadroom (default) or PolicyKAITO.
	Policy string
	// TypicalContext is the context length (prompt + output tokens) of a
	// typical request, which sizes max-num-seqs; 0 means no traffic is
	// known, and max-num-seqs keeps the value in use (MaxNumSeqsRule).
	TypicalContext int
	// LengthWhose names whose the --max-model-len given is, where a caller
	// chose it rather than the user ("the pool's longest requests"); ""
	// is the user's ("yours"). A length given is kept where it fits.
	LengthWhose string
}

// Recommendation is a set of settings and the plan they give.
type Recommendation struct {
	Policy               string  `json:"policy"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	MaxModelLen          int     `json:"max_model_len"`
	MaxNumSeqs           int     `json:"max_num_seqs"`
	TypicalContext       int     `json:"typical_context"`
	// Why says in words how the values were chosen.
	Why []string `json:"why"`
	// Budget is the plan with the recommended settings applied.
	Budget Budget `json:"-"`
}

// Utilization returns the recommended --gpu-memory-utilization for a plan
// under a policy.
func Utilization(b Budget, policy string) (float64, string) {
	p := b.PerGPU
	if policy == PolicyKAITO {
		// KAITO divides its SKU table's nominal memory (80Gi for an
		// 80 GB card), not what CUDA reports.
		mem := b.Device.NominalBytes
		if mem <= 0 {
			mem = p.Total
		}
		u := math.Floor((1-1.5*gib/float64(mem))*100) / 100
		u = math.Min(0.95, u)
		return u, fmt.Sprintf("KAITO's curve: min(0.95, floor((1 − 1.5 GiB / %s) × 100) / 100) = %.2f", GiB(mem), u)
	}
	sampler := samplerPeakBytes(b.Model, b.Settings.MaxNumBatchedTokens, b.Settings.MaxNumSeqs, b.DtypeBytes, b.run)
	outside := p.Context + ReserveBytes(p.Total) + sampler
	graphs := ""
	if !b.CUDAGraphInBudget {
		outside += p.CUDAGraph
		graphs = fmt.Sprintf(", CUDA graphs %s (outside the budget in vLLM %s)", GiB(p.CUDAGraph), b.Settings.Version)
	}
	u := math.Floor(float64(p.Total-outside)/float64(p.Total)*100) / 100
	u = math.Min(u, maxUtilization)
	why := fmt.Sprintf("%.2f leaves %s of %s for what vLLM does not budget: CUDA context %s, sampler warm-up %s%s, fragmentation reserve %s",
		u, GiB(p.Total-int64(u*float64(p.Total))), GiB(p.Total), GiB(p.Context),
		GiB(sampler), graphs, GiB(ReserveBytes(p.Total)))
	return u, why
}

// MaxNumSeqsRule is the one rule for --max-num-seqs without traffic, as
// plan, its help, doctor, audit and the webhook say it: the value in use
// is kept, and only a known traffic (a request log, a profile, a typical
// context) sizes it.
const MaxNumSeqsRule = "the value in use (vLLM's default unless set), kept without a traffic to size it by (plan --profile FILE or --typical-context N, or doctor with a request log, sizes it)"

// Recommend picks utilization, max-model-len and max-num-seqs for the input.
func Recommend(in Input, opt Options) (Recommendation, error) {
	base, err := Plan(in)
	if err != nil {
		return Recommendation{}, err
	}
	r, at, b, err := recommendLen(in, base, opt)
	if err != nil {
		return Recommendation{}, err
	}
	if r.MaxModelLen <= 0 {
		r.Budget = b
		return r, nil
	}
	at.Settings.MaxModelLen = r.MaxModelLen
	b, err = Plan(at)
	if err != nil {
		return Recommendation{}, err
	}
	r.TypicalContext = opt.TypicalContext
	if r.TypicalContext > 0 {
		// The user said what a typical request is: as many as the cache
		// holds at once, so that they are not preempted.
		seqs := SeqsAt(b, r.TypicalContext)
		r.MaxNumSeqs = seqs
		if seqs < b.Settings.MaxNumSeqs {
			r.Why = append(r.Why, fmt.Sprintf("max-num-seqs %d: %s KV tokens at --gpu-memory-utilization %.2f hold %d requests of %s tokens (typical context) at once; more would queue or be preempted", seqs, vllm.Thousands(b.KVTokens), b.Settings.GPUMemoryUtilization, seqs, vllm.Thousands(int64(r.TypicalContext))))
		} else {
			r.Why = append(r.Why, fmt.Sprintf("max-num-seqs %d: the value in use; %s KV tokens at --gpu-memory-utilization %.2f hold %d requests of %s tokens", seqs, vllm.Thousands(b.KVTokens), b.Settings.GPUMemoryUtilization, b.KVTokens/int64(r.TypicalContext), vllm.Thousands(int64(r.TypicalContext))))
		}
	} else {
		// Without the traffic, keep the value in use. A cap below it only
		// makes requests the cache could hold wait: vLLM's scheduler
		// already stops admitting when the cache is full and preempts the
		// newest request when it runs out. Capping at "the cache holds N
		// requests of a quarter of max-model-len" cost 13x the E2E p99 on
		// chat traffic (sim/README.md); the traffic decides (--profile).
		r.MaxNumSeqs = max(b.Settings.MaxNumSeqs, 1)
		r.Why = append(r.Why, fmt.Sprintf("max-num-seqs %d: %s; the KV cache holds %s tokens at --gpu-memory-utilization %.2f, and vLLM queues or preempts what does not fit", r.MaxNumSeqs, MaxNumSeqsRule, vllm.Thousands(b.KVTokens), b.Settings.GPUMemoryUtilization))
	}
	seqs := r.MaxNumSeqs
	at.Settings.MaxNumSeqs = seqs
	if r.Budget, err = Plan(at); err != nil {
		return Recommendation{}, err
	}
	return r, nil
}

// RecommendContext is the first half of Recommend for a plan already made
// (base is Plan(in)): the utilization and the max-model-len, with their
// reasons. MaxNumSeqs, TypicalContext and Budget stay zero. A caller that
// fills only those two flags skips the two plans Recommend adds for
// max-num-seqs, and the plan of in it has already made.
func RecommendContext(in Input, base Budget, opt Options) (Recommendation, error) {
	r, _, _, err := recommendLen(in, base, opt)
	if err != nil {
		return Recommendation{}, err
	}
	return r, nil
}

// recommendLen picks the utilization and max-model-len; it returns the
// input at that utilization and its plan, which Recommend goes on from.
func recommendLen(in Input, base Budget, opt Options) (r Recommendation, at Input, b Budget, err error) {
	r = Recommendation{Policy: opt.Policy}
	if r.Policy == "" {
		r.Policy = PolicyHeadroom
	}
	u, why := Utilization(base, r.Policy)
	r.GPUMemoryUtilization = u
	r.Why = append(r.Why, "gpu-memory-utilization "+why)

	at = in
	at.Settings = base.Settings
	at.Settings.GPUMemoryUtilization = u
	if at.Settings.MaxModelLen == vllm.AutoMaxModelLen {
		at.Settings.MaxModelLen = 0
	}
	if b, err = Plan(at); err != nil {
		return Recommendation{}, Input{}, Budget{}, err
	}
	warm := b.FitLen()
	r.MaxModelLen, _ = b.LargestFit()
	// Only a length the user gave is theirs: one an alternative chose
	// (a shorter context at another utilization) is recomputed here, at
	// the recommended utilization.
	user := in.Settings.MaxModelLen
	if !in.Settings.Set[vllm.FlagMaxModelLen] {
		user = 0
	}
	switch {
	case user > 0 && user <= r.MaxModelLen:
		// The user chose a context that fits: keep it, and say how far it could go.
		whose := "yours"
		if opt.LengthWhose != "" {
			whose = opt.LengthWhose
		}
		r.Why = append(r.Why, fmt.Sprintf("max-model-len %d: %s, and it fits (up to %d would at --gpu-memory-utilization %.2f)", user, whose, r.MaxModelLen, u))
		r.MaxModelLen = user
	case r.MaxModelLen <= 0:
		r.Why = append(r.Why, fmt.Sprintf("no context fits: %s of KV cache per GPU at utilization %.2f", GiB(b.PerGPU.KVCache), u))
	case r.MaxModelLen >= b.Model.MaxPositions:
		r.Why = append(r.Why, fmt.Sprintf("max-model-len %d: the model's full context fits (KV for %s tokens at --gpu-memory-utilization %.2f)", r.MaxModelLen, vllm.Thousands(b.KVTokens), u))
	case r.MaxModelLen < warm:
		// A length headroom chooses must also start a new pod, whose
		// torch.compile cache is cold (LargestFit).
		r.Why = append(r.Why, fmt.Sprintf("max-model-len %d: the longest block-aligned context a first start with a cold torch.compile cache holds at --gpu-memory-utilization %.2f (%s less KV cache than a warm start, which holds %d), so that a new pod starts too", r.MaxModelLen, u, GiB(b.ColdStartAllowance()), warm))
	default:
		r.Why = append(r.Why, fmt.Sprintf("max-model-len %d: the longest block-aligned context whose KV fits in %s per GPU at --gpu-memory-utilization %.2f (the model allows %d)", r.MaxModelLen, GiB(b.PerGPU.KVCache), u, b.Model.MaxPositions))
	}
	return r, at, b, nil
}

// SeqsAt is the --max-num-seqs a budget sustains: as many requests of
// typicalContext tokens as its KV cache holds at once, at least 1 and at
// most the max-num-seqs in use.
func SeqsAt(b Budget, typicalContext int) int {
	if typicalContext <= 0 {
		return max(b.Settings.MaxNumSeqs, 1)
	}
	n := int(b.KVTokens / int64(typicalContext))
	return max(min(n, b.Settings.MaxNumSeqs), 1)
}

// DefaultTypicalContext is a quarter of max-model-len: the request length
// the frontier and the dead ends illustrate with when no traffic is known.
// It never sizes max-num-seqs (MaxNumSeqsRule).
func DefaultTypicalContext(maxModelLen int) int { return max(maxModelLen/4, 1) }

// FitLen is the longest --max-model-len whose KV cache fits the budget,
// block-aligned (or the model's maximum): what to tell a user whose
// context is too long.
func (b Budget) FitLen() int {
	return alignDown(b.MaxFitLen, b.Settings.BlockSize, b.Model.MaxPositions)
}

// UtilizationBeside is the most --gpu-memory-utilization vLLM may ask for
// on a card of total bytes of which other processes hold held: what they
// leave, less the CUDA context and the reserve kept outside vLLM's budget
// (p's), floored to a hundredth. Zero or less when nothing is left.
func UtilizationBeside(total, held int64, p Parts) float64 {
	room := total - held - p.Context - ReserveBytes(p.Total)
	return math.Floor(float64(room)/float64(total)*100) / 100
}

// alignDown floors n to a multiple of block unless n is the model's
// maximum (vLLM accepts any length; a block-aligned one wastes no block).
func alignDown(n, block, modelMax int) int {
	if n >= modelMax && modelMax > 0 {
		return modelMax
	}
	if block <= 0 {
		return n
	}
	return n / block * block
}
