package telemetry

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "smi", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// MiB values below are copied from the recorded outputs; bytes are MiB<<20.
func TestParseQueryGPU(t *testing.T) {
	tests := []struct {
		file string
		want []GPU
	}{
		{"query-gpu-535-units.csv", []GPU{
			{Index: 0, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-4a3f2c1e-9b7d-5e6f-8a1b-2c3d4e5f6a7b",
				TotalBytes: 81920 << 20, UsedBytes: 74305 << 20, FreeBytes: 7128 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
			{Index: 1, Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-8e1d0c9b-7a6f-4e3d-9c2b-1a0f9e8d7c6b",
				TotalBytes: 81920 << 20, UsedBytes: 74305 << 20, FreeBytes: 7128 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
		}},
		// nounits: the unit is only in the header; memory.reserved (R510+) is read too.
		{"query-gpu-570-nounits.csv", []GPU{
			{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-b2c6f0d4-1e3a-7c59-a8b4-6d2e0f1c3a57",
				TotalBytes: 81559 << 20, UsedBytes: 74621 << 20, FreeBytes: 6399 << 20, ReservedBytes: 539 << 20, UtilizationPercent: Unknown},
		}},
		// noheader: the columns are QueryGPUFields.
		{"query-gpu-470-noheader.csv", []GPU{
			{Index: 0, Name: "Tesla T4", UUID: "GPU-1f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0",
				TotalBytes: 15109 << 20, UsedBytes: 14466 << 20, FreeBytes: 643 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
		}},
		// In a container: nounits, with memory.reserved.
		{"query-gpu-570-l4-container.csv", []GPU{
			{Index: 0, Name: "NVIDIA L4", UUID: "GPU-c7a1e9d3-5b2f-4c8e-9a6d-0f3b7e1c5a92",
				TotalBytes: 23034 << 20, UsedBytes: 20983 << 20, FreeBytes: 1563 << 20, ReservedBytes: 488 << 20, UtilizationPercent: Unknown},
		}},
		// Recorded on one H200 (driver 580.159.04) while a PyTorch process
		// held 20 GiB, and before it started: total − used − free is the
		// 614 MiB the driver reserves, which these fields do not name.
		{"query-gpu-580-h200-nounits.csv", []GPU{
			{Index: 0, Name: "NVIDIA H200", UUID: "GPU-080f83a1-947f-164d-fde0-2a30d7b18bb9",
				TotalBytes: 143771 << 20, UsedBytes: 21263 << 20, FreeBytes: 121894 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
		}},
		{"query-gpu-580-h200-idle-units.csv", []GPU{
			{Index: 0, Name: "NVIDIA H200", UUID: "GPU-080f83a1-947f-164d-fde0-2a30d7b18bb9",
				TotalBytes: 143771 << 20, UsedBytes: 0, FreeBytes: 143156 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
		}},
		// utilization.gpu is [N/A] on a MIG-enabled GPU.
		{"query-gpu-550-na.csv", []GPU{
			{Index: 0, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-5d1c0b9a-8f7e-6d5c-4b3a-29180f7e6d5c",
				TotalBytes: 40960 << 20, UsedBytes: 4737 << 20, FreeBytes: 35798 << 20, ReservedBytes: Unknown, UtilizationPercent: Unknown},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseQueryGPU(open(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseQueryGPUFieldsSeedScript(t *testing.T) {
	// The seed's gpu_mem_snapshot.sh: --query-gpu=index,utilization.gpu,
	// utilization.memory,memory.used,memory.total --format=csv,noheader.
	in := "0, 97 %, 63 %, 14466 MiB, 15109 MiB\n"
	got, err := ParseQueryGPUFields(strings.NewReader(in),
		[]string{"index", "utilization.gpu", "utilization.memory", "memory.used", "memory.total"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].UtilizationPercent != 97 || got[0].UsedBytes != 14466<<20 ||
		got[0].TotalBytes != 15109<<20 || got[0].FreeBytes != Unknown {
		t.Errorf("got %+v", got)
	}
}

func TestParseQueryGPUErrors(t *testing.T) {
	tests := []struct {
		name, in string
		noGPU    bool
		want     string
	}{
		{"no devices", "No devices were found\n", true, "No devices were found"},
		{"no driver", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", true, "cannot reach the driver"},
		{"short row", "0, Tesla T4, GPU-1, 15109 MiB\n", false, "has 4 columns, want 6"},
		{"bad memory", "0, Tesla T4, GPU-1, lots, 1 MiB, 1 MiB\n", false, "memory.total"},
		{"bad unit", "0, Tesla T4, GPU-1, 15 TiB, 1 MiB, 1 MiB\n", false, "unit"},
		{"overflow", "0, Tesla T4, GPU-1, 99999999999999 MiB, 1 MiB, 1 MiB\n", false, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseQueryGPU(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if errors.Is(err, ErrNoGPU) != tt.noGPU {
				t.Errorf("errors.Is(err, ErrNoGPU) = %v, want %v", !tt.noGPU, tt.noGPU)
			}
		})
	}
}

func TestParseComputeApps(t *testing.T) {
	p := func(pid int, name string, used int64, uuid string) Process {
		return Process{GPUIndex: Unknown, GI: Unknown, CI: Unknown, PID: pid, Name: name, UsedBytes: used, GPUUUID: uuid}
	}
	tests := []struct {
		file string
		want []Process
	}{
		{"compute-apps-535.csv", []Process{
			p(2291733, "python3", 74292<<20, "GPU-4a3f2c1e-9b7d-5e6f-8a1b-2c3d4e5f6a7b"),
			p(2291984, "ray::RayWorkerWrapper", 74292<<20, "GPU-8e1d0c9b-7a6f-4e3d-9c2b-1a0f9e8d7c6b"),
		}},
		// In a container without the host PID namespace the driver hides
		// per-process memory.
		{"compute-apps-570-container.csv", []Process{
			p(1, "/usr/bin/python3", Unknown, "GPU-c7a1e9d3-5b2f-4c8e-9a6d-0f3b7e1c5a92"),
			p(284, "/opt/venvs/vllm/bin/python3.12", Unknown, "GPU-c7a1e9d3-5b2f-4c8e-9a6d-0f3b7e1c5a92"),
		}},
		{"compute-apps-empty.csv", []Process{}},
		// The H200 recording (driver 580.159.04), with and without units.
		{"compute-apps-580-h200-nounits.csv", []Process{p(476, "python3", 21254<<20, "GPU-080f83a1-947f-164d-fde0-2a30d7b18bb9")}},
		{"compute-apps-580-h200-units.csv", []Process{p(476, "python3", 21254<<20, "GPU-080f83a1-947f-164d-fde0-2a30d7b18bb9")}},
		{"compute-apps-noheader-nounits.csv", []Process{
			p(28417, "python3", 14463<<20, "GPU-1f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseComputeApps(open(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseComputeAppsCommaInName(t *testing.T) {
	// A process name with ", " gives one surplus column; it belongs to the name.
	in := "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n77, worker, rank 0, 1024 MiB, GPU-a\n"
	got, err := ParseComputeApps(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "worker, rank 0" || got[0].UsedBytes != 1024<<20 || got[0].GPUUUID != "GPU-a" {
		t.Errorf("got %+v", got)
	}
}

func TestParseComputeAppsNoProcessesLine(t *testing.T) {
	got, err := ParseComputeApps(strings.NewReader("No running processes found\n"))
	if err != nil || len(got) != 0 {
		t.Errorf("got %v, %v; want no processes and no error", got, err)
	}
}

func TestParseSMIScreen(t *testing.T) {
	proc := func(gpu, gi, ci, pid int, typ, name string, used int64) Process {
		return Process{GPUIndex: gpu, GI: gi, CI: ci, PID: pid, Type: typ, Name: name, UsedBytes: used}
	}
	gpu := func(i int, name, bus string, used, total int64, util int) GPU {
		return GPU{Index: i, Name: name, BusID: bus, UsedBytes: used, TotalBytes: total, FreeBytes: total - used,
			ReservedBytes: Unknown, UtilizationPercent: util}
	}
	tests := []struct {
		file         string
		driver, cuda string
		gpus         []GPU
		mig          []MIGDevice
		procs        []Process
		noProcesses  bool
	}{
		{file: "screen-418-v100.txt", driver: "418.67", cuda: "10.1",
			gpus: []GPU{
				gpu(0, "Tesla V100-SXM2...", "00000000:00:1B.0", 15440<<20, 16130<<20, 0),
				gpu(1, "Tesla V100-SXM2...", "00000000:00:1C.0", 11<<20, 16130<<20, 0),
			},
			// Before R450 the process table had no GI/CI columns.
			procs: []Process{proc(0, Unknown, Unknown, 40177, "C", "/opt/conda/bin/python", 15429<<20)}},
		{file: "screen-470-t4.txt", driver: "470.82.01", cuda: "11.4",
			gpus:  []GPU{gpu(0, "Tesla T4", "00000000:00:1E.0", 14466<<20, 15109<<20, 0)},
			procs: []Process{proc(0, Unknown, Unknown, 28417, "C", "python3", 14463<<20)}},
		{file: "screen-535-a100x2.txt", driver: "535.104.05", cuda: "12.2",
			gpus: []GPU{
				gpu(0, "NVIDIA A100-SXM4-80GB", "00000000:07:00.0", 74305<<20, 81920<<20, 31),
				gpu(1, "NVIDIA A100-SXM4-80GB", "00000000:0F:00.0", 74305<<20, 81920<<20, 29),
			},
			procs: []Process{
				proc(0, Unknown, Unknown, 2291733, "C", "python3", 74292<<20),
				proc(1, Unknown, Unknown, 2291984, "C", "ray::RayWorkerWrapper", 74292<<20),
			}},
		{file: "screen-550-h100-noproc.txt", driver: "550.54.15", cuda: "12.4",
			gpus:        []GPU{gpu(0, "NVIDIA H100 80GB HBM3", "00000000:19:00.0", 4<<20, 81559<<20, 0)},
			noProcesses: true},
		// Recorded on one H200 while a PyTorch process held 20 GiB; the
		// screen leaves out the 614 MiB the driver reserves, so free is
		// taken as total − used.
		{file: "screen-580-h200.txt", driver: "580.159.04", cuda: "13.0",
			gpus:  []GPU{gpu(0, "NVIDIA H200", "00000000:00:06.0", 21263<<20, 143771<<20, 7)},
			procs: []Process{proc(0, Unknown, Unknown, 476, "C", "python3", 21254<<20)}},
		{file: "screen-570-l4-container.txt", driver: "570.133.20", cuda: "12.8",
			gpus: []GPU{gpu(0, "NVIDIA L4", "00000000:00:03.0", 20983<<20, 23034<<20, 87)},
			procs: []Process{
				proc(0, Unknown, Unknown, 1, "C", "/usr/bin/python3", Unknown),
				proc(0, Unknown, Unknown, 284, "C", "...rs/vllm/bin/python3.12", Unknown),
			}},
		// GPU-Util is N/A with MIG on; the MIG table gives each instance's
		// memory and, on the line below, its BAR1.
		{file: "screen-535-a100-mig.txt", driver: "535.129.03", cuda: "12.2",
			gpus: []GPU{gpu(0, "NVIDIA A100-SXM4-40GB", "00000000:00:04.0", 4737<<20, 40960<<20, Unknown)},
			mig: []MIGDevice{
				{GPUIndex: 0, GI: 1, CI: 0, Index: 0, UsedBytes: 4712 << 20, TotalBytes: 19968 << 20, BAR1UsedBytes: 2 << 20, BAR1TotalBytes: 32767 << 20},
				{GPUIndex: 0, GI: 2, CI: 0, Index: 1, UsedBytes: 13 << 20, TotalBytes: 9728 << 20, BAR1UsedBytes: 0, BAR1TotalBytes: 16383 << 20},
				{GPUIndex: 0, GI: 3, CI: 0, Index: 2, UsedBytes: 12 << 20, TotalBytes: 9728 << 20, BAR1UsedBytes: 0, BAR1TotalBytes: 16383 << 20},
			},
			procs: []Process{proc(0, 1, 0, 21837, "C", "python3", 4698<<20)}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, err := ParseSMIScreen(open(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if s.DriverVersion != tt.driver || s.CUDAVersion != tt.cuda {
				t.Errorf("versions %q/%q, want %q/%q", s.DriverVersion, s.CUDAVersion, tt.driver, tt.cuda)
			}
			if s.NoProcesses != tt.noProcesses {
				t.Errorf("NoProcesses = %v", s.NoProcesses)
			}
			if !reflect.DeepEqual(s.Processes, tt.procs) {
				t.Errorf("processes\n got  %+v\n want %+v", s.Processes, tt.procs)
			}
			if !reflect.DeepEqual(s.MIG, tt.mig) {
				t.Errorf("MIG\n got  %+v\n want %+v", s.MIG, tt.mig)
			}
			// Each process also hangs under its GPU.
			want := AttachProcesses(tt.gpus, tt.procs)
			if !reflect.DeepEqual(s.GPUs, want) {
				t.Errorf("GPUs\n got  %+v\n want %+v", s.GPUs, want)
			}
		})
	}
}

func TestParseSMIScreenErrors(t *testing.T) {
	for _, tt := range []struct {
		file  string
		noGPU bool
	}{{"no-devices.txt", true}, {"no-driver.txt", true}, {"query-gpu-535-units.csv", false}} {
		_, err := ParseSMIScreen(open(t, tt.file))
		if err == nil {
			t.Fatalf("%s: no error", tt.file)
		}
		if errors.Is(err, ErrNoGPU) != tt.noGPU {
			t.Errorf("%s: %v; ErrNoGPU want %v", tt.file, err, tt.noGPU)
		}
	}
}

func TestParseDmon(t *testing.T) {
	d := func(date, tm string, gpu int, fb, bar1 int64, sm, mem int) DmonSample {
		return DmonSample{Date: date, Time: tm, GPU: gpu, FBBytes: fb, BAR1Bytes: bar1, SMPercent: sm, MemPercent: mem}
	}
	tests := []struct {
		file string
		want []DmonSample
	}{
		// R470: u columns (sm mem enc dec) before m columns (fb bar1).
		{"dmon-470.txt", []DmonSample{
			d("", "", 0, 14466<<20, 5<<20, 97, 63),
			d("", "", 0, 14466<<20, 5<<20, 98, 61),
			d("", "", 0, 14466<<20, 5<<20, 0, 0),
		}},
		// R580 on an H200 (recorded): ccpm comes after bar1.
		{"dmon-580-h200.txt", []DmonSample{
			d("", "", 0, 21263<<20, 21264<<20, 0, 0),
			d("", "", 0, 21263<<20, 21264<<20, 0, 0),
			d("", "", 0, 21263<<20, 21264<<20, 0, 0),
		}},
		{"dmon-580-h200-dt.txt", []DmonSample{
			d("20261127", "12:07:16", 0, 21263<<20, 21264<<20, 0, 0),
			d("20261127", "12:07:17", 0, 21263<<20, 21264<<20, 0, 0),
		}},
		// R550 with -o DT: date and time first; jpg, ofa, ccpm added; "-" is no value.
		{"dmon-550-dt.txt", []DmonSample{
			d("20240313", "08:10:02", 0, 74621<<20, 5<<20, 91, 58),
			d("20240313", "08:10:02", 1, 74621<<20, 5<<20, 89, 57),
			d("20240313", "08:10:04", 0, 74621<<20, 5<<20, Unknown, Unknown),
			d("20240313", "08:10:04", 1, 74621<<20, 5<<20, 93, 60),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseDmon(open(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseDmonErrors(t *testing.T) {
	for name, in := range map[string]string{
		"no header":    "    0    97    63\n",
		"column count": "# gpu sm mem fb bar1\n# Idx % % MB MB\n 0 1 2 3\n",
		"bad fb":       "# gpu fb\n# Idx MB\n 0 lots\n",
		"empty":        "",
		"no devices":   "No devices were found\n",
	} {
		if _, err := ParseDmon(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAttachProcessesDoesNotAlias(t *testing.T) {
	in := []GPU{{Index: 0, UUID: "GPU-a", Processes: make([]Process, 0, 4)}}
	out := AttachProcesses(in, []Process{{GPUUUID: "GPU-a", GPUIndex: Unknown, PID: 7}})
	if len(out[0].Processes) != 1 || out[0].Processes[0].GPUIndex != 0 {
		t.Fatalf("got %+v", out)
	}
	if len(in[0].Processes) != 0 || cap(in[0].Processes) == 4 && in[0].Processes[:1][0].PID == 7 {
		t.Errorf("input slice was written through")
	}
	// A process on a GPU not in the list is dropped.
	out = AttachProcesses(in, []Process{{GPUUUID: "GPU-z", PID: 9}})
	if len(out[0].Processes) != 0 {
		t.Errorf("got %+v", out)
	}
}
