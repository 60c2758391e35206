package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/admission"
)

// argsDoc has --gpu-memory-utilization before --max-model-len and no
// --max-num-seqs: a fix of all three replaces line 16, then line 13, and
// adds a line in front of line 17, given in that order.
const argsDoc = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args:
        - --gpu-memory-utilization
        - "0.95"
        - --model
        - meta-llama/Llama-3.1-8B-Instruct
        - --max-model-len=131072
        resources:
          limits:
            nvidia.com/gpu: 1
`

// The diff diff -u writes for that fix: one hunk in file order, three
// lines of context each side, 10 old lines from line 10 and 11 new.
const argsDiff = `--- m.yaml
+++ m.yaml
@@ -10,10 +10,11 @@
         image: vllm/vllm-openai:v0.11.0
         args:
         - --gpu-memory-utilization
-        - "0.95"
+        - "0.9"
         - --model
         - meta-llama/Llama-3.1-8B-Instruct
-        - --max-model-len=131072
+        - --max-model-len=34800
+        - --max-num-seqs=64
         resources:
           limits:
             nvidia.com/gpu: 1
`

func TestUnifiedDiffInFileOrder(t *testing.T) {
	edits := []PatchLine{
		{Line: 16, Old: "        - --max-model-len=131072", New: "        - --max-model-len=34800"},
		{Line: 13, Old: `        - "0.95"`, New: `        - "0.9"`},
		{Line: 17, New: "        - --max-num-seqs=64"},
	}
	text := readText("m.yaml", []byte(argsDoc))
	got, err := text.unifiedDiff(edits)
	if err != nil || got != argsDiff {
		t.Fatalf("diff (%v):\n%s\nwant:\n%s", err, got, argsDiff)
	}
	want := strings.Replace(strings.Replace(argsDoc, `"0.95"`, `"0.9"`, 1), "--max-model-len=131072\n", "--max-model-len=34800\n        - --max-num-seqs=64\n", 1)
	_, fixed, _ := text.diffOps(edits)
	if string(text.bytes(fixed)) != want {
		t.Errorf("fixed file:\n%s\nwant:\n%s", text.bytes(fixed), want)
	}
	// The real patch applies it (where the machine has one).
	if bin, err := exec.LookPath("patch"); err == nil {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(argsDoc), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-p0", "--forward", "--batch")
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(got)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch refused the diff: %v: %s", err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "m.yaml")); string(b) != want {
			t.Errorf("patched file:\n%s\nwant:\n%s", b, want)
		}
	}
	// The file changed since: the edit says so instead of writing.
	if _, err := readText("m.yaml", []byte(strings.Replace(argsDoc, `"0.95"`, `"0.97"`, 1))).unifiedDiff(edits); err == nil || !strings.Contains(err.Error(), `m.yaml:13 is "        - \"0.97\""`) {
		t.Errorf("a changed file: %v", err)
	}
}

// A file without a final line end keeps none, and diff's marker follows
// its last line on both sides; CRLF line ends stay CRLF.
func TestUnifiedDiffLineEnds(t *testing.T) {
	text := readText("n.yaml", []byte("a\nb\nc"))
	edits := []PatchLine{{Line: 2, Old: "b", New: "B"}}
	got, err := text.unifiedDiff(edits)
	want := "--- n.yaml\n+++ n.yaml\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n"
	if err != nil || got != want {
		t.Errorf("diff (%v):\n%q\nwant\n%q", err, got, want)
	}
	// An added last line: the old last line loses its "last" on the new
	// side, so it is removed and added again, as diff -u writes it.
	got, _ = text.unifiedDiff([]PatchLine{{Line: 4, New: "d"}})
	want = "--- n.yaml\n+++ n.yaml\n@@ -1,3 +1,4 @@\n a\n b\n-c\n\\ No newline at end of file\n+c\n+d\n\\ No newline at end of file\n"
	if got != want {
		t.Errorf("diff:\n%q\nwant\n%q", got, want)
	}
	crlf := readText("w.yaml", []byte("a\r\nb\r\n"))
	_, fixed, _ := crlf.diffOps([]PatchLine{{Line: 1, Old: "a", New: "A"}})
	if got := string(crlf.bytes(fixed)); got != "A\r\nb\r\n" {
		t.Errorf("CRLF file written as %q", got)
	}
}

// A manifest check cannot read is not admitted: exit 2, said on the first
// line (before, it printed ADMITTED and exited 0).
func TestCheckNotReadExits2(t *testing.T) {
	code, out, errs := run(t, offline, "check", filepath.Join("testdata", "check", "malformed-env.yaml"))
	if code != ExitBadInput || !strings.HasPrefix(out, "NOT CHECKED: 1 of 1 objects could not be checked") || strings.Contains(out, "ADMITTED") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "malformed-env.yaml:1 Deployment/llama-8b not checked: cannot read the object") {
		t.Errorf("stderr %q", errs)
	}
	code, out, _ = run(t, offline, "check", filepath.Join("testdata", "check", "malformed-env.yaml"), "-o", "json")
	if code != ExitBadInput || !strings.Contains(out, `"not_checked": [`) {
		t.Errorf("-o json: exit %d: %s", code, out)
	}
}

// --write applies the fix and checks the file again; the fixed file is
// admitted, and -o patch's diff, applied by patch, gives the same file.
func TestCheckWrite(t *testing.T) {
	src := filepath.Join("testdata", "check", "in-house.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "in-house.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, diff, errs := run(t, offline, "check", path, "-o", "patch")
	if code != ExitNoFit || !strings.HasPrefix(diff, "--- "+path+"\n+++ "+path+"\n@@ ") {
		t.Fatalf("-o patch: exit %d: %s %s", code, diff, errs)
	}
	code, out, errs := run(t, offline, "check", path, "--write")
	if code != ExitFits || !strings.HasPrefix(out, "ADMITTED") || !strings.Contains(errs, "wrote the fixes into "+path) {
		t.Fatalf("--write: exit %d: %s %s", code, out, errs)
	}
	// The release the object was planned for is said, with its source.
	if !strings.Contains(out, "vllm     planned for 0.11.0 (annotation headroom.dev/vllm-version)") {
		t.Errorf("no release line:\n%s", out)
	}
	written, _ := os.ReadFile(path)
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's own 0600", info.Mode().Perm())
	}
	if bin, err := exec.LookPath("patch"); err == nil {
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "m.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--batch", filepath.Join(other, "m.yaml"))
		cmd.Stdin = strings.NewReader(diff)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch: %v: %s", err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(other, "m.yaml")); string(b) != string(written) {
			t.Errorf("patch and --write disagree:\n%s\n%s", b, written)
		}
	}
	code, _, errs = run(t, offline, "check", path, "--write")
	if code != ExitFits || !strings.Contains(errs, "no fix to write") {
		t.Errorf("a second --write: exit %d: %s", code, errs)
	}
}

// FuzzUnifiedDiff: any file text, one line replaced and one added, gives a
// diff without an error whose hunk counts match its lines, and a fixed file
// that differs from the original only there. The replaced line is one with
// text: a PatchLine without old is an added line (the fixes replace flag
// and list lines, never an empty one), so replacing an empty line cannot
// be said.
func FuzzUnifiedDiff(f *testing.F) {
	f.Add(argsDoc, 13, "x")
	f.Add("a\r\nb", 2, "")
	f.Fuzz(func(t *testing.T, data string, at int, repl string) {
		text := readText("f.yaml", []byte(data))
		if len(text.lines) == 0 || strings.ContainsAny(repl, "\r\n") {
			return
		}
		at = 1 + (at%len(text.lines)+len(text.lines))%len(text.lines)
		if text.lines[at-1] == "" {
			return
		}
		edits := []PatchLine{{Line: at, Old: text.lines[at-1], New: repl}, {Line: len(text.lines) + 1, New: "added"}}
		d, err := text.unifiedDiff(edits)
		if err != nil {
			t.Fatal(err)
		}
		_, fixed, _ := text.diffOps(edits)
		if len(fixed) != len(text.lines)+1 || fixed[at-1] != repl || fixed[len(fixed)-1] != "added" {
			t.Fatalf("fixed %q", fixed)
		}
		for _, h := range strings.Split(d, "\n@@ ")[1:] {
			var o1, o2, n1, n2 int
			head, body, _ := strings.Cut(h, "\n")
			if _, err := fmtSscanf(head, &o1, &o2, &n1, &n2); err != nil {
				continue // a one-line side leaves its count out
			}
			old, added := 0, 0
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, "@@") {
					break
				}
				switch {
				case strings.HasPrefix(l, " "):
					old++
					added++
				case strings.HasPrefix(l, "-"):
					old++
				case strings.HasPrefix(l, "+"):
					added++
				}
			}
			if old != o2 || added != n2 {
				t.Fatalf("hunk %q counts %d,%d, has %d,%d", head, o2, n2, old, added)
			}
		}
	})
}

func fmtSscanf(head string, o1, o2, n1, n2 *int) (int, error) {
	return fmt.Sscanf(head, "-%d,%d +%d,%d @@", o1, o2, n1, n2)
}

// check reads a vLLM --config file (and a model config) from a ConfigMap
// of the files it checks, as the webhook reads it from the API server:
// Llama-3.1-8B on an L4 at the file's 8192 tokens fits (1 GiB of KV);
// without the ConfigMap the line alone is checked, the model's 131072
// tokens need 16 GiB of KV, and the warning says the file was not found.
func TestCheckReadsConfigFileFromManifests(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: llm}
spec:
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.19.0
        command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]
        args: [--config, /etc/vllm/serve.yaml]
        resources: {limits: {nvidia.com/gpu: "1"}}
        volumeMounts: [{name: flags, mountPath: /etc/vllm}]
      volumes:
      - name: flags
        configMap: {name: vllm-flags, items: [{key: flags.yaml, path: serve.yaml}]}
`
	const configMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-flags, namespace: llm}
data:
  flags.yaml: |
    max-model-len: 8192
`
	dir := t.TempDir()
	both, alone := filepath.Join(dir, "both.yaml"), filepath.Join(dir, "alone.yaml")
	if err := os.WriteFile(both, []byte(deployment+"---\n"+configMap), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, []byte(deployment), 0o644); err != nil {
		t.Fatal(err)
	}
	var rs []CheckResult
	code, out, errs := run(t, offline, "check", both, "-o", "json")
	if err := json.Unmarshal([]byte(out), &rs); code != 0 || err != nil || len(rs) != 2 || rs[0].Kind != "Deployment" || rs[0].Verdict == admission.VerdictDenied {
		t.Fatalf("with the ConfigMap: exit %d %v %s %s", code, err, out, errs)
	}
	code, out, _ = run(t, offline, "check", alone, "-o", "json")
	if err := json.Unmarshal([]byte(out), &rs); code != 1 || err != nil || len(rs) != 1 || rs[0].Verdict != admission.VerdictDenied ||
		!strings.Contains(strings.Join(rs[0].Warnings, "\n"), "ConfigMap llm/vllm-flags: cannot read it: not among the files checked") {
		t.Fatalf("without the ConfigMap: exit %d %v %s", code, err, out)
	}
}
