package memory

// PlanWith lets the external tests compare a plan that reuses another
// plan's per-layer counts with one that counts them itself.
var PlanWith = planWith

// ProfileTerms are the parts of a plan's profile run on its last stage:
// the forward peak, and the sampler peak less samplerFixedBytes (what the
// fits of the constants need).
func ProfileTerms(b Budget) (forward, samplerLessFixed int64) {
	s, set := b.Model, b.Settings
	st := stages(s.Layers, set.PipelineParallelSize)
	last := st[len(st)-1]
	moe := moeScratchFor(s, set, b.Device, nil, set.MaxNumBatchedTokens, b.DtypeBytes)
	forward, _ = forwardPeakBytes(s, last, set.TensorParallelSize, set.MaxNumBatchedTokens, b.DtypeBytes, moe)
	samplerLessFixed = samplerPeakBytes(s, set.MaxNumBatchedTokens, set.MaxNumSeqs, b.DtypeBytes, b.run) - samplerFixedBytes
	return forward, samplerLessFixed
}

// FirstStageForward is the forward peak of the first pipeline stage.
func FirstStageForward(b Budget) int64 {
	s, set := b.Model, b.Settings
	first := stages(s.Layers, set.PipelineParallelSize)[0]
	moe := moeScratchFor(s, set, b.Device, nil, set.MaxNumBatchedTokens, b.DtypeBytes)
	f, _ := forwardPeakBytes(s, first, set.TensorParallelSize, set.MaxNumBatchedTokens, b.DtypeBytes, moe)
	return f
}

// Fitted constants, for the tests that refit them from the calibration rows.
const (
	SamplerFixedBytes = samplerFixedBytes
	HiddenBuffers     = hiddenBuffers
)

// KVResidualErr is the band's calibrated half-width in GiB.
const KVResidualErr = kvResidualErr

// WithoutTPPoints drops the non-torch points of one link ("nvlink",
// "pcie", "cross-node") until the returned function restores them: what a
// plan would have been had those start-ups not been held. Tests that call
// it must not run in parallel.
func WithoutTPPoints(link string) (restore func()) {
	saved := tpPoints
	var kept []tpPoint
	for _, p := range saved {
		if string(p.link) != link {
			kept = append(kept, p)
		}
	}
	tpPoints = kept
	return func() { tpPoints = saved }
}

// ColdStartErr is the cold-start allowance in GiB.
const ColdStartErr = coldStartErr
