package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"headroom.dev/headroom/admission"
)

// FuzzCheckManifest: any bytes as a manifest give results or one error,
// never a panic; every patch line points inside the file.
func FuzzCheckManifest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "deployments", "*.yaml"))
	for _, name := range files {
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
		for _, r := range rs {
			for _, p := range r.Patch {
				if p.Line < 1 || p.Line > lines+1 {
					t.Fatalf("patch line %d outside a file of %d lines", p.Line, lines)
				}
			}
		}
	})
}
