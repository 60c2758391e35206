package doctor

import (
	"fmt"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Disagreement codes: inputs that cannot all describe one deployment.
const (
	// DisagreeModel: the log, /metrics, a manifest or the flags name
	// different models.
	DisagreeModel = "model_mismatch"
	// DisagreeGPU: nvidia-smi, the log's total or a metrics exporter show
	// another GPU than the one planned (--gpu, or the first the evidence
	// named).
	DisagreeGPU = "gpu_mismatch"
	// DisagreeKVCache: the KV cache a start-up log measured does not fit
	// on the GPU planned: the log comes from another card or layout. Its
	// figures are then not used.
	DisagreeKVCache = "kv_cache_mismatch"
)

// Disagreement is one pair of inputs that contradict each other.
type Disagreement struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Lines are where each side says so, when it is a line.
	Lines []Line `json:"lines,omitempty"`
}

// gpuTotalSlack is how far a reported total may be from the planned
// device's and still be that device: nvidia-smi counts the driver's
// reserve that CUDA does not (about 0.5 GiB on an 80 GB card), and
// exporters print MiB.
const gpuTotalSlack = 0.04

// disagreements compares what each input says of the model and the GPU
// with the deployment planned. It runs after resolve and measure; a log
// whose measured KV cache cannot fit the planned GPU is set aside.
func (g *diag) disagreements() []Disagreement {
	var out []Disagreement
	add := func(code, msg string, lines ...Line) {
		var ls []Line
		for _, l := range lines {
			if !l.zero() {
				ls = append(ls, l)
			}
		}
		out = append(out, Disagreement{Code: code, Message: msg, Lines: ls})
	}
	dep := g.dep

	// Models, by what each source calls them; the resolver maps aliases
	// to the canonical id where it can.
	canon := func(ref string) string {
		if g.opt.ResolveModel != nil {
			if s, err := g.opt.ResolveModel(ref); err == nil && s.ID != "" {
				return strings.ToLower(s.ID)
			}
		}
		return strings.ToLower(ref)
	}
	type named struct {
		model, from string
		line        Line
	}
	var models []named
	if g.opt.HasSettings && g.opt.Settings.Model != "" {
		models = append(models, named{g.opt.Settings.Model, "the command line given", Line{}})
	}
	if g.opt.Model.ID != "" {
		models = append(models, named{g.opt.Model.ID, "--model", Line{}})
	}
	for _, l := range g.ev.Logs {
		if l.Model != "" {
			var at Line
			if len(l.SettingsLines) > 0 {
				at = l.SettingsLines[0]
			}
			models = append(models, named{l.Model, l.Source, at})
		}
	}
	for _, m := range g.ev.Metrics {
		if m.VLLM != nil {
			for _, id := range m.VLLM.Models {
				models = append(models, named{id, m.Line.Source + " (model_name)", m.Line})
			}
		}
	}
	for _, c := range g.ev.K8s.Containers {
		if c.VLLM && c.HasSettings && c.Settings.Model != "" {
			models = append(models, named{c.Settings.Model, c.ArgsLine.Ref(), c.ArgsLine})
		}
	}
	for i := 1; i < len(models); i++ {
		a, b := models[0], models[i]
		if canon(a.model) != canon(b.model) {
			add(DisagreeModel, fmt.Sprintf("%s names the model %s but %s names %s: the inputs may come from different deployments; the diagnosis plans %s",
				a.from, a.model, b.from, b.model, orName(dep.Model)), a.line, b.line)
			break
		}
	}

	if !dep.hasGPU {
		return out
	}
	planned := dep.device
	off := func(total int64) bool {
		if total <= 0 || total == telemetry.Unknown || planned.TotalBytes <= 0 {
			return false
		}
		d := float64(total-planned.TotalBytes) / float64(planned.TotalBytes)
		return d > gpuTotalSlack || d < -gpuTotalSlack
	}
	gpuFrom := dep.GPUSource
	for _, gf := range g.ev.GPUs {
		for _, x := range gf.GPUs {
			// By name, where both name a catalog device: an A100 and an
			// H100 both have 80 GB.
			if sel, err := gpu.Resolve(x.Name); err == nil && !planned.Estimated && planned.MIG == "" && sel.Device.Name != planned.Name && sel.Device.Parent == "" && g.opt.HasGPU {
				add(DisagreeGPU, fmt.Sprintf("%s shows %s, but the plan is for %s (from %s)", gf.Line.Source, x.Name, planned.Name, gpuFrom), gf.Line)
				break
			}
			if off(x.TotalBytes) {
				add(DisagreeGPU, fmt.Sprintf("%s shows %s with %s, but the plan is for %s (%s, from %s)",
					gf.Line.Source, orName(x.Name), gib(x.TotalBytes), planned.Name, gib(planned.TotalBytes), gpuFrom), gf.Line)
				break
			}
		}
	}
	for _, l := range g.ev.Logs {
		if off(l.Report.TotalBytes) {
			add(DisagreeGPU, fmt.Sprintf("%s logged a GPU of %s, but the plan is for %s (%s, from %s)",
				l.Source, gib(l.Report.TotalBytes), planned.Name, gib(planned.TotalBytes), gpuFrom))
		}
	}
	for _, m := range g.ev.Metrics {
		if off(m.GPUTotalBytes) {
			add(DisagreeGPU, fmt.Sprintf("%s reports a GPU of %s, but the plan is for %s (%s, from %s)",
				m.Line.Source, gib(m.GPUTotalBytes), planned.Name, gib(planned.TotalBytes), gpuFrom), m.Line)
		}
	}

	// A measured KV cache larger than the card's budget was measured
	// elsewhere: keep the plan's own numbers, and say so.
	if m := dep.measured; m != nil && m.KVTokens > 0 {
		in, ok := dep.input(dep.Settings)
		if ok {
			in.Measured = nil
			if b, err := memory.Plan(in); err == nil && b.KVBytesPerToken > 0 {
				kv := m.KVTokens * b.KVBytesPerToken
				budget := int64(float64(planned.TotalBytes) * max(m.Utilization, b.Settings.GPUMemoryUtilization))
				if kv+m.Weights > budget {
					add(DisagreeKVCache, fmt.Sprintf("%s measured a KV cache of %s tokens (%s at %s B a token) and %s of weights, more than the %s budget of one %s (%s, from %s): the log comes from another GPU or layout; its figures are not used",
						m.Source, vllm.Thousands(m.KVTokens), gib(kv), vllm.Thousands(b.KVBytesPerToken), gib(m.Weights), gib(budget), planned.Name, gib(planned.TotalBytes), gpuFrom))
					g.dep.measured, g.dep.Measured = nil, ""
				}
			}
		}
	}
	return out
}

func orName(s string) string {
	if s == "" {
		return "an unnamed one"
	}
	return s
}
