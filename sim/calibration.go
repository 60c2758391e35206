package sim

import (
	"errors"
	"fmt"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/workload"
)

// Calibration corrects the roofline for one GPU: the shares of the
// datasheet peaks its kernels reach and the engine's CPU time per step,
// and the API server's CPU time per request and per token (FrontEnd). A
// calibration file line holds any of these fields; the ones it leaves out
// keep the device's defaults (CalibrationFor).
type Calibration struct {
	GPU string `json:"gpu,omitempty"`
	// FLOPsEfficiency is the share of the tensor peak the GEMMs reach;
	// AttentionEfficiency the share prefill attention reaches (0: the
	// GEMMs'); BandwidthEfficiency the share of HBM bandwidth the GEMMs
	// reach reading the weights; KVBandwidthEfficiency the share decode
	// attention reaches reading the paged cache (0: the weights').
	FLOPsEfficiency       float64 `json:"flops_efficiency"`
	AttentionEfficiency   float64 `json:"attention_efficiency,omitempty"`
	BandwidthEfficiency   float64 `json:"bandwidth_efficiency"`
	KVBandwidthEfficiency float64 `json:"kv_bandwidth_efficiency,omitempty"`
	// Overhead is the engine core's CPU time per step (scheduling,
	// preparing inputs, sampling, output processing) beside the forward
	// pass; SeqOverhead what each scheduled sequence adds to it.
	Overhead    float64 `json:"overhead_s"`
	SeqOverhead float64 `json:"seq_overhead_s,omitempty"`
	// GroupedShare is the share of the tensor peak the routed experts'
	// grouped GEMMs reach on full tiles (their tiles' padding is the
	// kernel's, moeKernel); 0: FLOPsEfficiency. It is a kernel's share,
	// not a multiple of FLOPsEfficiency, which also carries what a dense
	// model's prefill step spends beside its GEMMs.
	GroupedShare float64 `json:"grouped_gemm_share,omitempty"`
	// GroupedKHalf is the reduction length at which an expert GEMM runs
	// at half its share (Roofline.expertTime): the tiles' pipeline
	// fill, which a rank's narrow experts do not amortise.
	GroupedKHalf float64 `json:"grouped_gemm_k_half,omitempty"`
	// DequantShare is the share of FLOPsEfficiency that weight-only
	// kernels which widen quantized weights in registers reach on this
	// architecture (Marlin on Ampere, matmul_ogs's MXFP4 on Hopper).
	DequantShare float64 `json:"dequant_share,omitempty"`
	// GEMMFloor is what a GEMM kernel takes beyond its math or its read
	// (Roofline.GEMMKernels); measured on kernel tables, not fitted
	// (kernelsMeasured).
	GEMMFloor float64 `json:"gemm_floor_s,omitempty"`
	// FP8GEMMShare and FP8ReadShare are the shares of the GEMM share and
	// of the weights' bandwidth share that native FP8 GEMMs reach against
	// BF16 ones (on the FP8 peak, reading one byte a weight); measured on
	// kernel tables, not fitted (kernelsMeasured).
	FP8GEMMShare float64 `json:"fp8_gemm_share,omitempty"`
	FP8ReadShare float64 `json:"fp8_read_share,omitempty"`
	// FrontEnd is the API server's CPU time, its Request for a chat
	// rendered by the model's Jinja chat template; HarmonyRequest replaces
	// it for models whose chat vLLM renders with openai_harmony, and
	// CompletionRequest for a request to /v1/completions, which renders
	// no chat (FrontEndFor).
	FrontEnd
	HarmonyRequest float64 `json:"frontend_harmony_request_s,omitempty"`
	// CompletionRequest is 0 for HarmonyRequest: no training row calls
	// /v1/completions, and harmony's chat is the fitted request that no
	// Jinja template renders (harmony renders in Rust, in microseconds).
	CompletionRequest float64 `json:"frontend_completion_request_s,omitempty"`
	// NodeHostShare is what the API server's CPU times take on a server
	// of a whole multi-GPU node, as a share of the times above, which are
	// those of a server of one or two GPUs (hostShare); 0 reads as 1. The
	// engine core's times are the same on both.
	NodeHostShare float64 `json:"node_host_share,omitempty"`
	Source        string  `json:"source,omitempty"`
}

func (c Calibration) attention() float64 {
	if c.AttentionEfficiency > 0 {
		return c.AttentionEfficiency
	}
	return c.FLOPsEfficiency
}

func (c Calibration) groupedPlateau() float64 {
	if c.GroupedShare > 0 {
		return c.GroupedShare
	}
	return c.FLOPsEfficiency
}

func (c Calibration) fp8GEMM() float64 {
	if c.FP8GEMMShare > 0 {
		return c.FP8GEMMShare
	}
	return 1
}

func (c Calibration) fp8Read() float64 {
	if c.FP8ReadShare > 0 {
		return c.FP8ReadShare
	}
	return 1
}

func (c Calibration) kvBandwidth() float64 {
	if c.KVBandwidthEfficiency > 0 {
		return c.KVBandwidthEfficiency
	}
	return c.BandwidthEfficiency
}

// check reports a calibration that cannot price a step. A share is at
// least minShare, or 0 where 0 means the default: a share a hair above 0
// (a measured step of 1e300 s, fitted) would price a step at infinity.
// The CPU times are bounded for the same reason, far above any step or
// request a server survives.
func (c Calibration) check() error {
	share := func(v, hi float64) bool { return v == 0 || (v >= minShare && v <= hi) }
	switch {
	case !(c.FLOPsEfficiency >= minShare && c.FLOPsEfficiency <= 1) || !(c.BandwidthEfficiency >= minShare && c.BandwidthEfficiency <= 1):
		return errors.New("flops_efficiency and bandwidth_efficiency must be in [0.001, 1]")
	case !share(c.AttentionEfficiency, 1) || !share(c.KVBandwidthEfficiency, 1):
		return errors.New("attention_efficiency and kv_bandwidth_efficiency must be 0 (the default) or in [0.001, 1]")
	case !(c.Overhead >= 0 && c.Overhead <= 10) || !(c.SeqOverhead >= 0 && c.SeqOverhead <= 1):
		return errors.New("overhead_s must be in [0, 10] and seq_overhead_s in [0, 1]")
	case !(c.HarmonyRequest >= 0 && c.HarmonyRequest <= 60) || !(c.CompletionRequest >= 0 && c.CompletionRequest <= 60):
		return errors.New("frontend_harmony_request_s and frontend_completion_request_s must be in [0, 60]")
	case !share(c.NodeHostShare, 10):
		return errors.New("node_host_share must be 0 (the default) or in [0.001, 10]")
	case !share(c.GroupedShare, 1) || !share(c.DequantShare, 1):
		return errors.New("grouped_gemm_share and dequant_share must be 0 (the default) or in [0.001, 1]")
	case c.GroupedKHalf < 0 || c.GroupedKHalf > 1e6:
		return errors.New("grouped_gemm_k_half must be in [0, 1e6]")
	case c.GEMMFloor < 0 || c.GEMMFloor > 1e-3:
		return errors.New("gemm_floor_s must be in [0, 0.001]")
	case !share(c.FP8GEMMShare, 1.5) || !share(c.FP8ReadShare, 1.5):
		return errors.New("fp8_gemm_share and fp8_read_share must be 0 (the default) or in [0.001, 1.5]")
	}
	return c.FrontEnd.check()
}

// minShare is the least share of a peak a calibration may give.
const minShare = 1e-3

// String is the calibration in one line, for reports.
func (c Calibration) String() string {
	return fmt.Sprintf("%s: GEMMs x%.2f, attention x%.2f of peak; weights x%.2f, cache x%.2f of bandwidth; MoE grouped GEMMs x%.2f of peak on full tiles (half at a reduction of %.0f), dequantizing kernels x%.2f, FP8 GEMMs x%.2f (weights read x%.2f); +%.1f µs/GEMM; +%.2f ms/step, +%.0f µs/sequence; API server %.1f ms/chat request (%.1f with harmony, %.1f a completion), %.0f µs/token, %.0f ms latency",
		c.Source, c.FLOPsEfficiency, c.attention(), c.BandwidthEfficiency, c.kvBandwidth(), c.groupedPlateau(), c.GroupedKHalf, c.DequantShare, c.fp8GEMM(), c.fp8Read(), c.GEMMFloor*1e6,
		c.Overhead*1e3, c.SeqOverhead*1e6, c.Request*1e3, c.HarmonyRequest*1e3, c.completionRequest()*1e3, c.OutputToken*1e6, c.Latency*1e3)
}

// FrontEndFor is the API server's cost for the server of plan b and
// requests to endpoint (workload.EndpointChat or EndpointCompletions):
// vLLM's chat endpoint renders gpt-oss (model_type gpt_oss) with
// openai_harmony, which turns the conversation into token ids in Rust
// (serving_chat.py's use_harmony, since 0.10.1), instead of rendering the
// Jinja chat template and then tokenizing its text, as for every other
// model; the completions endpoint renders no chat and tokenizes the
// prompt (serving_completion.py), the request harmony's chat costs too
// (completionRequest); and the API server takes its host class's share
// of the times (hostShare), shared by --api-server-count processes.
func (c Calibration) FrontEndFor(b memory.Budget, endpoint string) FrontEnd {
	f := c.FrontEnd
	chat := c.Request
	if c.HarmonyRequest > 0 && rendersWithHarmony(b.Model) {
		chat = c.HarmonyRequest
	}
	f.ByEndpoint = EndpointCosts{Chat: chat, Completions: c.completionRequest()}
	f.Request = f.ByEndpoint.Completions
	if endpoint == workload.EndpointChat {
		f.Request = chat
	}
	f.StreamInterval = b.Settings.StreamInterval
	h := c.hostShare(b)
	f.Latency *= h
	// --api-server-count N runs N API-server processes, each its own
	// event loop and tokenizer, the requests spread over them: N
	// processor-sharing servers, priced as one N times as fast (the same
	// throughput; a request's own time differs by how evenly they split).
	return f.cpuTimes(h / float64(b.Settings.APIServers()))
}

// nodeGPUs is the least number of GPUs a server takes for its host to be
// a whole multi-GPU node: an HGX or DGX board holds 4 or 8 SXM GPUs, and a
// server of one or two of them runs in a slice of such a host (a cloud
// instance of a GPU or two, its share of the CPUs), which is what the
// rows' one- and two-GPU servers ran on.
const nodeGPUs = 4

// hostShare is the share of the calibration's API server times that plan
// b's host takes: NodeHostShare on a server of nodeGPUs or more GPUs
// (tensor × pipeline × data parallel), 1 on one of fewer. gpustack's
// 8-GPU host renders a Jinja chat in 4.5-5.4 ms a request where its one-
// GPU hosts take 10-14 ms (each burst's mean and p99 TTFT, sim/README.md):
// the host, not the model, sets it, since the same Qwen3-235B server
// spends the same time a request on random and ShareGPT prompts. The
// engine core keeps its times: taking the share too, it priced Qwen3-
// 235B's ShareGPT decode of ~800 sequences at half their CPU, 27% fast in
// throughput (the fit's loss 1.75 against 1.39). A slice's API server
// shares its few CPUs with the benchmark client's event loop, which a
// whole node's do not; the engine core busy-polls a core of its own on
// either.
func (c Calibration) hostShare(b memory.Budget) float64 {
	s := b.Settings
	if max(s.TensorParallelSize, 1)*max(s.PipelineParallelSize, 1)*max(s.DataParallelSize, 1) >= nodeGPUs {
		return orOne(c.NodeHostShare)
	}
	return 1
}

// completionRequest is the API server's CPU time of a request to
// /v1/completions: CompletionRequest, else HarmonyRequest (the fitted
// request no Jinja template renders), else Request.
func (c Calibration) completionRequest() float64 {
	switch {
	case c.CompletionRequest > 0:
		return c.CompletionRequest
	case c.HarmonyRequest > 0:
		return c.HarmonyRequest
	}
	return c.Request
}

// RendersChatTemplate reports whether a chat request to the server of
// plan b is rendered by the model's Jinja chat template (every model but
// those vLLM renders with openai_harmony): what makes a chat request cost
// more than a completion.
func RendersChatTemplate(b memory.Budget) bool { return !rendersWithHarmony(b.Model) }

func rendersWithHarmony(s model.Spec) bool {
	return s.ModelType == "gpt_oss" || s.TextModelType == "gpt_oss"
}

// Check reports a calibration that cannot price a step.
func (c Calibration) Check() error { return c.check() }

// The constants below were fitted on testdata/serving/train.csv,
// train-more.csv and train-turn5.csv (sim/README.md: the rows, the fit,
// which rows pin each constant, and how well it reproduces them): fifteen
// published `vllm bench serve` runs of gpustack's performance lab on vLLM
// 0.10.2 and 0.11.0, A100 SXM and H100 SXM, dense Qwen3 and MoE gpt-oss
// and Qwen3-235B, TP 1, 2 and 8. TestServingRuns replays them.
//
// The GEMM share and the bandwidth share are the device's; the engine's
// and the API server's CPU times are the host's and the release's, and
// are shared by every device. Attention's share is not separable on these
// rows (prefill attention is 6% of the FLOPs of a 4,000-token prompt): it
// is the GEMMs' until a long-prompt run says otherwise.
var (
	// fittedByCapability holds the device shares, by CUDA compute
	// capability: the kernels a release runs, and the share of its
	// datasheet peak a part reaches, are the architecture's (sm_80:
	// A100; sm_90: H100, H200, GH200). The weights shares are not fitted:
	// Hopper's is measured (hopperKernels; a GPU with its own table takes
	// its own), the A100's a cuBLAS figure (weightBandwidthShare).
	fittedByCapability = map[string]Calibration{
		"8.0": {FLOPsEfficiency: 0.733, BandwidthEfficiency: weightBandwidthShare, KVBandwidthEfficiency: 0.259, DequantShare: 0.820,
			Source: "fitted on 15 vllm bench serve runs (vLLM 0.10.2–0.11.0), the A100-SXM's shares from its 3 (Qwen3-14B, gpt-oss-20b)"},
		hopper: {FLOPsEfficiency: 0.369, BandwidthEfficiency: hopperKernels.Weights, KVBandwidthEfficiency: 0.487, DequantShare: 0.381,
			Source: "fitted on 15 vllm bench serve runs (vLLM 0.10.2–0.11.0), the H100-SXM's shares from its 12 (Qwen3-8B/14B/32B, gpt-oss-20b/120b, Qwen3-235B; TP 1, 2, 8); the weights read, GEMM floor and FP8 shares measured on its kernel table"},
	}
	// hostCPU are the CPU costs of vLLM 0.10.2–0.11.0's engine core and
	// API server (with the bench client) on gpustack's hosts, fitted on
	// the same rows: the API server's Jinja path per request (pinned by
	// the Qwen3 bursts), its harmony path (the gpt-oss bursts), the fixed
	// latency on the way in (Qwen3-8B at concurrency 1 and 4), the
	// engine's time per step and per sequence (all rows).
	hostCPU = Calibration{Overhead: 0.000118, SeqOverhead: 50.1e-6,
		FrontEnd:       FrontEnd{Latency: 0.0338, Request: 0.01215, PromptToken: tokenizeSeconds, OutputToken: 83.1e-6},
		HarmonyRequest: 0.00245, NodeHostShare: 0.447}
	// groupedGEMM is the routed experts' grouped GEMMs on every
	// architecture: 0.735 of the tensor peak on full tiles (the MoE rows'
	// prefills), their padding the kernel's tiles (moeKernel), and half of
	// the share at a reduction of reductionKHalf (measured).
	groupedGEMM = Calibration{GroupedShare: 0.735, GroupedKHalf: reductionKHalf}
	// defaultShares are for devices without a fit: the mean of the
	// fitted devices' shares, stated as a default in every report.
	defaultShares = Calibration{FLOPsEfficiency: 0.551, BandwidthEfficiency: 0.828, KVBandwidthEfficiency: 0.373, DequantShare: 0.600}
)

// kernelsMeasured are what the kernel table of each GPU measured there
// (bench/gpu-kernels, read by KernelTable.Shares; TestKernelsMeasured
// holds each entry to its table):
//   - GEMMFloor and Weights: the line seconds = floor + bytes / (bandwidth
//     × share) through the memory-bound BF16 GEMMs of the catalog's shapes
//     (1 to 64 rows), fitted on relative error: what a GEMM takes beyond
//     its read in a CUDA graph, and the share of the bandwidth it reads
//     at beyond that;
//   - FP8GEMM and FP8Read: native FP8 GEMMs (torch._scaled_mm, per-tensor
//     scales, cuBLASLt's kernels) against the BF16 GEMMs of the same
//     shapes, compute-bound (the share of the FP8 peak over the BF16
//     share of its peak) and memory-bound (the line's share over the BF16
//     line's). vLLM's FP8 GEMMs are CUTLASS's (cutlass_scaled_mm): the
//     ratio, not the kernel, is what is carried over. No training row runs
//     FP8.
//
// A GPU with a table takes its own; every other device takes the H100's
// (hopperKernels). Tables were measured on 2026-11-27 with driver
// 580.159.04, torch 2.11.0+cu130 and CUDA 13.0. Two H200 runs on two
// machines of the same kind differed by 0.5% in the floor and 2% in the
// weights share (4.31 and 4.33 µs, 0.831 and 0.847): the digits kept here
// are not all significant.
//
// GEMM, Prefill and Decode are the tables' kernel shares of the peaks
// (compute-bound BF16 GEMMs, causal prefill attention, decode attention's
// cache read); they price nothing themselves but say what serving reaches
// of its kernels (kernelToServing).
var kernelsMeasured = map[string]measuredKernels{
	"H100-80GB": {Table: "testdata/kernels/h100-sxm.csv", GEMMFloor: 3.92e-6, Weights: 0.855, FP8GEMM: 0.892, FP8Read: 0.918, GEMM: 0.739, Prefill: 0.395, Decode: 0.801},
	"H200":      {Table: "testdata/kernels/h200-sxm.csv", GEMMFloor: 4.33e-6, Weights: 0.847, FP8GEMM: 0.884, FP8Read: 0.914, GEMM: 0.747, Prefill: 0.398, Decode: 0.797},
}

// hopper is the compute capability of the Hopper fit, whose weights share
// is a kernel table's.
const hopper = "9.0"

// measuredKernels is one GPU's entry of kernelsMeasured.
type measuredKernels struct {
	Table                                string
	GEMMFloor, Weights, FP8GEMM, FP8Read float64
	GEMM, Prefill, Decode                float64
}

// hopperKernels are the H100 SXM's, the GPU the Hopper rows ran on: its
// weights share is the Hopper calibration's (not fitted: fitted on the
// rows beside the floor it went to 0.932, the loss 1.302 against 1.337
// here, a share no measured GEMM reaches, taking up time the rest of a
// one-sequence step holds, gs-q8-h100-c1's 7.3 ms; held at the
// measurement, the rows keep every figure but the Jinja path's within the
// bars, sim/README.md), and its floor and FP8 shares are every device's
// without a table of its own.
var hopperKernels = kernelsMeasured["H100-80GB"]

// kernelToServing is what serving reaches of its kernels, on the one
// architecture where both were measured: the Hopper fit's shares over the
// H100 table's. A prefill step's GEMMs reach 0.499 of cuBLAS's share
// (0.369 against 0.739: the fit prices a whole Qwen3 prefill layer at
// 1.14–1.34 times what it takes unfused, bench/gpu-kernels/layer_sweep.py),
// the paged KV cache 0.608 of a contiguous decode's read (0.487 against
// 0.801), and the clock's prefill attention share 1.27 times the table's
// (0.5 against 0.395, which is PyTorch's default backend at three
// lengths). The weights are read at the kernels' share (Hopper's is the
// table's). A kernel table of a device without a serving fit is scaled by
// these, so it stands for what vLLM would reach there and not for the
// kernels' ceiling: scaled so, the H100's own table gives back the Hopper
// fit. How far the ratios carry to another architecture is not measured:
// the A100's fitted GEMM share (0.733) is 0.86–0.92 of the 0.8–0.85 that
// cuBLAS is commonly reported to reach there (no A100 table was
// measured), against Hopper's 0.499.
func kernelToServing() (gemm, prefill, decode float64) {
	h := fittedByCapability[hopper]
	return h.FLOPsEfficiency / hopperKernels.GEMM, prefillAttentionShare / hopperKernels.Prefill, h.KVBandwidthEfficiency / hopperKernels.Decode
}

// prefillAttentionShare is the share of the tensor peak prefill attention
// reaches: FlashAttention-2 reaches 72% of an A100's BF16 peak (225 of 312
// TFLOP/s, its paper's long-sequence forward pass), FlashAttention-3 75% of
// an H100's (740 of 989); vLLM's paged, variable-length prefill over
// chunks runs below that. Not fitted: on the training rows prefill
// attention is 6% of the FLOPs. Measured on an H100 (testdata/kernels/
// h100-attention.json, causal, head dim 128): cuDNN's fused attention,
// the FlashAttention-3 class vLLM runs on Hopper, reaches 0.38 of the peak
// on 512-token prompts and 0.56–0.65 on 2k–32k-token ones in batches
// that fill the GPU; PyTorch's FlashAttention-2 0.20–0.36. 0.5 lies
// between the short prompts and the long (TestPrefillAttentionMeasured);
// how the share grows with the prompt is not priced.
const prefillAttentionShare = 0.5

// reductionKHalf is the reduction length at which a GEMM's main loop runs
// at half its share (Roofline.expertTime): the median of the six series
// the H100's cuBLAS GEMMs at fixed M and N were timed over (183 to 563,
// testdata/kernels/h100-reduction.csv, TestReductionLengthMeasured).
// Measured, not fitted: fitted on the rows beside the tiles' padding it
// took 164, below every series, and the rows cannot tell it from the
// grouped GEMMs' share.
const reductionKHalf = 282

// tokenizeSeconds is the API server's time per prompt token: a Hugging
// Face fast tokenizer encodes about a million tokens a second on one core.
// Not fitted: the rows' per-request time cannot tell it from the rest.
const tokenizeSeconds = 1e-6

// weightBandwidthShare is the share of HBM bandwidth the GEMMs reach
// streaming the weights through a decode step on the A100: the usual
// figure for memory-bound GEMMs of a few dozen rows (cuBLAS and CUTLASS
// reach 75–85% of the datasheet bandwidth; the kernel tables measured
// 0.855 on an H100 and 0.847 on an H200, beyond the GEMM floor), not
// fitted, since no A100 row decodes a small batch. No A100 table yet.
const weightBandwidthShare = 0.8

// DefaultCalibration is the calibration of a device without a fit.
var DefaultCalibration = withHost(defaultShares, "default shares of the datasheet peaks (no serving run fitted on this device)")

func withHost(c Calibration, source string) Calibration {
	c.AttentionEfficiency = prefillAttentionShare
	c.Overhead, c.SeqOverhead, c.FrontEnd, c.HarmonyRequest, c.NodeHostShare = hostCPU.Overhead, hostCPU.SeqOverhead, hostCPU.FrontEnd, hostCPU.HarmonyRequest, hostCPU.NodeHostShare
	c.GroupedShare, c.GroupedKHalf = groupedGEMM.GroupedShare, groupedGEMM.GroupedKHalf
	c.GEMMFloor, c.FP8GEMMShare, c.FP8ReadShare = hopperKernels.GEMMFloor, hopperKernels.FP8GEMM, hopperKernels.FP8Read
	c.Source = source
	return c
}

// CalibrationFor is the calibration of a device: its architecture's fit
// where serving runs were fitted on it, else DefaultCalibration; fitted
// says which.
func CalibrationFor(d gpu.Device) (c Calibration, fitted bool) {
	c = DefaultCalibration
	if f, ok := fittedByCapability[d.ComputeCapability]; ok && d.Vendor != "amd" {
		c, fitted = withHost(f, f.Source), true
	}
	if k, ok := kernelsMeasured[d.Name]; ok {
		// The GPU's own kernels: its floor and FP8 shares, and, where the
		// weights share is a measurement (Hopper's), its own.
		c.GEMMFloor, c.FP8GEMMShare, c.FP8ReadShare = k.GEMMFloor, k.FP8GEMM, k.FP8Read
		if fitted && d.ComputeCapability == hopper {
			c.BandwidthEfficiency = k.Weights
		}
	}
	return c, fitted
}

// Sample is one measured step: its batch and how long it took.
type Sample struct {
	Batch   Batch   `json:"batch"`
	Seconds float64 `json:"seconds"`
}

// Fit corrects a calibration from measured steps on the roofline m
// (whose own corrections are ignored; with m.Overlap, async scheduling,
// the CPU's time is hidden under the forward pass). Decode steps (one token per
// request) give the cache's bandwidth share and the per-step overhead: what
// a step takes beyond reading the weights (at c's share) and c's
// per-sequence time, on a least-squares line over the cache bytes it reads
// (slope 1 / (bandwidth × share), intercept the overhead); with one such
// step, or all of the same size, the overhead stays c's. Prefill steps then
// give the GEMM share as the mean of their FLOPs over peak × (seconds − the
// rest of the step). Fields without samples keep c's values.
func Fit(m Roofline, c Calibration, samples []Sample) Calibration {
	var mem, comp []Sample
	for _, s := range samples {
		if s.Seconds <= 0 || s.Batch.Tokens <= 0 {
			continue
		}
		if s.Batch.Tokens <= int64(s.Batch.Requests) {
			mem = append(mem, s)
		} else {
			comp = append(comp, s)
		}
	}
	seq := func(b Batch) float64 { return c.SeqOverhead * float64(b.Requests) }
	if m.Overlap {
		// Async scheduling hides the CPU's time under the forward pass:
		// a step is its GPU time, and the line goes through 0.
		seq = func(Batch) float64 { return 0 }
	}
	// weights is the part of a decode step the cache share does not
	// explain: the weights' read (at c's share) and the kernels' floors.
	weights := func(b Batch) float64 {
		return (m.WeightBytes/orOne(m.DenseRead)+m.ExpertBytes*m.expertsTouched(float64(b.Tokens))/orOne(m.ExpertRead))/(m.Bandwidth*c.BandwidthEfficiency) + m.fixedKernelTime()
	}
	if len(mem) > 0 {
		var sx, sy, sxx, sxy float64
		for _, s := range mem {
			_, x := m.attention(s.Batch)
			y := s.Seconds - seq(s.Batch) - weights(s.Batch)
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		n := float64(len(mem))
		overhead := c.Overhead
		if m.Overlap {
			overhead = 0
		}
		if d := n*sxx - sx*sx; d > 1e-9*sxx*n && len(mem) > 1 && !m.Overlap {
			slope := (n*sxy - sx*sy) / d
			if icpt := (sy - slope*sx) / n; slope > 0 && icpt >= 0 {
				c.KVBandwidthEfficiency = min(1/(slope*m.Bandwidth), 1)
				c.Overhead = icpt
			}
		} else if t := sy/n - overhead; t > 0 && sx > 0 {
			c.KVBandwidthEfficiency = min(sx/n/m.Bandwidth/t, 1)
		}
	}
	if len(comp) > 0 {
		var sum float64
		k := 0
		for _, s := range comp {
			b := s.Batch
			flops := 2 * (m.LinearParams*float64(b.Tokens) + m.HeadParams*float64(b.Requests))
			pairs, cache := m.attention(b)
			rest := cache/(m.Bandwidth*c.kvBandwidth()) + seq(b) + m.fixedKernelTime()
			if !m.Overlap {
				rest += c.Overhead
			}
			// Prefill attention runs at the GEMMs' share unless c sets its own.
			if c.AttentionEfficiency > 0 {
				rest += pairs / (m.PeakFLOPs * c.AttentionEfficiency)
				pairs = 0
			}
			if t := s.Seconds - rest; t > 0 {
				sum += (flops + pairs) / m.PeakFLOPs / t
				k++
			}
		}
		if k > 0 {
			c.FLOPsEfficiency = min(sum/float64(k), 1)
		}
	}
	c.Source = fmt.Sprintf("fitted to %d measured steps", len(mem)+len(comp))
	return c
}
