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
	// Decodes are the requests given one token (a decode, or the last
	// token of a prompt); DecodeContext is the KV they read, Σ (computed +
	// 1). Their attention reads the cache and is bound by memory. The other
	// requests are prefill chunks: PrefillPairs are their query × key pairs,
	// a product of the chunk and the context that the tensor cores compute.
	Decodes       int
	DecodeContext int64
	PrefillPairs  int64
	// Drafts are the speculative tokens the decodes verify: each is one
	// more query of its request's decode and one more row of the LM head.
	Drafts int64
	// GroupTokens are the tokens of every engine of a data-parallel group
	// that steps in lockstep with this one (a MoE model's: its MoE layers
	// compute them together, Roofline.DataParallel); 0 when the engine
	// steps alone.
	GroupTokens int64
	// Chunks are the scheduled requests one by one, for what the totals
	// cannot give (the keys a sliding window leaves a query). They are the
	// engine's scratch, valid while the step is priced; a measured step
	// has none.
	Chunks []Chunk `json:"-"`
}

// Chunk is one scheduled request's part of a step: New tokens computed
// after Computed ones, Drafts of them speculative tokens to verify (a
// decode is New = 1 + Drafts).
type Chunk struct{ New, Computed, Drafts int64 }

// StepTimer prices one step in seconds of simulated time.
type StepTimer interface {
	StepTime(Batch) float64
}

// PartsTimer is a StepTimer that says where a step's time goes; its
// StepTime is Parts(b).Total().
type PartsTimer interface {
	StepTimer
	Parts(Batch) StepParts
}

// Fixed is a step time that is the same for every step (exact checks).
type Fixed float64

// StepTime returns the fixed time.
func (f Fixed) StepTime(Batch) float64 { return float64(f) }
