package memory

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

const gib = 1 << 30
const mib = 1 << 20

// tpLink is how the GPUs of one tensor-parallel group reach each other,
// which decides the all-reduce path and its buffers: NVLink inside a node
// (vLLM's custom all-reduce over P2P), PCIe inside a node (NCCL; custom
// all-reduce needs P2P, which PCIe cards often lack), or across nodes
// (NCCL over the network).
type tpLink string

const (
	linkNVLink    tpLink = "nvlink"
	linkPCIe      tpLink = "pcie"
	linkCrossNode tpLink = "cross-node"
)

// linkOf is the TP group's link: across nodes when the group has more GPUs
// than a node holds, else the device's peer link (gpu.PerfOf; a device the
// GPU catalog has no figures for is taken as PCIe).
func linkOf(dev gpu.Device, tp, gpusPerNode int) tpLink {
	if gpusPerNode <= 0 {
		gpusPerNode = DefaultGPUsPerNode
	}
	if tp > gpusPerNode {
		return linkCrossNode
	}
	if p, ok := gpu.PerfOf(dev); ok && p.NVLink {
		return linkNVLink
	}
	return linkPCIe
}

// tpPoint is non-torch memory at TP ≥ 2 as start-ups of one release on one
// kind of GPU and link logged it (or, where only the KV cache was logged,
// as the KV cache leaves it beside the logged weights and the planned
// activation).
type tpPoint struct {
	release vllm.Version
	device  string
	link    tpLink
	tps     []int
	// atTP2 is the GiB at TP 2 for a model of hidden size 4096; each
	// doubling of TP adds perDoubling, each 1024 of hidden size perHidden
	// (both read from the 0.19.0 rows, the only NVLink ones with more than
	// one TP size and width).
	atTP2 float64
	// perRankWidth, when set, replaces that form: the one-GPU figure plus
	// perRankWidth GiB per 1024 of the hidden width one rank holds
	// (hidden / TP), the form the PCIe rows follow.
	perRankWidth float64
	source       string
}

const (
	nonTorchPerDoubling = 0.065
	nonTorchPerHidden   = 0.006
	// nonTorchOneGPU is what a single GPU's non-torch memory grows by
	// during profiling (cuBLAS and attention-backend workspaces, kernels
	// loaded on first use): vLLM 0.19.0 on H100, 0.24–0.26 GiB for all but
	// Granite.
	nonTorchOneGPU = 0.25
	// nonTorchPP is the same per worker of a pipeline without tensor
	// parallelism on the 0.19.0 H100 rows (PP 2–4).
	nonTorchPP = 0.07
)

// tpPoints are the calibrated points, oldest first. Each names its rows.
var tpPoints = []tpPoint{
	{
		// dennislee22/vLLM-benchmarking@b474d1e0 logs (testdata
		// startups-0.10-a100-tp2.csv): Qwen2-7B-Instruct at TP 2 on two
		// A100-80GB of one node. The KV cache leaves 0.11 GiB beside the
		// logged 7.12 GiB of weights and the planned 0.56 GiB FlashInfer
		// sampler run, at utilization 0.25 and 0.5 alike
		// (TestStartups010A100).
		release: vllm.Version{Major: 0, Minor: 10, Patch: 1}, device: "A100-80GB", link: linkNVLink, tps: []int{2},
		atTP2: 0.11, source: "3 vLLM 0.10.1 start-ups of Qwen2-7B at TP 2 on A100",
	},
	{
		// The same launch on two A100-40GB in two pods on different nodes
		// (Ray): NCCL over the network keeps 0.99 GiB a GPU.
		release: vllm.Version{Major: 0, Minor: 10, Patch: 1}, device: "A100-40GB", link: linkCrossNode, tps: []int{2},
		atTP2: 0.99, source: "3 vLLM 0.10.1 start-ups of Qwen2-7B at TP 2 on A100",
	},
	{
		// vLLM 0.28.0 on L4 over PCIe (testdata startups-0.28-l4-l40s.csv,
		// rows 102, 103, 105, 107: Qwen2.5-7B and 14B at TP 2 and 4 on a
		// g6.12xlarge, PCIe only, topology NODE). Without NVLink vLLM's
		// custom all-reduce is off and NCCL sets up its communicators
		// before the worker's baseline snapshot, so little of the TP 2.1
		// GiB of the H100 rows is there: what the KV cache leaves beside
		// the logged weights and the planned activation is the one-GPU
		// figure plus 0.185 GiB per 1024 of the hidden width a rank
		// holds (0.556, 0.415, 0.728 and 0.474 GiB at 1792, 896, 2560 and
		// 1280 a rank; largest residual 0.018 GiB; TestPCIeTPPoint028).
		// The width term is read from the rows, not from vLLM's code.
		release: vllm.Version{Major: 0, Minor: 28, Patch: 0}, device: "L4", link: linkPCIe, tps: []int{2, 4},
		atTP2: nonTorchOneGPU + 0.185*2, perRankWidth: 0.185, source: "4 vLLM 0.28.0 start-ups at TP 2 and 4 on L4 (PCIe)",
	},
	{
		// vLLM 0.19.0 on H100-80GB (testdata vllm-0.19.0-h100.csv):
		// 2.06–2.11 GiB at TP 2 and 2.13–2.21 GiB at TP 4, a little more
		// for wider models: 2.0 + 0.065 × log2(TP) + 0.006 × hidden/1024.
		release: vllm.Version{Major: 0, Minor: 19, Patch: 0}, device: "H100-80GB", link: linkNVLink, tps: []int{2, 4},
		atTP2: 2.0 + nonTorchPerDoubling + nonTorchPerHidden*4, source: "57 vLLM 0.19.0 start-ups on H100-80GB",
	},
}

// at is the point's GiB at tp for a model of the given hidden size.
func (p tpPoint) at(tp, hidden int) float64 {
	if p.perRankWidth > 0 {
		return nonTorchOneGPU + p.perRankWidth*float64(hidden)/float64(tp)/1024
	}
	return p.atTP2 + nonTorchPerDoubling*math.Log2(float64(tp)/2) + nonTorchPerHidden*(float64(hidden)-4096)/1024
}

// nonTorchEstimate is non-torch memory with its evidence.
type nonTorchEstimate struct {
	bytes       int64
	uncertainty int64
	calibrated  bool
	covers, why string
}

// Uncertainty of a calibrated non-torch figure: the largest residual of
// the rows it comes from (TP ≥ 2: Kimi-VL and Llama-3.3-70B at TP 4,
// 0.03 GiB; one GPU: the Granite rows, which log 0.46 GiB against 0.24–0.26
// for every other model).
const (
	nonTorchTPErr  = 0.05
	nonTorchOneErr = 0.21
	// nonTorchFloorErr is the least uncertainty of an extrapolated figure.
	nonTorchFloorErr = 0.25
)

// nonTorchFor models the memory outside PyTorch's allocator that appears
// between the worker's baseline snapshot and the end of profiling (cuBLAS
// workspaces, attention-backend buffers, NCCL and custom all-reduce
// buffers), per GPU, with how sure it is:
//
//   - one GPU: 0.25 GiB (vLLM 0.19.0 on H100: 0.24–0.26 for all but
//     Granite); with pipeline parallelism alone 0.07 GiB per worker; for a
//     release nearer another point, at most that point's TP 2 figure on
//     one node (which holds the one-GPU part too);
//   - tensor parallel: the calibrated point of the nearest release (by
//     minor version) with the same link, at this TP size and width. Where
//     the link has no point in that release's era, the era's NVLink point
//     is taken, plus what the network added at 0.10.1 for a group across
//     nodes. Anything that is not the point's release, GPU, link and TP
//     sizes is extrapolated and said to be, and its uncertainty spans
//     every point of the link.
//
// The 0.10.1 and 0.19.0 points differ by 1.9 GiB at TP 2; no start-up in
// between says where (or whether on other GPUs than the two measured) the
// step lies, so a release between them is extrapolated from the nearer.
func nonTorchFor(s model.Spec, set vllm.Settings, dev gpu.Device, gpusPerNode int) nonTorchEstimate {
	tp, pp := max(set.TensorParallelSize, 1), max(set.PipelineParallelSize, 1)
	v := set.Version
	if tp == 1 {
		g, e := nonTorchOneGPU, nonTorchOneErr
		if pp > 1 {
			g, e = nonTorchPP, nonTorchTPErr
		}
		var whys []string
		from, covers := "H100-80GB", "57 vLLM 0.19.0 start-ups on H100-80GB (one GPU, and PP 2–4)"
		if v.Major != 0 || v.Minor != 19 {
			// A TP group's non-torch memory holds the one-GPU part and the
			// all-reduce buffers, so the nearest release's TP 2 point on
			// one node bounds the one-GPU figure from above.
			why := fmt.Sprintf("no single-GPU start-up of vLLM %d.%d in the calibration set; the 0.19.0 figure is used", v.Major, v.Minor)
			if p, ok := nearestTPPoint(v, func(p tpPoint) bool { return p.link == linkNVLink }); ok && p.atTP2 < g {
				g, e, from = p.atTP2, p.atTP2, p.device
				covers = fmt.Sprintf("%s (vLLM %s, %s, TP 2, one node), as an upper bound", p.source, p.release, p.device)
				why = fmt.Sprintf("no single-GPU start-up of vLLM %d.%d in the calibration set; at most what %s logged at TP 2 on one node (%.2f GiB, all-reduce buffers included)", v.Major, v.Minor, p.source, p.atTP2)
			}
			whys = append(whys, why)
		}
		est := nonTorchEstimate{bytes: gibs(g), uncertainty: gibs(e), covers: covers}
		if dev.Name != from {
			whys = append(whys, fmt.Sprintf("no single-GPU start-up on %s; the %s figure is used", dev.Name, from))
		}
		est.calibrated = len(whys) == 0
		if !est.calibrated {
			est.why = strings.Join(whys, "; ")
			est.uncertainty = max(est.uncertainty, gibs(min(nonTorchFloorErr, g)))
		}
		return est
	}
	link := linkOf(dev, tp, gpusPerNode)
	nearest := func(ok func(tpPoint) bool) (tpPoint, bool) { return nearestTPPoint(v, ok) }
	var g float64
	var whys []string
	var pt tpPoint
	borrowed := false // another link's figure stands in
	switch link {
	case linkCrossNode:
		// The network's part is known at 0.10.1 only: a release of
		// another NVLink era takes its NVLink figure plus that part.
		era, _ := nearest(func(p tpPoint) bool { return p.link == linkNVLink })
		sameEra := func(p tpPoint) bool {
			return p.release.Major == era.release.Major && p.release.Minor == era.release.Minor
		}
		var ok bool
		if pt, ok = nearest(func(p tpPoint) bool { return sameEra(p) && p.link == linkCrossNode }); ok {
			g = pt.at(tp, s.Hidden)
		} else {
			pt = era
			g = pt.at(tp, s.Hidden) + crossNodeExtra()
			whys = append(whys, fmt.Sprintf("no start-up of vLLM %s across nodes: its NVLink figure plus the %.2f GiB the network added at 0.10.1", pt.release, crossNodeExtra()))
		}
	default:
		var ok bool
		if pt, ok = nearest(func(p tpPoint) bool { return p.link == link }); !ok {
			pt, _ = nearest(func(p tpPoint) bool { return p.link == linkNVLink })
			whys = append(whys, fmt.Sprintf("no start-up over %s: the %s figure of vLLM %s is used", link.name(), pt.link.name(), pt.release))
			borrowed = true
		}
		g = pt.at(tp, s.Hidden)
	}
	est := nonTorchEstimate{bytes: gibs(g), covers: fmt.Sprintf("%s (vLLM %s, %s, %s, TP %s)", pt.source, pt.release, pt.device, pt.link.name(), joinInts(pt.tps))}
	if v.Major != pt.release.Major || v.Minor != pt.release.Minor {
		whys = append(whys, fmt.Sprintf("vLLM %s has no TP start-up over %s in the calibration set; the nearest release with one is %s", v, pt.link.name(), pt.release))
	}
	if dev.Name != pt.device {
		whys = append(whys, fmt.Sprintf("%s has no TP start-up; the point is %s's", dev.Name, pt.device))
	}
	if !containsInt(pt.tps, tp) {
		how := fmt.Sprintf("%.3f GiB per doubling of TP, from the 0.19.0 rows", nonTorchPerDoubling)
		if pt.perRankWidth > 0 {
			how = "the figure follows the hidden width a rank holds"
		}
		whys = append(whys, fmt.Sprintf("TP %d has no start-up; TP %s did (%s)", tp, joinInts(pt.tps), how))
	}
	est.calibrated = len(whys) == 0
	est.why = strings.Join(whys, "; ")
	if est.calibrated {
		est.uncertainty = gibs(nonTorchTPErr)
		return est
	}
	// Extrapolated: the figure could be any of the points of its link
	// (NVLink's 0.10.1 and 0.19.0 points are 1.9 GiB apart: custom
	// all-reduce and NVLink buffers, which PCIe groups do not have).
	spread := nonTorchFloorErr
	for _, p := range tpPoints {
		if p.link == link {
			spread = math.Max(spread, math.Abs(p.at(tp, s.Hidden)-g))
		}
	}
	if borrowed && link == linkPCIe {
		// Without custom all-reduce a PCIe group may keep little of an
		// NVLink group's figure: anything down to the one-GPU part.
		spread = math.Max(spread, g-nonTorchOneGPU)
	}
	est.uncertainty = gibs(spread)
	return est
}

// name is the link as the output spells it.
func (l tpLink) name() string {
	switch l {
	case linkNVLink:
		return "NVLink"
	case linkPCIe:
		return "PCIe"
	}
	return "the network across nodes"
}

// nearestTPPoint is the point of the release nearest to v among those ok
// accepts.
func nearestTPPoint(v vllm.Version, ok func(tpPoint) bool) (tpPoint, bool) {
	var best tpPoint
	found := false
	for _, p := range tpPoints {
		if !ok(p) {
			continue
		}
		if !found || minorDistance(p.release, v) < minorDistance(best.release, v) {
			best, found = p, true
		}
	}
	return best, found
}

// crossNodeExtra is what NCCL over the network added to a TP 2 group at
// vLLM 0.10.1 (the cross-node point less the NVLink one).
func crossNodeExtra() float64 {
	var nv, cross float64
	for _, p := range tpPoints {
		if p.release.Minor != 10 {
			continue
		}
		switch p.link {
		case linkNVLink:
			nv = p.atTP2
		case linkCrossNode:
			cross = p.atTP2
		}
	}
	return cross - nv
}

// minorDistance orders releases by how far apart they are.
func minorDistance(a, b vllm.Version) int {
	d := (a.Major-b.Major)*1000 + a.Minor - b.Minor
	if d < 0 {
		return -d
	}
	return d
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func joinInts(xs []int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.Itoa(x))
	}
	return strings.Join(parts, ", ")
}

// contextBytes is what a worker process already holds when vLLM takes its
// baseline snapshot (CUDA context, and NCCL communicators when TP > 1). It
// is outside the utilization budget but on the card. Source: v0.19.0
// start-ups on H100 log 78.68 GiB free of 79.19 at TP=1 (0.51 GiB used)
// and 77.64–77.66 at TP=2/4 (1.53–1.55 GiB). A bare PyTorch process
// agrees: torch 2.11 (CUDA 13.0) held 527 MiB (0.51 GiB) after
// torch.cuda.init() on an H100 SXM and on an H200 alike, by nvidia-smi,
// and 783 MiB after its first BF16 GEMM (cuBLAS's handle, workspace and
// kernels, loaded on first use; vLLM's snapshot is taken before its
// profile run, so this is not in the 0.51).
func contextBytes(tp int) int64 {
	if tp > 1 {
		return gibs(1.54)
	}
	return gibs(0.51)
}

// calibratedCaptureSize is the max_cudagraph_capture_size of the v0.19.0
// calibration runs that cudaGraphBytes is fitted to.
const calibratedCaptureSize = 512

// cudaGraphBytes estimates the CUDA-graph pool captured after the KV cache
// is allocated (vllm-memory.md §2.4): a base plus a per-layer share that
// grows with the width each rank holds; MLA layers keep several times more
// (absorbed-attention decode buffers) and MoE layers more than dense ones.
// Zero with --enforce-eager. Calibrated at max_cudagraph_capture_size 512
// on v0.19.0/H100 ("CUDA graph pool memory: … (actual)"): Llama-3.1-8B
// 0.91 GiB, TP=2 0.76, TP=4 0.67; Llama-3.3-70B TP=2 1.79; DeepSeek-V2-Lite
// 1.57; the per-layer share scales with the capture size. captureSize is
// the settings' after vllm's WithDefaults, which fills vLLM's default.
func cudaGraphBytes(s model.Spec, st stage, tp, captureSize int, eager bool) int64 {
	if eager {
		return 0
	}
	scale := float64(max(captureSize, 0)) / calibratedCaptureSize
	var perLayer float64
	for i := st.first; i < st.last; i++ {
		var l float64
		if s.LayerKind(i).Kind == model.MLA {
			l = 31 * mib
		} else {
			l = 7*mib + 2.2*1024*float64(s.Hidden)/float64(tp)
		}
		if s.IsMoELayer(i) {
			l *= 1.4
		}
		perLayer += l
	}
	return int64(0.4*gib + perLayer*scale)
}

// gibs converts GiB to bytes.
func gibs(x float64) int64 { return int64(x * gib) }
