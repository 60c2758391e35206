package sim

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// Confidence is how sure a simulated figure is: whether the conditions it
// was simulated under lie inside the training rows' (Fitted), what lies
// outside, and the error band the fit's cross-validation measured on rows
// it had not seen, per figure. It is `confidence` in simulate -o json.
type Confidence struct {
	// Evidence is "fitted" (GPU architecture, model family, quantization
	// path, tensor-parallel size and vLLM version all covered by training
	// rows) or "extrapolated".
	Evidence string `json:"evidence"`
	// Outside names each condition the training rows do not cover.
	Outside []string `json:"outside,omitempty"`
	// The bands, in percent of the figure (±): request and token
	// throughput, TTFT, TPOT and ITL, E2E.
	ThroughputPct float64 `json:"throughput_pct"`
	TTFTPct       float64 `json:"ttft_pct"`
	TPOTPct       float64 `json:"tpot_pct"`
	E2EPct        float64 `json:"e2e_pct"`
	// Source says where the bands come from.
	Source string `json:"source"`
}

// Fitted reports whether every condition is covered.
func (c Confidence) Fitted() bool { return c.Evidence == evidenceFitted }

// Label is the evidence in a few words for a table: "fitted", or
// "extrapolated: <first reason>" with the rest counted.
func (c Confidence) Label() string {
	if c.Fitted() || len(c.Outside) == 0 {
		return c.Evidence
	}
	s := c.Evidence + ": " + c.Outside[0]
	if n := len(c.Outside) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// Summary is every band and the evidence in one line: "throughput ±27%,
// TTFT ±38%, TPOT and ITL ±23%, E2E ±38% (fitted)", or with "extrapolated:"
// and what lies outside.
func (c Confidence) Summary() string {
	ev := c.Evidence
	if len(c.Outside) > 0 {
		ev += ": " + strings.Join(c.Outside, "; ")
	}
	return fmt.Sprintf("throughput ±%.0f%%, TTFT ±%.0f%%, TPOT and ITL ±%.0f%%, E2E ±%.0f%% (%s)", c.ThroughputPct, c.TTFTPct, c.TPOTPct, c.E2EPct, ev)
}

// Band formats a figure's band: "±12%, fitted".
func (c Confidence) Band(pct float64) string {
	return fmt.Sprintf("±%.0f%%, %s", pct, c.Evidence)
}

// The evidence classes are memory's, one vocabulary for plan and simulate.
const (
	evidenceFitted       = memory.EvidenceFitted
	evidenceExtrapolated = memory.EvidenceExtrapolated
)

// conditions are what decides whether a simulation stands on the fit.
type conditions struct {
	// Arch is "sm_80", "sm_90", ... or "amd"; Device the device's name.
	Arch, Device string
	// Families: "dense", "MoE", "MLA", "hybrid" (linear-state layers).
	Families []string
	// Quant are the kernel paths the weights take, "arch/path".
	Quant []string
	TP    int
	// DP is the data-parallel size: engines behind one API server, a MoE
	// model's in lockstep (RunDataParallel).
	DP int
	// EP is set when a MoE model's ranks hold whole experts
	// (--enable-expert-parallel; Roofline.ExpertParallel).
	EP bool
	// APIServers is --api-server-count: the API-server processes.
	APIServers int
	// PP is the pipeline-parallel size: batches in flight (pipeline.go).
	PP int
	// DCP is the decode context parallel size: each rank reads 1/DCP of a
	// request's tokens.
	DCP int
	// Nodes is the nodes the server's GPUs span (memory.Budget.GPUsPerNode):
	// past one, a group of its ranks meets over the network.
	Nodes   int
	Version vllm.Version
	// Host is the API server's host class (hostClass): "slice" for a
	// server of fewer than nodeGPUs GPUs, "node" for a whole node's.
	Host string
	// SmallBatch is set when the run decoded at most smallBatch
	// sequences at a time (unknown, and unset, for a plan alone).
	SmallBatch bool
}

// hostClass is the host class of a server of gpus GPUs (hostShare).
func hostClass(gpus int) string {
	if gpus >= nodeGPUs {
		return "node"
	}
	return "slice"
}

// smallBatch is the most sequences a run may hold at once for its steps
// to count as small batches: a regime of their own, where a step is the
// kernels' and the all-reduce's latencies more than their bandwidth, and
// which the training rows decode only at concurrency 1 and 4 (Qwen3-8B,
// dense, one GPU).
const smallBatch = 8

// key is a family at a tensor-parallel size, as the small-batch coverage
// lists them: "dense at TP 1".
func key(family string, tp int) string { return fmt.Sprintf("%s at TP %d", family, tp) }

func archOf(d gpu.Device) string {
	if d.Vendor == "amd" || d.ComputeCapability == "" {
		return "amd"
	}
	return "sm_" + strings.ReplaceAll(d.ComputeCapability, ".", "")
}

// conditionsOf reads a plan's conditions.
func conditionsOf(b memory.Budget) conditions {
	s := b.Model
	set := b.Settings
	c := conditions{Arch: archOf(b.Device), Device: b.Device.Name, TP: max(set.TensorParallelSize, 1), DP: max(set.DataParallelSize, 1), PP: max(set.PipelineParallelSize, 1), DCP: max(set.DecodeContextParallelSize, 1), APIServers: set.APIServers(), Version: set.Version,
		Host: hostClass(max(set.TensorParallelSize, 1) * max(set.PipelineParallelSize, 1) * max(set.DataParallelSize, 1))}
	if per := b.GPUsPerNode; per > 0 {
		gpus := max(set.TensorParallelSize, 1) * max(set.PipelineParallelSize, 1) * max(set.DataParallelSize, 1)
		c.Nodes = (gpus + per - 1) / per
	}
	fam := map[string]bool{}
	for i := range s.Layers {
		switch s.LayerKind(i).Kind {
		case model.MLA:
			fam["MLA"] = true
		case model.Linear:
			fam["hybrid"] = true
		}
		if s.IsMoELayer(i) {
			fam["MoE"] = true
		}
	}
	if len(fam) == 0 {
		fam["dense"] = true
	}
	c.EP = fam["MoE"] && memory.ExpertShapeFor(s, set, b.Device).ExpertParallel
	for f := range fam {
		c.Families = append(c.Families, f)
	}
	sort.Strings(c.Families)
	q := []string{c.Arch + "/" + quantPathOf(denseQuant(s, b.Settings.Quantization), b.Device).Name}
	if s.MoE != nil && s.MoE.Experts > 0 {
		if e := c.Arch + "/" + expertPathOf(s, b.Settings, b.Device).Name; e != q[0] {
			q = append(q, e)
		}
	}
	c.Quant = q
	return c
}

// coverage is what a set of training rows covers.
type coverage struct {
	Archs, Families, Quant, Hosts []string
	TPs, DPs, APIServers, PPs     []int
	DCPs, Nodes                   []int
	// EP is set when a row runs whole experts a rank.
	EP     bool
	Lo, Hi vllm.Version
	// SmallBatch are the families and TP sizes the rows decode small
	// batches of (key).
	SmallBatch []string
}

// put adds the values s lacks, keeping it sorted.
func put[T cmp.Ordered](s []T, v ...T) []T {
	for _, x := range v {
		if !slices.Contains(s, x) {
			s = append(s, x)
		}
	}
	slices.Sort(s)
	return s
}

// add widens the coverage by one row's conditions.
func (cv *coverage) add(c conditions) {
	cv.Archs = put(cv.Archs, c.Arch)
	cv.Families = put(cv.Families, c.Families...)
	cv.Quant = put(cv.Quant, c.Quant...)
	cv.Hosts = put(cv.Hosts, c.Host)
	cv.TPs = put(cv.TPs, c.TP)
	cv.DPs = put(cv.DPs, c.DP)
	cv.PPs = put(cv.PPs, c.PP)
	cv.DCPs = put(cv.DCPs, c.DCP)
	cv.Nodes = put(cv.Nodes, max(c.Nodes, 1))
	cv.APIServers = put(cv.APIServers, c.APIServers)
	cv.EP = cv.EP || c.EP
	if cv.Lo.IsZero() || c.Version.Compare(cv.Lo) < 0 {
		cv.Lo = c.Version
	}
	if c.Version.Compare(cv.Hi) > 0 {
		cv.Hi = c.Version
	}
	if c.SmallBatch {
		for _, f := range c.Families {
			cv.SmallBatch = put(cv.SmallBatch, key(f, c.TP))
		}
	}
}

// The kinds of condition a run may lie outside the rows by, each what a
// cross-validation fold measures by leaving its rows out
// (TestCrossValidateServing prints the errors of each).
const (
	kindGPU        = "GPU architecture"
	kindFamily     = "model family"
	kindWeights    = "weights path"
	kindTP         = "tensor parallel"
	kindDP         = "data parallel"
	kindEP         = "expert parallel"
	kindAPIServers = "API servers"
	kindPP         = "pipeline parallel"
	kindDCP        = "decode context parallel"
	kindNodes      = "nodes"
	kindHost       = "host class"
	kindVersion    = "vLLM release"
	kindSmallBatch = "small batches"
)

// gap is one condition of a run the coverage lacks: its kind and the
// reason as a report prints it.
type gap struct{ Kind, Text string }

// gaps are the conditions of c the coverage lacks, in a fixed order.
func (cv coverage) gaps(c conditions) []gap {
	var out []gap
	add := func(kind, text string) { out = append(out, gap{kind, text}) }
	if !slices.Contains(cv.Archs, c.Arch) {
		add(kindGPU, fmt.Sprintf("GPU architecture %s (%s): the rows cover %s", c.Arch, c.Device, strings.Join(cv.Archs, ", ")))
	}
	for _, f := range c.Families {
		if !slices.Contains(cv.Families, f) {
			add(kindFamily, fmt.Sprintf("model family %s: the rows cover %s", f, strings.Join(cv.Families, ", ")))
		}
	}
	for _, q := range c.Quant {
		if !slices.Contains(cv.Quant, q) && slices.Contains(cv.Archs, c.Arch) {
			add(kindWeights, fmt.Sprintf("weights path %s: no row runs it", q))
		}
	}
	if !slices.Contains(cv.TPs, c.TP) {
		tps := make([]string, len(cv.TPs))
		for i, t := range cv.TPs {
			tps[i] = strconv.Itoa(t)
		}
		add(kindTP, fmt.Sprintf("tensor parallel %d: the rows run %s", c.TP, strings.Join(tps, ", ")))
	}
	if c.DP > 0 && !slices.Contains(cv.DPs, c.DP) {
		add(kindDP, fmt.Sprintf("data parallel %d: the rows run one engine a server (engines sharing an API server; a MoE model's ranks in lockstep, exchanging tokens in every MoE layer)", c.DP))
	}
	if c.PP > 0 && !slices.Contains(cv.PPs, c.PP) {
		add(kindPP, fmt.Sprintf("pipeline parallel %d: the rows run one stage (batches in flight, each stage's share of a pass and the sends between them are not fitted)", c.PP))
	}
	if c.DCP > 0 && !slices.Contains(cv.DCPs, c.DCP) {
		add(kindDCP, fmt.Sprintf("decode context parallel %d: the rows keep each request's tokens whole on a rank (a rank's 1/%d of them is read; merging the ranks' partial attention is not priced)", c.DCP, c.DCP))
	}
	if c.Nodes > 1 && !slices.Contains(cv.Nodes, c.Nodes) {
		add(kindNodes, fmt.Sprintf("%d nodes: the rows run on one (the ranks that span nodes meet over the network, priced at 400 Gb/s a GPU, not measured)", c.Nodes))
	}
	if c.EP && !cv.EP {
		add(kindEP, "expert parallel: the rows split every expert over the ranks (with --enable-expert-parallel a rank holds whole experts, and a step waits for the busiest)")
	}
	if c.APIServers > 0 && !slices.Contains(cv.APIServers, c.APIServers) {
		add(kindAPIServers, fmt.Sprintf("%d API-server processes: the rows run one (several are priced as one as many times as fast)", c.APIServers))
	}
	if c.Host != "" && !slices.Contains(cv.Hosts, c.Host) {
		add(kindHost, fmt.Sprintf("a %s host's API server: the rows' servers run on %s hosts only", c.Host, strings.Join(cv.Hosts, ", ")))
	}
	if v := c.Version; !v.IsZero() && (v.Compare(cv.Lo) < 0 || v.Compare(cv.Hi) > 0) {
		add(kindVersion, fmt.Sprintf("vLLM %s: the rows run %s–%s (their engine and API server CPU costs, and GEMM shares that give a Hopper prefill layer 1.1–1.3 times its kernels' time)", v, cv.Lo, cv.Hi))
	}
	if k := cv.smallBatchOutside(c); k != "" {
		rows := "no row decodes small batches"
		if len(cv.SmallBatch) > 0 {
			rows = "the rows decode small batches only for " + strings.Join(cv.SmallBatch, ", ")
		}
		add(kindSmallBatch, fmt.Sprintf("at most %d sequences a step, %s: %s (kernel and all-reduce latencies, not bandwidth, set such steps)", smallBatch, k, rows))
	}
	return out
}

// outside names each condition of c the coverage lacks.
func (cv coverage) outside(c conditions) []string {
	var out []string
	for _, g := range cv.gaps(c) {
		out = append(out, g.Text)
	}
	return out
}

// smallBatchOutside is the first family and TP size of c whose small
// batches the coverage lacks, or "".
func (cv coverage) smallBatchOutside(c conditions) string {
	if !c.SmallBatch {
		return ""
	}
	for _, f := range c.Families {
		if k := key(f, c.TP); !slices.Contains(cv.SmallBatch, k) {
			return k
		}
	}
	return ""
}

// unseen reports whether c's GPU architecture or one of its model
// families lies outside the coverage, or its small batches do, or its
// ranks span nodes: the kernels themselves, or what bounds them, change,
// which the cross-validation measures only by leaving a whole
// architecture out.
func (cv coverage) unseen(c conditions) bool {
	if !slices.Contains(cv.Archs, c.Arch) || cv.smallBatchOutside(c) != "" || (c.Nodes > 1 && !slices.Contains(cv.Nodes, c.Nodes)) {
		return true
	}
	for _, f := range c.Families {
		if !slices.Contains(cv.Families, f) {
			return true
		}
	}
	return false
}

// trainingCoverage is what the 15 training rows cover
// (testdata/serving/train.csv, train-more.csv and train-turn5.csv; TestTrainingCoverage
// reads it back from them).
var trainingCoverage = coverage{
	Archs:      []string{"sm_80", "sm_90"},
	Families:   []string{"MoE", "dense"},
	Quant:      []string{"sm_80/bf16", "sm_80/mxfp4 marlin (weight-only, dequantized)", "sm_90/bf16", "sm_90/mxfp4 (upcast in kernel)"},
	Hosts:      []string{"node", "slice"},
	TPs:        []int{1, 2, 8},
	DPs:        []int{1},
	APIServers: []int{1},
	PPs:        []int{1},
	DCPs:       []int{1},
	Nodes:      []int{1},
	Lo:         vllm.MustVersion("0.10.2"),
	Hi:         vllm.MustVersion("0.11.0"),
	SmallBatch: []string{"dense at TP 1"},
}

// errorBand is the ± of each figure, in percent.
type errorBand struct{ Throughput, TTFT, TPOT, E2E float64 }

// The bands come from TestCrossValidateServing: the fit redone with one
// GPU, one model or TP 2 left out (9 folds: Qwen3-235B's is also TP 8's
// and the 8-GPU host's, gpt-oss-120b's also vLLM 0.10.2's), each
// searched by Levenberg-Marquardt (12 iterations, as the fit) from
// constants no fold has seen (cvStart), and the left-out rows simulated
// (mean, median and p99 pooled per figure, the median gap between chunks
// with TPOT). A left-out row whose conditions its fold still covers counts
// toward fittedBand, the others toward extrapolatedBand. A band is the
// 80th percentile of the absolute errors (coverRank at bandConfidence), so
// four figures in five fall inside. unseenBand is for a GPU architecture
// or a model family no row runs, or small batches of a family and TP size
// no row decodes, where the kernels themselves, or what bounds them,
// change: the larger of the extrapolated band and the same statistic of
// the figures whose fold had not seen their architecture or their small
// batches. A band is at least the band of the class inside it. The
// statistics, with the mean absolute errors beside them:
//
//	                 fitted (n)              extrapolated (n)        unseen (n)
//	throughput       19.1%, mean  7.8% (7)   41.4%, mean 25.9% (24)  42.1%, mean 25.5% (17)
//	TTFT             13.5%, mean  8.5% (21)  62.6%, mean 38.3% (72)  57.8%, mean 34.7% (51)
//	TPOT and ITL     29.3%, mean 10.9% (28)  49.0%, mean 30.6% (96)  50.4%, mean 32.5% (68)
//
// Checked fold by fold (each fold's figures against the bands of the
// other folds alone), the bands hold 216 of 248 figures (87%) at a mean
// half-width of 57%: fitted 47 of 56 (84%) at 21%, extrapolated 43 of 56
// (77%) at 53%, unseen 126 of 136 (93%) at 73%. Bands of their own for
// each condition outside (a TP size, a release, the host class, a weights
// path) do not hold: a condition that one or two folds measure has, fold
// by fold, no other fold's errors to stand on, and such bands held 83% of
// the figures at the same width, 70% of the TTFTs. The rows publish no
// E2E: its band is the larger of TTFT's and TPOT's.
var (
	fittedBand       = errorBand{Throughput: 19, TTFT: 14, TPOT: 29, E2E: 29}
	extrapolatedBand = errorBand{Throughput: 41, TTFT: 63, TPOT: 49, E2E: 63}
	unseenBand       = errorBand{Throughput: 42, TTFT: 63, TPOT: 50, E2E: 63}
	bandSource       = "the fit's cross-validation over 15 published runs (one GPU, model or TP size left out)"
)

// ConfidenceOfRun is how sure a simulation of plan b on the built-in
// clock is, given what its run rep showed: a run that never held more
// than smallBatch sequences at once is a small-batch regime, covered only
// where the rows decode one (rep nil: the plan's conditions alone). A
// user's calibration (--calibration, measured steps) changes the clock but
// not the evidence: the bands are the built-in fit's.
func ConfidenceOfRun(b memory.Budget, rep *Report) Confidence {
	cond := conditionsOf(b)
	if rep != nil {
		// An engine's batch: a fleet's MaxRunning is all its engines'.
		batch := rep.MaxRunning
		if rep.MaxEngineRunning > 0 {
			batch = rep.MaxEngineRunning
		}
		cond.SmallBatch = batch > 0 && batch <= smallBatch
	}
	c := confidenceOf(cond)
	if sp := b.Settings.Speculative; sp != nil {
		c = withSpeculation(c, string(sp.Method))
	}
	return c
}

func confidenceOf(cond conditions) Confidence {
	out := trainingCoverage.outside(cond)
	c := Confidence{Evidence: evidenceFitted, Outside: out, Source: bandSource}
	band := fittedBand
	switch {
	case trainingCoverage.unseen(cond):
		c.Evidence, band = evidenceExtrapolated, unseenBand
	case len(out) > 0:
		c.Evidence, band = evidenceExtrapolated, extrapolatedBand
	}
	c.ThroughputPct, c.TTFTPct, c.TPOTPct, c.E2EPct = band.Throughput, band.TTFT, band.TPOT, band.E2E
	return c
}
