package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/memory"
)

// podRequest is the CREATE review of a Pod written as YAML.
func podRequest(t *testing.T, text string) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "default", Name: "p",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}
}

// copyFixture copies testdata/check/name into a temporary directory.
func copyFixture(t *testing.T, name string) (path string, data []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "check", name))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// checkJSON is check -o json of one file of one object.
func checkJSON(t *testing.T, path string) (int, CheckResult) {
	t.Helper()
	code, out, errs := run(t, offline, "check", path, "-o", "json")
	var rs []CheckResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("%s: exit %d, %v: %s %s", path, code, err, out, errs)
	}
	return code, rs[0]
}

// applyWithPatch applies a unified diff to a copy of data with the patch
// program, where the machine has one, and returns the result.
func applyWithPatch(t *testing.T, data []byte, diff string) ([]byte, bool) {
	t.Helper()
	bin, err := exec.LookPath("patch")
	if err != nil {
		return nil, false
	}
	dst := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--batch", dst)
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch refused the diff: %v: %s\n%s", err, out, diff)
	}
	b, _ := os.ReadFile(dst)
	return b, true
}

// moe-fp8-l4.yaml asks one L4 for Qwen3-30B-A3B-FP8: 29.04 GiB of weights
// (30.53 B parameters, the layers in FP8), more than the 22.03 GiB an L4
// reports, so no flag makes it fit one card; the webhook's fix is tensor
// parallel 2 on 2 L4s, 14.52 GiB of weights each. Written without the
// second GPU, check denied its own output ("tensor × pipeline × data
// parallel = 2 × 1 × 1 needs 2 GPUs, but only 1 are given"). Now --write
// sets nvidia.com/gpu to 2 in limits and requests with the flags, and the
// written file passes its re-check; -o patch applied by patch gives the
// same file.
func TestCheckWriteAddsGPUs(t *testing.T) {
	path, data := copyFixture(t, "moe-fp8-l4.yaml")
	code, r := checkJSON(t, path)
	if code != ExitNoFit || r.Fix == nil || r.Fix.Code != memory.AltMoreGPUs || r.Fix.Count != 2 || r.PatchNote != "" {
		t.Fatalf("exit %d, fix %+v, note %q", code, r.Fix, r.PatchNote)
	}
	want := map[PatchLine]bool{
		{Line: 24, New: "        - --tensor-parallel-size=2"}:                                  true,
		{Line: 26, Old: "            nvidia.com/gpu: 1", New: "            nvidia.com/gpu: 2"}: true,
		{Line: 29, Old: "            nvidia.com/gpu: 1", New: "            nvidia.com/gpu: 2"}: true,
	}
	for _, p := range r.Patch {
		delete(want, p)
	}
	if len(want) != 0 {
		t.Errorf("patch %+v lacks %+v", r.Patch, want)
	}
	code, diff, errs := run(t, offline, "check", path, "-o", "patch")
	if code != ExitNoFit || errs != "" || strings.Count(diff, "+            nvidia.com/gpu: 2\n") != 2 {
		t.Fatalf("-o patch: exit %d: %s %s", code, diff, errs)
	}
	code, out, errs := run(t, offline, "check", path, "--write")
	written, _ := os.ReadFile(path)
	if code != ExitFits || !strings.HasPrefix(out, "ADMITTED") || !strings.Contains(errs, "wrote the fixes into") || strings.Count(string(written), "nvidia.com/gpu: 2\n") != 2 {
		t.Fatalf("--write: exit %d: %s %s\n%s", code, out, errs, written)
	}
	if patched, ok := applyWithPatch(t, data, diff); ok && string(patched) != string(written) {
		t.Errorf("patch and --write disagree:\n%s\n%s", patched, written)
	}
	if code, _, errs := run(t, offline, "check", path, "--write"); code != ExitFits || !strings.Contains(errs, "no fix to write") {
		t.Errorf("a second --write: exit %d: %s", code, errs)
	}
}

// What --write writes, check admits: the user's own manifests (the
// L4 one at 131072 tokens and utilization 0.95, and GKE's), a flow-style
// one and one pinned to an instance type, each written and checked again.
// Whichever fix the webhook ranks first, the written file is not denied,
// and -o patch is the same change.
func TestCheckWriteThenRecheck(t *testing.T) {
	for _, name := range []string{"l4-long-context.yaml", "gke-l4.yaml", "flow-args.yaml", "moe-fp8-l4.yaml", "host-offload.yaml", "in-house.yaml"} {
		path, data := copyFixture(t, name)
		_, diff, _ := run(t, offline, "check", path, "-o", "patch")
		code, out, errs := run(t, offline, "check", path, "--write")
		if code == ExitNoFit || code == ExitBadInput {
			t.Errorf("%s: written and checked again: exit %d: %s %s", name, code, out, errs)
			continue
		}
		written, _ := os.ReadFile(path)
		if patched, ok := applyWithPatch(t, data, diff); ok && string(patched) != string(written) {
			t.Errorf("%s: patch and --write disagree", name)
		}
	}
}

// args as a flow list, resources as a flow mapping: the fix edits them in
// place, in their own style (it said "no args line to patch", and -o patch
// carried the /dev/shm hunk alone, so the patched object stayed denied).
// Tensor parallel 2 needs a /dev/shm, found by checking the fixed object;
// the block pod spec takes it as lines.
func TestCheckFixFlowStyle(t *testing.T) {
	path, data := copyFixture(t, "flow-args.yaml")
	code, r := checkJSON(t, path)
	if code != ExitNoFit || r.Fix == nil || r.Fix.Count != 2 || len(r.ThenFixes) == 0 || !strings.Contains(r.ThenFixes[len(r.ThenFixes)-1], "/dev/shm") {
		t.Fatalf("exit %d: %+v", code, r)
	}
	code, diff, errs := run(t, offline, "check", path, "-o", "patch")
	if code != ExitNoFit || errs != "" ||
		!strings.Contains(diff, `+        args: ["--model", "Qwen/Qwen3-30B-A3B-FP8", "--max-model-len", "16384", "--tensor-parallel-size=2", "--gpu-memory-utilization=`) ||
		!strings.Contains(diff, `+        resources: {limits: {nvidia.com/gpu: "2", memory: 32Gi}}`+"\n") || !strings.Contains(diff, "+        - mountPath: /dev/shm\n") {
		t.Fatalf("exit %d: %s %s", code, diff, errs)
	}
	_, lines, err := readText(path, data).diffOps(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	fixed := filepath.Join(t.TempDir(), "fixed.yaml")
	if err := os.WriteFile(fixed, readText(path, data).bytes(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run(t, offline, "check", fixed); code != ExitFits || !strings.HasPrefix(out, "ADMITTED") {
		t.Errorf("patched: exit %d: %s %s", code, out, errs)
	}
}

// A pod pinned to g6.xlarge (one L4) is not told to use 2 × L4 as if it
// could: the fix names the larger type (g6.12xlarge, the smallest AWS type
// with at least 2 L4s, has 4) and is not written, and --write says why.
// Pinned to g6.12xlarge the same fix runs there, and is written.
func TestCheckPinnedInstanceType(t *testing.T) {
	path, data := copyFixture(t, "pinned-g6.yaml")
	code, r := checkJSON(t, path)
	if code != ExitNoFit || r.Fix == nil || !strings.Contains(r.Fix.Message, "use 2 × L4 with --tensor-parallel-size 2") ||
		!strings.HasSuffix(r.Fix.Message, " on a larger instance type: g6.xlarge has 1, g6.12xlarge has 4") ||
		len(r.Patch) != 0 || !strings.Contains(r.PatchNote, "more GPUs than the pinned instance type has") {
		t.Fatalf("exit %d: fix %+v, patch %+v, note %q", code, r.Fix, r.Patch, r.PatchNote)
	}
	if !strings.Contains(r.Denials[0], "on a larger instance type: g6.xlarge has 1, g6.12xlarge has 4") {
		t.Errorf("denial %q", r.Denials[0])
	}
	code, out, errs := run(t, offline, "check", path, "--write")
	if b, _ := os.ReadFile(path); code != ExitNoFit || string(b) != string(data) || !strings.Contains(errs, "its fix is not in the patch: it needs a change of node selection") || !strings.Contains(errs, "no fix to write") {
		t.Errorf("--write: exit %d: %s %s", code, out, errs)
	}

	big := filepath.Join(t.TempDir(), "g6-12.yaml")
	if err := os.WriteFile(big, []byte(strings.Replace(string(data), "g6.xlarge", "g6.12xlarge", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, r := checkJSON(t, big); code != ExitNoFit || r.Fix == nil || r.Fix.Count != 2 || strings.Contains(r.Fix.Message, "instance type") || len(r.Patch) == 0 {
		t.Fatalf("g6.12xlarge: exit %d: %+v", code, r)
	}
	code, out, errs = run(t, offline, "check", big, "--write")
	if b, _ := os.ReadFile(big); code != ExitFits || !strings.Contains(string(b), "nvidia.com/gpu: 2\n") {
		t.Errorf("g6.12xlarge --write: exit %d: %s %s\n%s", code, out, errs, b)
	}
}

// A fix that cannot be written into the file as it is (a script in a
// double-quoted scalar with escapes) is not half written: -o patch prints
// no diff and says why on stderr, --write leaves the file as it was.
func TestCheckUnwritableFixSaysWhy(t *testing.T) {
	path, data := copyFixture(t, "script-escaped.yaml")
	code, diff, errs := run(t, offline, "check", path, "-o", "patch")
	if code != ExitNoFit || diff != "" || !strings.Contains(errs, "its fix is not in the patch: its shell script (command item 2) is a YAML scalar with escapes") {
		t.Errorf("-o patch: exit %d: %q %s", code, diff, errs)
	}
	code, out, _ := run(t, offline, "check", path)
	if code != ExitNoFit || !strings.Contains(out, "  (not in the patch: its shell script") {
		t.Errorf("table: exit %d: %s", code, out)
	}
	run(t, offline, "check", path, "--write")
	if b, _ := os.ReadFile(path); string(b) != string(data) {
		t.Errorf("--write changed the file:\n%s", b)
	}
}

// fixEdits in each way a vLLM command is written: the lines it gives, and
// none where the command cannot take the flags.
func TestFixEdits(t *testing.T) {
	h := admission.NewHandler(admission.Deps{})
	head := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}\n  containers:\n  - name: vllm\n    image: vllm/vllm-openai:v0.10.1\n"
	alt := memory.Alternative{Args: []string{"--max-model-len", "4096", "--tensor-parallel-size", "2"}, GPU: "L4", Count: 2}
	for _, tc := range []struct {
		name, body string
		want       []PatchLine // lines of the document (head is 8 lines)
		why        string
	}{
		{"literal script",
			"    command: [sh, -c]\n    args:\n    - |\n      vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n        --max-model-len 131072; echo done\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
			[]PatchLine{
				{Line: 13, Old: "        --max-model-len 131072; echo done", New: "        --max-model-len 4096 --tensor-parallel-size=2; echo done"},
				{Line: 14, Old: "    resources: {limits: {nvidia.com/gpu: 1}}", New: "    resources: {limits: {nvidia.com/gpu: 2}}"},
			}, ""},
		{"plain one-line script",
			"    command: [sh, -c, vllm serve meta-llama/Llama-3.1-8B-Instruct --max_model_len=131072]\n    resources:\n      limits: {nvidia.com/gpu: \"1\"}\n      requests: {nvidia.com/gpu: \"1\"}\n",
			[]PatchLine{
				{Line: 9, Old: "    command: [sh, -c, vllm serve meta-llama/Llama-3.1-8B-Instruct --max_model_len=131072]", New: "    command: [sh, -c, vllm serve meta-llama/Llama-3.1-8B-Instruct --max_model_len=4096 --tensor-parallel-size=2]"},
				{Line: 11, Old: "      limits: {nvidia.com/gpu: \"1\"}", New: "      limits: {nvidia.com/gpu: \"2\"}"},
				{Line: 12, Old: "      requests: {nvidia.com/gpu: \"1\"}", New: "      requests: {nvidia.com/gpu: \"2\"}"},
			}, ""},
		{"block args, underscore spelling",
			"    args:\n    - --model\n    - meta-llama/Llama-3.1-8B-Instruct\n    - '--max_model_len=131072'\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n",
			[]PatchLine{
				{Line: 12, Old: "    - '--max_model_len=131072'", New: "    - '--max_model_len=4096'"},
				{Line: 13, New: "    - '--tensor-parallel-size=2'"},
				{Line: 15, Old: "        nvidia.com/gpu: 1", New: "        nvidia.com/gpu: 2"},
			}, ""},
		{"two new flags, in order",
			"    args:\n    - meta-llama/Llama-3.1-8B-Instruct\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n",
			[]PatchLine{
				{Line: 11, New: "    - --max-model-len=4096"},
				{Line: 11, New: "    - --tensor-parallel-size=2"},
				{Line: 13, Old: "        nvidia.com/gpu: 1", New: "        nvidia.com/gpu: 2"},
			}, ""},
		{"a bare -- ends the flags",
			"    command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --]\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
			nil, "its flags end with a bare --"},
		{"the count in another resource",
			"    args: [--model, meta-llama/Llama-3.1-8B-Instruct]\n    resources: {limits: {nvidia.com/gpu.shared: 1}}\n",
			nil, "by another resource than nvidia.com/gpu"},
	} {
		d := splitManifest(head + tc.body)[0]
		rs := h.Check(context.Background(), podRequest(t, head+tc.body))
		if len(rs.Evaluation.Engines) != 1 {
			t.Fatalf("%s: engines %+v", tc.name, rs.Evaluation)
		}
		e := rs.Evaluation.Engines[0]
		e.Input.Count = 1
		got, why := fixEdits(d, "Pod", e, alt)
		if tc.why != "" {
			if got != nil || !strings.Contains(why, tc.why) {
				t.Errorf("%s: %+v, why %q, want %q", tc.name, got, why, tc.why)
			}
			continue
		}
		if why != "" || len(got) != len(tc.want) {
			t.Errorf("%s: why %q, lines %+v", tc.name, why, got)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: line %d %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
	// A fix of the GPU count alone ("give 2 × L4": the flags already ask
	// for tensor parallel 2) needs no flag after the bare --.
	text := head + "    command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, \"2\", --]\n    resources: {limits: {nvidia.com/gpu: 1}}\n"
	e := h.Check(context.Background(), podRequest(t, text)).Evaluation.Engines[0]
	got, why := fixEdits(splitManifest(text)[0], "Pod", e, memory.Alternative{Code: memory.AltGPUCount, GPU: "L4", Count: 2})
	if why != "" || len(got) != 1 || got[0].New != "    resources: {limits: {nvidia.com/gpu: 2}}" {
		t.Errorf("the count alone: %+v, %q", got, why)
	}
}
