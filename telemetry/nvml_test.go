//go:build nvml && cgo

package telemetry

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// There is no GPU where the tests run, so NVML is go-nvml's own mock; the
// numbers are those of the recorded nvidia-smi outputs in testdata/smi.

func busID(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s); i++ {
		b[i] = int8(s[i])
	}
	return b
}

type fakeDevice struct {
	name, uuid, bus string
	mem             nvml.Memory_v2
	v2              nvml.Return // return of GetMemoryInfo_v2
	procs           []nvml.ProcessInfo
	procsRet        nvml.Return
}

func (f fakeDevice) mock() *mock.Device {
	return &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return f.name, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return f.uuid, nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID(f.bus)}, nvml.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) { return f.mem, f.v2 },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: f.mem.Total, Free: f.mem.Free, Used: f.mem.Used}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 31, Memory: 12}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return f.procs, f.procsRet },
	}
}

func fakeNVML(devs ...fakeDevice) *mock.Interface {
	return &mock.Interface{
		InitFunc:        func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:    func() nvml.Return { return nvml.SUCCESS },
		ErrorStringFunc: func(r nvml.Return) string { return "mock error " + r.String() },
		DeviceGetCountFunc: func() (int, nvml.Return) {
			return len(devs), nvml.SUCCESS
		},
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i].mock(), nvml.SUCCESS
		},
	}
}

const noMIG = math.MaxUint32 // NVML's GpuInstanceId outside MIG

func TestNVMLReader(t *testing.T) {
	// An H100 as in query-gpu-570-nounits.csv: 81559 MiB total, 74621 used,
	// 6399 free, 539 reserved; one vLLM process of 74612 MiB and one whose
	// memory NVML withholds (all ones).
	h100 := fakeDevice{name: "NVIDIA H100 80GB HBM3", uuid: "GPU-b2c6f0d4-1e3a-7c59-a8b4-6d2e0f1c3a57", bus: "00000000:19:00.0",
		mem: nvml.Memory_v2{Total: 81559 << 20, Used: 74621 << 20, Free: 6399 << 20, Reserved: 539 << 20}, v2: nvml.SUCCESS,
		procs: []nvml.ProcessInfo{
			{Pid: 3156234, UsedGpuMemory: 74612 << 20, GpuInstanceId: noMIG, ComputeInstanceId: noMIG},
			{Pid: 77, UsedGpuMemory: math.MaxUint64, GpuInstanceId: noMIG, ComputeInstanceId: noMIG},
		}}
	// An old driver without the v2 call: the v1 call is used, no reserved
	// figure. A MIG process carries its instance ids.
	t4 := fakeDevice{name: "Tesla T4", uuid: "GPU-1f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0", bus: "00000000:00:1E.0",
		mem: nvml.Memory_v2{Total: 15109 << 20, Used: 14466 << 20, Free: 643 << 20}, v2: nvml.ERROR_FUNCTION_NOT_FOUND,
		procs: []nvml.ProcessInfo{{Pid: 28417, UsedGpuMemory: 14463 << 20, GpuInstanceId: 1, ComputeInstanceId: 0}}}
	names := map[int]string{3156234: "python3", 28417: "pt_main_thread"}
	r, err := OpenNVML(fakeNVML(h100, t4), func(pid int) string { return names[pid] })
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: h100.uuid, BusID: "00000000:19:00.0",
			TotalBytes: 81559 << 20, UsedBytes: 74621 << 20, FreeBytes: 6399 << 20, ReservedBytes: 539 << 20, UtilizationPercent: 31,
			Processes: []Process{
				{GPUIndex: 0, GPUUUID: h100.uuid, GI: Unknown, CI: Unknown, PID: 3156234, Name: "python3", UsedBytes: 74612 << 20},
				{GPUIndex: 0, GPUUUID: h100.uuid, GI: Unknown, CI: Unknown, PID: 77, Name: "", UsedBytes: Unknown},
			}},
		{Index: 1, Name: "Tesla T4", UUID: t4.uuid, BusID: "00000000:00:1E.0",
			TotalBytes: 15109 << 20, UsedBytes: 14466 << 20, FreeBytes: 643 << 20, ReservedBytes: Unknown, UtilizationPercent: 31,
			Processes: []Process{
				{GPUIndex: 1, GPUUUID: t4.uuid, GI: 1, CI: 0, PID: 28417, Name: "pt_main_thread", UsedBytes: 14463 << 20},
			}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if r.Source() != SourceNVML {
		t.Errorf("source %q", r.Source())
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
}

func TestNVMLProcessListRefused(t *testing.T) {
	// vGPU guests answer NOT_SUPPORTED for the process list: memory stays.
	d := fakeDevice{name: "NVIDIA A10", uuid: "GPU-x", mem: nvml.Memory_v2{Total: 22731 << 20, Used: 100 << 20, Free: 22631 << 20},
		v2: nvml.SUCCESS, procsRet: nvml.ERROR_NOT_SUPPORTED}
	r, err := OpenNVML(fakeNVML(d), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.GPUs(context.Background())
	if err != nil || len(got) != 1 || got[0].UsedBytes != 100<<20 || len(got[0].Processes) != 0 {
		t.Fatalf("got %+v, %v", got, err)
	}
	// Any other failure is an error naming the device.
	d.procsRet = nvml.ERROR_GPU_IS_LOST
	r, _ = OpenNVML(fakeNVML(d), nil)
	if _, err := r.GPUs(context.Background()); err == nil {
		t.Fatal("a lost GPU read as fine")
	}
}

func TestOpenNVMLNoGPU(t *testing.T) {
	tests := []struct {
		name  string
		lib   *mock.Interface
		noGPU bool
	}{
		{"no library", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}, true},
		{"no driver", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED },
			ErrorStringFunc: func(nvml.Return) string { return "Driver Not Loaded" }}, true},
		{"no device", func() *mock.Interface { m := fakeNVML(); return m }(), true},
		{"unknown failure", &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_UNKNOWN },
			ErrorStringFunc: func(nvml.Return) string { return "Unknown Error" }}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenNVML(tt.lib, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrNoGPU) != tt.noGPU {
				t.Errorf("%v: ErrNoGPU want %v", err, tt.noGPU)
			}
		})
	}
}
