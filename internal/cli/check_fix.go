package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/memory"
)

// A fix is written into the manifest as the user wrote it: each change is
// a replacement of bytes inside one line (a flag's value, a GPU count) or
// an item added to a list (a new flag), in the list's own style, block or
// flow. The document is then read again and must be the object the fix
// describes, every other field unchanged, or nothing of the fix is
// written and the reason is said instead.

// tokenEdit replaces bytes [from, to) of line (0-based, in the document).
type tokenEdit struct {
	line, from, to int
	text           string
}

// lineInsert adds lines after line after (0-based, in the document).
type lineInsert struct {
	after int
	lines []string
}

// docEditor collects the edits of one document.
type docEditor struct {
	d       manifestDoc
	tokens  []tokenEdit
	inserts []lineInsert
}

// lines is the edits as PatchLines of the file, and the document's lines
// with them; false when two edits overlap.
func (e *docEditor) lines() ([]PatchLine, []string, bool) {
	byLine := map[int][]tokenEdit{}
	for _, t := range e.tokens {
		byLine[t.line] = append(byLine[t.line], t)
	}
	fixed := append([]string(nil), e.d.lines...)
	var out []PatchLine
	keys := make([]int, 0, len(byLine))
	for k := range byLine {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, i := range keys {
		ts := byLine[i]
		// Right to left, so each edit's columns are the original's; two
		// inserts at one place, the later first, so they read in order.
		sort.SliceStable(ts, func(a, b int) bool { return ts[a].from > ts[b].from })
		for a, b := 0, 0; a < len(ts); a = b {
			for b = a; b < len(ts) && ts[b].from == ts[a].from; b++ {
			}
			slices.Reverse(ts[a:b])
		}
		l := fixed[i]
		prev := len(l) + 1
		for _, t := range ts {
			if t.to > prev || t.from < 0 || t.to > len(l) || t.from > t.to {
				return nil, nil, false
			}
			l = l[:t.from] + t.text + l[t.to:]
			prev = t.from
		}
		out = append(out, PatchLine{Line: e.d.first + i, Old: fixed[i], New: l})
		fixed[i] = l
	}
	// The lines added after one line, in the order they were added; then
	// applied from the bottom up, which keeps the line numbers above.
	sort.SliceStable(e.inserts, func(a, b int) bool { return e.inserts[a].after < e.inserts[b].after })
	var merged []lineInsert
	for _, in := range e.inserts {
		if n := len(merged); n > 0 && merged[n-1].after == in.after {
			merged[n-1].lines = append(merged[n-1].lines, in.lines...)
			continue
		}
		merged = append(merged, lineInsert{after: in.after, lines: append([]string(nil), in.lines...)})
	}
	for k := len(merged) - 1; k >= 0; k-- {
		in := merged[k]
		if in.after < 0 || in.after >= len(fixed) {
			return nil, nil, false
		}
		fixed = append(fixed[:in.after+1], append(append([]string(nil), in.lines...), fixed[in.after+1:]...)...)
	}
	for _, in := range merged {
		for _, l := range in.lines {
			out = append(out, PatchLine{Line: e.d.first + in.after + 1, New: l})
		}
	}
	return sortEdits(out), fixed, true
}

// scalarAt locates the bytes of a scalar's value in the document, where
// they are written verbatim: a plain or quoted scalar on one line without
// escapes, or a literal block. pos maps a byte offset of the value (0 to
// its length) to a line and column; end is the column after the scalar's
// last byte on its line (after a closing quote).
type scalarAt struct {
	n     *yamlv3.Node
	pos   func(off int) (line, col int, ok bool)
	line  int // the line the scalar ends on (0-based)
	end   int
	style yamlv3.Style
}

func locateScalar(d manifestDoc, n *yamlv3.Node) (scalarAt, bool) {
	if n == nil || n.Kind != yamlv3.ScalarNode || n.Line < 1 || n.Line > len(d.lines) || n.Column < 1 {
		return scalarAt{}, false
	}
	i, c := n.Line-1, n.Column-1
	l := d.lines[i]
	if c > len(l) {
		return scalarAt{}, false
	}
	v := n.Value
	one := func(start, end int) (scalarAt, bool) {
		return scalarAt{n: n, line: i, end: end, style: n.Style, pos: func(off int) (int, int, bool) {
			if off < 0 || off > len(v) {
				return 0, 0, false
			}
			return i, start + off, true
		}}, true
	}
	switch n.Style {
	case 0:
		if strings.Contains(v, "\n") || !strings.HasPrefix(l[c:], v) {
			return scalarAt{}, false
		}
		return one(c, c+len(v))
	case yamlv3.DoubleQuotedStyle:
		if strings.ContainsAny(v, "\\\"\n") || !strings.HasPrefix(l[c:], `"`+v+`"`) {
			return scalarAt{}, false
		}
		return one(c+1, c+len(v)+2)
	case yamlv3.SingleQuotedStyle:
		if strings.ContainsAny(v, "'\n") || !strings.HasPrefix(l[c:], "'"+v+"'") {
			return scalarAt{}, false
		}
		return one(c+1, c+len(v)+2)
	case yamlv3.LiteralStyle:
		// The content starts on the line after the indicator, each line
		// indented alike; blank lines may carry less.
		parts := strings.Split(strings.TrimSuffix(v, "\n"), "\n")
		indent := -1
		for k, p := range parts {
			at := i + 1 + k
			if at >= len(d.lines) {
				return scalarAt{}, false
			}
			fl := d.lines[at]
			if p == "" {
				if strings.TrimSpace(fl) != "" {
					return scalarAt{}, false
				}
				continue
			}
			if indent < 0 {
				indent = len(fl) - len(p)
			}
			if indent < 0 || len(fl) != indent+len(p) || fl[indent:] != p || strings.TrimLeft(fl[:indent], " ") != "" {
				return scalarAt{}, false
			}
		}
		if indent < 0 {
			return scalarAt{}, false
		}
		last := len(parts) - 1
		return scalarAt{n: n, line: i + 1 + last, end: indent + len(parts[last]), style: n.Style, pos: func(off int) (int, int, bool) {
			if off < 0 || off > len(v) {
				return 0, 0, false
			}
			k := strings.Count(v[:off], "\n")
			if k > last {
				return 0, 0, false
			}
			start := strings.LastIndexByte(v[:off], '\n') + 1
			return i + 1 + k, indent + off - start, true
		}}, true
	}
	return scalarAt{}, false
}

// replaceValue replaces bytes [from, to) of the scalar's value with text,
// where both ends are on one line.
func (e *docEditor) replaceValue(s scalarAt, from, to int, text string) bool {
	l1, c1, ok1 := s.pos(from)
	l2, c2, ok2 := s.pos(to)
	if !ok1 || !ok2 || l1 != l2 || strings.ContainsAny(text, "\n\r") {
		return false
	}
	e.tokens = append(e.tokens, tokenEdit{line: l1, from: c1, to: c2, text: text})
	return true
}

// plainSafe matches what is written unquoted: a flag, a number, a name.
var plainSafe = regexp.MustCompile(`^[A-Za-z0-9._/=+-]+$`)

// token writes a new string item in a sibling's style: quoted as it is, or
// plain where YAML reads the text back as that string (not as a number).
func token(text string, style yamlv3.Style) string {
	switch style {
	case yamlv3.SingleQuotedStyle:
		return "'" + strings.ReplaceAll(text, "'", "''") + "'"
	case 0:
		var v any
		if plainSafe.MatchString(text) && yamlv3.Unmarshal([]byte(text), &v) == nil && v == text {
			return text
		}
	}
	b, _ := json.Marshal(text)
	return string(b)
}

// appendItem adds text as the last item of a sequence of scalars.
func (e *docEditor) appendItem(seq *yamlv3.Node, text string) bool {
	if seq == nil || seq.Kind != yamlv3.SequenceNode {
		return false
	}
	if seq.Style&yamlv3.FlowStyle != 0 {
		if len(seq.Content) == 0 {
			i, c := seq.Line-1, seq.Column-1
			if i < 0 || i >= len(e.d.lines) || c < 0 || c >= len(e.d.lines[i]) || e.d.lines[i][c] != '[' {
				return false
			}
			e.tokens = append(e.tokens, tokenEdit{line: i, from: c + 1, to: c + 1, text: token(text, yamlv3.DoubleQuotedStyle)})
			return true
		}
		last, ok := locateScalar(e.d, seq.Content[len(seq.Content)-1])
		if !ok || last.style == yamlv3.LiteralStyle {
			return false
		}
		e.tokens = append(e.tokens, tokenEdit{line: last.line, from: last.end, to: last.end, text: ", " + token(text, last.style)})
		return true
	}
	if len(seq.Content) == 0 {
		return false
	}
	item := seq.Content[len(seq.Content)-1]
	last, ok := locateScalar(e.d, item)
	if !ok {
		return false
	}
	// The item's dash and the blanks before its text, as the last item has
	// them ("        - ").
	first := e.d.lines[item.Line-1]
	prefix := first[:item.Column-1]
	if t := strings.TrimRight(prefix, " "); !strings.HasSuffix(t, "-") || strings.TrimLeft(t[:len(t)-1], " ") != "" {
		return false
	}
	// A new flag is written as the flags are ("- --flag" plain, while a
	// number value beside it is quoted).
	style := last.style
	for _, n := range seq.Content {
		if n.Kind == yamlv3.ScalarNode && strings.HasPrefix(n.Value, "--") {
			style = n.Style
		}
	}
	if style == yamlv3.LiteralStyle || style == yamlv3.FoldedStyle {
		style = yamlv3.DoubleQuotedStyle
	}
	e.inserts = append(e.inserts, lineInsert{after: last.line, lines: []string{prefix + token(text, style)}})
	return true
}

// unescapePointer splits a JSON pointer into its reference tokens.
func unescapePointer(p string) []string {
	tokens := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens
}

// flagName is the long flag an argument names, with dashes for
// underscores ("--max_model_len=8" is "max-model-len"); "" for another
// argument.
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "--") || arg == "--" {
		return ""
	}
	name, _, _ := strings.Cut(arg[2:], "=")
	return strings.ReplaceAll(name, "_", "-")
}

// fixEdits writes an alternative into one manifest document: its flags
// into the vLLM command of the engine's container (a flag there gets its
// new value, in its own place; one that is not is added after the last
// argument, or after the vLLM command in a shell script), and where it
// adds GPUs of the same kind, that count into the container's
// nvidia.com/gpu limit and request. why says what could not be written;
// then nothing is.
func fixEdits(d manifestDoc, kind string, e admission.Engine, a memory.Alternative) (edits []PatchLine, why string) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(strings.Join(d.lines, "\n")), &doc); err != nil || len(doc.Content) == 0 {
		return nil, "the document does not read as YAML"
	}
	ptr, ok := e.ContainerPointer(kind)
	if !ok {
		return nil, "its vLLM command is not a container of this object"
	}
	c := lookupPath(doc.Content[0], unescapePointer(ptr))
	if c == nil || c.Kind != yamlv3.MappingNode {
		return nil, "its container is not a mapping here"
	}
	ed := &docEditor{d: d}
	want := map[string]any{} // field of the container -> its new value, for the check below
	if len(a.Args)%2 != 0 {
		return nil, "the fix's flags do not pair with values"
	}
	if s, isScript := e.Script(); isScript {
		field := "command"
		if s.InArgs {
			field = "args"
		}
		seq := mapValue(c, field)
		if seq == nil || seq.Kind != yamlv3.SequenceNode || s.Index >= len(seq.Content) {
			return nil, "its shell script is not where the webhook read it"
		}
		at, ok := locateScalar(d, seq.Content[s.Index])
		if !ok {
			return nil, fmt.Sprintf("its shell script (%s item %d) is a YAML scalar with escapes or folds, which cannot be edited in place; set %s in its vllm command yourself", field, s.Index, strings.Join(a.Args, " "))
		}
		script, ok := scriptWithFlags(ed, at, s, a.Args)
		if !ok {
			return nil, fmt.Sprintf("its shell script cannot take %s in place", strings.Join(a.Args, " "))
		}
		items := make([]any, len(seq.Content))
		for i, n := range seq.Content {
			items[i] = n.Value
		}
		items[s.Index] = script
		want[field] = items
	} else if why := argvWithFlags(ed, c, a.Args, e.Appendable(), want); why != "" {
		return nil, why
	}
	if device, count := a.GPU, a.Count; device != "" && device == e.Input.Device.Name && count > 0 && count != e.Input.Count {
		if why := gpuCountEdits(ed, c, count, want); why != "" {
			return nil, why
		}
	}
	out, fixed, ok := ed.lines()
	if !ok || !containerIs(d, fixed, ptr, want) {
		return nil, "the edited manifest would not read as the fixed object"
	}
	return out, ""
}

// argvWithFlags writes flags into a container's command and args lists,
// adding at the end only where appendable (no bare "--" ends the flags);
// want receives each list as it must read afterwards.
func argvWithFlags(ed *docEditor, c *yamlv3.Node, flags []string, appendable bool, want map[string]any) string {
	type item struct {
		field string
		n     *yamlv3.Node
	}
	var items []item
	lists := map[string][]any{}
	var last *yamlv3.Node
	lastField := ""
	for _, field := range []string{"command", "args"} {
		seq := mapValue(c, field)
		if seq == nil {
			continue
		}
		if seq.Kind != yamlv3.SequenceNode {
			return fmt.Sprintf("its %s is not a list", field)
		}
		for _, n := range seq.Content {
			if n.Kind != yamlv3.ScalarNode {
				return fmt.Sprintf("its %s holds a value that is not a string", field)
			}
			items = append(items, item{field, n})
			lists[field] = append(lists[field], n.Value)
		}
		last, lastField = seq, field
	}
	if last == nil {
		return "its container has neither command nor args"
	}
	index := func(it item) int {
		k := 0
		for _, x := range items {
			if x.n == it.n {
				return k
			}
			if x.field == it.field {
				k++
			}
		}
		return -1
	}
	for k := 0; k+1 < len(flags); k += 2 {
		flag, value := flags[k], flags[k+1]
		name := flagName(flag)
		done := false
		// The last occurrence is the one argparse keeps.
		for i := len(items) - 1; i >= 0 && !done; i-- {
			arg := items[i].n.Value
			if flagName(arg) != name {
				continue
			}
			at, ok := locateScalar(ed.d, items[i].n)
			if eq := strings.IndexByte(arg, '='); eq >= 0 {
				if !ok || !ed.replaceValue(at, eq+1, len(arg), value) {
					return fmt.Sprintf("%s is written in a way that cannot be edited in place", clipArg(arg))
				}
				lists[items[i].field][index(items[i])] = arg[:eq+1] + value
				done = true
				continue
			}
			if i+1 < len(items) && flagName(items[i+1].n.Value) == "" && items[i+1].n.Value != "--" {
				v := items[i+1]
				vat, ok := locateScalar(ed.d, v.n)
				if !ok || !ed.replaceValue(vat, 0, len(v.n.Value), value) {
					return fmt.Sprintf("the value of %s is written in a way that cannot be edited in place", flag)
				}
				lists[v.field][index(v)] = value
				done = true
			}
			// A flag without its value is left; the one added below wins.
			break
		}
		if done {
			continue
		}
		arg := flag + "=" + value
		if !appendable {
			return fmt.Sprintf("its flags end with a bare --, after which vLLM takes no flags; add %s before it", arg)
		}
		if !ed.appendItem(last, arg) {
			return fmt.Sprintf("its %s list is written in a way an item cannot be added to; add %s", lastField, arg)
		}
		lists[lastField] = append(lists[lastField], arg)
	}
	for f, l := range lists {
		want[f] = l
	}
	return ""
}

// clipArg shortens an argument for a message.
func clipArg(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// scriptFlagRe finds "--flag value" or "--flag=value" in a shell command;
// the value ends at a blank, a separator or a quote.
func scriptFlagRe(flag string) *regexp.Regexp {
	name := strings.TrimPrefix(flag, "--")
	alt := regexp.QuoteMeta(name)
	if u := strings.ReplaceAll(name, "-", "_"); u != name {
		alt += "|" + regexp.QuoteMeta(u)
	}
	return regexp.MustCompile(`(?:^|\s)--(?:` + alt + `)(?:=|[ \t]+)([^\s;&|'"<>()]+)`)
}

// scriptWithFlags writes flags into the vLLM command of a shell script
// (bytes [Start, End) of the scalar's value): a flag there gets its new
// value; one that is not is added after the command, before the blanks
// that end it. It returns the script as it must read afterwards.
func scriptWithFlags(ed *docEditor, at scalarAt, s admission.Script, flags []string) (string, bool) {
	text := at.n.Value
	if s.Start < 0 || s.End > len(text) || s.Start > s.End {
		return "", false
	}
	type change struct {
		from, to int
		text     string
	}
	var changes []change
	end := s.End
	for end > s.Start && (text[end-1] == ' ' || text[end-1] == '\t' || text[end-1] == '\r') {
		end--
	}
	var added []string
	for k := 0; k+1 < len(flags); k += 2 {
		flag, value := flags[k], flags[k+1]
		ms := scriptFlagRe(flag).FindAllStringSubmatchIndex(text[s.Start:s.End], -1)
		if len(ms) == 0 {
			added = append(added, flag+"="+value)
			continue
		}
		m := ms[len(ms)-1]
		changes = append(changes, change{s.Start + m[2], s.Start + m[3], value})
	}
	if len(added) > 0 {
		changes = append(changes, change{end, end, " " + strings.Join(added, " ")})
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].from > changes[j].from })
	for _, c := range changes {
		if !ed.replaceValue(at, c.from, c.to, c.text) {
			return "", false
		}
		text = text[:c.from] + c.text + text[c.to:]
	}
	return text, true
}

// gpuCountEdits sets the container's nvidia.com/gpu limit and request,
// where each is given, to count, in the style each is written in.
func gpuCountEdits(ed *docEditor, c *yamlv3.Node, count int, want map[string]any) string {
	res := mapValue(c, "resources")
	found := false
	for _, part := range []string{"limits", "requests"} {
		var m *yamlv3.Node
		if res != nil && res.Kind == yamlv3.MappingNode {
			m = mapValue(res, part)
		}
		if m == nil || m.Kind != yamlv3.MappingNode {
			continue
		}
		v := mapValue(m, admission.ResourceGPU)
		if v == nil {
			continue
		}
		at, ok := locateScalar(ed.d, v)
		if !ok || !ed.replaceValue(at, 0, len(v.Value), strconv.Itoa(count)) {
			return fmt.Sprintf("its %s %s is written in a way that cannot be edited in place; set it to %d", part, admission.ResourceGPU, count)
		}
		found = true
		want["resources."+part] = count
	}
	if !found {
		return fmt.Sprintf("the fix needs %d GPUs and the container gives its count by another resource than %s", count, admission.ResourceGPU)
	}
	return ""
}

// containerIs reports whether the fixed document reads as the original
// with only the container's fields in want changed: a list of command or
// args, or "resources.limits"/"resources.requests" holding the new GPU
// count (a number or a string, as the original wrote it).
func containerIs(d manifestDoc, fixed []string, ptr string, want map[string]any) bool {
	var orig, got any
	o, err := yaml.YAMLToJSON([]byte(strings.Join(d.lines, "\n")))
	if err != nil || json.Unmarshal(o, &orig) != nil {
		return false
	}
	g, err := yaml.YAMLToJSON([]byte(strings.Join(fixed, "\n")))
	if err != nil || json.Unmarshal(g, &got) != nil {
		return false
	}
	c, ok := jsonAt(orig, unescapePointer(ptr)).(map[string]any)
	if !ok {
		return false
	}
	for k, v := range want {
		part, isGPU := strings.CutPrefix(k, "resources.")
		if !isGPU {
			c[k] = v
			continue
		}
		m, ok := jsonAt(c, []string{"resources", part}).(map[string]any)
		if !ok {
			return false
		}
		if _, quoted := m[admission.ResourceGPU].(string); quoted {
			m[admission.ResourceGPU] = strconv.Itoa(v.(int))
		} else {
			m[admission.ResourceGPU] = float64(v.(int))
		}
	}
	return reflect.DeepEqual(normalize(orig), normalize(got))
}

// normalize makes JSON lists of strings comparable to []any.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	return v
}

// jsonAt follows object keys and array indices in decoded JSON.
func jsonAt(v any, tokens []string) any {
	for _, t := range tokens {
		if t == "" {
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			v = x[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// maxFixRounds bounds how often a fixed object is checked again for the
// fixes its fix needs in turn: a larger tensor parallel size needs a
// /dev/shm and more host memory, found only on the fixed object, whose
// fixes need nothing more. Past it, nothing of the object's fix is
// written.
const maxFixRounds = 4

// fixedLine is a line of a document being fixed: its text, and the index
// of the original line it stands in for (-1 for an added line).
type fixedLine struct {
	text string
	orig int
}

// fixedDoc is a document with the fixes of every round applied, each line
// still knowing the original line it came from, so the whole can be said
// as edits of the original.
type fixedDoc struct {
	orig  []string
	lines []fixedLine
}

func newFixedDoc(lines []string) *fixedDoc {
	f := &fixedDoc{orig: lines}
	for i, l := range lines {
		f.lines = append(f.lines, fixedLine{l, i})
	}
	return f
}

// apply applies edits whose lines count from 1 in the current text.
func (f *fixedDoc) apply(edits []PatchLine) error {
	edits = sortEdits(edits)
	var out []fixedLine
	k := 0
	for i := 0; i <= len(f.lines); i++ {
		for k < len(edits) && edits[k].Line == i+1 && edits[k].Old == "" {
			out = append(out, fixedLine{edits[k].New, -1})
			k++
		}
		if i == len(f.lines) {
			break
		}
		l := f.lines[i]
		if k < len(edits) && edits[k].Line == i+1 {
			if edits[k].Old != l.text {
				return fmt.Errorf("line %d is %q, the fix expected %q", i+1, l.text, edits[k].Old)
			}
			l.text = edits[k].New
			k++
		}
		out = append(out, l)
	}
	if k < len(edits) {
		return fmt.Errorf("a fix names line %d of %d", edits[k].Line, len(f.lines))
	}
	f.lines = out
	return nil
}

func (f *fixedDoc) text() string {
	ls := make([]string, len(f.lines))
	for i, l := range f.lines {
		ls[i] = l.text
	}
	return strings.Join(ls, "\n")
}

// edits are the changes of every round as edits of the original document
// whose first line is line first of its file.
func (f *fixedDoc) edits(first int) []PatchLine {
	var out []PatchLine
	for i, l := range f.lines {
		switch {
		case l.orig >= 0 && l.text != f.orig[l.orig]:
			out = append(out, PatchLine{Line: first + l.orig, Old: f.orig[l.orig], New: l.text})
		case l.orig < 0:
			next := len(f.orig)
			for _, m := range f.lines[i+1:] {
				if m.orig >= 0 {
					next = m.orig
					break
				}
			}
			out = append(out, PatchLine{Line: first + next, New: l.text})
		}
	}
	return out
}

// settleFix makes r's patch one that makes the object pass: the object
// with its fixes applied is checked again, and what that check proposes in
// turn is applied too, until nothing more is (at most maxFixRounds). If
// the object so fixed is still denied, or its fixes do not settle, its
// patch is dropped and PatchNote says why.
func settleFix(ctx context.Context, h *admission.Handler, file string, d manifestDoc, namespace string, r *CheckResult) {
	if len(r.Patch) == 0 {
		return
	}
	fd := newFixedDoc(d.lines)
	edits := make([]PatchLine, len(r.Patch))
	for i, p := range r.Patch {
		p.Line -= d.first - 1
		edits[i] = p
	}
	var then []string
	drop := func(why string) {
		r.Patch, r.ThenFixes = nil, nil
		if r.PatchNote != "" {
			why += "; " + r.PatchNote
		}
		r.PatchNote = why
	}
	for round := 1; ; round++ {
		if err := fd.apply(edits); err != nil {
			drop(fmt.Sprintf("the fixes do not apply together (%v)", err))
			return
		}
		rs, _, err := checkDocs(ctx, h, file, []byte(fd.text()), namespace)
		if err != nil || len(rs) != 1 {
			drop("the fixed object does not read as one object")
			return
		}
		next := rs[0]
		if len(next.Patch) == 0 {
			if next.Verdict == admission.VerdictDenied || next.Verdict == admission.VerdictBypassed {
				msg := "fixed so, it would still be denied"
				if len(next.Denials) > 0 {
					msg += ": " + next.Denials[0]
				}
				if next.PatchNote != "" {
					msg += " (" + next.PatchNote + ")"
				}
				drop(msg)
				return
			}
			break
		}
		if round == maxFixRounds {
			drop(fmt.Sprintf("its fixes did not settle in %d checks of the fixed object", maxFixRounds))
			return
		}
		if next.Fix != nil && next.PatchNote == "" {
			then = append(then, next.Fix.Message)
		}
		for _, f := range next.written {
			then = append(then, f.Message)
		}
		edits = next.Patch
	}
	r.Patch, r.ThenFixes = fd.edits(d.first), then
}
