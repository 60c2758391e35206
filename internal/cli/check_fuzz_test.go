package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"headroom.dev/headroom/admission"
)

// FuzzCheckManifest: any bytes as a manifest give results or one error,
// never a panic; every patch line points inside the file, and a patch,
// applied, gives an object the same check does not deny (a patch is
// written only where it makes the object pass).
func FuzzCheckManifest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "deployments", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "check", "*.yaml"))
	for _, name := range append(files, more...) {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\n"))
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: vllm\n        args: [\"--model=x\", \"--max-model-len=9\"]\n"))
	h := admission.NewHandler(admission.Deps{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		rs, err := CheckManifest(context.Background(), h, "m.yaml", data, "default")
		if err != nil {
			return
		}
		lines := 1
		for _, c := range data {
			if c == '\n' {
				lines++
			}
		}
		patched := false
		for _, r := range rs {
			for _, p := range r.Patch {
				if p.Line < 1 || p.Line > lines+1 {
					t.Fatalf("patch line %d outside a file of %d lines", p.Line, lines)
				}
			}
			patched = patched || len(r.Patch) > 0
		}
		if !patched {
			return
		}
		text := readText("m.yaml", data)
		_, order := fileEdits(rs)
		_, fixed, err := text.diffOps(order["m.yaml"])
		if err != nil {
			t.Fatalf("the patch does not apply: %v", err)
		}
		again, err := CheckManifest(context.Background(), h, "m.yaml", text.bytes(fixed), "default")
		if err != nil || len(again) != len(rs) {
			t.Fatalf("the patched file does not read as the same objects: %v", err)
		}
		for i, r := range rs {
			if len(r.Patch) > 0 && again[i].Verdict == admission.VerdictDenied {
				t.Fatalf("%s/%s patched is still denied: %q", r.Kind, r.Name, again[i].Denials)
			}
		}
	})
}
