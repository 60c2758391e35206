package telemetry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSMI writes an nvidia-smi stand-in that prints recorded outputs: the
// --query-gpu file for a GPU query, the --query-compute-apps file for a
// process query, and records its arguments.
func fakeSMI(t *testing.T, gpuFile, appsFile string, exit int) (path, argLog string) {
	t.Helper()
	dir := t.TempDir()
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("testdata", "smi", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	argLog = filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >> '" + argLog + "'\ncase \"$1\" in\n" +
		"--query-gpu=*) cat '" + abs(gpuFile) + "' ;;\n" +
		"--query-compute-apps=*) cat '" + abs(appsFile) + "' ;;\n" +
		"*) echo unexpected; exit 2 ;;\nesac\n"
	if exit != 0 {
		script += "exit " + string(rune('0'+exit)) + "\n"
	}
	path = filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argLog
}

func TestSMIReader(t *testing.T) {
	path, argLog := fakeSMI(t, "query-gpu-535-units.csv", "compute-apps-535.csv", 0)
	r, err := OpenGPUs(OpenOptions{SMIPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if r.Source() != SourceNvidiaSMI {
		t.Fatalf("source %q", r.Source())
	}
	if v := Via(r); v != "nvidia-smi at "+path+" (the binary named)" {
		t.Errorf("Via = %q", v)
	}
	gpus, err := r.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Two A100s, each with the one vLLM worker that holds 74292 MiB.
	if len(gpus) != 2 {
		t.Fatalf("got %d GPUs", len(gpus))
	}
	for i, want := range []struct {
		pid  int
		name string
	}{{2291733, "python3"}, {2291984, "ray::RayWorkerWrapper"}} {
		g := gpus[i]
		if g.UsedBytes != 74305<<20 || len(g.Processes) != 1 || g.Processes[0].PID != want.pid ||
			g.Processes[0].Name != want.name || g.Processes[0].UsedBytes != 74292<<20 || g.Processes[0].GPUIndex != i {
			t.Errorf("GPU %d: %+v", i, g)
		}
	}
	args, err := os.ReadFile(argLog)
	if err != nil {
		t.Fatal(err)
	}
	want := "--query-gpu=index,name,uuid,memory.total,memory.used,memory.free --format=csv,nounits\n" +
		"--query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid --format=csv,nounits\n"
	if string(args) != want {
		t.Errorf("nvidia-smi ran with\n%s\nwant\n%s", args, want)
	}
}

func TestSMIReaderNoGPU(t *testing.T) {
	// nvidia-smi prints "No devices were found" and exits 6.
	path, _ := fakeSMI(t, "no-devices.txt", "no-devices.txt", 6)
	r := &SMIReader{Path: path}
	_, err := r.GPUs(context.Background())
	if !errors.Is(err, ErrNoGPU) {
		t.Fatalf("err = %v, want ErrNoGPU", err)
	}
	// A path that does not exist.
	r = &SMIReader{Path: filepath.Join(t.TempDir(), "nvidia-smi")}
	if _, err := r.GPUs(context.Background()); !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v", err)
	}
}

func TestSMIReaderFailure(t *testing.T) {
	// A failure that is not "no GPU" keeps nvidia-smi's first line.
	path, _ := fakeSMI(t, "no-driver.txt", "no-driver.txt", 9)
	_, err := (&SMIReader{Path: path}).GPUs(context.Background())
	if !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "cannot reach the driver") {
		t.Fatalf("err = %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:07:00.0: Unknown Error' >&2\nexit 255\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = (&SMIReader{Path: bad}).GPUs(context.Background())
	if err == nil || errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "Unable to determine the device handle") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenGPUsNeither(t *testing.T) {
	r, err := OpenGPUs(OpenOptions{LookPath: func(string) (string, error) { return "", errors.New("not found") }})
	if err == nil {
		// NVML loaded: this machine has a GPU.
		r.Close()
		t.Skip("NVML is present here")
	}
	if !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "nvidia-smi is not on PATH") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenGPUsFallsBackToSMI(t *testing.T) {
	path, _ := fakeSMI(t, "query-gpu-470-noheader.csv", "compute-apps-empty.csv", 0)
	r, err := OpenGPUs(OpenOptions{LookPath: func(string) (string, error) { return path, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Source() == SourceNVML {
		t.Skip("NVML is present here")
	}
	// Via names the binary and why NVML was passed over.
	if v := Via(r); !strings.HasPrefix(v, "nvidia-smi at "+path+" (no NVML: ") {
		t.Errorf("Via = %q", v)
	}
	gpus, err := r.GPUs(context.Background())
	if err != nil || len(gpus) != 1 || gpus[0].Name != "Tesla T4" || len(gpus[0].Processes) != 0 {
		t.Fatalf("got %+v, %v", gpus, err)
	}
}

func TestProcComm(t *testing.T) {
	if _, err := os.Stat("/proc/self/comm"); err != nil {
		t.Skip("no /proc here")
	}
	if name := ProcComm(os.Getpid()); name == "" || strings.ContainsRune(name, '\n') {
		t.Errorf("own name %q", name)
	}
	if name := ProcComm(-5); name != "" {
		t.Errorf("name of no process: %q", name)
	}
}

// Sum adds what every GPU reported: two H100s (79.19 GiB as CUDA reports
// it, 81,085,464,576 B each) using 60 and 10 GiB sum to 70 GiB of
// 162,170,929,152 B; one GPU that did not report its use makes the sum
// unknown rather than short.
func TestSum(t *testing.T) {
	const h100 = 81_085_464_576
	gpus := []GPU{{UsedBytes: 60 << 30, TotalBytes: h100}, {UsedBytes: 10 << 30, TotalBytes: h100}}
	if used, total, ok := Sum(gpus); !ok || used != 70<<30 || total != 162_170_929_152 {
		t.Errorf("Sum = %d, %d, %v", used, total, ok)
	}
	gpus[1].UsedBytes = Unknown
	if _, _, ok := Sum(gpus); ok {
		t.Error("a GPU without its use still summed")
	}
	if _, _, ok := Sum(nil); ok {
		t.Error("no GPUs summed")
	}
}
