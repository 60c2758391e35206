package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// executable writes an empty executable named name in dir.
func executable(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFindBinary: --vllm-bin wins, then a pasted path to vllm (after any
// VAR=value), then vllm on PATH; each miss says what to give.
func TestFindBinary(t *testing.T) {
	onPath, venv := t.TempDir(), t.TempDir()
	pathVLLM := executable(t, onPath, "vllm")
	venvVLLM := executable(t, venv, "vllm")
	other := executable(t, venv, "other")
	t.Setenv("PATH", onPath)
	for _, c := range []struct {
		name, bin string
		pasted    []string
		want, err string
	}{
		{name: "flag", bin: other, pasted: []string{venvVLLM, "serve", "m"}, want: other},
		{name: "flag missing", bin: filepath.Join(venv, "nope"), err: "--vllm-bin " + filepath.Join(venv, "nope") + ": "},
		{name: "pasted path", pasted: []string{"VLLM_USE_V1=1", venvVLLM, "serve", "m"}, want: venvVLLM},
		{name: "pasted path missing", pasted: []string{"/opt/none/bin/vllm", "serve", "m"}, err: "/opt/none/bin/vllm: "},
		{name: "pasted vllm", pasted: []string{"vllm", "serve", "m"}, want: pathVLLM},
		{name: "pasted other program", pasted: []string{"python", "-m", "vllm.entrypoints.openai.api_server"}, want: pathVLLM},
		{name: "nothing pasted", want: pathVLLM},
	} {
		got, err := FindBinary(c.bin, c.pasted)
		switch {
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s: got %q, %v; want an error starting %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := FindBinary("", nil); err == nil || err.Error() != "vllm is not on PATH: give --vllm-bin /path/to/vllm" {
		t.Errorf("no vllm on PATH: %v", err)
	}
}

func TestAssignments(t *testing.T) {
	got := Assignments(map[string]string{"VLLM_USE_V1": "1", "HF_HOME": "/data/hf cache", "CUDA_VISIBLE_DEVICES": "0,1"})
	want := []string{"CUDA_VISIBLE_DEVICES=0,1", "HF_HOME=/data/hf cache", "VLLM_USE_V1=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Assignments(nil); len(got) != 0 {
		t.Errorf("no assignments: %q", got)
	}
}

// gauge stands in for a GPU's memory readings.
type gauge struct {
	gpus []GPUMemory
	err  error
}

func (g gauge) Read(context.Context) ([]GPUMemory, error) { return g.gpus, g.err }
func (g gauge) Source() string                            { return "nvidia-smi" }

// TestGaugeGPU: a GPU the catalog knows by the name nvidia-smi prints is
// the catalog's; another is planned with the total it reports.
func TestGaugeGPU(t *testing.T) {
	ctx := context.Background()
	// An L4 reports 23034 MiB in all, as in TestSMIGauge.
	sel, note, err := GaugeGPU(ctx, gauge{gpus: []GPUMemory{{Name: "NVIDIA L4", TotalBytes: 23034 << 20}}}, 0)
	if err != nil || sel.Device.Name != "L4" || sel.Count != 1 || note != `GPU "NVIDIA L4" read from nvidia-smi` {
		t.Errorf("L4: %+v %q %v", sel, note, err)
	}
	sel, note, err = GaugeGPU(ctx, gauge{gpus: []GPUMemory{{Name: "Acme X1", TotalBytes: 48 << 30}}}, 2)
	if err != nil || sel.Device.TotalBytes != 48<<30 || sel.Count != 2 ||
		note != `GPU "Acme X1" read from nvidia-smi is not in the catalog; planning with its 48.00 GiB` {
		t.Errorf("unknown GPU: %+v %q %v", sel, note, err)
	}
	for _, g := range []MemoryGauge{nil, gauge{}, gauge{err: errors.New("driver gone")}} {
		if _, _, err := GaugeGPU(ctx, g, 1); err == nil || !strings.HasPrefix(err.Error(), "no GPU: give --gpu") {
			t.Errorf("%v: %v", g, err)
		}
	}
}
