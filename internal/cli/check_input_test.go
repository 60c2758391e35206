package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runStdin is run with stdin as the command's standard input.
func runStdin(t testing.TB, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return offline[k] }}
	root := newRoot(env)
	root.SetIn(bytes.NewReader(stdin))
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	code = ExitFits
	switch {
	case err == nil:
	case err == errNoFit:
		code = ExitNoFit
	default:
		code = ExitBadInput
		errb.WriteString("headroom: " + err.Error() + "\n")
	}
	return code, out.String(), errb.String()
}

// A GKE pod names its GPU by cloud.google.com/gke-accelerator: the
// Deployment of gke-l4.yaml is checked on an L4 (22.03 GiB as CUDA
// reports it) and denied as the same Deployment selecting
// nvidia.com/gpu.product=NVIDIA-L4 is: 131072 tokens × 128 KiB a token
// (32 layers × 8 KV heads × 128 dims × K and V × 2 bytes) = 16.00 GiB of
// KV cache for one request, more than an L4 holds beside 14.96 GiB of
// weights. Before, it was not checked at all (exit 2).
func TestCheckGKEAccelerator(t *testing.T) {
	read := func(name string) CheckResult {
		t.Helper()
		code, out, errs := run(t, offline, "check", filepath.Join("testdata", "check", name), "-o", "json")
		var rs []CheckResult
		if err := json.Unmarshal([]byte(out), &rs); err != nil || code != ExitNoFit || len(rs) != 1 || len(rs[0].Denials) == 0 {
			t.Fatalf("%s: exit %d, %v: %s %s", name, code, err, out, errs)
		}
		return rs[0]
	}
	gke, gfd := read("gke-l4.yaml"), read("l4-long-context.yaml")
	if !strings.Contains(gke.Denials[0], "on 1 × L4 (22.03 GiB, from node label cloud.google.com/gke-accelerator=nvidia-l4): one request of 131072 tokens needs 16.00 GiB of KV cache") {
		t.Errorf("denial %q", gke.Denials[0])
	}
	same := strings.Replace(gke.Denials[0], "node label cloud.google.com/gke-accelerator=nvidia-l4", "nodeSelector nvidia.com/gpu.product=NVIDIA-L4", 1)
	if same != gfd.Denials[0] {
		t.Errorf("the two selections disagree:\n%s\n%s", gke.Denials[0], gfd.Denials[0])
	}
	// doctor reads a kubectl describe's Node-Selectors through the same
	// resolver: the pod of describe-gke.txt runs on an L4, line 61.
	code, out, errs := run(t, offline, "doctor", filepath.Join("testdata", "check", "describe-gke.txt"), "-o", "json")
	var doc struct {
		Deployment struct {
			GPU     string `json:"gpu"`
			GPUFrom string `json:"gpu_from"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Deployment.GPU != "L4" || !strings.HasSuffix(doc.Deployment.GPUFrom, "describe-gke.txt:61") {
		t.Errorf("doctor: exit %d, %v: %+v %s", code, err, doc, errs)
	}
}

// An object the webhook could not check has one verdict, not checked, in
// the header, on its own line and in the JSON, and the vLLM release its
// image tag names (v0.10.1), as the same object with a GPU selector says;
// the advice is the annotation or a node selector, never a flag check
// does not have. Beside a denied object each is counted once.
func TestCheckNotCheckedVerdict(t *testing.T) {
	path := filepath.Join("testdata", "check", "no-gpu-selection.yaml")
	code, out, errs := run(t, offline, "check", path)
	if code != ExitBadInput || !strings.HasPrefix(out, "NOT CHECKED: 1 of 1 objects could not be checked") ||
		!strings.Contains(out, "Deployment/vllm-llama  NOT CHECKED\n") || strings.Contains(out, "WARNED") ||
		!strings.Contains(out, "vllm     would be planned for 0.10.1 (image tag)\n") ||
		!strings.Contains(out, "name it with the annotation headroom.dev/gpu") || strings.Contains(out, "--gpu-memory") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, offline, "check", path, "-o", "json")
	var rs []CheckResult
	if err := json.Unmarshal([]byte(out), &rs); err != nil || code != ExitBadInput || len(rs) != 1 ||
		rs[0].Verdict != VerdictNotChecked || rs[0].VLLMVersion != "0.10.1" || rs[0].VLLMVersionFrom != "image tag" || len(rs[0].NotChecked) != 1 {
		t.Errorf("-o json: exit %d, %v: %s", code, err, out)
	}

	dir := t.TempDir()
	both := filepath.Join(dir, "both.yaml")
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(filepath.Join("testdata", "check", "l4-long-context.yaml"))
	if err := os.WriteFile(both, []byte(string(a)+"---\n"+string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, offline, "check", both)
	if code != ExitBadInput || !strings.HasPrefix(out, "NOT CHECKED: 1 of 2 objects could not be checked") ||
		!strings.Contains(out, "\nDENIED: 1 of 2 objects would be refused") || strings.Count(out, "  NOT CHECKED\n") != 1 || strings.Count(out, "  DENIED\n") != 1 {
		t.Errorf("two objects: exit %d:\n%s", code, out)
	}
}

// A file without objects is bad input, exit 2, one line: an empty helm
// template or kustomize output must not pass as "all 0 objects admitted".
func TestCheckEmptyInput(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"empty.yaml":    "",
		"seps.yaml":     "---\n---\n",
		"comments.yaml": "# Source: chart/templates/deployment.yaml\n---\n# nothing rendered\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := run(t, offline, "check", path)
		if code != ExitBadInput || out != "" || errs != "headroom: "+path+": no Kubernetes objects (an empty helm template or kustomize output?)\n" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
	}
	if code, _, errs := runStdin(t, nil, "check", "-"); code != ExitBadInput || errs != "headroom: -: no Kubernetes objects (an empty helm template or kustomize output?)\n" {
		t.Errorf("empty stdin: exit %d, %q", code, errs)
	}
}

// "-" reads the manifests from standard input (helm template | headroom
// check -), bounded as a file is; it cannot be read twice or written back.
func TestCheckStdin(t *testing.T) {
	path := filepath.Join("testdata", "check", "gke-l4.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, fromFile, _ := run(t, offline, "check", path)
	code, fromStdin, errs := runStdin(t, data, "check", "-")
	if code != ExitNoFit || fromStdin != strings.ReplaceAll(fromFile, path, "-") {
		t.Errorf("exit %d, %s\n%s\nwant\n%s", code, errs, fromStdin, fromFile)
	}
	huge := bytes.Repeat([]byte("# padding\n"), maxManifestBytes/10+1)
	if code, _, errs := runStdin(t, huge, "check", "-"); code != ExitBadInput || !strings.Contains(errs, "-: more than 16 MiB") {
		t.Errorf("past the bound: exit %d, %q", code, errs)
	}
	for _, args := range [][]string{{"check", "-", "-"}, {"check", "-", "--write"}} {
		if code, _, errs := runStdin(t, data, args...); code != ExitBadInput || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
