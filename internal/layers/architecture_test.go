package layers

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// floorNames are the floors as docs/architecture.md's table names them.
var floorNames = map[string]int{
	"facts": facts, "core": core, "libraries": libraries, "services": services,
	"reports": reports, "faces": faces, "top": top,
}

// docRow is a row of the package table: | `pkg` | floor | ...
var docRow = regexp.MustCompile("^\\| `([a-z0-9/]+)` \\| ([a-z]+) \\|")

// docFloors reads the package table of an architecture document.
func docFloors(doc string) (map[string]int, []string) {
	floors := map[string]int{}
	var bad []string
	for _, line := range strings.Split(doc, "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f, ok := floorNames[m[2]]
		if !ok {
			bad = append(bad, fmt.Sprintf("docs/architecture.md: %s is on an unknown floor %q", m[1], m[2]))
			continue
		}
		floors[m[1]] = f
	}
	return floors, bad
}

// disagreements lists, sorted, every package whose floor the document and
// floorOf give differently, or that only one of them has.
func disagreements(doc, code map[string]int) []string {
	var out []string
	for name, f := range code {
		d, ok := doc[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: floor %d in floorOf, no row in docs/architecture.md", name, f))
		case d != f:
			out = append(out, fmt.Sprintf("%s: floor %d in floorOf, %d in docs/architecture.md", name, f, d))
		}
	}
	for name, d := range doc {
		if _, ok := code[name]; !ok {
			out = append(out, fmt.Sprintf("%s: floor %d in docs/architecture.md, no row in floorOf", name, d))
		}
	}
	sort.Strings(out)
	return out
}

// TestArchitectureDocAgrees: the layering the document describes is the
// one this test enforces, package for package.
func TestArchitectureDocAgrees(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, bad := docFloors(string(body))
	for _, b := range bad {
		t.Error(b)
	}
	if len(doc) < len(floorOf)/2 {
		t.Fatalf("docs/architecture.md: read %d package rows, floorOf has %d", len(doc), len(floorOf))
	}
	for _, d := range disagreements(doc, floorOf) {
		t.Error(d)
	}
}

// TestDisagreementsCatchDrift: a package moved in the code but not in the
// document, one only the document has, and one only the code has.
func TestDisagreementsCatchDrift(t *testing.T) {
	doc, bad := docFloors("| package | floor |\n|---|---|\n" +
		"| `memory` | core | the calculator |\n" +
		"| `sim` | services | moved |\n" +
		"| `gone` | facts | |\n" +
		"| `odd` | attic | |\n")
	if len(bad) != 1 || !strings.Contains(bad[0], `"attic"`) {
		t.Errorf("unknown floor not reported: %q", bad)
	}
	code := map[string]int{"memory": core, "sim": libraries, "web": faces}
	got := disagreements(doc, code)
	want := []string{
		"gone: floor 0 in docs/architecture.md, no row in floorOf",
		"sim: floor 2 in floorOf, 3 in docs/architecture.md",
		"web: floor 5 in floorOf, no row in docs/architecture.md",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
