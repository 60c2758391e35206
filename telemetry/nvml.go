//go:build nvml && cgo

// NVML is behind the nvml build tag: go-nvml's cgo headers mark NVML's
// older calls deprecated, and a default build would print those C
// compiler warnings before the user's first plan. The image (Dockerfile)
// builds with -tags nvml; a default build reads GPUs through nvidia-smi.

package telemetry

import (
	"context"
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLReader reads GPUs through NVML (libnvidia-ml, loaded at run time).
// It sees the devices NVML sees: all of the node's GPUs, whatever
// CUDA_VISIBLE_DEVICES says. MIG instances are not listed separately; the
// parent GPU's memory covers them.
type NVMLReader struct {
	lib      nvml.Interface
	procName func(pid int) string
}

// OpenNVML initialises lib (nvml.New() for the real library; a mock in
// tests) and checks that it sees at least one device. procName names
// processes by PID; nil leaves names empty. Errors that mean "no GPU here"
// (no library, no driver, no device) wrap ErrNoGPU.
func OpenNVML(lib nvml.Interface, procName func(int) string) (*NVMLReader, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
			return nil, fmt.Errorf("%w: NVML: %v", ErrNoGPU, nvmlError(lib, ret))
		}
		return nil, fmt.Errorf("NVML init: %v", nvmlError(lib, ret))
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || n == 0 {
		lib.Shutdown()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device count: %v", nvmlError(lib, ret))
		}
		return nil, fmt.Errorf("%w: NVML sees no device", ErrNoGPU)
	}
	if procName == nil {
		procName = func(int) string { return "" }
	}
	return &NVMLReader{lib: lib, procName: procName}, nil
}

func openSystemNVML(procName func(int) string) (GPUReader, error) {
	r, err := OpenNVML(nvml.New(), procName)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// nvmlError renders a return code. ErrorString needs the loaded library,
// which a failed load does not have, so codes it cannot name keep their number.
func nvmlError(lib nvml.Interface, ret nvml.Return) string {
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		return "libnvidia-ml.so.1 not found"
	}
	if s := lib.ErrorString(ret); s != "" {
		return s
	}
	return fmt.Sprintf("NVML error %d", int32(ret))
}

// Source is SourceNVML.
func (r *NVMLReader) Source() string { return SourceNVML }

// Close shuts NVML down.
func (r *NVMLReader) Close() error {
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %v", nvmlError(r.lib, ret))
	}
	return nil
}

// GPUs reads every device: name, UUID, bus id, memory (the v2 call, which
// also gives the reserved carve-out; the v1 call where v2 is missing) and
// compute processes.
func (r *NVMLReader) GPUs(ctx context.Context) ([]GPU, error) {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %v", nvmlError(r.lib, ret))
	}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %v", i, nvmlError(r.lib, ret))
		}
		g, err := r.device(i, d)
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

func (r *NVMLReader) device(i int, d nvml.Device) (GPU, error) {
	g := newGPU()
	g.Index = i
	var ret nvml.Return
	if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("NVML device %d name: %v", i, nvmlError(r.lib, ret))
	}
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		g.UUID = ""
	}
	if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.BusID = cString(pci.BusId[:])
	}
	if m, ret := d.GetMemoryInfo_v2(); ret == nvml.SUCCESS {
		g.TotalBytes, g.UsedBytes, g.FreeBytes, g.ReservedBytes = bytesOf(m.Total), bytesOf(m.Used), bytesOf(m.Free), bytesOf(m.Reserved)
	} else if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.TotalBytes, g.UsedBytes, g.FreeBytes = bytesOf(m.Total), bytesOf(m.Used), bytesOf(m.Free)
	} else {
		return g, fmt.Errorf("NVML device %d memory: %v", i, nvmlError(r.lib, ret))
	}
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		g.UtilizationPercent = int(u.Gpu)
	}
	procs, ret := d.GetComputeRunningProcesses()
	switch {
	case ret == nvml.SUCCESS:
		for _, p := range procs {
			pr := newProcess()
			pr.GPUIndex, pr.GPUUUID, pr.PID = i, g.UUID, int(p.Pid)
			pr.UsedBytes = bytesOf(p.UsedGpuMemory)
			pr.Name = r.procName(pr.PID)
			// 0xFFFFFFFF: NVML's "not in a MIG instance".
			if p.GpuInstanceId != math.MaxUint32 {
				pr.GI, pr.CI = int(p.GpuInstanceId), int(p.ComputeInstanceId)
			}
			g.Processes = append(g.Processes, pr)
		}
	case ret == nvml.ERROR_NOT_SUPPORTED, ret == nvml.ERROR_NO_PERMISSION:
		// Some vGPU and container set-ups refuse the list; the memory stands.
	default:
		return g, fmt.Errorf("NVML device %d processes: %v", i, nvmlError(r.lib, ret))
	}
	return g, nil
}

// bytesOf converts NVML's unsigned sizes; NVML_VALUE_NOT_AVAILABLE (all
// ones, what a process's memory reads without permission) and anything
// beyond int64 are Unknown.
func bytesOf(v uint64) int64 {
	if v > math.MaxInt64 {
		return Unknown
	}
	return int64(v)
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
