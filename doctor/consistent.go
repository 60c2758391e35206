package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"headroom.dev/headroom/vllm"
)

// consistent makes the report one recommendation a user can follow: no
// remedy a dead end of the same report rules out (raising the utilization
// where the memory that ran out lies outside the budget), and, per
// finding, the remedies that keep the context the user asked for before
// those that cut it (a 65,536-token deployment is offered more GPUs
// before 4,416 tokens; memory.Alternatives ranks by how little a change
// moves, not by what the user needs).
func (g *diag) consistent() {
	noRaise := slices.ContainsFunc(g.dead, func(d DeadEnd) bool { return d.Code == DeadRaiseUtilRetry })
	asked := g.askedContext()
	for _, f := range g.findings {
		rs := f.Remedies[:0]
		for _, r := range f.Remedies {
			if noRaise && g.raisesUtilization(r) {
				continue
			}
			rs = append(rs, r)
		}
		if asked > 0 {
			slices.SortStableFunc(rs, func(a, b Remedy) int {
				return boolInt(cutsContext(a, asked)) - boolInt(cutsContext(b, asked))
			})
			g.oneFit(rs, asked)
		}
		f.Remedies = rs
	}
}

// oneFit gives every remedy that cuts the context the one length that
// fits: the base plan's (with what the log measured), where an
// alternative planned on predictions alone named a slightly different
// one (4,416 beside 4,336 tokens in one report).
func (g *diag) oneFit(rs []Remedy, asked int) {
	if g.base == nil {
		return
	}
	fit := g.base.FitLen()
	if fit <= 0 || fit >= asked {
		return
	}
	want := strconv.Itoa(fit)
	for i, r := range rs {
		v, ok := flagValue(r.Args, vllm.FlagMaxModelLen)
		if !ok || v == want || !cutsContext(r, asked) {
			continue
		}
		args := slices.Clone(r.Args)
		for j, a := range args {
			switch {
			case a == v && j > 0 && args[j-1] == "--"+vllm.FlagMaxModelLen:
				args[j] = want
			case a == "--"+vllm.FlagMaxModelLen+"="+v:
				args[j] = "--" + vllm.FlagMaxModelLen + "=" + want
			}
		}
		rs[i].Args, rs[i].Why = args, strings.ReplaceAll(r.Why, v, want)
	}
}

// askedContext is the --max-model-len the user chose: set in the command
// or logged among vLLM's non-default arguments, and not the model's own
// maximum (which is the default); 0 when none was chosen.
func (g *diag) askedContext() int {
	s := g.dep.Settings
	if s.MaxModelLen <= 0 || (g.base != nil && s.MaxModelLen >= g.base.Model.MaxPositions) {
		return 0
	}
	return s.MaxModelLen
}

// cutsContext reports a remedy that serves a shorter context than asked.
func cutsContext(r Remedy, asked int) bool {
	n, ok := flagValue(r.Args, vllm.FlagMaxModelLen)
	if !ok {
		return false
	}
	v, err := strconv.Atoi(n)
	return err == nil && v < asked
}

// raisesUtilization reports a remedy that sets --gpu-memory-utilization
// above the deployment's.
func (g *diag) raisesUtilization(r Remedy) bool {
	n, ok := flagValue(r.Args, vllm.FlagGPUMemoryUtilization)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(n, 64)
	return err == nil && v > g.util()
}

// flagValue is the value of --name in args ("--name v" or "--name=v").
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nonDefault clears from s what vLLM would take anyway, this release's
// defaults on this GPU for this model, so the suggested command names only
// what differs from a bare `vllm serve MODEL` (a start-up log's engine
// config spells every value out).
func (g *diag) nonDefault(s vllm.Settings) vllm.Settings {
	if g.base == nil {
		return s
	}
	b := g.base
	bare := vllm.Settings{Model: s.Model, Env: s.Env, Version: s.Version, Install: s.Install, Extra: s.Extra}
	d := bare.WithDefaults(s.Version, b.Device.Name, b.Device.TotalBytes, b.Model.MaxPositions)
	if s.TensorParallelSize == 1 {
		s.TensorParallelSize = 0
	}
	if s.PipelineParallelSize == 1 {
		s.PipelineParallelSize = 0
	}
	if s.DataParallelSize == 1 {
		s.DataParallelSize = 0
	}
	if s.GPUMemoryUtilization == d.GPUMemoryUtilization {
		s.GPUMemoryUtilization = 0
	}
	if s.MaxNumSeqs == d.MaxNumSeqs {
		s.MaxNumSeqs = 0
	}
	if s.MaxNumBatchedTokens == d.MaxNumBatchedTokens {
		s.MaxNumBatchedTokens = 0
	}
	if s.BlockSize == d.BlockSize {
		s.BlockSize = 0
	}
	if s.MaxCudagraphCaptureSize == d.MaxCudagraphCaptureSize {
		s.MaxCudagraphCaptureSize = 0
	}
	if s.MaxModelLen == b.Model.MaxPositions {
		s.MaxModelLen = 0
	}
	if s.KVCacheDtype == "auto" {
		s.KVCacheDtype = ""
	}
	if auto, err := vllm.ResolveDtype("auto", b.Model.Dtype); s.Dtype == "auto" || (err == nil && s.Dtype == auto) {
		s.Dtype = ""
	}
	return s
}

// planWhat says what the planner lacks to give computed values, naming
// what the evidence did give: a model it could not read (with why, and
// how to give its config), a GPU it does not know, or neither.
func (g *diag) planWhat() string {
	switch {
	case g.dep.Model != "" && !g.dep.hasSpec && g.dep.hasGPU:
		why := "it could not be read"
		if g.dep.specErr != "" {
			why = g.dep.specErr
		}
		return fmt.Sprintf("the model %s is not one headroom can plan (%s): give its config.json with --model ./config.json (with model.safetensors.index.json beside it for exact weights) for values computed by the planner", g.dep.Model, why)
	case g.dep.Model != "" && !g.dep.hasGPU:
		return fmt.Sprintf("give the GPU %s runs on (--gpu H100-80GB) for values computed by the planner", g.dep.Model)
	case g.dep.Model != "":
		why := "it could not be read"
		if g.dep.specErr != "" {
			why = g.dep.specErr
		}
		return fmt.Sprintf("the model %s is not one headroom can plan (%s), and no GPU was named: give its config.json with --model ./config.json and the GPU with --gpu for values computed by the planner", g.dep.Model, why)
	}
	return "give the model and GPU (--gpu H100-80GB -- vllm serve MODEL ...) for values computed by the planner"
}
