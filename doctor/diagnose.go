package doctor

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"headroom.dev/headroom/host"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Finding codes: stable strings, the rows of the root-cause matrix.
const (
	CodeWeightsTooLarge = "weights_too_large"
	CodeKVCachePressure = "kv_cache_pressure"
	CodeMaxModelLen     = "max_model_len_too_large"
	CodeUtilizationEdge = "utilization_edge"
	CodeOutsideBudget   = "outside_budget"
	CodeFragmentation   = "fragmentation"
	CodeOtherProcesses  = "other_processes"
	CodeTensorParallel  = "tensor_parallel_misuse"
	CodeK8sScheduling   = "k8s_scheduling"
	CodeVersionDrift    = "version_drift"
)

// Confidence labels and bounds (see the package doc).
const (
	confidenceCap       = 0.99
	levelHigh, levelMed = 0.75, 0.45
	labelHigh, labelMed = "high", "medium"
	labelLow            = "low"
	// maxEvidencePerResult bounds the lines cited per finding.
	maxEvidencePerResult = 8
)

// matrixOrder breaks confidence ties: the order of the root-cause matrix,
// causes that stop vLLM outright first.
var matrixOrder = []string{
	CodeMaxModelLen, CodeWeightsTooLarge, CodeHostMemory, CodeSharedMemory, CodeOtherProcesses, CodeOutsideBudget, CodeKVCachePressure,
	CodeUtilizationEdge, CodeFragmentation, CodeTensorParallel, CodeK8sScheduling, CodeVersionDrift,
}

// Codes are the finding codes, in the order of the root-cause matrix.
func Codes() []string { return slices.Clone(matrixOrder) }

var titles = map[string]string{
	CodeWeightsTooLarge: "The weights (static memory) take most of the GPU",
	CodeKVCachePressure: "Long contexts × concurrency fill the KV cache allocated at start-up",
	CodeMaxModelLen:     "--max-model-len does not fit in the KV cache",
	CodeUtilizationEdge: "--gpu-memory-utilization leaves too little outside vLLM's budget",
	CodeOutsideBudget:   "Memory outside vLLM's budget (CUDA graphs, the sampler, a step's peak) ran past the card",
	CodeFragmentation:   "Allocator fragmentation: memory reserved but unallocated",
	CodeOtherProcesses:  "Another process holds memory on the GPU",
	CodeTensorParallel:  "Tensor parallelism is misconfigured",
	CodeK8sScheduling:   "Kubernetes keeps vLLM from starting or serving (scheduling, probes, restarts, GPU limits)",
	CodeVersionDrift:    "The vLLM version changed how memory is budgeted",
	CodeHostMemory:      "The pod ran out of host memory: OOMKilled by its memory limit, not a CUDA OOM",
	CodeSharedMemory:    "/dev/shm is too small for vLLM's message queues, NCCL or the offloaded KV cache",
}

// Remedy actions.
const (
	ActionSetFlag      = "set_flag"
	ActionSetEnv       = "set_env"
	ActionEditManifest = "edit_manifest"
	ActionHardware     = "change_hardware"
	ActionSplitPools   = "split_pools"
	ActionFreeGPU      = "free_the_gpu"
	ActionPinVersion   = "pin_version"
	// ActionGiveInput asks for evidence the values need (a request log,
	// the model or GPU, the crashed container's log): Why says which and
	// how, Args holds the command that gathers it when there is one.
	ActionGiveInput = "give_input"
	// ActionAdvice is a step with nothing to paste (keep a setting, an
	// order of changes); Args is empty.
	ActionAdvice = "advice"
)

// Finding is one cause, with its confidence, evidence and remedies.
type Finding struct {
	Code  string `json:"code"`
	Title string `json:"title"`
	// Confidence is 1 − Π(1 − wᵢ) over the finding's signals (see the
	// package doc); Level is its label.
	Confidence float64 `json:"confidence"`
	Level      string  `json:"confidence_level"`
	// Reasons are the signals in words, strongest first.
	Reasons  []string `json:"reasons"`
	Evidence []Line   `json:"evidence"`
	// Remedies are ranked, most direct first.
	Remedies []Remedy `json:"remedies"`
	// Predicted is set when every signal of the finding is the planner's
	// prediction for the settings: nothing in the evidence shows it
	// happened.
	Predicted bool `json:"predicted,omitempty"`

	weights []float64
	// seen is set once a signal that is not a prediction is added.
	seen bool
}

// Remedy is one change to make.
type Remedy struct {
	Action string `json:"action"`
	// Args are what to paste: vLLM flags ("--max-num-seqs", "64"),
	// environment assignments, manifest fields, a GPU.
	Args []string `json:"args"`
	Why  string   `json:"why"`

	// alt marks an alternative to the finding's answer (a trade-off the
	// user chooses), left out of the suggested command.
	alt bool
}

// Paste is the remedy as a user pastes it: flags quoted for a shell,
// assignments as an export line, manifest fields as "field: value" (a
// field without a value alone); other actions' args as they are.
func (r Remedy) Paste() string {
	switch r.Action {
	case ActionSetFlag:
		return vllm.ShellJoin(r.Args)
	case ActionSetEnv:
		return "export " + strings.Join(r.Args, " ")
	case ActionEditManifest:
		var parts []string
		for i := 0; i < len(r.Args); i += 2 {
			if i+1 < len(r.Args) {
				parts = append(parts, r.Args[i]+": "+r.Args[i+1])
			} else {
				parts = append(parts, r.Args[i])
			}
		}
		return strings.Join(parts, ", ")
	}
	return strings.Join(r.Args, " ")
}

// DeadEnd is a fix the evidence invites that will not work.
type DeadEnd struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Diagnosis is doctor's answer.
type Diagnosis struct {
	// Findings are ordered most likely first.
	Findings   []Finding  `json:"findings"`
	DeadEnds   []DeadEnd  `json:"dead_ends"`
	Memory     Memory     `json:"memory"`
	Deployment Deployment `json:"deployment"`
	Inputs     []*Input   `json:"inputs"`
	// Command is the deployment's command with the flag remedies of the
	// findings of medium or high confidence applied.
	Command string `json:"suggested_command,omitempty"`
	// CommandWhen says when the suggested command applies, where not at
	// once: after the GPU is freed, or for what the planner predicts
	// beside a cause the command does not answer (an OOMKill).
	CommandWhen string   `json:"suggested_command_when,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	// Disagreements are inputs that contradict each other or the flags
	// (another model, another GPU): said before the findings, as the
	// findings rest on them.
	Disagreements []Disagreement `json:"disagreements"`
}

// Healthy reports whether nothing is wrong.
func (d Diagnosis) Healthy() bool { return len(d.Findings) == 0 }

// Memory holds the numbers read from the evidence and the plan computed
// for the deployment. Bytes are int64.
type Memory struct {
	OOM     *OOMFacts             `json:"oom,omitempty"`
	Startup *vllm.StartupReport   `json:"startup,omitempty"`
	GPUs    []telemetry.GPU       `json:"gpus,omitempty"`
	Metrics *telemetry.VLLMSample `json:"metrics,omitempty"`
	// Preemptions and MaxKVUsage are the highest any input gave (a
	// /metrics counter, the engine's log); null where none gave one.
	Preemptions *float64 `json:"preemptions"`
	MaxKVUsage  *float64 `json:"max_kv_cache_usage"`
	// StartupKVTokens is the KV cache in tokens of the start-up log: the
	// "GPU KV cache size" it logged (StartupKVTokensFrom "log"), else
	// derived by the planner from the logged GiB and the page size
	// ("derived").
	StartupKVTokens     int64           `json:"startup_kv_cache_tokens,omitempty"`
	StartupKVTokensFrom string          `json:"startup_kv_cache_tokens_from,omitempty"`
	Traffic             *TrafficSummary `json:"traffic,omitempty"`
	Plan                *PlanSummary    `json:"plan,omitempty"`
	Recommended         *PlanSummary    `json:"recommended,omitempty"`
	// Host is the host plan of the deployment (package host), when it is
	// planned: what the pod holds beside the GPUs, term by term.
	Host *host.Plan `json:"host,omitempty"`
}

// TrafficSummary is the request logs' distribution.
type TrafficSummary struct {
	Requests int64            `json:"requests"`
	Input    traffic.Summary  `json:"input_tokens"`
	Output   traffic.Summary  `json:"output_tokens"`
	Total    traffic.Summary  `json:"total_tokens"`
	Buckets  []traffic.Bucket `json:"buckets"`
	Surges   int              `json:"surging_windows"`
}

// PlanSummary is a memory plan's figures per GPU.
type PlanSummary struct {
	Utilization     float64          `json:"gpu_memory_utilization"`
	MaxModelLen     int              `json:"max_model_len"`
	MaxNumSeqs      int              `json:"max_num_seqs"`
	TotalBytes      int64            `json:"total_bytes"`
	RequestedBytes  int64            `json:"requested_bytes"`
	WeightsBytes    int64            `json:"weights_bytes"`
	ActivationBytes int64            `json:"activation_bytes"`
	NonTorchBytes   int64            `json:"non_torch_bytes"`
	CUDAGraphBytes  int64            `json:"cudagraph_bytes"`
	KVCacheBytes    int64            `json:"kv_cache_bytes"`
	KVBytesPerToken int64            `json:"kv_bytes_per_token"`
	KVTokens        int64            `json:"kv_cache_tokens"`
	MaxConcurrency  float64          `json:"max_concurrency"`
	MaxFitLen       int              `json:"max_fit_model_len"`
	Fits            bool             `json:"fits"`
	Problems        []memory.Finding `json:"problems,omitempty"`
	Warnings        []memory.Finding `json:"warnings,omitempty"`
	// Sources say, per number above, where it comes from: SourceLog,
	// SourceMetrics, SourceDerived or SourcePlan (keyed as in
	// memory.Budget, so the longest context is "max_fit_len"); numbers
	// not listed are settings or follow from these.
	Sources memory.Origins `json:"sources"`
}

// Where a number of a plan summary comes from.
const (
	// SourceLog is a number vLLM logged at start-up.
	SourceLog = "log"
	// SourceMetrics is a number vLLM's /metrics gave: the KV cache of
	// vllm:cache_config_info (num_gpu_blocks × block_size).
	SourceMetrics = "metrics"
	// SourceDerived is computed from logged numbers (a part the log did
	// not give, as what the measured non-KV memory leaves; tokens from
	// the logged GiB and the page size).
	SourceDerived = "derived"
	// SourcePlan is the planner's prediction, where the evidence has no
	// number.
	SourcePlan = "plan"
)

// sources are a budget's origins as the report names them; measured is
// what a measured number came from (SourceLog or SourceMetrics).
func sources(o memory.Origins, measured string) memory.Origins {
	source := func(origin string) string {
		switch origin {
		case memory.OriginMeasured:
			return measured
		case memory.OriginDerived:
			return SourceDerived
		}
		return SourcePlan
	}
	return memory.Origins{Weights: source(o.Weights), Activation: source(o.Activation), NonTorch: source(o.NonTorch),
		CUDAGraph: source(o.CUDAGraph), KVCache: source(o.KVCache), KVTokens: source(o.KVTokens), MaxFitLen: source(o.MaxFitLen)}
}

func planSummary(b memory.Budget, measured string) *PlanSummary {
	p := b.PerGPU
	return &PlanSummary{Sources: sources(b.Origins, measured),
		Utilization: b.Settings.GPUMemoryUtilization, MaxModelLen: b.MaxModelLen, MaxNumSeqs: b.Settings.MaxNumSeqs,
		TotalBytes: p.Total, RequestedBytes: p.Requested, WeightsBytes: p.Weights, ActivationBytes: p.Activation,
		NonTorchBytes: p.NonTorch, CUDAGraphBytes: p.CUDAGraph, KVCacheBytes: p.KVCache, KVBytesPerToken: b.KVBytesPerToken,
		KVTokens: b.KVTokens, MaxConcurrency: math.Round(b.MaxConcurrency*100) / 100, MaxFitLen: b.MaxFitLen, Fits: b.Fits,
		Problems: b.Problems, Warnings: b.Warnings}
}

// diag is one diagnosis in progress.
type diag struct {
	ev       *Evidence
	opt      Options
	dep      Deployment
	in       memory.Input
	base     *memory.Budget
	rec      *memory.Recommendation
	typical  int // typical context for max-num-seqs (traffic p90), 0 = Recommend's default
	findings map[string]*Finding
	dead     []DeadEnd
	notes    []string
	disagree []Disagreement
	// mustFree says, when other processes leave the model no room, that
	// the suggested command applies once they are gone.
	mustFree string
}

// Diagnose turns evidence into findings, most likely first.
func Diagnose(ev *Evidence, opt Options) Diagnosis {
	if opt.Policy == "" {
		opt.Policy = memory.PolicyHeadroom
	}
	g := &diag{ev: ev, opt: opt, findings: map[string]*Finding{}}
	g.dep, g.notes = resolve(ev, opt)
	g.disagree = g.disagreements()
	if ev.Traffic != nil && ev.Traffic.Requests() > 0 {
		g.typical = int(ev.Traffic.Total().Quantile(0.90))
	}
	if in, ok := g.dep.input(g.dep.Settings); ok {
		g.in = in
		if b, err := memory.Plan(in); err == nil {
			g.base = &b
			if r, err := memory.Recommend(in, memory.Options{Policy: opt.Policy, TypicalContext: g.typical}); err == nil {
				g.rec = &r
			}
		} else {
			g.notes = append(g.notes, "the planner cannot plan this deployment: "+err.Error())
		}
	}
	g.rules()
	g.remedies()
	g.deadEnds()
	g.consistent()

	out := Diagnosis{Deployment: g.dep, Inputs: ev.Inputs, Notes: g.notes, DeadEnds: g.dead, Findings: []Finding{},
		Disagreements: g.disagree}
	if out.Disagreements == nil {
		out.Disagreements = []Disagreement{}
	}
	if out.DeadEnds == nil {
		out.DeadEnds = []DeadEnd{}
	}
	for _, f := range g.findings {
		f.Confidence = combine(f.weights)
		f.Level = level(f.Confidence)
		if len(f.Evidence) > maxEvidencePerResult {
			f.Evidence = f.Evidence[:maxEvidencePerResult]
		}
		if f.Remedies == nil {
			f.Remedies = []Remedy{}
		}
		f.Predicted = !f.seen
		out.Findings = append(out.Findings, *f)
	}
	sort.SliceStable(out.Findings, func(i, j int) bool {
		a, b := out.Findings[i], out.Findings[j]
		if a.Confidence != b.Confidence {
			return a.Confidence > b.Confidence
		}
		return slices.Index(matrixOrder, a.Code) < slices.Index(matrixOrder, b.Code)
	})
	out.Memory = g.memory()
	var from []Finding
	out.Command, from = g.command(out.Findings)
	if out.Command != "" {
		out.CommandWhen = g.commandWhen(out.Findings, from)
	}
	return out
}

// combine is 1 − Π(1 − wᵢ), capped and rounded to two decimals.
func combine(ws []float64) float64 {
	miss := 1.0
	for _, w := range ws {
		miss *= 1 - math.Min(math.Max(w, 0), 1)
	}
	return math.Round(math.Min(1-miss, confidenceCap)*100) / 100
}

func level(c float64) string {
	switch {
	case c >= levelHigh:
		return labelHigh
	case c >= levelMed:
		return labelMed
	}
	return labelLow
}

// signal adds one piece of evidence for a cause.
func (g *diag) signal(code string, w float64, reason string, lines ...Line) {
	g.add(code, w, reason, lines...).seen = true
}

// predict adds a prediction of the planner for the settings in use: a
// finding made of predictions alone is Predicted.
func (g *diag) predict(code string, w float64, reason string, lines ...Line) {
	g.add(code, w, reason, lines...)
}

func (g *diag) add(code string, w float64, reason string, lines ...Line) *Finding {
	f := g.findings[code]
	if f == nil {
		f = &Finding{Code: code, Title: titles[code], Evidence: []Line{}}
		g.findings[code] = f
	}
	// Keep the reasons strongest first. The same reason twice (a CUDA
	// error and the exception it caused, both naming one OOM) is one
	// piece of evidence: its lines are added, not its weight.
	if !slices.Contains(f.Reasons, reason) {
		i := 0
		for i < len(f.weights) && f.weights[i] >= w {
			i++
		}
		f.weights = slices.Insert(f.weights, i, w)
		f.Reasons = slices.Insert(f.Reasons, i, reason)
	}
	for _, l := range lines {
		if l.zero() || slices.Contains(f.Evidence, l) {
			continue
		}
		f.Evidence = append(f.Evidence, l)
	}
	return f
}

func (g *diag) has(code string) bool { return g.findings[code] != nil }

func (g *diag) memory() Memory {
	var m Memory
	if len(g.ev.OOMs) > 0 {
		o := g.ev.OOMs[0]
		m.OOM = &o
	}
	for _, l := range g.ev.Logs {
		if l.Report.Profiled || l.Report.WeightsBytes > 0 || len(l.Report.Errors) > 0 {
			r := l.Report
			m.Startup = &r
			break
		}
	}
	if s := m.Startup; s != nil {
		switch {
		case s.KVTokens > 0:
			m.StartupKVTokens, m.StartupKVTokensFrom = s.KVTokens, SourceLog
		case s.NumGPUBlocks > 0:
			// V0's "# GPU blocks: N", in tokens of the block size it ran with.
			for _, l := range g.ev.Logs {
				if l.Report.NumGPUBlocks == s.NumGPUBlocks {
					m.StartupKVTokens, m.StartupKVTokensFrom = s.NumGPUBlocks*int64(logBlockSize(l, g.dep.Settings)), SourceLog
					break
				}
			}
		case s.AvailableKVBytes > 0 && g.base != nil && g.dep.measured != nil:
			m.StartupKVTokens, m.StartupKVTokensFrom = g.base.TokensIn(s.AvailableKVBytes), SourceDerived
		}
	}
	for _, gf := range g.ev.GPUs {
		if len(gf.GPUs) > 0 {
			m.GPUs = gf.GPUs
			break
		}
	}
	highest := func(p **float64, v float64) {
		if *p == nil || v > **p {
			*p = &v
		}
	}
	for _, mf := range g.ev.Metrics {
		if s := mf.VLLM; s != nil {
			m.Metrics = s
			if s.Has(vllm.MetricPreemptions) {
				highest(&m.Preemptions, s.PreemptionsTotal)
			}
			if s.Has(vllm.MetricKVCacheUsage) {
				highest(&m.MaxKVUsage, s.KVCacheUsage)
			}
		}
	}
	for _, l := range g.ev.Logs {
		// A log counts preemptions by their warnings and gives the KV
		// usage in its statistics lines: none of either is no figure.
		if !l.PreemptionLine.zero() {
			highest(&m.Preemptions, float64(l.Preemptions))
		}
		if !l.KVUsageLine.zero() {
			highest(&m.MaxKVUsage, l.MaxKVUsage)
		}
	}
	if p := g.ev.Traffic; p != nil && p.Requests() > 0 {
		t := &TrafficSummary{Requests: p.Requests(), Input: p.Input().Summary(), Output: p.Output().Summary(),
			Total: p.Total().Summary(), Buckets: p.Buckets()}
		for _, w := range p.Windows().Windows {
			if w.Surge {
				t.Surges++
			}
		}
		m.Traffic = t
	}
	if g.base != nil {
		m.Plan = planSummary(*g.base, g.dep.measuredKind())
	}
	if g.rec != nil && g.rec.MaxModelLen > 0 {
		m.Recommended = planSummary(g.rec.Budget, g.dep.measuredKind())
	}
	if hp, ok := g.hostPlan(); ok {
		m.Host = &hp
	}
	return m
}

// command applies the first flag remedy of each finding of medium or
// high confidence to the deployment's settings, most likely first; from
// are the findings whose remedies it applies.
func (g *diag) command(fs []Finding) (cmd string, from []Finding) {
	if g.dep.Settings.Model == "" {
		return "", nil
	}
	base := g.dep.Settings.Args()
	var extra []string
	seen := map[string]bool{}
	for _, f := range fs {
		// The host memory's answer is the pod's limit; its flag remedy
		// (offload less) is an alternative, not the command to run.
		if f.Confidence < levelMed || f.Code == CodeHostMemory {
			continue
		}
		for _, r := range f.Remedies {
			if r.Action != ActionSetFlag || len(r.Args) == 0 || r.alt {
				continue
			}
			// Only the finding's first flag remedy, and only flags no
			// likelier finding set.
			if !seen[r.Args[0]] {
				for _, a := range r.Args {
					if strings.HasPrefix(a, "--") {
						seen[a] = true
					}
				}
				extra = append(extra, r.Args...)
				from = append(from, f)
			}
			break
		}
	}
	if len(extra) == 0 {
		return "", nil
	}
	set, err := vllm.ParseFlags(append(base, extra...))
	if err != nil {
		return "", nil
	}
	// Each remedy was planned alone; together they must still fit: a
	// context computed at one utilization shrinks with a lower one.
	if all, err := vllm.ParseFlags(append(g.baseArgs(), extra...)); err == nil && seen["--max-model-len"] && set.MaxModelLen > 0 {
		if nb, ok := g.with(func(s *vllm.Settings) { *s = withVersion(all, s) }); ok {
			// The length plan would choose there: one a first start with a
			// cold compile cache holds too (memory.Budget.LargestFit).
			if fit, _ := nb.LargestFit(); fit > 0 && fit < set.MaxModelLen {
				set.MaxModelLen = fit
			}
		}
	}
	set.Model, set.Env = g.dep.Settings.Model, g.dep.Settings.Env
	set.Version = g.dep.Settings.Version
	return g.nonDefault(set, seen).CommandLine(), from
}

// commandWhen says when the suggested command applies, where not at once:
// after the other processes leave a card the model does not fit beside
// them, or, where it answers only what the planner predicts, beside a
// likelier cause it does not answer (an OOMKill is the memory limit's).
func (g *diag) commandWhen(fs, from []Finding) string {
	if g.mustFree != "" {
		return g.mustFree
	}
	var predicted []string
	for _, f := range from {
		if !f.Predicted {
			return ""
		}
		predicted = append(predicted, f.Code)
	}
	if len(predicted) == 0 || len(fs) == 0 {
		return ""
	}
	lead := fs[0]
	what := fmt.Sprintf("for what the planner predicts at these settings (%s), which nothing in the evidence shows yet", strings.Join(predicted, ", "))
	if slices.ContainsFunc(from, func(f Finding) bool { return f.Code == lead.Code }) {
		return what
	}
	for _, r := range lead.Remedies {
		if p := r.Paste(); p != "" {
			return fmt.Sprintf("%s; %s's fix comes first: %s", what, lead.Code, p)
		}
	}
	return fmt.Sprintf("%s; %s comes first", what, lead.Code)
}

// baseArgs are the planned settings as flags, defaults included.
func (g *diag) baseArgs() []string {
	if g.base == nil {
		return nil
	}
	return g.base.Settings.Args()
}

// withVersion is set with what parsed flags do not carry (the release,
// the environment, the model) taken from cur.
func withVersion(set vllm.Settings, cur *vllm.Settings) vllm.Settings {
	set.Version, set.Env, set.Model = cur.Version, cur.Env, cur.Model
	return set
}

// gib renders bytes as vLLM logs them.
func gib(b int64) string { return memory.GiB(b) }
