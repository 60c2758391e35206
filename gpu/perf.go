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
	// Source names the datasheet each figure comes from.
	Source string
}

const (
	tera = 1e12
	giga = 1e9
)

// perf holds the figures by catalog name. Where a catalog name covers
// several form factors, the figure is the SXM/OAM part's and Source says
// so. Devices missing here (consumer cards, A10G, MIG slices) have no
// published dense tensor figure we trust; the simulator then asks for a
// fixed step time.
var perf = map[string]Perf{
	"T4": {BF16: 65 * tera, Bandwidth: 320 * giga,
		Source: "NVIDIA T4 datasheet: 65 TFLOPS mixed-precision FP16/FP32, 320 GB/s GDDR6 (no bfloat16)"},
	"V100-16GB": {BF16: 125 * tera, Bandwidth: 900 * giga,
		Source: "NVIDIA V100 datasheet, SXM2: 125 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16)"},
	"V100-32GB": {BF16: 125 * tera, Bandwidth: 900 * giga,
		Source: "NVIDIA V100 datasheet, SXM2: 125 TFLOPS tensor (FP16), 900 GB/s HBM2 (no bfloat16)"},
	"A10": {BF16: 125 * tera, Bandwidth: 600 * giga,
		Source: "NVIDIA A10 datasheet: BF16 tensor 125 TFLOPS (250 with sparsity), 600 GB/s GDDR6"},
	"L4": {BF16: 121 * tera, FP8: 242.5 * tera, Bandwidth: 300 * giga,
		Source: "NVIDIA L4 datasheet: BF16 242 / FP8 485 TFLOPS with sparsity (halved for dense), 300 GB/s"},
	"A40": {BF16: 149.7 * tera, Bandwidth: 696 * giga,
		Source: "NVIDIA A40 datasheet: BF16 tensor 149.7 TFLOPS (299.4 with sparsity), 696 GB/s GDDR6"},
	"L40": {BF16: 181.05 * tera, FP8: 362.1 * tera, Bandwidth: 864 * giga,
		Source: "NVIDIA L40 datasheet: BF16 181.05 / FP8 362 TFLOPS dense (double with sparsity), 864 GB/s"},
	"L40S": {BF16: 362.05 * tera, FP8: 733 * tera, Bandwidth: 864 * giga,
		Source: "NVIDIA L40S datasheet: BF16 362.05 / FP8 733 TFLOPS dense (733 / 1466 with sparsity), 864 GB/s"},
	"A100-40GB": {BF16: 312 * tera, Bandwidth: 1555 * giga,
		Source: "NVIDIA A100 datasheet, 40GB SXM: BF16 tensor 312 TFLOPS dense, 1,555 GB/s HBM2"},
	"A100-80GB": {BF16: 312 * tera, Bandwidth: 2039 * giga,
		Source: "NVIDIA A100 datasheet, 80GB SXM: BF16 tensor 312 TFLOPS dense, 2,039 GB/s HBM2e (PCIe: 1,935)"},
	"H100-80GB": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 3.35e12,
		Source: "NVIDIA H100 datasheet, SXM: BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense), 3.35 TB/s (PCIe: 756 / 1,513 dense, 2 TB/s)"},
	"H100-94GB": {BF16: 835.5 * tera, FP8: 1670.5 * tera, Bandwidth: 3.9e12,
		Source: "NVIDIA H100 datasheet, NVL: BF16 1,671 / FP8 3,341 TFLOPS with sparsity (halved for dense), 3.9 TB/s"},
	"H200": {BF16: 989.4 * tera, FP8: 1978.9 * tera, Bandwidth: 4.8e12,
		Source: "NVIDIA H200 datasheet, SXM: BF16 1,979 / FP8 3,958 TFLOPS with sparsity (halved for dense), 4.8 TB/s HBM3e"},
	"B200": {BF16: 2.25e15, FP8: 4.5e15, Bandwidth: 8e12,
		Source: "NVIDIA HGX B200 datasheet, per GPU: BF16 4.5 / FP8 9 PFLOPS with sparsity (halved for dense), 8 TB/s HBM3e"},
	"MI300X": {BF16: 1307.4 * tera, FP8: 2614.9 * tera, Bandwidth: 5.3e12,
		Source: "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 5.3 TB/s HBM3"},
	"MI325X": {BF16: 1307.4 * tera, FP8: 2614.9 * tera, Bandwidth: 6e12,
		Source: "AMD Instinct MI325X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 6 TB/s HBM3E"},
}

// PerfOf returns the datasheet figures of a catalog device; ok is false
// for devices without them and for MIG slices (a slice's share of the
// bandwidth is not published per profile).
func PerfOf(d Device) (Perf, bool) {
	if d.MIG != "" {
		return Perf{}, false
	}
	p, ok := perf[d.Name]
	return p, ok
}
