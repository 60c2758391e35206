package gpu

// Perf is a device's datasheet throughput: dense tensor-core peaks (no
// structured sparsity) and memory bandwidth. The step-time model of the
// simulator (package sim) reads it; efficiency and overhead corrections
// live there, not here.
type Perf struct {
	// BF16 and FP8 are dense peak FLOP/s; FP8 is 0 where the device has no
	// FP8 tensor cores (it then runs FP8 weights at the 16-bit rate). On
	// devices without bfloat16 (T4, V100) BF16 holds the FP16 figure, the
	// 16-bit format vLLM runs there.
	BF16, FP8 float64
	// Bandwidth is the memory bandwidth in bytes/s.
	Bandwidth float64
	// Link is the bandwidth one GPU has to its peers in a node, in bytes/s
	// each way (half the bidirectional figure datasheets print): NVLink
	// (or AMD's Infinity Fabric) where the part has it, else PCIe. The
	// tensor-parallel all-reduce of every layer crosses it.
	Link float64
	// NVLink is true for a GPU-to-GPU fabric (NVLink, Infinity Fabric),
	// false for PCIe, whose all-reduce also pays more latency per call.
	NVLink bool
	// Source names the datasheet each figure comes from.
	Source string
}

// Link figures (bytes/s each way). PCIe from the PCI-SIG rates of an x16
// slot: Gen3 16 GB/s, Gen4 32 GB/s, Gen5 64 GB/s each way.
const (
	pcie3 = 16 * giga
	pcie4 = 32 * giga
	pcie5 = 64 * giga
)

const (
	tera = 1e12
	giga = 1e9
)

// perf holds the figures by catalog name. Where a catalog name covers
// several form factors, the figure is the SXM/OAM part's and Source says
// so. The 16-bit figure is the one vLLM's GEMMs run at: bfloat16 with
// FP32 accumulate. GeForce cards run that at half their FP16-accumulate
// figure (NVIDIA's Ampere, Ada and Blackwell GeForce whitepapers list
// both); the professional RTX cards and the data-center parts at full
// rate. MIG slices have no published share of the bandwidth; K80 and M60
// (compute capability under 7.0) are below what vLLM runs on.
var perf = map[string]Perf{
	"T4": {BF16: 65 * tera, Bandwidth: 320 * giga,
		Link:   pcie3,
		Source: "NVIDIA T4 datasheet: 65 TFLOPS mixed-precision FP16/FP32, 320 GB/s GDDR6 (no bfloat16); PCIe Gen3 x16"},
	"V100-16GB": {BF16: 125 * tera, Bandwidth: 900 * giga,
		Link: 150 * giga, NVLink: true,
		Source: "NVIDIA V100 datasheet, SXM2: 125 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16); NVLink 2: 300 GB/s bidirectional"},
	"V100-32GB": {BF16: 125 * tera, Bandwidth: 900 * giga,
		Link: 150 * giga, NVLink: true,
		Source: "NVIDIA V100 datasheet, SXM2: 125 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16); NVLink 2: 300 GB/s bidirectional"},
	"A10": {BF16: 125 * tera, Bandwidth: 600 * giga,
		Link:   pcie4,
		Source: "NVIDIA A10 datasheet: BF16 tensor 125 TFLOPS (250 with sparsity), 600 GB/s GDDR6; PCIe Gen4 x16"},
	"L4": {BF16: 121 * tera, FP8: 242.5 * tera, Bandwidth: 300 * giga,
		Link:   pcie4,
		Source: "NVIDIA L4 datasheet: BF16 242 / FP8 485 TFLOPS with sparsity (halved for dense), 300 GB/s; PCIe Gen4 x16"},
	"A40": {BF16: 149.7 * tera, Bandwidth: 696 * giga,
		Link:   pcie4,
		Source: "NVIDIA A40 datasheet: BF16 tensor 149.7 TFLOPS (299.4 with sparsity), 696 GB/s GDDR6; PCIe Gen4 x16 (an NVLink bridge pairs two cards only)"},
	"L40": {BF16: 181.05 * tera, FP8: 362.1 * tera, Bandwidth: 864 * giga,
		Link:   pcie4,
		Source: "NVIDIA L40 datasheet: BF16 181.05 / FP8 362 TFLOPS dense (double with sparsity), 864 GB/s; PCIe Gen4 x16"},
	"L40S": {BF16: 362.05 * tera, FP8: 733 * tera, Bandwidth: 864 * giga,
		Link:   pcie4,
		Source: "NVIDIA L40S datasheet: BF16 362.05 / FP8 733 TFLOPS dense (733 / 1466 with sparsity), 864 GB/s; PCIe Gen4 x16"},
	"A100-40GB": {BF16: 312 * tera, Bandwidth: 1555 * giga,
		Link: 300 * giga, NVLink: true,
		Source: "NVIDIA A100 datasheet, 40GB SXM: BF16 tensor 312 TFLOPS dense, 1,555 GB/s HBM2; NVLink 3: 600 GB/s bidirectional"},
	"A100-80GB": {BF16: 312 * tera, Bandwidth: 2039 * giga,
		Link: 300 * giga, NVLink: true,
		Source: "NVIDIA A100 datasheet, 80GB SXM: BF16 tensor 312 TFLOPS dense, 2,039 GB/s HBM2e (PCIe: 1,935); NVLink 3: 600 GB/s bidirectional (PCIe cards: Gen4 x16)"},
	"H100-80GB": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 3.35e12,
		Link: 450 * giga, NVLink: true,
		Source: "NVIDIA H100 datasheet, SXM: BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense), 3.35 TB/s (PCIe: 756 / 1,513 dense, 2 TB/s); NVLink 4: 900 GB/s bidirectional (PCIe cards: Gen5 x16)"},
	"H100-94GB": {BF16: 835.5 * tera, FP8: 1670.5 * tera, Bandwidth: 3.9e12,
		Link: 300 * giga, NVLink: true,
		Source: "NVIDIA H100 datasheet, NVL: BF16 1,671 / FP8 3,341 TFLOPS with sparsity (halved for dense), 3.9 TB/s; NVLink bridge: 600 GB/s bidirectional"},
	"H200": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 4.8e12,
		Link: 450 * giga, NVLink: true,
		Source: "NVIDIA H200 datasheet, SXM: BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense), 4.8 TB/s HBM3e; NVLink 4: 900 GB/s bidirectional"},
	"B200": {BF16: 2.25e15, FP8: 4.5e15, Bandwidth: 8e12,
		Link: 900 * giga, NVLink: true,
		Source: "NVIDIA HGX B200 datasheet, per GPU: BF16 4.5 / FP8 9 PFLOPS with sparsity (halved for dense), 8 TB/s HBM3e; NVLink 5: 1.8 TB/s bidirectional"},
	"MI300X": {BF16: 1307.4 * tera, FP8: 2614.9 * tera, Bandwidth: 5.3e12,
		Link: 448 * giga, NVLink: true,
		Source: "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 5.3 TB/s HBM3; Infinity Fabric: 896 GB/s peer-to-peer, bidirectional"},
	"MI325X": {BF16: 1307.4 * tera, FP8: 2614.9 * tera, Bandwidth: 6e12,
		Link: 448 * giga, NVLink: true,
		Source: "AMD Instinct MI325X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 6 TB/s HBM3E; Infinity Fabric: 896 GB/s peer-to-peer, bidirectional"},
	"T4G": {BF16: 65 * tera, Bandwidth: 320 * giga,
		Link:   pcie3,
		Source: "the T4's datasheet: the T4G of AWS g5g instances is the same TU104 T4 board on an Arm (Graviton) host; 65 TFLOPS mixed-precision FP16/FP32, 320 GB/s GDDR6 (no bfloat16); PCIe Gen3 x16"},
	"A2": {BF16: 18 * tera, Bandwidth: 200 * giga,
		Link:   16 * giga,
		Source: "NVIDIA A2 datasheet: BF16 tensor 18 TFLOPS (36 with sparsity), 200 GB/s GDDR6; PCIe Gen4 x8 (16 GB/s each way)"},
	"A16": {BF16: 17.9 * tera, Bandwidth: 200 * giga,
		Link:   pcie4,
		Source: "NVIDIA A16 datasheet, one of the board's four GPUs: FP16/BF16 tensor 4x 17.9 TFLOPS (4x 35.9 with sparsity), 4x 200 GB/s GDDR6; the four share the board's PCIe Gen4 x16"},
	"A10G": {BF16: 125 * tera, Bandwidth: 600 * giga,
		Link:   pcie4,
		Source: "the A10's datasheet (BF16 tensor 125 TFLOPS dense, 600 GB/s GDDR6, PCIe Gen4 x16): the A10G is AWS's variant of the A10 for its G5 instances, the same GA102 part with the same 24 GB of GDDR6 on a 384-bit bus, and NVIDIA publishes no datasheet of its own for it"},
	"A800-80GB": {BF16: 312 * tera, Bandwidth: 2039 * giga,
		Link: 200 * giga, NVLink: true,
		Source: "NVIDIA A800 datasheet, 80GB SXM: the A100 80GB's BF16 tensor 312 TFLOPS dense and 2,039 GB/s HBM2e; NVLink 400 GB/s bidirectional (the A100's 600, cut)"},
	"H800": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 3.35e12,
		Link: 200 * giga, NVLink: true,
		Source: "NVIDIA H800 datasheet, SXM: the H100 SXM's BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense) and 3.35 TB/s; NVLink 400 GB/s bidirectional (the H100's 900, cut)"},
	"H20": {BF16: 148 * tera, FP8: 296 * tera, Bandwidth: 4e12,
		Link: 450 * giga, NVLink: true,
		Source: "NVIDIA H20 specifications (published by NVIDIA's server partners; no datasheet on nvidia.com): BF16 148 / FP8 296 TFLOPS dense, 4.0 TB/s HBM3 (96 GB); NVLink 900 GB/s bidirectional"},
	"GH200": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 4e12,
		Link: 450 * giga, NVLink: true,
		Source: "NVIDIA GH200 Grace Hopper Superchip datasheet, the 96 GB HBM3 part: its Hopper GPU's BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense), 4 TB/s (the 144 GB HBM3e part: 4.9 TB/s); NVLink 900 GB/s bidirectional"},
	"B300": {BF16: 2.25e15, FP8: 4.5e15, Bandwidth: 8e12,
		Link: 900 * giga, NVLink: true,
		Source: "NVIDIA HGX B300 datasheet, per GPU of eight: FP16/BF16 36 / FP8 72 PFLOPS for the eight with sparsity (2.25 / 4.5 PFLOPS a GPU dense), 8 TB/s HBM3e; NVLink 5: 1.8 TB/s bidirectional"},
	"RTX-3090": {BF16: 71 * tera, Bandwidth: 936 * giga,
		Link:   pcie4,
		Source: "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: BF16 tensor with FP32 accumulate 71 TFLOPS dense (142 with sparsity; FP16 with FP16 accumulate 142), 936 GB/s GDDR6X; PCIe Gen4 x16 (an NVLink bridge pairs two cards only)"},
	"RTX-4090": {BF16: 165.2 * tera, FP8: 330.3 * tera, Bandwidth: 1008 * giga,
		Link:   pcie4,
		Source: "NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090: BF16 165.2 / FP8 330.3 TFLOPS with FP32 accumulate, dense (FP16-accumulate figures twice those), 1,008 GB/s GDDR6X; PCIe Gen4 x16, no NVLink"},
	"RTX-5090": {BF16: 209.5 * tera, FP8: 419 * tera, Bandwidth: 1792 * giga,
		Link:   pcie5,
		Source: "NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090: BF16 209.5 / FP8 419 TFLOPS with FP32 accumulate, dense (FP16-accumulate figures twice those), 1,792 GB/s GDDR7; PCIe Gen5 x16, no NVLink"},
	"RTX-A6000": {BF16: 154.8 * tera, Bandwidth: 768 * giga,
		Link:   pcie4,
		Source: "NVIDIA RTX A6000 datasheet: tensor 309.7 TFLOPS with sparsity (154.8 dense, FP16/BF16 at full rate with FP32 accumulate on the professional card), 768 GB/s GDDR6; PCIe Gen4 x16 (an NVLink bridge pairs two cards only)"},
	"RTX-6000-Ada": {BF16: 364.25 * tera, FP8: 728.5 * tera, Bandwidth: 960 * giga,
		Link:   pcie4,
		Source: "NVIDIA RTX 6000 Ada Generation datasheet: FP8 tensor 1,457 TFLOPS with sparsity (728.5 dense; BF16 364.25 dense with FP32 accumulate), 960 GB/s GDDR6; PCIe Gen4 x16, no NVLink"},
	"RTX-PRO-6000": {BF16: 500 * tera, FP8: 1000 * tera, Bandwidth: 1792 * giga,
		Link:   pcie5,
		Source: "NVIDIA RTX PRO 6000 Blackwell datasheet: 4,000 AI TOPS (FP4 with sparsity: 2,000 dense, FP8 1,000 and BF16 500 dense, each half the precision below at full rate on the professional card), 1,792 GB/s GDDR7; PCIe Gen5 x16, no NVLink"},
	"MI210": {BF16: 181 * tera, Bandwidth: 1638.4 * giga,
		Link:   pcie4,
		Source: "AMD Instinct MI210 datasheet: BF16 181.0 TFLOPS (no sparsity figure), 1.6 TB/s HBM2e; PCIe Gen4 x16 (an Infinity Fabric bridge links two or four cards where fitted)"},
	"MI250X": {BF16: 191.5 * tera, Bandwidth: 1638.4 * giga,
		Link: 50 * giga, NVLink: true,
		Source: "AMD Instinct MI250X datasheet, one of its two GCDs (the device ROCm shows): BF16 383 TFLOPS and 3.2 TB/s HBM2e for the module, halved; Infinity Fabric: one link's 100 GB/s bidirectional, the least a GCD has to a peer"},
	"MI355X": {BF16: 2516.6 * tera, FP8: 5033.2 * tera, Bandwidth: 8e12,
		Link: 537.6 * giga, NVLink: true,
		Source: "AMD Instinct MI355X datasheet: FP16/BF16 2,516.6 / FP8 5,033.2 TFLOPS dense, 8 TB/s HBM3E; Infinity Fabric: 7 links of 153.6 GB/s, 1,075.2 GB/s peer-to-peer bidirectional"},
}

// PerfOf returns the datasheet figures of a catalog device; ok is false
// for devices without them and for MIG slices (a slice's share of the
// bandwidth is not published per profile).
func PerfOf(d Device) (Perf, bool) {
	if d.MIG != "" {
		return Perf{}, false
	}
	if p, ok := pciePerf[d.Name]; ok && d.PCIe {
		return p, true
	}
	p, ok := perf[d.Name]
	return p, ok
}

// pciePerf holds the PCIe cards of parts whose catalog entry is the SXM
// module (Device.PCIe): the same memory, lower clocks or bandwidth, and
// PCIe between GPUs (an NVLink bridge can pair two cards, which is not
// assumed).
var pciePerf = map[string]Perf{
	"V100-16GB": {BF16: 112 * tera, Bandwidth: 900 * giga, Link: pcie3,
		Source: "NVIDIA V100 datasheet, PCIe: 112 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16); PCIe Gen3 x16"},
	"V100-32GB": {BF16: 112 * tera, Bandwidth: 900 * giga, Link: pcie3,
		Source: "NVIDIA V100 datasheet, PCIe: 112 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16); PCIe Gen3 x16"},
	"A100-40GB": {BF16: 312 * tera, Bandwidth: 1555 * giga, Link: pcie4,
		Source: "NVIDIA A100 datasheet, 40GB PCIe: BF16 tensor 312 TFLOPS dense, 1,555 GB/s HBM2; PCIe Gen4 x16"},
	"A100-80GB": {BF16: 312 * tera, Bandwidth: 1935 * giga, Link: pcie4,
		Source: "NVIDIA A100 datasheet, 80GB PCIe: BF16 tensor 312 TFLOPS dense, 1,935 GB/s HBM2e; PCIe Gen4 x16"},
	"H100-80GB": {BF16: 756 * tera, FP8: 1513 * tera, Bandwidth: 2e12, Link: pcie5,
		Source: "NVIDIA H100 datasheet, PCIe: BF16 1,513 / FP8 3,026 TFLOPS with sparsity (halved for dense), 2 TB/s HBM2e; PCIe Gen5 x16"},
}
