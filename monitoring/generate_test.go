package monitoring

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files under charts/headroom/files/")

// The committed files, relative to this package.
var (
	rulesFile     = filepath.Join("..", "charts", "headroom", "files", "prometheus-rules.yaml")
	dashboardFile = filepath.Join("..", "charts", "headroom", "files", "grafana-dashboard.json")
)

// The chart ships exactly what the code generates, byte for byte.
func TestGeneratedFilesAreCommitted(t *testing.T) {
	for _, g := range []struct {
		path string
		gen  func() ([]byte, error)
	}{{rulesFile, RulesYAML}, {dashboardFile, DashboardJSON}} {
		want, err := g.gen()
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(g.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatalf("%v: run go test ./monitoring -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what package monitoring generates: run go test ./monitoring -update (or bash hack/monitoring.sh)", g.path)
		}
	}
}
