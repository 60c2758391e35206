package report

import (
	"context"
	"fmt"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// resolveDraft reads the checkpoint --speculative-config names as its draft
// (a draft model, an EAGLE or DFlash head) as the target is read: the
// catalog, a local directory, or the Hub unless offline. A draft that
// cannot be read is not an error here, as vLLM reads it, not headroom: the
// plan then says that its weights and KV are not planned
// (memory.CodeDraftNotRead), and a note says why.
func resolveDraft(ctx context.Context, env Env, e *Evidence, offline bool) {
	c := e.Settings.Speculative
	if c == nil || !c.NeedsDraftModel() {
		return
	}
	spec, err := ResolveModel(ctx, env, c.Model, offline)
	if err != nil {
		e.Notes = append(e.Notes, fmt.Sprintf("the draft %s was not read (%v)", c.Model, err))
		return
	}
	e.Draft = &spec
}

// featureNotes are the notes the settings' features call for: each flag
// that may move memory and is not modelled (the plan's warnings name them
// too), the weights an ipc_cache load shares, and a start-up that reuses
// vLLM's own measured KV size.
func featureNotes(s vllm.Settings) []string {
	var notes []string
	for _, n := range s.NotModelled() {
		notes = append(notes, n.String()+"; may move memory, not modelled")
	}
	if s.LoadFormat() == "ipc_cache" {
		notes = append(notes, "--load-format ipc_cache: the weights are held by another process and counted as this engine's at the start-up check (#54921), so the card holds them once and the budget is as planned")
	}
	if s.StartupPlanEnabled() {
		notes = append(notes, vllm.EnvStartupPlan+"=1: vLLM reuses the KV size an earlier start-up of this configuration measured (#47388) instead of profiling; after a change of release, driver or neighbours on the GPU its pool can differ from this plan's")
	}
	return notes
}

// configFileNotes say which flags a --config file gave, and which of its
// keys vLLM drops.
func configFileNotes(cf *vllm.ConfigFile) []string {
	if cf == nil {
		return nil
	}
	if cf.Unread != "" {
		return []string{fmt.Sprintf("--config %s is not read (%s): planned on the line alone; run headroom where the file is, or give its flags on the line", cf.Path, cf.Unread)}
	}
	var notes []string
	if len(cf.Flags) == 0 {
		notes = append(notes, fmt.Sprintf("--config %s read: it sets no flag", cf.Path))
	} else {
		notes = append(notes, fmt.Sprintf("--config %s read: %s, before the line's own flags, which win as in vLLM", cf.Path, vllm.ShellJoin(cf.Flags)))
	}
	for _, k := range cf.Dropped {
		notes = append(notes, fmt.Sprintf("--config %s sets %s to false, which vLLM's loader drops (it adds only a true flag): %s keeps its default; write no-%s: true to turn it off", cf.Path, k, k, k))
	}
	return notes
}

// FeaturesLine is the table's line of what the features add, "" without
// any: LoRA slots, the drafter, the multimodal limits' encoder pass.
func FeaturesLine(f memory.Features) string {
	var parts []string
	if l := f.LoRA; l != nil {
		parts = append(parts, fmt.Sprintf("LoRA %d × rank %d: %s in the weights", l.Slots, l.Rank, memory.GiB(l.Bytes)))
	}
	if s := f.Speculative; s != nil {
		p := fmt.Sprintf("speculative %s, %d tokens a step", s.Method, s.Tokens)
		if s.Draft != "" {
			p += fmt.Sprintf("; drafter %s: %s of weights, %d KV layers", s.Draft, memory.GiB(s.WeightsBytes), s.KVLayers)
		}
		if s.ForcesV1Runner {
			p += "; runs on the V1 model runner"
		}
		parts = append(parts, p)
	}
	if m := f.Multimodal; m != nil {
		switch {
		case m.TextOnly:
			parts = append(parts, "multimodal: text only, no encoder in the profile")
		case m.EncoderItems > 0:
			parts = append(parts, fmt.Sprintf("multimodal: the profile's encoder pass on %d dummy items peaks at %s", m.EncoderItems, memory.GiB(m.EncoderPeakBytes)))
		}
	}
	return strings.Join(parts, "; ")
}

// refusedFlagsOnly reports problems that are all flags the release does
// not know: the memory fits, and no memory change would make it start.
func refusedFlagsOnly(problems []memory.Finding) bool {
	for _, p := range problems {
		if p.Code != memory.CodeFlagNotInRelease {
			return false
		}
	}
	return len(problems) > 0
}
