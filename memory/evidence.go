package memory

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"headroom.dev/headroom/vllm"
)

// How sure a planned number is.
const (
	// EvidenceMeasured is a number a real launch logged.
	EvidenceMeasured = "measured"
	// EvidenceFitted is a prediction whose mechanism's constants were
	// fitted on start-ups of this version range and kind (see
	// Term.CalibratedOn). The simulator's figures use the same word for
	// the same meaning (sim.Confidence).
	EvidenceFitted = "fitted"
	// EvidenceExtrapolated is a prediction outside what the calibration
	// start-ups cover; Term.Why says what is missing.
	EvidenceExtrapolated = "extrapolated"
)

// Term says how sure one planned part of the per-GPU budget is.
type Term struct {
	// Term is the part, named as in Parts' JSON (weights_bytes, ...).
	Term string `json:"term"`
	// Class is EvidenceMeasured, EvidenceFitted or EvidenceExtrapolated.
	Class string `json:"class"`
	// Mechanism names the code path of vLLM the number models.
	Mechanism string `json:"mechanism"`
	// CalibratedOn names the start-ups that check the mechanism: release,
	// GPU, TP size and model families.
	CalibratedOn string `json:"calibrated_on,omitempty"`
	// Why says what the calibration does not cover, when extrapolated.
	Why string `json:"why,omitempty"`
	// UncertaintyBytes is ± what the part may be off: the largest
	// residual of the calibration rows when calibrated, the spread of what
	// the data allow when extrapolated, 0 when measured.
	UncertaintyBytes int64 `json:"uncertainty_bytes"`
}

// Band is a range of KV-cache tokens the plan stands behind.
type Band struct {
	Low  int64 `json:"low"`
	High int64 `json:"high"`
	// Basis says where the width comes from.
	Basis string `json:"basis"`
}

// calibrationSet is a group of start-ups the planner was checked on.
type calibrationSet struct {
	name     string
	release  vllm.Version
	sampler  vllm.SamplerPath
	devices  []string
	tps      []int
	families []string // model_type of the models
}

// calibrationSets are the start-ups behind the constants of this package
// (testdata/README.md names their sources).
var calibrationSets = []calibrationSet{
	{name: "57 vLLM 0.19.0 start-ups on H100-80GB", release: vllm.Version{Major: 0, Minor: 19}, sampler: vllm.SamplerTriton,
		devices: []string{"H100-80GB"}, tps: []int{1, 2, 4},
		families: []string{"deepseek_v2", "gemma", "gemma2", "gemma3", "granite", "kimi_vl", "llama", "llava_next", "mistral3", "mixtral", "qwen2", "qwen3"}},
	{name: "3 vLLM 0.10.1 start-ups of Qwen2-7B at TP 2 on A100", release: vllm.Version{Major: 0, Minor: 10, Patch: 1}, sampler: vllm.SamplerFlashInfer,
		devices: []string{"A100-80GB", "A100-40GB"}, tps: []int{2}, families: []string{"qwen2"}},
	{name: "Qwen3-14B's logged activation on vLLM 0.16.0 (5.64 GiB), H100", release: vllm.Version{Major: 0, Minor: 16}, sampler: vllm.SamplerSort,
		devices: []string{"H100-80GB"}, tps: []int{1}, families: []string{"qwen3"}},
	{name: "Qwen3-14B's logged activation on vLLM 0.17.0 (2.23 GiB), H100", release: vllm.Version{Major: 0, Minor: 17}, sampler: vllm.SamplerTriton,
		devices: []string{"H100-80GB"}, tps: []int{1}, families: []string{"qwen3"}},
}

// forwardFamilies are the families of the forward-bound rows hiddenBuffers
// is fitted on (TestForwardFit).
var forwardFamilies = []string{"llama", "granite"}

// Uncertainties of calibrated parts: the largest residuals of the 0.19.0
// rows (TestCalibrationResiduals checks each against them).
const (
	// weightsErr: Kimi-VL at TP 2 loads 1.29% more than planned.
	weightsErr = 0.013
	// weightsUncoveredErr: a family without start-ups, counted from its
	// architecture (llm-d's study of the same counting: 0.89% mean).
	weightsUncoveredErr = 0.03
	// activationErr: the sampler-bound rows leave 28–39 MiB against the
	// fitted 36; the MoE rows are held to 0.05 GiB.
	activationErr = 0.05
	// activationExtrapolatedErr: a path or family no start-up checked.
	activationExtrapolatedErr = 0.10
	// graphErr: Gemma-3-27B's pool is 0.38 GiB below the plan.
	graphErr = 0.38
	// kvResidualErr: the largest miss of the KV cache itself over the
	// 0.19.0 rows and the 0.10.1 rows (Granite-3.1-2B: 0.21 GiB, and 0.01
	// for the log's two decimals), where the parts' errors partly cancel
	// (TestKVResidual). A plan whose parts are all calibrated stands behind
	// ± this; each extrapolated part adds its own uncertainty.
	kvResidualErr = 0.22
	// coldStartErr is how much more than the mechanism a one-GPU worker's
	// start has measured beside its weights and KV cache when it compiled
	// from scratch: a first start with a cold torch.compile cache (every
	// new pod, unless ~/.cache/vllm is on a volume), by reports, none from
	// vLLM's code. A start-up variance, not a mechanism: it widens the low
	// side of the band and is named (TestStartups028):
	//   - vLLM 0.28.0, one L4, Qwen2.5-7B: 2.20 GiB beside weights and KV
	//     against 0.55 planned (+1.65); Qwen2.5-14B at PP 2 (TP 1 stages):
	//     +1.16; Qwen3-14B on one L40S: +1.18 (testdata
	//     startups-0.28-l4-l40s.csv rows 101, 106, 115);
	//   - the same lab on vLLM 0.27.1 (features rows 203–207): the draft
	//     arms at k = 3 and 5, which followed k = 1 with the same models,
	//     leave what the mechanism plans (their KV tokens within 0.3% of
	//     the plan's, TestDraftModelL4); the first start of each
	//     configuration leaves 1.3–1.65 GiB more;
	//   - an 8B AWQ with an EAGLE-3 head on an RTX 5070 Ti, vLLM 0.31.0: 4.34
	//     GiB of KV cold, 5.47 warm (+1.13);
	//   - a report of 3.53 against 6.03 GiB of KV on one card, cold against
	//     warm (+2.5; model and release not given, so not the bound).
	// The calibration start-ups of vLLM 0.19.0 on H100 (one GPU) show none
	// (non-torch 0.24–0.26 GiB logged), nor do the TP 2 and 4 start-ups of
	// the 0.28.0 lab beyond its PCIe figure: it is taken for one-GPU
	// workers (TP 1, also pipeline stages) that compile (not
	// --enforce-eager), at the largest of the held reports.
	coldStartErr = 1.65
)

// evidence classifies the per-GPU worker's parts and sets the KV band.
func (b *Budget) evidence(run profileRun, nt nonTorchEstimate, gpusPerNode int) {
	s, set, p := b.Model, b.Settings, b.PerGPU
	family := s.ModelType
	inFamily := func(c calibrationSet) bool {
		return slices.Contains(c.families, family) || slices.Contains(c.families, s.TextModelType)
	}
	var terms []Term

	// Weights: the architecture count per rank (or the checkpoint's bytes).
	w := Term{Term: "weights_bytes", Mechanism: "parameters per rank from the architecture (tensor-parallel shards, replicated norms, quantized storage), scaled to the checkpoint's bytes when known"}
	if c, ok := findSet(func(c calibrationSet) bool { return inFamily(c) }); ok {
		w.Class, w.CalibratedOn = EvidenceFitted, fmt.Sprintf("%s (family %s); loading does not depend on the release", c.name, family)
		w.UncertaintyBytes = int64(weightsErr * float64(p.Weights))
	} else {
		w.Class, w.Why = EvidenceExtrapolated, fmt.Sprintf("no start-up of the %s family in the calibration set; counted from its architecture", family)
		w.UncertaintyBytes = int64(weightsUncoveredErr * float64(p.Weights))
	}
	terms = append(terms, w)

	// Activation: the profile run's peak.
	a := Term{Term: "activation_bytes", Mechanism: activationMechanism(b, run)}
	forwardBound := b.activationForwardBound
	var whys []string
	c, ok := findSet(func(c calibrationSet) bool {
		if forwardBound {
			// hiddenBuffers is fitted on Llama's and Granite's rows.
			return !run.runnerV2 && c.release.Minor == 19 && sameProfileRange(c.release, set.Version, b.moe()) &&
				(slices.Contains(forwardFamilies, family) || slices.Contains(forwardFamilies, s.TextModelType))
		}
		return c.sampler == run.sampler && !run.runnerV2 && sameProfileRange(c.release, set.Version, b.moe()) && inFamily(c)
	})
	switch {
	case ok && forwardBound:
		a.Class, a.CalibratedOn = EvidenceFitted, fmt.Sprintf("%s (family %s, whose forward-bound start-ups the buffers are fitted on)", c.name, family)
		a.UncertaintyBytes = gibs(activationErr)
	case ok:
		a.Class, a.CalibratedOn = EvidenceFitted, fmt.Sprintf("%s (family %s); the sampler run does not shrink with TP (logits are all-gathered) and depends on the GPU only through the SM count", c.name, family)
		a.UncertaintyBytes = gibs(activationErr)
	default:
		a.Class = EvidenceExtrapolated
		switch {
		case run.runnerV2:
			whys = append(whys, "Model Runner V2's profile run is unmeasured: its dummy sampler holds a float32 copy of the logits in some builds and none in others, and the forward pass it then leaves as the peak is fitted on V1 start-ups")
		case forwardBound:
			whys = append(whys, "the forward pass sets the peak, and its buffers are fitted on Llama and Granite start-ups of vLLM 0.19.0 only")
		default:
			if _, found := findSet(func(c calibrationSet) bool {
				return c.sampler == run.sampler && sameProfileRange(c.release, set.Version, b.moe())
			}); !found {
				whys = append(whys, fmt.Sprintf("no start-up of vLLM %s's sampler path (%s) in this range of releases", set.Version, run.sampler))
			}
		}
		if _, found := findSet(inFamily); !found {
			whys = append(whys, fmt.Sprintf("no start-up of the %s family", family))
		}
		if len(whys) == 0 {
			whys = append(whys, fmt.Sprintf("the %s family has no start-up of this release range", family))
		}
		a.Why = strings.Join(whys, "; ")
		a.UncertaintyBytes = gibs(activationErr) + int64(activationExtrapolatedErr*float64(p.Activation))
		if run.runnerV2 && !forwardBound {
			// The two V2 builds differ by the float32 copy.
			rows := math.Min(float64(set.MaxNumSeqs), float64(set.MaxNumBatchedTokens))
			a.UncertaintyBytes = gibs(activationErr) + int64(rows*float64(s.Vocab)*float32Copy)
		}
	}
	terms = append(terms, a)

	// Non-torch memory.
	n := Term{Term: "non_torch_bytes", CalibratedOn: nt.covers, UncertaintyBytes: nt.uncertainty, Why: nt.why}
	n.Mechanism = "cuBLAS and attention-backend workspaces"
	if set.TensorParallelSize > 1 {
		n.Mechanism += fmt.Sprintf(", NCCL and custom all-reduce buffers of a TP %d group over %s", set.TensorParallelSize, linkOf(b.Device, set.TensorParallelSize, gpusPerNode))
	}
	n.Class = EvidenceExtrapolated
	if nt.calibrated {
		n.Class = EvidenceFitted
	}
	terms = append(terms, n)

	// CUDA graphs.
	g := Term{Term: "cudagraph_bytes", Mechanism: "the CUDA-graph pool captured after the KV cache: a base plus a per-layer share that grows with the width each rank holds and the capture size"}
	switch {
	case vllm.CUDAGraphMode(set) == vllm.GraphModeNone:
		g.Class, g.Mechanism = EvidenceFitted, "--enforce-eager or cudagraph_mode NONE: no CUDA graphs"
	case set.Version.Major == 0 && set.Version.Minor == 19 && b.Device.Name == "H100-80GB":
		g.Class, g.CalibratedOn = EvidenceFitted, "57 vLLM 0.19.0 start-ups on H100-80GB (CUDA graph pool memory, actual), capture size 512"
		g.UncertaintyBytes = gibs(graphErr)
	default:
		g.Class = EvidenceExtrapolated
		g.Why = fmt.Sprintf("graph pools are measured on vLLM 0.19.0 on H100-80GB only (here %s on %s)", set.Version, b.Device.Name)
		g.UncertaintyBytes = max(gibs(graphErr), p.CUDAGraph/3)
	}
	if b.CUDAGraphEstimateZero {
		g.Mechanism += "; Model Runner V2 reserves none of it inside the budget before vLLM 0.29"
	}
	terms = append(terms, g)

	// Measured parts replace the prediction and carry no uncertainty.
	origins := map[string]string{"weights_bytes": b.Origins.Weights, "activation_bytes": b.Origins.Activation, "non_torch_bytes": b.Origins.NonTorch, "cudagraph_bytes": b.Origins.CUDAGraph}
	for i := range terms {
		if o := origins[terms[i].Term]; o == OriginMeasured || o == OriginDerived {
			terms[i] = Term{Term: terms[i].Term, Class: EvidenceMeasured, Mechanism: terms[i].Mechanism, CalibratedOn: "a launch of this deployment (" + o + ")"}
		}
	}
	b.Evidence = terms
	b.KVTokensBand = b.kvBand(terms)
}

// kvBand widens the KV cache by the uncertainties of the parts inside the
// budget, as tokens.
func (b *Budget) kvBand(terms []Term) Band {
	set := b.Settings
	if set.KVCacheMemoryBytes > 0 || (b.Origins.KVCache == OriginMeasured && b.Origins.KVTokens == OriginMeasured) {
		return Band{Low: b.KVTokens, High: b.KVTokens, Basis: "the KV cache is fixed (--" + vllm.FlagKVCacheMemory + ") or measured"}
	}
	unc := gibs(kvResidualErr)
	parts := []string{"the calibration start-ups' largest KV miss " + GiB(unc)}
	for _, t := range terms {
		if t.Term == "cudagraph_bytes" && !b.CUDAGraphInBudget {
			continue // outside the budget: it does not move the KV cache
		}
		if t.Class == EvidenceExtrapolated && t.UncertaintyBytes > 0 {
			unc += t.UncertaintyBytes
			parts = append(parts, fmt.Sprintf("%s extrapolated ± %s", strings.ReplaceAll(strings.TrimSuffix(t.Term, "_bytes"), "_", "-"), GiB(t.UncertaintyBytes)))
		}
	}
	kv := b.PerGPU.KVCache
	if p := b.PerGPU; kv == 0 {
		// Nothing is left for the cache: the band starts from how far
		// past the budget the rest goes, so weights over the card by tens
		// of GiB get no tokens from the parts' uncertainty.
		kv = p.Requested - p.Weights - p.Activation - p.NonTorch
		if b.CUDAGraphInBudget {
			kv -= p.CUDAGraph
		}
		kv = min(kv, 0)
	}
	cold := b.ColdStartAllowance()
	lo := b.layout.tokens(b.layout.blocks(kv - unc - cold))
	hi := b.layout.tokens(b.layout.blocks(kv + unc))
	basis := "± " + GiB(unc) + " of KV cache per GPU: " + strings.Join(parts, ", ")
	if u := unmeasuredLayout(set); len(u) > 0 {
		basis += "; " + strings.Join(u, ", ") + " read from vLLM's code: no calibration start-up runs them"
	}
	if cold > 0 {
		basis += fmt.Sprintf("; and down to %s less on a first start with a cold torch.compile cache (one-GPU start-ups of vLLM 0.27–0.31 on L4, L40S and RTX cards logged 1.1–1.65 GiB more beside weights and KV than a warm start)", GiB(cold))
	}
	return Band{Low: lo, High: hi, Basis: basis}
}

// ColdStartAllowance is how much less KV cache a first start with a cold
// torch.compile cache may leave a one-GPU worker than this plan
// (coldStartErr): zero for --enforce-eager, tensor-parallel workers, and a
// KV cache that is fixed, measured, or derived from a measurement at
// another utilization (the start measured is the deployment's own).
func (b Budget) ColdStartAllowance() int64 {
	set := b.Settings
	if set.EnforceEager || set.TensorParallelSize > 1 || set.KVCacheMemoryBytes > 0 || b.Origins.KVCache == OriginMeasured || b.Origins.KVCache == OriginDerived {
		return 0
	}
	return gibs(coldStartErr)
}

func findSet(ok func(calibrationSet) bool) (calibrationSet, bool) {
	for _, c := range calibrationSets {
		if ok(c) {
			return c, true
		}
	}
	return calibrationSet{}, false
}

// sameProfileRange reports whether no profile-run boundary lies between
// two releases (they run the same dummy sampler and model runner rules).
func sameProfileRange(a, b vllm.Version, moe bool) bool {
	if a.Compare(b) > 0 {
		a, b = b, a
	}
	for _, x := range vllm.ProfileBoundaries(moe) {
		if x.Compare(a) > 0 && x.Compare(b) <= 0 {
			return false
		}
	}
	return true
}

// activationMechanism names the code path that sets the planned peak.
func activationMechanism(b *Budget, run profileRun) string {
	set := b.Settings
	rows := min(set.MaxNumSeqs, set.MaxNumBatchedTokens)
	if b.activationForwardBound {
		return fmt.Sprintf("the dummy forward pass of %d tokens without attention (gate/up and activation outputs, %.2f hidden-sized buffers a token) sets the peak", set.MaxNumBatchedTokens, hiddenBuffers)
	}
	var path string
	switch run.sampler {
	case vllm.SamplerSort:
		path = fmt.Sprintf("PyTorch sort top-k/top-p, b + %d B a logit", sortBytesPerLogit)
	case vllm.SamplerFlashInfer:
		path = fmt.Sprintf("FlashInfer top-k/top-p, b + %d B a logit", flashInferBytesPerLogit)
	case vllm.SamplerTriton:
		path = fmt.Sprintf("Triton top-k/top-p, b + %d B a logit and a cached %d × vocabulary float32 buffer", tritonBytesPerLogit, min(run.sms, rows))
	default:
		path = fmt.Sprintf("Model Runner V2, no top-k/top-p, b + %d B a logit", runnerV2BytesPerLogit)
	}
	if run.logitShards > 1 {
		path += fmt.Sprintf(", the logits split over %d ranks (--%s)", run.logitShards, vllm.FlagEnableBatchShardedSampling)
	}
	return fmt.Sprintf("the dummy sampler over %d rows × %d vocabulary (%s) sets the peak", rows, b.Model.Vocab, path)
}

// moe reports whether the model has routed experts.
func (b *Budget) moe() bool { return b.Model.MoE != nil && b.Model.MoE.Experts > 0 }

// unmeasuredLayout names the settings a plan follows from vLLM's code that
// no calibration start-up ran: they move the KV cache's size or
// accounting beyond the parts' uncertainty.
func unmeasuredLayout(set vllm.Settings) []string {
	var out []string
	if n := set.DecodeContextParallelSize; n > 1 {
		out = append(out, fmt.Sprintf("decode context parallel %d's tokens a rank", n))
	}
	if set.MambaCacheMode != "" {
		out = append(out, "--mamba-cache-mode "+set.MambaCacheMode+"'s state blocks")
	}
	if set.HybridKVCacheManagerDisabled() {
		out = append(out, "the hybrid KV cache manager off")
	}
	if set.EPLB() && set.RedundantExperts() > 0 {
		out = append(out, fmt.Sprintf("EPLB's %d redundant experts", set.RedundantExperts()))
	}
	return out
}
