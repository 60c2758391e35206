package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/admission"
)

// The host plan's example pod (docs/host.md): check denies it for its
// memory limit and its /dev/shm, exit 1, and the patch it prints (-o
// patch, the lines the JSON carries) applied to the file is admitted,
// exit 0. The YAML keeps its own layout: the limit's line is replaced,
// the rest is added after the container's last line, deepest first.
func TestCheckHostPatchPasses(t *testing.T) {
	path := filepath.Join("testdata", "check", "host-offload.yaml")
	code, out, errs := run(t, offline, "check", path, "-o", "json")
	var rs []CheckResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || code != 1 || len(rs) != 1 {
		t.Fatalf("exit %d, %v: %s %s", code, err, out, errs)
	}
	r := rs[0]
	if len(r.Denials) != 2 || !strings.Contains(r.Denials[0], "its memory limit 32Gi is below the 78.83 GiB") || !strings.Contains(r.Denials[1], "no /dev/shm volume") {
		t.Fatalf("denials %q", r.Denials)
	}
	if len(r.PodFixes) != 2 || r.PodFixes[0].Code != admission.CodeHostMemory || r.PodFixes[1].Code != admission.CodeSharedMemory || len(r.PodPatch) != 4 {
		t.Fatalf("pod fixes %+v, patch %+v", r.PodFixes, r.PodPatch)
	}
	want := []PatchLine{
		{Line: 29, Old: "            memory: 32Gi", New: "            memory: 104Gi"},
		{Line: 30, New: "          requests:"},
		{Line: 30, New: "            memory: 104Gi"},
		{Line: 30, New: "        volumeMounts:"},
		{Line: 30, New: "        - mountPath: /dev/shm"},
		{Line: 30, New: "          name: dshm"},
		{Line: 30, New: "      volumes:"},
		{Line: 30, New: "      - emptyDir:"},
		{Line: 30, New: "          medium: Memory"},
		{Line: 30, New: "          sizeLimit: 65Gi"},
		{Line: 30, New: "        name: dshm"},
	}
	if len(r.Patch) != len(want) {
		t.Fatalf("patch lines %+v", r.Patch)
	}
	for i := range want {
		if r.Patch[i] != want[i] {
			t.Errorf("patch line %d: %+v, want %+v", i, r.Patch[i], want[i])
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ops, lines, err := readText(path, data).diffOps(r.Patch)
	if err != nil || len(ops) == 0 {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "fixed.yaml")
	if err := os.WriteFile(dst, readText(path, data).bytes(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, offline, "check", dst); code != 0 || !strings.HasPrefix(out, "ADMITTED") {
		t.Fatalf("patched: exit %d: %s %s", code, out, errs)
	}
}

// Flow style has no line to add a key in: the fix stays in pod_patch,
// and the lines carry only what has a place.
func TestPodPatchFlowStyle(t *testing.T) {
	doc := splitManifest(`apiVersion: apps/v1
kind: Deployment
metadata: {name: flow}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.33.0
        args: [meta-llama/Llama-3.1-70B-Instruct, --tensor-parallel-size, "4", --kv-offloading-size, "64"]
        resources: {limits: {nvidia.com/gpu: 4, memory: 32Gi}}
`)[0]
	fixes := []admission.PodFix{{Code: admission.CodeHostMemory, Ops: []admission.PatchOp{{Op: "add", Path: "/containers/0/resources/limits/memory", Value: "104Gi"}}}}
	if got, _ := podPatchLines(doc, "Deployment", fixes); len(got) != 0 {
		t.Fatalf("a flow mapping was edited as lines: %+v", got)
	}
}

// FuzzPodPatchLines: any manifest text, with the host example's fixes:
// never a panic, and lines only where the edited text reads as the
// patched object.
func FuzzPodPatchLines(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "check", "host-offload.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(seed))
	f.Add("spec:\n  template:\n    spec:\n      containers: [{name: vllm}]\n")
	f.Add("spec:\n  template:\n    spec:\n      containers:\n      - name: vllm\n        resources: |\n          x\n")
	fixes := []admission.PodFix{
		{Code: admission.CodeHostMemory, Ops: []admission.PatchOp{{Op: "add", Path: "/containers/0/resources/limits/memory", Value: "104Gi"}, {Op: "add", Path: "/containers/0/resources/requests", Value: map[string]string{"memory": "104Gi"}}}},
		{Code: admission.CodeSharedMemory, Ops: []admission.PatchOp{{Op: "add", Path: "/volumes", Value: []any{map[string]any{"name": "dshm", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "65Gi"}}}}, {Op: "add", Path: "/containers/0/volumeMounts/-", Value: map[string]string{"name": "dshm", "mountPath": "/dev/shm"}}}},
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<16 {
			return
		}
		d := manifestDoc{first: 1, lines: strings.Split(text, "\n")}
		lines, _ := podPatchLines(d, "Deployment", fixes)
		if len(lines) == 0 {
			return
		}
		for _, l := range lines {
			if l.Line < 1 || l.Line > len(d.lines)+1 {
				t.Fatalf("line %d of a %d-line document", l.Line, len(d.lines))
			}
		}
	})
}

// An InferenceService's custom predictor holds its pod spec at
// /spec/predictor: its pod fixes are patched there (they were written
// under /spec/template/spec, which it does not have, and the file's
// lines were left without them), and the written file is admitted.
func TestCheckInferenceServicePodPatch(t *testing.T) {
	src := filepath.Join("testdata", "check", "isvc-custom.yaml")
	code, out, errs := run(t, offline, "check", src, "-o", "json")
	var rs []CheckResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || code != 1 || len(rs) != 1 {
		t.Fatalf("exit %d, %v: %s %s", code, err, out, errs)
	}
	r := rs[0]
	if len(r.PodPatch) == 0 || len(r.Patch) == 0 {
		t.Fatalf("pod patch %+v, lines %+v; denials %q", r.PodPatch, r.Patch, r.Denials)
	}
	for _, op := range r.PodPatch {
		if !strings.HasPrefix(op.Path, "/spec/predictor/") {
			t.Errorf("pod patch op at %s", op.Path)
		}
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "isvc.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, offline, "check", path, "--write"); code != 0 || !strings.HasPrefix(out, "ADMITTED") {
		t.Fatalf("--write: exit %d: %s %s", code, out, errs)
	}
}
