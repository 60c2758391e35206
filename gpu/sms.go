package gpu

// multiprocessors holds the streaming multiprocessors of each NVIDIA
// catalog device, from NVIDIA's datasheets and architecture whitepapers
// (for a name that covers SXM and PCIe parts, the SXM part's). The memory
// planner reads it for kernels that keep one buffer row per SM (vLLM's
// Triton top-k/top-p sampler).
var multiprocessors = map[string]int{
	"T4": 40, "T4G": 40, "V100-16GB": 80, "V100-32GB": 80,
	"A2": 10, "A16": 10, "A10G": 80, "A10": 72, "L4": 58, "A40": 84, "L40": 142, "L40S": 142,
	"A100-40GB": 108, "A100-80GB": 108, "A800-80GB": 108,
	"H100-80GB": 132, "H800": 132, "H100-94GB": 132, "H20": 78, "GH200": 132, "H200": 132,
	"B200": 148, "B300": 160,
	"RTX-3090": 82, "RTX-4090": 128, "RTX-5090": 170, "RTX-A6000": 84, "RTX-6000-Ada": 142, "RTX-PRO-6000": 188,
}

// Multiprocessors is the device's SM count; ok is false for devices the
// table does not hold (custom sizes, AMD parts). A MIG slice has fewer SMs
// than its parent; the table does not hold slices either.
func Multiprocessors(d Device) (int, bool) {
	if d.MIG != "" {
		return 0, false
	}
	n, ok := multiprocessors[d.Name]
	return n, ok
}
