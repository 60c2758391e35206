package probe

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"headroom.dev/headroom/telemetry"
)

// fakeSMI writes a script that stands in for nvidia-smi (there is no GPU
// here), printing gpuCSV for the GPU query and no compute process.
func fakeSMI(t *testing.T, gpuCSV string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\ncase \"$1\" in\n" +
		"--query-gpu=*) printf '%s' '" + gpuCSV + "' ;;\n" +
		"--query-compute-apps=*) echo 'pid, process_name, used_gpu_memory [MiB], gpu_uuid' ;;\n" +
		"*) exit 9 ;;\nesac\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestSMIGauge(t *testing.T) {
	// nvidia-smi prints MiB; an L4 reports 23034 MiB in all.
	bin := fakeSMI(t, "index, name, uuid, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"+
		"0, NVIDIA L4, GPU-1, 23034, 512, 22522\n")
	g, note := findGauge(context.Background(), telemetry.OpenOptions{SMIPath: bin})
	if g == nil {
		t.Fatalf("no gauge: %s", note)
	}
	got, err := g.Read(context.Background())
	want := []GPUMemory{{Index: 0, Name: "NVIDIA L4", TotalBytes: 23034 << 20, UsedBytes: 512 << 20}}
	if err != nil || !reflect.DeepEqual(got, want) || g.Source() != "nvidia-smi" {
		t.Errorf("got %+v from %s, %v; want %+v", got, g.Source(), err, want)
	}
}

// TestSMIGaugeNotAvailable: a GPU whose used memory nvidia-smi does not
// report gives no gauge, since the release cannot be told.
func TestSMIGaugeNotAvailable(t *testing.T) {
	bin := fakeSMI(t, "index, name, uuid, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"+
		"0, NVIDIA A100, GPU-1, 81920, [N/A], [N/A]\n")
	if g, note := findGauge(context.Background(), telemetry.OpenOptions{SMIPath: bin}); g != nil || !strings.Contains(note, "neither NVML nor nvidia-smi") {
		t.Errorf("got %v, %q", g, note)
	}
}

func TestReleased(t *testing.T) {
	gib := int64(1 << 30)
	before := []GPUMemory{{Index: 0, TotalBytes: 80 * gib, UsedBytes: 2 * gib}}
	// The slack on an 80 GiB card is 1% = 0.8 GiB (more than 512 MiB).
	for _, tt := range []struct {
		used int64
		done bool
	}{{2 * gib, true}, {2*gib + 800<<20, true}, {2*gib + 900<<20, false}, {gib, true}, {60 * gib, false}} {
		now := []GPUMemory{{Index: 0, TotalBytes: 80 * gib, UsedBytes: tt.used}}
		if done, _, ok := released(before, now); !ok || done != tt.done {
			t.Errorf("used %d: done %v, want %v", tt.used, done, tt.done)
		}
	}
	if _, _, ok := released(before, nil); ok {
		t.Error("a GPU that vanished compares")
	}
}

// TestFindGaugeWithoutGPU: here there is neither NVML nor nvidia-smi.
func TestFindGaugeWithoutGPU(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	g, note := FindGauge(context.Background())
	if g != nil || !strings.Contains(note, "neither NVML nor nvidia-smi") {
		t.Skipf("a GPU gauge answers here (%v): nothing to check", g)
	}
}
