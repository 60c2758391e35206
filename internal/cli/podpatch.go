package cli

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
)

// podPatchLines writes the pod checks' fixes of one manifest document
// (RFC 6902 operations on its pod spec) as lines of the file to change,
// in the file's own block style, so that -o patch and --write carry them
// with the flag fixes. Each fix is written only where every one of its
// operations has a place in block YAML (a key added to a block mapping,
// an item appended to a block sequence, a scalar replaced); and only when
// the edited document, read again, is the object the operations give.
// What cannot be written so (flow style, a JSON manifest) stays in
// pod_patch, for kubectl patch. written are the fixes the lines carry.
func podPatchLines(d manifestDoc, kind string, fixes []admission.PodFix) (lines []PatchLine, written []admission.PodFix) {
	if len(fixes) == 0 {
		return nil, nil
	}
	text := strings.Join(d.lines, "\n")
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(text), &doc); err != nil || len(doc.Content) == 0 {
		return nil, nil
	}
	spec := lookupPath(doc.Content[0], strings.Split(strings.TrimPrefix(admission.PodSpecPath(kind), "/"), "/"))
	if spec == nil || spec.Kind != yamlv3.MappingNode || spec.Style&yamlv3.FlowStyle != 0 {
		return nil, nil
	}
	var groups [][]PatchLine
	var ops []admission.PatchOp
	for _, f := range fixes {
		var mine [][]PatchLine
		ok := true
		for _, op := range f.Ops {
			l, good := opLines(d, spec, op)
			if !good {
				ok = false
				break
			}
			mine = append(mine, l)
		}
		if !ok {
			continue
		}
		try := append(append([][]PatchLine(nil), groups...), mine...)
		if !sameObject(d, flatten(try), kind, append(append([]admission.PatchOp(nil), ops...), f.Ops...)) {
			continue
		}
		groups, ops = try, append(ops, f.Ops...)
		written = append(written, f)
	}
	return flatten(groups), written
}

// flatten orders the operations' lines for the file: by line, and lines
// added at the same place deepest first (a container's new key before the
// pod spec's, both after the container's last line), each operation's
// lines together.
func flatten(groups [][]PatchLine) []PatchLine {
	gs := append([][]PatchLine(nil), groups...)
	indent := func(g []PatchLine) int { return len(g[0].New) - len(strings.TrimLeft(g[0].New, " -")) }
	sort.SliceStable(gs, func(i, j int) bool {
		if gs[i][0].Line != gs[j][0].Line {
			return gs[i][0].Line < gs[j][0].Line
		}
		return gs[i][0].Old == "" && gs[j][0].Old == "" && indent(gs[i]) > indent(gs[j])
	})
	var out []PatchLine
	for _, g := range gs {
		out = append(out, g...)
	}
	return out
}

// lookupPath follows mapping keys and sequence indices from n.
func lookupPath(n *yamlv3.Node, path []string) *yamlv3.Node {
	for _, p := range path {
		if p == "" {
			continue
		}
		switch n.Kind {
		case yamlv3.MappingNode:
			v := mapValue(n, p)
			if v == nil {
				return nil
			}
			n = v
		case yamlv3.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		default:
			return nil
		}
	}
	return n
}

// mapValue is the value of key in a mapping node, nil when absent.
func mapValue(m *yamlv3.Node, key string) *yamlv3.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// lastLine is the last line (1-based, in the document) a block node's
// text takes; 0 for a node whose end cannot be told (a literal or folded
// scalar, an alias).
func lastLine(n *yamlv3.Node) int {
	switch n.Kind {
	case yamlv3.ScalarNode:
		if n.Style&(yamlv3.LiteralStyle|yamlv3.FoldedStyle) != 0 || strings.Contains(n.Value, "\n") {
			return 0
		}
		return n.Line
	case yamlv3.MappingNode, yamlv3.SequenceNode:
		if len(n.Content) == 0 {
			return n.Line
		}
		if n.Style&yamlv3.FlowStyle != 0 {
			// A flow collection on one line ends there ({limits: {memory:
			// 16Gi}}); one over several lines is not told.
			if flowOneLine(n, n.Line) {
				return n.Line
			}
			return 0
		}
		return lastLine(n.Content[len(n.Content)-1])
	}
	return 0
}

// flowOneLine reports whether every node under n is on line.
func flowOneLine(n *yamlv3.Node, line int) bool {
	if n.Line != line || n.Kind == yamlv3.ScalarNode && strings.Contains(n.Value, "\n") {
		return false
	}
	for _, c := range n.Content {
		if !flowOneLine(c, line) {
			return false
		}
	}
	return true
}

// opLines is one operation as line edits. parent is found by the
// operation's path less its last token; an add to a key of a block
// mapping replaces a scalar's line or adds "key: value" after the
// mapping's last line; "-" appends an item after the sequence's last
// line. Other operations have no place here (false).
func opLines(d manifestDoc, spec *yamlv3.Node, op admission.PatchOp) ([]PatchLine, bool) {
	tokens := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	parent := lookupPath(spec, tokens[:len(tokens)-1])
	last := tokens[len(tokens)-1]
	if parent == nil || parent.Style&yamlv3.FlowStyle != 0 || op.Op != "add" {
		return nil, false
	}
	end := lastLine(parent)
	if end == 0 {
		return nil, false
	}
	switch parent.Kind {
	case yamlv3.SequenceNode:
		if last != "-" || len(parent.Content) == 0 {
			return nil, false
		}
		first := parent.Content[0]
		// An item's dash stands two columns left of its content.
		body, ok := renderBlock(op.Value, first.Column-1)
		if !ok {
			return nil, false
		}
		body[0] = strings.Repeat(" ", first.Column-3) + "- " + strings.TrimLeft(body[0], " ")
		return insertAfter(d, end, body), true
	case yamlv3.MappingNode:
		if len(parent.Content) == 0 {
			return nil, false
		}
		col := parent.Content[0].Column - 1
		if v := mapValue(parent, last); v != nil {
			// A key that is there: only a scalar's value is replaced.
			s, isScalar := op.Value.(string)
			if v.Kind != yamlv3.ScalarNode || !isScalar || v.Line != mapKeyLine(parent, last) {
				return nil, false
			}
			i := v.Line - 1
			old := d.lines[i]
			return []PatchLine{{Line: d.first + i, Old: old, New: old[:v.Column-1] + quoteScalar(s) + trailingComment(old, v)}}, true
		}
		body, ok := renderBlock(map[string]any{last: op.Value}, col)
		if !ok {
			return nil, false
		}
		return insertAfter(d, end, body), true
	}
	return nil, false
}

// mapKeyLine is the line of key in a mapping.
func mapKeyLine(m *yamlv3.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return 0
}

// trailingComment keeps a comment after a replaced scalar.
func trailingComment(line string, v *yamlv3.Node) string {
	if v.LineComment == "" {
		return ""
	}
	if i := strings.Index(line, "#"); i >= 0 {
		return " " + line[i:]
	}
	return ""
}

// quoteScalar writes a string value as YAML reads it back as a string.
func quoteScalar(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSpace(string(b))
}

// renderBlock writes v as block YAML indented by col spaces, one line a slice
// element.
func renderBlock(v any, col int) ([]string, bool) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, false
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	pad := strings.Repeat(" ", max(col, 0))
	for i, l := range lines {
		lines[i] = pad + l
	}
	return lines, true
}

// insertAfter adds lines after line end (1-based, in the document).
func insertAfter(d manifestDoc, end int, lines []string) []PatchLine {
	out := make([]PatchLine, len(lines))
	for i, l := range lines {
		out[i] = PatchLine{Line: d.first + end, New: l}
	}
	return out
}

// sameObject reports whether the document with edits reads as the object
// the operations make of it.
func sameObject(d manifestDoc, edits []PatchLine, kind string, ops []admission.PatchOp) bool {
	lines := append([]string(nil), d.lines...)
	// Apply from the bottom up, so earlier line numbers stay; inserts at
	// one line keep their order.
	sorted := sortEdits(edits)
	for i := len(sorted) - 1; i >= 0; {
		j := i
		for j > 0 && sorted[j-1].Line == sorted[i].Line && sorted[j-1].Old == "" && sorted[i].Old == "" {
			j--
		}
		at := sorted[i].Line - d.first
		if sorted[i].Old != "" {
			if at < 0 || at >= len(lines) || lines[at] != sorted[i].Old {
				return false
			}
			lines[at] = sorted[i].New
			i--
			continue
		}
		var ins []string
		for k := j; k <= i; k++ {
			ins = append(ins, sorted[k].New)
		}
		if at < 0 || at > len(lines) {
			return false
		}
		lines = append(lines[:at], append(ins, lines[at:]...)...)
		i = j - 1
	}
	got, err := yaml.YAMLToJSON([]byte(strings.Join(lines, "\n")))
	if err != nil {
		return false
	}
	orig, err := yaml.YAMLToJSON([]byte(strings.Join(d.lines, "\n")))
	if err != nil {
		return false
	}
	raw, err := json.Marshal(admission.Patch([]admission.PodFix{{Ops: ops}}, admission.PodSpecPath(kind)))
	if err != nil {
		return false
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return false
	}
	want, err := p.Apply(orig)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
