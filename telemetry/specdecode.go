package telemetry

import (
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"

	"headroom.dev/headroom/vllm"
)

// specMetrics are vLLM's speculative-decoding counters, which a server
// exports with --speculative-config (vllm/specdecode.go).
var specMetrics = []vllm.Metric{vllm.MetricSpecDrafts, vllm.MetricSpecDraftTokens, vllm.MetricSpecAccepted, vllm.MetricSpecAcceptedPerPos}

// perPositionNames are the per-position family's wire names.
var perPositionNames = vllm.MetricWireNames(vllm.MetricSpecAcceptedPerPos)

func isPerPosition(name string) bool { return slices.Contains(perPositionNames, name) }

// addPosition folds one sample of the per-position family by its
// position label; a position past what vLLM proposes is left out with a
// note, so that a hostile label cannot size the slice.
func (f *fold) addPosition(name string, a *famAcc, m *dto.Metric, v float64) {
	for _, l := range m.GetLabel() {
		if l.GetName() != "position" {
			continue
		}
		i, err := strconv.Atoi(l.GetValue())
		if err != nil || i < 0 || i >= vllm.MaxSpeculativeTokens {
			f.note("%s position=%q is not a draft position (0 to %d): left out", name, l.GetValue(), vllm.MaxSpeculativeTokens-1)
			return
		}
		for len(a.byPos) <= i {
			a.byPos = append(a.byPos, 0)
		}
		a.byPos[i] += v
	}
}

// specDecode is the speculative-decoding counters of the exposition (each
// through total, which leaves out what is implausible and names what it
// read); nil when the server exports no drafts counter.
func (f *fold) specDecode(total func(vllm.Metric) float64) *vllm.SpecDecodeCounts {
	if a, _ := f.newest(vllm.MetricSpecDrafts); a == nil {
		return nil
	}
	c := vllm.SpecDecodeCounts{Drafts: total(vllm.MetricSpecDrafts), DraftTokens: total(vllm.MetricSpecDraftTokens), Accepted: total(vllm.MetricSpecAccepted)}
	if a, _ := f.newest(vllm.MetricSpecAcceptedPerPos); a != nil && len(a.byPos) > 0 && total(vllm.MetricSpecAcceptedPerPos) > 0 {
		c.AcceptedPerPos = a.byPos
	}
	return &c
}
