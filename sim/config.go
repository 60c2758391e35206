package sim

import (
	"errors"
	"fmt"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Group is one KV-cache group: every group holds its own blocks for every
// request, all taken from one pool (memory.KVGroup).
type Group struct {
	Kind model.AttentionKind
	// Window is the sliding window or local-attention chunk in tokens.
	Window  int
	Chunked bool
}

// Config is an engine: its pool, its limits and its clock model.
type Config struct {
	// NumGPUBlocks is vLLM's num_gpu_blocks; one block is the null block,
	// so requests share NumGPUBlocks − 1.
	NumGPUBlocks int
	// BlockSize is tokens per block (vLLM's default on CUDA: 16).
	BlockSize           int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	MaxModelLen         int
	// LongPrefillTokenThreshold caps the tokens one request gets per step
	// when > 0 (vLLM --long-prefill-token-threshold).
	LongPrefillTokenThreshold int
	// NoChunkedPrefill makes a prompt larger than the step's remaining
	// budget wait (vLLM --no-enable-chunked-prefill).
	NoChunkedPrefill bool
	// NoPrefixCaching turns off block reuse across requests (vLLM
	// --no-enable-prefix-caching); V1 has it on by default.
	NoPrefixCaching bool
	// Groups are the KV-cache groups; none means one full-attention group.
	Groups []Group
	// StateBlocks is the blocks a request of a length keeps in a
	// linear-state group (vllm.Settings.MambaStateBlocks); nil: one.
	StateBlocks func(length int) int
	// Timer prices a step; nil means Fixed(0.010).
	Timer StepTimer
	// TokenEvents makes Step report every token (a streaming server needs
	// them); without it only finished and preempted requests are reported,
	// which is all a batch run reads.
	TokenEvents bool
	// FirstEvents makes Step report each request's first token too (Run
	// needs them to time what the client sees).
	FirstEvents bool
	// Speculation is speculative decoding; nil without
	// (speculative.go).
	Speculation *Speculation
	// PipelineStages is --pipeline-parallel-size: with more than one, up
	// to that many batches are in flight at once (pipeline.go).
	PipelineStages int
}

func (c *Config) validate() error {
	switch {
	case c.BlockSize <= 0:
		return errors.New("block size must be positive")
	case c.NumGPUBlocks < 2:
		return fmt.Errorf("num_gpu_blocks %d: the pool needs at least 2 blocks (one is the null block)", c.NumGPUBlocks)
	case c.NumGPUBlocks > MaxBlocks:
		return fmt.Errorf("num_gpu_blocks %d: more than the %d blocks vLLM's int32 block tables address: give a larger --block-size or a smaller pool", c.NumGPUBlocks, MaxBlocks)
	case c.MaxNumSeqs <= 0:
		return errors.New("max-num-seqs must be positive")
	case c.MaxNumBatchedTokens <= 0:
		return errors.New("max-num-batched-tokens must be positive")
	case c.MaxModelLen < 2:
		return fmt.Errorf("max-model-len %d: needs at least 2 tokens", c.MaxModelLen)
	}
	if c.NoChunkedPrefill && c.MaxNumBatchedTokens < c.MaxModelLen {
		return fmt.Errorf("without chunked prefill max-num-batched-tokens (%d) must be at least max-model-len (%d), as vLLM requires", c.MaxNumBatchedTokens, c.MaxModelLen)
	}
	if len(c.Groups) == 0 {
		c.Groups = []Group{{Kind: model.Full}}
	}
	for _, g := range c.Groups {
		if g.Kind == model.Sliding && g.Window <= 0 {
			return fmt.Errorf("sliding-window group without a window")
		}
	}
	if c.Timer == nil {
		c.Timer = Fixed(0.010)
	}
	if c.PipelineStages < 0 || c.PipelineStages > maxPipelineStages {
		return fmt.Errorf("pipeline-parallel size %d: 1 to %d stages", c.PipelineStages, maxPipelineStages)
	}
	if c.PipelineStages > 1 && c.Speculation != nil {
		return errors.New("speculative decoding with pipeline parallelism is not simulated: drop one of --speculative-config and --pipeline-parallel-size")
	}
	if c.Speculation != nil {
		return c.Speculation.validate()
	}
	return nil
}

// blocksFor is how many blocks group g holds for a request whose first
// computed tokens are computed and that is given slots up to total.
// Sliding layers free the blocks wholly before the window of the next
// token (vLLM's remove_skipped_blocks), chunked local layers those before
// the current chunk; a linear-state group holds its state blocks
// (stateBlocks).
func (c *Config) skippedBlocks(g Group, computed int) int {
	switch g.Kind {
	case model.Sliding:
		if g.Chunked {
			return computed / g.Window * g.Window / c.BlockSize
		}
		if s := computed - g.Window + 1; s > 0 {
			return s / c.BlockSize
		}
	}
	return 0
}

// peakBlocks is the most blocks a request of total tokens holds at once
// over all groups, when it is given its tokens in chunks of up to
// MaxNumBatchedTokens: the test for a request that can never fit.
func (c *Config) peakBlocks(total int) int {
	bs := c.BlockSize
	full := cdiv(total, bs)
	n := 0
	for _, g := range c.Groups {
		switch g.Kind {
		case model.Linear:
			n += c.stateBlocks(total)
		case model.Sliding:
			w := cdiv(g.Window-1+c.MaxNumBatchedTokens, bs) + 1
			if g.Chunked {
				w = cdiv(g.Window+c.MaxNumBatchedTokens, bs)
			}
			n += min(full, w)
		default:
			n += full
		}
	}
	return n
}

func cdiv(a, b int) int { return (a + b - 1) / b }

// stateBlocks is the blocks a request of length tokens keeps in a
// linear-state group.
func (c *Config) stateBlocks(length int) int {
	if c.StateBlocks == nil {
		return 1
	}
	return max(c.StateBlocks(length), 1)
}

// ConfigFor is the engine of a plan with vLLM's default scheduler flags:
// its pool (b.NumBlocks), KV-cache groups and limits, priced by timer.
// Callers set the scheduler flags the plan does not hold
// (LongPrefillTokenThreshold, NoChunkedPrefill, NoPrefixCaching, an
// override of NumGPUBlocks) on the result.
func ConfigFor(b memory.Budget, timer StepTimer) Config {
	var groups []Group
	for _, g := range b.KVGroups() {
		groups = append(groups, Group{Kind: g.Kind, Window: g.Window, Chunked: g.Chunked})
	}
	set := b.Settings
	c := Config{
		NumGPUBlocks: int(b.NumBlocks), BlockSize: set.BlockSize, MaxNumSeqs: RunningCap(set),
		MaxNumBatchedTokens: set.MaxNumBatchedTokens, MaxModelLen: b.MaxModelLen, Groups: groups, Timer: timer,
		PipelineStages: set.PipelineParallelSize,
	}
	if set.MambaCacheMode != "" {
		c.StateBlocks = func(length int) int { return int(set.MambaStateBlocks(length, set.BlockSize)) }
	}
	return c
}

// RunningCap is how many requests the scheduler runs at once:
// --max-num-seqs, or --max-num-active-seqs where it is set below it
// (0.29+, #56758: the scheduler admits no more than it, while the KV
// cache, the graphs and the input buffers stay sized by --max-num-seqs,
// which is why the plan does not read it).
func RunningCap(set vllm.Settings) int {
	if a := set.MaxNumActiveSeqs; a > 0 && a < set.MaxNumSeqs {
		return a
	}
	return set.MaxNumSeqs
}
