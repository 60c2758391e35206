package doctor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/telemetry"
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
	fit, _ := g.base.LargestFit()
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
// config spells every value out). The flags in keep stay: a remedy set
// them, and the change is what the user must see, also where it lands on
// a default (0.95 lowered to 0.92, the default of the release assumed).
func (g *diag) nonDefault(s vllm.Settings, keep map[string]bool) vllm.Settings {
	if g.base == nil {
		return s
	}
	b := g.base
	bare := vllm.Settings{Model: s.Model, Env: s.Env, Version: s.Version, Install: s.Install, Extra: s.Extra}
	d := bare.WithDefaults(s.Version, b.Device.Name, b.Device.TotalBytes, b.Model.MaxPositions)
	drop := func(flag string, isDefault bool) bool { return isDefault && !keep["--"+flag] }
	if drop(vllm.FlagTensorParallelSize, s.TensorParallelSize == 1) {
		s.TensorParallelSize = 0
	}
	if s.PipelineParallelSize == 1 {
		s.PipelineParallelSize = 0
	}
	if s.DataParallelSize == 1 {
		s.DataParallelSize = 0
	}
	if drop(vllm.FlagGPUMemoryUtilization, s.GPUMemoryUtilization == d.GPUMemoryUtilization) {
		s.GPUMemoryUtilization = 0
	}
	if drop(vllm.FlagMaxNumSeqs, s.MaxNumSeqs == d.MaxNumSeqs) {
		s.MaxNumSeqs = 0
	}
	if drop(vllm.FlagMaxNumBatchedTokens, s.MaxNumBatchedTokens == d.MaxNumBatchedTokens) {
		s.MaxNumBatchedTokens = 0
	}
	if s.BlockSize == d.BlockSize {
		s.BlockSize = 0
	}
	if s.MaxCudagraphCaptureSize == d.MaxCudagraphCaptureSize {
		s.MaxCudagraphCaptureSize = 0
	}
	if drop(vllm.FlagMaxModelLen, s.MaxModelLen == b.Model.MaxPositions) {
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
		return fmt.Sprintf("give the GPU %s runs on (--gpu %s) for values computed by the planner", g.dep.Model, g.exampleGPU())
	case g.dep.Model != "":
		why := "it could not be read"
		if g.dep.specErr != "" {
			why = g.dep.specErr
		}
		return fmt.Sprintf("the model %s is not one headroom can plan (%s), and no GPU was named: give its config.json with --model ./config.json and the GPU with --gpu for values computed by the planner", g.dep.Model, why)
	case g.dep.hasGPU:
		return fmt.Sprintf("give the model (-- vllm serve MODEL ...) for values computed by the planner; the GPU is %s (%s, from %s)%s",
			g.dep.GPU, gib(g.dep.GPUTotalBytes), g.dep.GPUSource, g.nameTheCard())
	}
	return fmt.Sprintf("give the model and GPU (--gpu %s -- vllm serve MODEL ...) for values computed by the planner", g.exampleGPU())
}

// cardMatch is how close a catalog GPU's total must come to the total the
// evidence gave to be offered as its name: CUDA and the messages round
// differently, and a driver reserves a little.
const cardMatch = 0.02

// nearestCard is the catalog GPU whose total is nearest total, within
// cardMatch; "" when none is.
func nearestCard(total int64) string {
	best, name := cardMatch, ""
	for _, d := range gpu.Devices() {
		if d.Estimated || d.MIG != "" || total <= 0 {
			continue
		}
		if off := math.Abs(float64(d.TotalBytes-total)) / float64(total); off <= best {
			best, name = off, d.Name
		}
	}
	return name
}

// exampleGPU is the --gpu a message offers as its example: the catalog
// GPU the evidence's total points at, else a common one.
func (g *diag) exampleGPU() string {
	for _, total := range g.evidenceTotals() {
		if n := nearestCard(total); n != "" {
			return n
		}
	}
	return "H100-80GB"
}

// evidenceTotals are the GPU totals the evidence reports: OOM messages,
// start-up logs, nvidia-smi, a metrics exporter.
func (g *diag) evidenceTotals() []int64 {
	var out []int64
	for _, o := range g.ev.OOMs {
		out = append(out, o.OOM.Total)
	}
	for _, l := range g.ev.Logs {
		out = append(out, l.Report.TotalBytes)
	}
	for _, gf := range g.ev.GPUs {
		for _, x := range gf.GPUs {
			if x.TotalBytes != telemetry.Unknown {
				out = append(out, x.TotalBytes)
			}
		}
	}
	for _, m := range g.ev.Metrics {
		out = append(out, m.GPUTotalBytes)
	}
	return out
}

// nameTheCard offers the catalog name of a card the evidence gave only as
// a total: vLLM's defaults depend on the name.
func (g *diag) nameTheCard() string {
	if !strings.HasPrefix(g.dep.GPU, "custom-") {
		return ""
	}
	if n := nearestCard(g.dep.GPUTotalBytes); n != "" {
		return fmt.Sprintf("; if it is the %s, say so with --gpu %s: vLLM's defaults depend on the card", n, n)
	}
	return ""
}
