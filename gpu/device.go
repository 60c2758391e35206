// Package gpu knows accelerators: each device's usable memory as CUDA reports
// it, cloud instance types (count x device), NVIDIA GPU-feature-discovery
// product labels and MIG profiles. It knows nothing about models.
//
// Every lookup goes through Resolve, which takes whatever a person or a
// cluster calls a GPU (a device name in any spelling, a cloud instance type,
// a GPU-feature-discovery product label, a MIG profile or extended resource)
// and returns a count and a Device. Byte counts are int64 throughout.
package gpu

import (
	"strconv"
	"strings"
)

// Device is one accelerator as an inference engine sees it.
type Device struct {
	// Name is the canonical catalog name, e.g. "H100-80GB".
	Name string `json:"name"`
	// TotalBytes is the total memory that cudaMemGetInfo reports (what vLLM
	// multiplies by gpu_memory_utilization), not the marketing size.
	TotalBytes int64 `json:"total_bytes"`
	// ComputeCapability is "major.minor" ("9.0"); empty for non-NVIDIA devices.
	ComputeCapability string `json:"compute_capability,omitempty"`
	// Vendor is "nvidia" or "amd".
	Vendor string `json:"vendor"`
	// MIG is set when the device is a MIG slice of a larger GPU.
	MIG string `json:"mig,omitempty"`
	// Source says where TotalBytes comes from (a measurement, a log, a spec sheet).
	Source string `json:"source,omitempty"`

	// NominalBytes is the memory the vendor sells the card with ("80GB" on
	// an H100 is 80 GiB of HBM), kept so listings can show both and tests can
	// check TotalBytes against it. Zero for custom devices.
	NominalBytes int64 `json:"nominal_bytes,omitempty"`
	// Estimated is true when TotalBytes was derived (from a sibling card, a
	// spec sheet minus a guessed driver reservation, a MIG table) rather than
	// read from what the device itself reported. Plans on such devices
	// should say so.
	Estimated bool `json:"estimated,omitempty"`
	// Parent is the catalog name of the whole GPU a MIG slice is cut from.
	Parent string `json:"parent,omitempty"`
	// PCIe is set when the name given is the PCIe card of a part the
	// catalog lists as its SXM module ("A100 80GB PCIe", "NVIDIA-H100-
	// PCIe", Azure's NC A100 v4): the same memory, but no NVLink and the
	// PCIe card's own peaks (PerfOf).
	PCIe bool `json:"pcie,omitempty"`
}

// ParseCapability reads a CUDA compute capability "major.minor" ("8.9");
// 0, 0 for an empty or unreadable one.
func ParseCapability(cc string) (major, minor int) {
	a, b, _ := strings.Cut(cc, ".")
	major, errA := strconv.Atoi(a)
	minor, errB := strconv.Atoi(b)
	if errA != nil || errB != nil || major < 0 || minor < 0 {
		return 0, 0
	}
	return major, minor
}

// Capability is d's CUDA compute capability as numbers; 0, 0 for AMD and
// devices without one.
func (d Device) Capability() (major, minor int) {
	if d.Vendor == "amd" {
		return 0, 0
	}
	return ParseCapability(d.ComputeCapability)
}

// Custom returns a device of the given total memory for GPUs the catalog
// does not know (the CLI's --gpu-memory). The name says the size, e.g.
// "custom-24GiB". totalBytes should be what cudaMemGetInfo would report;
// ParseBytes gives a positive value from text.
func Custom(totalBytes int64) Device {
	return Device{
		Name:       "custom-" + sizeName(totalBytes),
		TotalBytes: totalBytes,
		Source:     "given by the user",
	}
}
