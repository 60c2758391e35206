package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/report"
)

// FuzzPlanTraffic feeds plan --profile any file: it is a profile, a
// request log or bad input (a usage error), and reading the traffic it
// opens never panics.
func FuzzPlanTraffic(f *testing.F) {
	f.Add([]byte(`{"requests": 2, "input_tokens": {"count": 2, "mean": 100, "p50": 90, "p90": 120, "p99": 130, "max": 140},
"output_tokens": {"count": 2, "mean": 10, "p50": 9, "p90": 12, "p99": 13, "max": 14}, "buckets": [{"name": "S"}],
"window_seconds": 60, "windows": [{"requests": 120}]}`))
	f.Add([]byte("2026-11-20T10:00:00.000Z input_tokens=10 output_tokens=5\n2026-11-20T10:00:01.000Z input_tokens=10 output_tokens=5\n"))
	f.Add([]byte(`{"id": "a", "arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}` + "\n"))
	f.Add([]byte(`{"input_tokens": {"count": 1, "max": 0}, "buckets": [{}]}`))
	f.Add([]byte("garbage\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := filepath.Join(t.TempDir(), "traffic")
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tr, err := report.PlanTraffic(nil, name, 0)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("not one line: %v", err)
			}
			return
		}
		src, closer, err := tr.Spec.Open(func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err != nil {
			return
		}
		defer closer.Close()
		for range 100 {
			if _, err := src.Next(); err != nil {
				if err != io.EOF {
					return
				}
				break
			}
		}
	})
}
