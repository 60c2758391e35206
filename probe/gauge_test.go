package probe

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseSMI(t *testing.T) {
	// nvidia-smi prints MiB; an H100 80GB HBM3 reports 81559 MiB in all.
	out := "0, NVIDIA H100 80GB HBM3, 81559, 1234\n1, NVIDIA H100 80GB HBM3, 81559, 77000\n"
	got, err := ParseSMI(out)
	want := []GPUMemory{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", TotalBytes: 81559 << 20, UsedBytes: 1234 << 20},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", TotalBytes: 81559 << 20, UsedBytes: 77000 << 20},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"", "\n", "0, NVIDIA A100, [N/A], 12", "0, a, 10, 20", "x, a, 10, 1", "0, NVIDIA, A100, 10, 1", "-1, a, 10, 1"} {
		if g, err := ParseSMI(bad); err == nil {
			t.Errorf("ParseSMI(%q) = %+v; want an error", bad, g)
		}
	}
}

func FuzzParseSMI(f *testing.F) {
	f.Add("0, NVIDIA H100 80GB HBM3, 81559, 1234\n")
	f.Add("0, NVIDIA L4, 23034, 0\n1, NVIDIA L4, 23034, 23034\n")
	f.Add("0, Tesla T4, 15360.5, 1e3\n")
	f.Fuzz(func(t *testing.T, out string) {
		gpus, err := ParseSMI(out)
		if err != nil {
			if gpus != nil {
				t.Fatalf("error with GPUs: %v", gpus)
			}
			return
		}
		if len(gpus) == 0 {
			t.Fatal("no GPUs without an error")
		}
		for _, g := range gpus {
			if g.Index < 0 || g.UsedBytes < 0 || g.UsedBytes > g.TotalBytes || strings.Contains(g.Name, ",") {
				t.Fatalf("GPU %+v", g)
			}
		}
	})
}

func TestSMIGauge(t *testing.T) {
	// A script stands in for nvidia-smi (there is no GPU here).
	bin := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\n[ \"$1\" = \"--query-gpu=index,name,memory.total,memory.used\" ] || exit 9\necho '0, NVIDIA L4, 23034, 512'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := SMIGauge{Bin: bin}.Read(context.Background())
	if err != nil || len(got) != 1 || got[0].UsedBytes != 512<<20 || got[0].Name != "NVIDIA L4" {
		t.Errorf("got %+v, %v", got, err)
	}
	if _, err := (SMIGauge{Bin: filepath.Join(t.TempDir(), "none")}).Read(context.Background()); err == nil {
		t.Error("a missing nvidia-smi reads")
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
