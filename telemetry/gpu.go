package telemetry

import "errors"

// Unknown marks a byte count or index that the source did not report
// (nvidia-smi's "[N/A]", "[Insufficient Permissions]", NVML's
// NVML_VALUE_NOT_AVAILABLE). Zero is a real value, so it cannot be the marker.
const Unknown = -1

// ErrNoGPU is wrapped by errors that mean this machine has no usable NVIDIA
// GPU: neither NVML nor nvidia-smi is present, nvidia-smi found no device, or
// it cannot talk to the driver. Callers test it with errors.Is.
var ErrNoGPU = errors.New("no NVIDIA GPU")

// GPU is one device's memory at one moment. Its JSON form writes Unknown
// as null.
type GPU struct {
	// Index is the device's index as nvidia-smi and CUDA (without
	// CUDA_VISIBLE_DEVICES) number it; Unknown when the source omits it.
	Index int
	Name  string
	UUID  string
	BusID string
	// TotalBytes, UsedBytes and FreeBytes are the driver's view; each is
	// Unknown when not reported. Used + Free can be less than Total: newer
	// drivers keep a reserved carve-out (ReservedBytes) outside both.
	TotalBytes    int64
	UsedBytes     int64
	FreeBytes     int64
	ReservedBytes int64
	// UtilizationPercent is the GPU (SM) utilization, Unknown if absent.
	UtilizationPercent int
	// Processes are the compute processes on this device, when known.
	Processes []Process
}

// Process is one process holding memory on a GPU.
type Process struct {
	// GPUIndex is the device index (Unknown when the source gives only the
	// UUID, as --query-compute-apps does).
	GPUIndex int
	GPUUUID  string
	// GI and CI are the MIG GPU- and compute-instance ids, Unknown outside MIG.
	GI  int
	CI  int
	PID int
	// Type is the screen's process type: C (compute), G (graphics), C+G, M
	// (MPS server) ...; empty where the source does not say.
	Type string
	Name string
	// UsedBytes is Unknown where the driver hides it (containers without
	// the host PID namespace, Windows WDDM).
	UsedBytes int64
}

// MIGDevice is one row of nvidia-smi's "MIG devices" table.
type MIGDevice struct {
	GPUIndex int `json:"gpu_index"`
	GI       int `json:"gi"`
	CI       int `json:"ci"`
	// Index is the MIG device number within its GPU ("MIG Dev").
	Index          int   `json:"index"`
	UsedBytes      int64 `json:"used_bytes"`
	TotalBytes     int64 `json:"total_bytes"`
	BAR1UsedBytes  int64 `json:"bar1_used_bytes"`
	BAR1TotalBytes int64 `json:"bar1_total_bytes"`
}

func newGPU() GPU {
	return GPU{Index: Unknown, TotalBytes: Unknown, UsedBytes: Unknown, FreeBytes: Unknown,
		ReservedBytes: Unknown, UtilizationPercent: Unknown}
}

func newProcess() Process {
	return Process{GPUIndex: Unknown, GI: Unknown, CI: Unknown, PID: Unknown, UsedBytes: Unknown}
}

// AttachProcesses returns gpus with each process appended to the device it
// runs on, matched by UUID, or by index when the process has no UUID.
// Processes that match no device are dropped: they belong to GPUs outside
// the list (e.g. hidden by CUDA_VISIBLE_DEVICES).
func AttachProcesses(gpus []GPU, procs []Process) []GPU {
	out := make([]GPU, len(gpus))
	for i, g := range gpus {
		g.Processes = append([]Process(nil), g.Processes...)
		out[i] = g
	}
	for _, p := range procs {
		for i := range out {
			byUUID := p.GPUUUID != "" && p.GPUUUID == out[i].UUID
			byIndex := p.GPUUUID == "" && p.GPUIndex != Unknown && p.GPUIndex == out[i].Index
			if byUUID || byIndex {
				if p.GPUIndex == Unknown {
					p.GPUIndex = out[i].Index
				}
				out[i].Processes = append(out[i].Processes, p)
				break
			}
		}
	}
	return out
}

// Sum is the memory used and the total of gpus together; ok is false when
// there are none or any of them did not report both, since a partial sum
// would read as a machine with less memory than it has.
func Sum(gpus []GPU) (used, total int64, ok bool) {
	for _, g := range gpus {
		if g.UsedBytes == Unknown || g.TotalBytes == Unknown {
			return 0, 0, false
		}
		used += g.UsedBytes
		total += g.TotalBytes
	}
	return used, total, len(gpus) > 0
}
