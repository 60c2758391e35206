package sim

// Batch is what one step's forward pass does.
type Batch struct {
	// Requests and Tokens are the scheduled requests and their new tokens.
	Requests int
	Tokens   int64
	// PrefillTokens are the new tokens that are prompt tokens (first
	// computation or recompute of a prompt).
	PrefillTokens int64
	// ContextTokens is the KV the batch attends over: Σ (computed + new)
	// per request, every token read (and the new ones written) once.
	ContextTokens int64
	// AttentionPairs is Σ query × key pairs of causal attention:
	// new × computed + new × (new + 1) / 2 per request.
	AttentionPairs int64
}

// StepTimer prices one step in seconds of simulated time.
type StepTimer interface {
	StepTime(Batch) float64
}

// Fixed is a step time that is the same for every step (exact checks).
type Fixed float64

// StepTime returns the fixed time.
func (f Fixed) StepTime(Batch) float64 { return float64(f) }

// Roofline prices a step as max(FLOPs / effective peak, bytes /
// effective bandwidth) + Overhead, per GPU: the forward pass is either
// compute- or memory-bound, and everything else a step costs (scheduling,
// sampling, launch gaps, the collective of tensor parallelism) is the
// overhead. The figures are per GPU worker (a tensor-parallel rank holds
// 1/TP of the weights and of the work).
type Roofline struct {
	// ActiveParams is the parameters one token passes through, per GPU.
	ActiveParams float64
	// WeightBytes is the weights one forward pass reads, per GPU.
	WeightBytes float64
	// KVBytesPerToken is the KV one token of context costs, per GPU.
	KVBytesPerToken float64
	// AttentionFLOPsPerPair is the attention FLOPs of one query × key pair
	// over all layers, per GPU: 4 × layers × query heads × head dim / TP
	// (QKᵀ and PV, a multiply-add each).
	AttentionFLOPsPerPair float64
	// PeakFLOPs and Bandwidth are the datasheet figures (gpu.Perf).
	PeakFLOPs, Bandwidth float64
	// FLOPsEfficiency and BandwidthEfficiency are the shares of the peaks a
	// real step reaches; Overhead is the per-step time on top (Calibration).
	FLOPsEfficiency, BandwidthEfficiency float64
	Overhead                             float64
}

// StepTime is the roofline estimate.
func (m *Roofline) StepTime(b Batch) float64 {
	if b.Tokens == 0 {
		return m.Overhead
	}
	flops, bytes := m.work(b)
	return max(flops/(m.PeakFLOPs*m.FLOPsEfficiency), bytes/(m.Bandwidth*m.BandwidthEfficiency)) + m.Overhead
}

// work is a batch's FLOPs and the bytes it reads: the weights once, and
// the KV of every context token.
func (m *Roofline) work(b Batch) (flops, bytes float64) {
	flops = 2*m.ActiveParams*float64(b.Tokens) + m.AttentionFLOPsPerPair*float64(b.AttentionPairs)
	bytes = m.WeightBytes + m.KVBytesPerToken*float64(b.ContextTokens)
	return flops, bytes
}
