package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtoolBin is HEADROOM_PROMTOOL; without it the test skips, but not in
// CI, where it fails.
func promtoolBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HEADROOM_PROMTOOL")
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HEADROOM_PROMTOOL is not set: run HEADROOM_PROMTOOL=$(bash hack/promtool.sh) go test ./monitoring/")
		}
		t.Skip("needs promtool: run HEADROOM_PROMTOOL=$(bash hack/promtool.sh) go test ./monitoring/")
	}
	return p
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtoolBin(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// promtool check rules accepts the rules file the chart ships, and its
// unit tests pass: rules-test.yaml on every alert (series that fire and
// series that must not), annotations-test.yaml on the file as shipped.
func TestPromtool(t *testing.T) {
	promtoolBin(t)
	t.Log(strings.TrimSpace(promtool(t, "check", "rules", rulesFile)))

	// rules-test.yaml reads the rules without their annotations, so its
	// expectations state the labels alone.
	rf := Rules()
	for _, g := range rf.Groups {
		for i := range g.Rules {
			g.Rules[i].Annotations = nil
		}
	}
	body, err := yaml.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules-test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(promtool(t, "test", "rules", filepath.Join(dir, "rules-test.yaml"))))
	t.Log(strings.TrimSpace(promtool(t, "test", "rules", filepath.Join("testdata", "annotations-test.yaml"))))
}

// Every alert has a test that makes it fire.
func TestEveryAlertIsTested(t *testing.T) {
	tests, err := os.ReadFile(filepath.Join("testdata", "rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			Alerts []struct {
				Name string `json:"alertname"`
				Exp  []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &f); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.Alerts {
			if len(a.Exp) > 0 {
				fires[a.Name] = true
			} else {
				quiet[a.Name] = true
			}
		}
	}
	for _, g := range Rules().Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: rules-test.yaml must make it fire and check a time it must not (fires %v, quiet %v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
}
