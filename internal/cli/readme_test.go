package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docExample is a ```console block of a document: a `$ headroom ...` line
// and the lines it prints, "..." standing for lines left out.
type docExample struct {
	file, command string
	lines         []string
}

// docExamples reads the console blocks of a Markdown document.
func docExamples(file, body string) []docExample {
	var out []docExample
	var cur *docExample
	for _, line := range strings.Split(body, "\n") {
		switch {
		case cur == nil && line == "```console":
			cur = &docExample{file: file}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil && cur.command == "":
			cur.command = strings.TrimPrefix(line, "$ ")
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	return out
}

// missingLines returns the example's lines (all but "...") that the output
// does not print in that order.
func missingLines(example []string, output string) []string {
	got := strings.Split(output, "\n")
	var missing []string
	i := 0
	for _, want := range example {
		if want == "..." {
			continue
		}
		j := i
		for j < len(got) && strings.TrimRight(got[j], " ") != strings.TrimRight(want, " ") {
			j++
		}
		if j == len(got) {
			missing = append(missing, want)
			continue
		}
		i = j + 1
	}
	return missing
}

// TestREADMEExamplesAreWhatHeadroomPrints runs every console example of the
// README and docs/plan.md and fails when a line shown is not what the
// command prints now: the first screen a user reads must not drift from the
// binary.
func TestREADMEExamplesAreWhatHeadroomPrints(t *testing.T) {
	var examples []docExample
	for _, f := range []string{"README.md", filepath.Join("docs", "plan.md")} {
		body, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, docExamples(f, string(body))...)
	}
	if len(examples) < 2 {
		t.Fatalf("found %d console examples in README.md and docs/plan.md", len(examples))
	}
	for _, ex := range examples {
		args, ok := strings.CutPrefix(ex.command, "headroom ")
		if !ok {
			t.Errorf("%s: example %q is not a headroom command", ex.file, ex.command)
			continue
		}
		_, stdout, stderr := run(t, offline, strings.Fields(args)...)
		if m := missingLines(ex.lines, stdout+stderr); len(m) > 0 {
			t.Errorf("%s: `%s` no longer prints these lines as shown (paste its output again):\n%s\n\nit prints:\n%s%s",
				ex.file, ex.command, strings.Join(m, "\n"), stdout, stderr)
		}
	}
}

// TestMissingLines: an example line the output lacks, or prints out of
// order, is reported; "..." skips any number of lines.
func TestMissingLines(t *testing.T) {
	out := "a\nb\nc\nd\n"
	if m := missingLines([]string{"a", "...", "c", "d"}, out); len(m) != 0 {
		t.Errorf("in order: missing %q", m)
	}
	if m := missingLines([]string{"a", "...", "max-num-seqs 57"}, out); len(m) != 1 || m[0] != "max-num-seqs 57" {
		t.Errorf("a changed line: missing %q", m)
	}
	if m := missingLines([]string{"c", "...", "b"}, out); len(m) != 1 || m[0] != "b" {
		t.Errorf("out of order: missing %q", m)
	}
}

// TestREADMEFirstScreen: the first 40 lines say how to install headroom,
// show the first command with its output and a map from task to command,
// and give the test command; the whole README stays under 350 lines (the
// details live in docs/ and the package READMEs).
func TestREADMEFirstScreen(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(body), "\n"), "\n")
	if len(lines) >= 350 {
		t.Errorf("README.md has %d lines: move reference details to docs/ or a package README", len(lines))
	}
	first := strings.Join(lines[:min(40, len(lines))], "\n")
	for _, want := range []string{"go install ./cmd/headroom", "docker build", "```console\n$ headroom plan", "| I have | run |", "go test ./..."} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md's first 40 lines lack %q", want)
		}
	}
}
