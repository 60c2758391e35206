package memory

import "headroom.dev/headroom/model"

// DrafterNetwork is the network that drafts under speculative decoding,
// as this plan loads it: a draft model or head, or the target's MTP
// layers as a model of their own, and the tensor-parallel ranks it runs
// on. ok is false without one on the GPU (no speculative decoding, n-gram
// and suffix matching, a draft that could not be read). The simulator
// prices the drafter's passes with it (sim.DrafterRoofline).
func (b Budget) DrafterNetwork() (spec model.Spec, tp int, ok bool) {
	d := b.feat.draft
	if d == nil || d.spec == nil {
		return model.Spec{}, 0, false
	}
	return *d.spec, d.tp, true
}
