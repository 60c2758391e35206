package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"headroom.dev/headroom/telemetry"
)

// telemetryFakeSMI writes an nvidia-smi stand-in printing recorded outputs
// from telemetry/testdata/smi (there is no GPU where the tests run).
func telemetryFakeSMI(t *testing.T, gpuFile, appsFile string) string {
	t.Helper()
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "..", "telemetry", "testdata", "smi", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\ncase \"$1\" in\n--query-gpu=*) cat '" + abs(gpuFile) + "' ;;\n" +
		"--query-compute-apps=*) cat '" + abs(appsFile) + "' ;;\n*) exit 2 ;;\nesac\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

var isoTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestSnapshotCSV(t *testing.T) {
	smi := telemetryFakeSMI(t, "query-gpu-535-units.csv", "compute-apps-535.csv")
	code, out, errs := run(t, nil, "snapshot", "--nvidia-smi", smi, "--count", "2", "--interval", "1ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "headroom: note: GPU memory through nvidia-smi at " + smi + " (the binary named)\n"; errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// A header, then per reading two GPU rows and a process row each.
	if len(lines) != 1+2*4 || lines[0] != telemetry.SnapshotCSVHeader {
		t.Fatalf("output:\n%s", out)
	}
	// Bytes are the recorded MiB << 20: 81920 MiB = 85899345920,
	// 74305 MiB = 77914439680, 7128 MiB = 7474249728, 74292 MiB = 77900808192.
	want := []string{
		"nvidia-smi,gpu,0,GPU-4a3f2c1e-9b7d-5e6f-8a1b-2c3d4e5f6a7b,NVIDIA A100-SXM4-80GB,,85899345920,77914439680,7474249728",
		"nvidia-smi,process,0,GPU-4a3f2c1e-9b7d-5e6f-8a1b-2c3d4e5f6a7b,python3,2291733,,77900808192,",
		"nvidia-smi,gpu,1,GPU-8e1d0c9b-7a6f-4e3d-9c2b-1a0f9e8d7c6b,NVIDIA A100-SXM4-80GB,,85899345920,77914439680,7474249728",
		"nvidia-smi,process,1,GPU-8e1d0c9b-7a6f-4e3d-9c2b-1a0f9e8d7c6b,ray::RayWorkerWrapper,2291984,,77900808192,",
	}
	for i, l := range lines[1:] {
		ts, rest, _ := strings.Cut(l, ",")
		if !isoTime.MatchString(ts) {
			t.Errorf("line %d time %q", i+1, ts)
		}
		if rest != want[i%4] {
			t.Errorf("line %d\n got  %s\n want %s", i+1, rest, want[i%4])
		}
	}
}

func TestSnapshotJSON(t *testing.T) {
	// In a container the driver hides per-process memory: null, not -1.
	smi := telemetryFakeSMI(t, "query-gpu-570-l4-container.csv", "compute-apps-570-container.csv")
	code, out, errs := run(t, nil, "snapshot", "--nvidia-smi", smi, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one line:\n%s", out)
	}
	var rec struct {
		Time   string           `json:"time"`
		Source string           `json:"source"`
		GPUs   []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	if !isoTime.MatchString(rec.Time) || rec.Source != "nvidia-smi" || len(rec.GPUs) != 1 {
		t.Fatalf("%+v", rec)
	}
	g := rec.GPUs[0]
	// 23034 MiB = 24152899584 bytes; 488 MiB reserved = 511705088.
	if g["total_bytes"] != float64(24152899584) || g["reserved_bytes"] != float64(511705088) {
		t.Errorf("GPU %v", g)
	}
	procs := g["processes"].([]any)
	if len(procs) != 2 {
		t.Fatalf("processes %v", procs)
	}
	p := procs[1].(map[string]any)
	if v, ok := p["used_bytes"]; !ok || v != nil || p["pid"] != float64(284) || p["name"] != "/opt/venvs/vllm/bin/python3.12" {
		t.Errorf("process %v", p)
	}
	// The JSON reads back into the same GPUs.
	var back struct{ GPUs []telemetry.GPU }
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	if back.GPUs[0].Processes[1].UsedBytes != telemetry.Unknown || back.GPUs[0].FreeBytes != 1563<<20 {
		t.Errorf("read back %+v", back.GPUs[0])
	}
}

func TestSnapshotFileRotation(t *testing.T) {
	smi := telemetryFakeSMI(t, "query-gpu-470-noheader.csv", "compute-apps-noheader-nounits.csv")
	dir := t.TempDir()
	path := filepath.Join(dir, "gpu.csv")
	// A run cut short left half a line.
	if err := os.WriteFile(path, []byte(telemetry.SnapshotCSVHeader+"\n2025-06-01T00:00:00.000Z,nvidia-smi,gp"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each reading is two rows of about 100 bytes; 500 bytes hold two readings.
	code, out, errs := run(t, nil, "snapshot", "--nvidia-smi", smi, "--count", "6", "--interval", "1ms",
		"--file", path, "--max-size", "500B", "--keep", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out != "" || !strings.Contains(errs, "wrote to "+path) {
		t.Errorf("stdout %q stderr %q", out, errs)
	}
	rows := 0
	for _, name := range []string{"gpu.csv", "gpu.csv.1", "gpu.csv.2"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 500 || b[len(b)-1] != '\n' {
			t.Errorf("%s: %d bytes, last %q", name, len(b), b[len(b)-1])
		}
		for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if i == 0 && l != telemetry.SnapshotCSVHeader {
				t.Errorf("%s starts with %q", name, l)
			}
			if i > 0 && strings.HasPrefix(l, "2") && strings.Count(l, ",") == 9 && !strings.HasSuffix(l, "gp") {
				rows++
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gpu.csv.3")); err == nil {
		t.Error("more files kept than --keep")
	}
	if rows == 0 {
		t.Error("no whole rows written")
	}
}

func TestSnapshotBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nvidia-smi")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "--nvidia-smi", missing}, "no NVIDIA GPU"},
		{[]string{"snapshot", "-o", "xml"}, "unknown output format"},
		{[]string{"snapshot", "--interval", "0s"}, "--interval"},
		{[]string{"snapshot", "--max-size", "10MiB"}, "give --file"},
		{[]string{"snapshot", "--file", "x", "--max-size", "ten"}, "--max-size"},
	}
	for _, tt := range tests {
		code, out, errs := run(t, nil, tt.args...)
		if code != ExitBadInput || out != "" || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, code, out, errs)
		}
	}
}

// -o yaml: one YAML document per reading; -o table is the CSV.
func TestSnapshotYAMLAndTable(t *testing.T) {
	smi := telemetryFakeSMI(t, "query-gpu-535-units.csv", "compute-apps-535.csv")
	code, out, errs := run(t, nil, "snapshot", "--nvidia-smi", smi, "--count", "2", "--interval", "1ms", "-o", "yaml")
	if code != 0 || strings.Count(out, "---\n") != 2 || strings.Contains(out, "{") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	_, csv, _ := run(t, nil, "snapshot", "--nvidia-smi", smi, "--count", "1", "--interval", "1ms", "-o", "csv")
	_, table, _ := run(t, nil, "snapshot", "--nvidia-smi", smi, "--count", "1", "--interval", "1ms", "-o", "table")
	if strings.SplitN(csv, "\n", 2)[0] != strings.SplitN(table, "\n", 2)[0] {
		t.Errorf("-o table %q, want the CSV header %q", strings.SplitN(table, "\n", 2)[0], strings.SplitN(csv, "\n", 2)[0])
	}
}
