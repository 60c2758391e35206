package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
)

// manifestText is one manifest file as read: its lines (without their
// line ends), whether they end in CRLF, and whether the last one ends in a
// line end at all, so a fixed file is written back as it was, changed only
// where the fix changes it.
type manifestText struct {
	name  string
	lines []string
	crlf  bool
	// noEOL is set when the file's last line has no line end.
	noEOL bool
}

func readText(name string, data []byte) manifestText {
	s := string(data)
	t := manifestText{name: name, crlf: strings.Contains(s, "\r\n")}
	if s == "" {
		return t
	}
	t.noEOL = !strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	for _, l := range strings.Split(s, "\n") {
		t.lines = append(t.lines, strings.TrimSuffix(l, "\r"))
	}
	return t
}

// bytes is the file's text with its own line ends.
func (t manifestText) bytes(lines []string) []byte {
	eol := "\n"
	if t.crlf {
		eol = "\r\n"
	}
	s := strings.Join(lines, eol)
	if len(lines) > 0 && !t.noEOL {
		s += eol
	}
	return []byte(s)
}

// sortEdits puts a file's line edits in file order: by line, an added line
// before the line it is added in front of, added lines in the order given
// (stable).
func sortEdits(edits []PatchLine) []PatchLine {
	out := append([]PatchLine(nil), edits...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Old == "" && out[j].Old != ""
	})
	return out
}

// diffOp is one line of a unified diff: ' ' kept, '-' removed, '+' added;
// lastOld and lastNew mark the file's last line on either side, after
// which a file without a final line end takes diff's marker.
type diffOp struct {
	kind             byte
	text             string
	lastOld, lastNew bool
}

// diffOps walks the file once with its edits (PatchLine: Line is 1-based
// in the original file; Old empty adds New in front of that line, or
// after the last line when Line is one past it; otherwise New replaces
// the line) and returns every line as kept, removed or added, and the
// fixed file's lines. An edit whose Old is not the file's line is an
// error: the file changed since it was checked.
func (t manifestText) diffOps(edits []PatchLine) ([]diffOp, []string, error) {
	edits = sortEdits(edits)
	var ops []diffOp
	var fixed []string
	k := 0
	for i := 0; i <= len(t.lines); i++ {
		for k < len(edits) && edits[k].Line == i+1 && edits[k].Old == "" {
			ops = append(ops, diffOp{kind: '+', text: edits[k].New})
			fixed = append(fixed, edits[k].New)
			k++
		}
		if i == len(t.lines) {
			break
		}
		if k < len(edits) && edits[k].Line == i+1 {
			e := edits[k]
			k++
			if e.Old != t.lines[i] {
				return nil, nil, fmt.Errorf("%s:%d is %q, the fix expected %q: check the file again", t.name, e.Line, t.lines[i], e.Old)
			}
			ops = append(ops, diffOp{kind: '-', text: t.lines[i]}, diffOp{kind: '+', text: e.New})
			fixed = append(fixed, e.New)
			continue
		}
		ops = append(ops, diffOp{kind: ' ', text: t.lines[i]})
		fixed = append(fixed, t.lines[i])
	}
	if k < len(edits) {
		return nil, nil, fmt.Errorf("%s:%d: the fix names a line past the end of the file (%d lines): check the file again", t.name, edits[k].Line, len(t.lines))
	}
	// Mark each side's last line; a kept line that is last on one side
	// only is written as removed and added, as diff does.
	lastOld, lastNew := -1, -1
	for i, op := range ops {
		if op.kind != '+' {
			lastOld = i
		}
		if op.kind != '-' {
			lastNew = i
		}
	}
	if lastOld >= 0 {
		ops[lastOld].lastOld = true
	}
	if lastNew >= 0 {
		ops[lastNew].lastNew = true
	}
	for i := 0; i < len(ops); i++ {
		if op := ops[i]; op.kind == ' ' && op.lastOld != op.lastNew && t.noEOL {
			rm := diffOp{kind: '-', text: op.text, lastOld: op.lastOld}
			add := diffOp{kind: '+', text: op.text, lastNew: op.lastNew}
			ops = append(ops[:i], append([]diffOp{rm, add}, ops[i+1:]...)...)
			i++
		}
	}
	return ops, fixed, nil
}

// diffContext is the number of unchanged lines around each change, diff's
// and patch's default.
const diffContext = 3

// unifiedDiff is the edits to file t as a unified diff (diff -u's format,
// which patch and git apply read): "--- NAME" and "+++ NAME" then hunks in
// file order, each with three lines of context. Empty when nothing
// changes.
func (t manifestText) unifiedDiff(edits []PatchLine) (string, error) {
	ops, _, err := t.diffOps(edits)
	if err != nil || len(edits) == 0 {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", t.name, t.name)
	// oldAt and newAt are the 1-based numbers of each op's line on
	// either side (of the line that follows, for the side it is not on).
	oldAt, newAt := make([]int, len(ops)), make([]int, len(ops))
	o, n := 1, 1
	for i, op := range ops {
		oldAt[i], newAt[i] = o, n
		if op.kind != '+' {
			o++
		}
		if op.kind != '-' {
			n++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		// Extend while the next change is within twice the context.
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j
				continue
			}
			if j-end > 2*diffContext {
				break
			}
		}
		stop := min(end+diffContext+1, len(ops))
		oldN, newN := 0, 0
		for _, op := range ops[start:stop] {
			if op.kind != '+' {
				oldN++
			}
			if op.kind != '-' {
				newN++
			}
		}
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(oldAt[start], oldN), hunkRange(newAt[start], newN))
		for _, op := range ops[start:stop] {
			b.WriteByte(op.kind)
			b.WriteString(op.text)
			b.WriteByte('\n')
			if t.noEOL && ((op.kind != '+' && op.lastOld) || (op.kind != '-' && op.lastNew)) {
				b.WriteString("\\ No newline at end of file\n")
			}
		}
		i = stop
	}
	return b.String(), nil
}

// hunkRange is one side of a hunk header: "start,count", with diff's
// conventions that a count of 1 is left out and an empty side starts at
// the line before it.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start-1)
	case 1:
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// fileEdits gathers the line edits of every object of each file, in the
// order the files were given.
func fileEdits(rs []CheckResult) (order []string, edits map[string][]PatchLine) {
	edits = map[string][]PatchLine{}
	for _, r := range rs {
		if len(r.Patch) == 0 {
			continue
		}
		if _, seen := edits[r.File]; !seen {
			order = append(order, r.File)
		}
		edits[r.File] = append(edits[r.File], r.Patch...)
	}
	return order, edits
}

// writeFixed applies the fixes of every file in place (--write) and
// returns the files written with their new contents.
func writeFixed(rs []CheckResult, texts map[string]manifestText) (map[string][]byte, error) {
	order, edits := fileEdits(rs)
	written := map[string][]byte{}
	for _, name := range order {
		t := texts[name]
		_, fixed, err := t.diffOps(edits[name])
		if err != nil {
			return nil, err
		}
		data := t.bytes(fixed)
		info, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, unwrapPathError(err))
		}
		if err := os.WriteFile(name, data, info.Mode().Perm()); err != nil {
			return nil, fmt.Errorf("%s: %v", name, unwrapPathError(err))
		}
		written[name] = data
	}
	return written, nil
}

// checkFiles checks every file, writes the fixes with --write (and checks
// the written files again), and prints the results: the table, -o json or
// yaml, or -o patch, every fix as one unified diff. The exit is 2 when
// anything could not be checked (a gate passes nothing it did not read),
// else 1 when an object is denied.
func checkFiles(cmd *cobra.Command, f checkFlags, h *admission.Handler, cms manifestConfigMaps, files []string) error {
	texts := map[string]manifestText{}
	out, err := checkAll(cmd.Context(), h, cms, files, f.namespace, texts, cmd.InOrStdin())
	if err != nil {
		return err
	}
	if f.write || f.output == "patch" {
		// What is not written is said where the patch goes unread: a
		// diff on stdout, a file rewritten in place.
		for _, r := range out {
			if r.PatchNote != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "headroom: %s:%d %s/%s: its fix is not in the patch: %s\n", r.File, r.Line, r.Kind, r.Name, r.PatchNote)
			}
		}
	}
	if f.write {
		written, err := writeFixed(out, texts)
		if err != nil {
			return usageError{err}
		}
		if len(written) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "headroom: no fix to write")
		}
		for _, name := range files {
			if data, ok := written[name]; ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "headroom: wrote the fixes into %s (%d bytes); checked again below\n", name, len(data))
			}
		}
		if out, err = checkAll(cmd.Context(), h, cms, files, f.namespace, texts, nil); err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	if f.output == "patch" {
		order, edits := fileEdits(out)
		for _, name := range order {
			d, err := texts[name].unifiedDiff(edits[name])
			if err != nil {
				return usageError{err}
			}
			if _, err := io.WriteString(w, d); err != nil {
				return err
			}
		}
	} else if err := writeAs(w, f.output, out, formats[[]CheckResult]{"": func(w io.Writer, rs []CheckResult) error { return writeCheckTable(w, rs, texts) }}); err != nil {
		return err
	}
	for _, r := range out {
		if unchecked(r) {
			return badInput("%s:%d %s/%s not checked: %s", r.File, r.Line, r.Kind, r.Name, r.NotChecked[0])
		}
	}
	for _, r := range out {
		if r.Verdict == admission.VerdictDenied {
			return errNoFit
		}
	}
	return nil
}

// unchecked reports whether an object's verdict is that it could not be
// checked: it was not read, or a vLLM server of it was not planned and
// nothing of it is denied.
func unchecked(r CheckResult) bool {
	return r.Verdict == VerdictNotChecked || r.Verdict == admission.VerdictError
}

// checkAll reads every file, takes their ConfigMaps into cms (which h
// reads), then checks every object; texts receives each file as read.
func checkAll(ctx context.Context, h *admission.Handler, cms manifestConfigMaps, files []string, namespace string, texts map[string]manifestText, stdin io.Reader) ([]CheckResult, error) {
	out := []CheckResult{}
	clear(cms)
	data := make([][]byte, len(files))
	for i, name := range files {
		var err error
		if data[i], err = readManifest(name, stdin); err != nil {
			return nil, usageError{err}
		}
		texts[name] = readText(name, data[i])
		cms.collect(data[i], namespace)
	}
	for i, name := range files {
		rs, err := CheckManifest(ctx, h, name, data[i], namespace)
		if err != nil {
			return nil, usageError{err}
		}
		// A file of no objects is most often a template that rendered
		// nothing; "all 0 objects admitted" would pass a gate unread.
		if len(rs) == 0 {
			return nil, badInput("%s: no Kubernetes objects (an empty helm template or kustomize output?)", name)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// manifestConfigMaps are the ConfigMaps of the files check reads, by
// namespace/name: an object's model config (headroom.dev/model-config) or
// vLLM --config file in a ConfigMap of the same files is read from them,
// as the webhook reads them from the API server.
type manifestConfigMaps map[string]*corev1.ConfigMap

// collect takes the ConfigMaps of one manifest; a document that does not
// read as one is left to CheckManifest to report.
func (m manifestConfigMaps) collect(data []byte, namespace string) {
	for _, d := range splitManifest(string(data)) {
		raw, err := yaml.YAMLToJSON([]byte(strings.Join(d.lines, "\n")))
		if err != nil {
			continue
		}
		var cm corev1.ConfigMap
		if json.Unmarshal(raw, &cm) != nil || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Name == "" {
			continue
		}
		if cm.Namespace == "" {
			cm.Namespace = namespace
		}
		m[cm.Namespace+"/"+cm.Name] = &cm
	}
}

// errNotInFiles is a ConfigMap the files checked do not hold.
var errNotInFiles = errors.New("not among the files checked: give the file that holds it too")

// GetConfigMap implements admission.ConfigMapGetter.
func (m manifestConfigMaps) GetConfigMap(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	if cm, ok := m[namespace+"/"+name]; ok {
		return cm, nil
	}
	return nil, errNotInFiles
}

// readChecked takes from the webhook's answer what it did not check and
// the vLLM release the object was planned for.
func (r *CheckResult) readChecked(c admission.Checked) {
	if c.Verdict == admission.VerdictError {
		for _, w := range c.Response.Warnings {
			r.NotChecked = append(r.NotChecked, strings.TrimPrefix(w, "headroom: "))
		}
	}
	for _, x := range c.Evaluation.Warnings {
		if x.Code == admission.CodeNotChecked {
			r.NotChecked = append(r.NotChecked, x.Message)
		}
	}
	// One verdict an object: the webhook would admit one it could not
	// check with a warning, which a gate must not read as admitted. A
	// denial still wins: the webhook refuses that object whatever the
	// part it could not check would say.
	if len(r.NotChecked) > 0 && (r.Verdict == admission.VerdictWarned || r.Verdict == admission.VerdictAllowed) {
		r.Verdict = VerdictNotChecked
	}
	if len(c.Evaluation.Engines) > 0 {
		v, from := c.Evaluation.Engines[0].Release()
		r.VLLMVersion, r.VLLMVersionFrom = v.String(), from
	}
}

// writeCheckHeadline is the table's answer: what was not checked comes
// first (check exits 2 on it), then the denials, else the admission.
func writeCheckHeadline(w io.Writer, rs []CheckResult) {
	denied, notChecked := 0, 0
	for _, r := range rs {
		switch {
		case r.Verdict == admission.VerdictDenied:
			denied++
		case unchecked(r):
			notChecked++
		}
	}
	if notChecked > 0 {
		fmt.Fprintf(w, "NOT CHECKED: %d of %d objects could not be checked, so nothing here is known to be admitted:\n", notChecked, len(rs))
		for _, r := range rs {
			if unchecked(r) {
				fmt.Fprintf(w, "  %s:%d %s/%s: %s\n", r.File, r.Line, r.Kind, r.Name, r.NotChecked[0])
			}
		}
	}
	switch {
	case denied > 0:
		fmt.Fprintf(w, "DENIED: %d of %d objects would be refused by the admission webhook\n", denied, len(rs))
	case notChecked == 0:
		fmt.Fprintf(w, "ADMITTED: the admission webhook would admit all %d objects\n", len(rs))
	}
}

// verdictWords is an object's verdict in the table.
func verdictWords(v string) string {
	return strings.ToUpper(strings.ReplaceAll(v, "_", " "))
}

// writeCheckedRelease says which vLLM release the object was planned for,
// or would have been where it was not planned.
func writeCheckedRelease(w io.Writer, r CheckResult) {
	planned := "planned for"
	if len(r.NotChecked) > 0 {
		planned = "would be planned for"
	}
	switch r.VLLMVersionFrom {
	case "":
	case admission.ReleaseAssumed:
		fmt.Fprintf(w, "  vllm     %s %s, assumed: neither the image tag nor the annotation %s names a release\n", planned, r.VLLMVersion, admission.AnnotationVLLMVersion)
	default:
		fmt.Fprintf(w, "  vllm     %s %s (%s)\n", planned, r.VLLMVersion, r.VLLMVersionFrom)
	}
}

// writeFixDiff prints one object's fix as a unified diff of its file,
// indented under the table's fix line.
func writeFixDiff(w io.Writer, t manifestText, edits []PatchLine) {
	d, err := t.unifiedDiff(edits)
	if err != nil {
		fmt.Fprintf(w, "  (%v)\n", err)
		return
	}
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
