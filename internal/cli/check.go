package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/memory"
)

// maxManifestBytes bounds one manifest file: the API server refuses
// objects past about 1.5 MiB, so a file of many is still far below this.
const maxManifestBytes = 16 << 20

// CheckResult is one object of `headroom check -o json`.
type CheckResult struct {
	File string `json:"file"`
	// Line is where the object starts in the file (1-based).
	Line      int    `json:"line"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Verdict is the validating webhook's: allowed, warned, denied,
	// bypassed, or error (the object could not be read); not_checked
	// where the webhook would admit it with a warning that a vLLM server
	// of it was not checked (NotChecked says why).
	Verdict  string   `json:"verdict"`
	Denials  []string `json:"denials"`
	Warnings []string `json:"warnings"`
	// Fix is the first alternative the denial quotes; Patch its flags
	// written into the manifest's args, as lines to change.
	Fix   *memory.Alternative `json:"fix,omitempty"`
	Patch []PatchLine         `json:"patch,omitempty"`
	// VLLMVersion is the vLLM release the object's (first) vLLM server was
	// planned for, VLLMVersionFrom where it came from: "annotation
	// headroom.dev/vllm-version", "image tag", "serving runtime", or
	// "assumed" (nothing named one; the newest release headroom knows).
	VLLMVersion     string `json:"vllm_version,omitempty"`
	VLLMVersionFrom string `json:"vllm_version_from,omitempty"`
	// NotChecked says what of the object was not checked and why (it could
	// not be read, its flags could not, its model or GPU is unknown);
	// check exits 2 when any object has one.
	NotChecked []string `json:"not_checked,omitempty"`
	// PodFixes are the pod checks' fixes (memory limit, /dev/shm, a token
	// in a Secret), and PodPatch all of them as one RFC 6902 patch of the
	// object (kubectl patch --type json).
	PodFixes []admission.PodFix  `json:"pod_fixes,omitempty"`
	PodPatch []admission.PatchOp `json:"pod_patch,omitempty"`
	// ThenFixes are the fixes the fixed object needs in turn, found by
	// checking it again (the /dev/shm tensor parallelism writes, the
	// memory its host plan needs): Patch carries them with the fix.
	ThenFixes []string `json:"then_fixes,omitempty"`
	// PatchNote says what of the fixes is not in Patch, and why: a fix
	// that cannot be written into this file as it is, or one that would
	// leave the object denied. Patch then holds none of the object's
	// fixes: a patch is written only where it makes the object pass.
	PatchNote string `json:"patch_note,omitempty"`

	// written are the pod fixes Patch carries as lines.
	written []admission.PodFix
}

// VerdictNotChecked is check's verdict on an object the webhook would let
// through unchecked: an unknown GPU or model, flags it cannot read.
const VerdictNotChecked = "not_checked"

// PatchLine is one line of the manifest to change: Old is removed (empty
// for an added line) and New written in its place at Line.
type PatchLine struct {
	Line int    `json:"line"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new"`
}

type checkFlags struct {
	output, namespace string
	storage           string
	write             bool
	podChecks         string
}

func newCheckCmd(env Env) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check FILE... (- reads standard input)",
		Short: "Check Kubernetes manifests before kubectl apply, offline, with the admission webhook's verdicts",
		Long: `check runs the validating admission webhook's own checks on each object of the
manifests (Deployments, StatefulSets, Pods, KAITO Workspaces, LeaderWorkerSets, KServe
InferenceServices), without a cluster: the same verdict and message the webhook would
answer, and the vLLM release each object was planned for (its image tag, the
annotation headroom.dev/vllm-version, or the newest release headroom knows, said so).
A denied object gets as its fix the first of the webhook's alternatives that its pod's
nodes can run (the GPU it selects, at a count its pinned instance type holds) and the
file can take: its flags, written in place in the file's own style (a list in block or
flow style, a sh -c script), and nvidia.com/gpu where it adds GPUs. The fixed object is
checked again and what it needs in turn (a /dev/shm, a memory limit) is added; a fix
that would leave the object denied is not written, and why is said. -o patch prints
every fix as a unified diff (patch -p0 < fix.patch applies it), --write writes the
fixed files and checks them again. A ConfigMap an object reads (its model config
named by headroom.dev/model-config, a vLLM --config file mounted from one) is read from
the ConfigMaps of the files given, as the webhook reads it from the cluster; one they
do not hold, and an HPA, are checked without and say so.

Each object gets one verdict: allowed, warned, denied, bypassed, not checked (the
webhook would let it through with a warning that a vLLM server of it was not checked),
or error (it could not be read).

Exit codes: 0 every object admitted, 1 one is denied, 2 bad input or an object that
could not be checked, said on the first line.`,
		Example: `  headroom check deploy.yaml
  headroom check k8s/*.yaml -o json
  helm template charts/llm | headroom check -
  headroom check deploy.yaml -o patch | patch -p0
  headroom check deploy.yaml --write`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runCheck(cmd, f, args) },
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml, patch (the fixes as a unified diff)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "default", "namespace of objects that name none")
	cmd.Flags().BoolVar(&f.write, "write", false, "write the fixes into the files, then check them again")
	addStorageFlag(cmd.Flags(), &f.storage)
	addPodChecksFlag(cmd.Flags(), &f.podChecks)
	return cmd
}

func runCheck(cmd *cobra.Command, f checkFlags, files []string) error {
	if err := checkFormat(f.output, "table", "json", "yaml", "patch"); err != nil {
		return err
	}
	stdin := 0
	for _, name := range files {
		if name == stdinName {
			stdin++
		}
	}
	switch {
	case stdin > 1:
		return badInput("- (standard input) is given %d times: it can be read once", stdin)
	case stdin == 1 && f.write:
		return badInput("--write cannot write the fixes back into standard input (-): give the file, or use -o patch")
	}
	storage, err := readStorage(f.storage)
	if err != nil {
		return err
	}
	policy, err := admission.ParsePodPolicy(f.podChecks)
	if err != nil {
		return badInput("--pod-checks: %v", err)
	}
	cms := manifestConfigMaps{}
	h := admission.NewHandler(admission.Deps{PodChecks: policy, Storage: storage, ConfigMaps: cms})
	return checkFiles(cmd, f, h, cms, files)
}

// stdinName is the file name that reads the manifests from standard input
// (helm template . | headroom check -).
const stdinName = "-"

// readManifest reads one manifest file, or standard input for "-", at
// most maxManifestBytes of it.
func readManifest(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if name == stdinName {
		r = stdin
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, unwrapPathError(err))
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, unwrapPathError(err))
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%s: more than %d MiB; check the manifests one file at a time", name, maxManifestBytes>>20)
	}
	return data, nil
}

// manifestDoc is one YAML document of a file and where it starts.
type manifestDoc struct {
	first int // 1-based line of its first line
	lines []string
}

func splitManifest(data string) []manifestDoc {
	var out []manifestDoc
	cur := manifestDoc{first: 1}
	for i, l := range strings.Split(data, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.HasPrefix(l, "---") && strings.TrimSpace(strings.Trim(l, "-")) == "" {
			out = append(out, cur)
			cur = manifestDoc{first: i + 2}
			continue
		}
		cur.lines = append(cur.lines, l)
	}
	return append(out, cur)
}

// CheckManifest runs the validating webhook (h.Check) on every object of
// one manifest file, as the API server would send each on create, and
// settles each object's fixes: its patch is what makes it pass the same
// check, or it is empty and PatchNote says why.
func CheckManifest(ctx context.Context, h *admission.Handler, file string, data []byte, namespace string) ([]CheckResult, error) {
	rs, docs, err := checkDocs(ctx, h, file, data, namespace)
	if err != nil {
		return nil, err
	}
	for i := range rs {
		settleFix(ctx, h, file, docs[i], namespace, &rs[i])
	}
	return rs, nil
}

// checkDocs checks every object of a file once, each with the fixes the
// check proposes for it as it is; it returns each object's document.
func checkDocs(ctx context.Context, h *admission.Handler, file string, data []byte, namespace string) ([]CheckResult, []manifestDoc, error) {
	var out []CheckResult
	var docs []manifestDoc
	for _, d := range splitManifest(string(data)) {
		text := strings.Join(d.lines, "\n")
		if strings.TrimSpace(stripComments(text)) == "" {
			continue
		}
		raw, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: not YAML: %v", file, d.first, firstLine(err.Error()))
		}
		var head struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.Kind == "" || head.APIVersion == "" {
			return nil, nil, fmt.Errorf("%s:%d: not a Kubernetes object (no apiVersion and kind)", file, d.first)
		}
		if head.Kind == "List" {
			return nil, nil, fmt.Errorf("%s:%d: a List: give its items as documents separated by ---", file, d.first)
		}
		gv, err := schema.ParseGroupVersion(head.APIVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: apiVersion %q: %v", file, d.first, head.APIVersion, err)
		}
		ns := head.Metadata.Namespace
		if ns == "" {
			ns = namespace
		}
		name := head.Metadata.Name
		if name == "" {
			name = head.Metadata.GenerateName
		}
		req := &admissionv1.AdmissionRequest{UID: "headroom-check", Operation: admissionv1.Create,
			Kind:   metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: head.Kind},
			Object: runtime.RawExtension{Raw: raw}, Namespace: ns, Name: name}
		c := h.Check(ctx, req)
		r := CheckResult{File: file, Line: d.first, Kind: head.Kind, Namespace: ns, Name: name, Verdict: c.Verdict,
			Denials: []string{}, Warnings: []string{}}
		for _, x := range c.Evaluation.Denials {
			r.Denials = append(r.Denials, x.Message)
		}
		for _, w := range c.Response.Warnings {
			r.Warnings = append(r.Warnings, strings.TrimPrefix(w, "headroom: "))
		}
		r.readChecked(c)
		if fixes := c.Evaluation.PodFixes; len(fixes) > 0 {
			r.PodFixes, r.PodPatch = fixes, admission.Patch(fixes, admission.PodSpecPath(head.Kind))
		}
		if c.Verdict == admission.VerdictDenied || c.Verdict == admission.VerdictBypassed {
			r.Fix, r.Patch, r.PatchNote = chooseFix(d, head.Kind, c.Evaluation.Engines)
		}
		// The pod checks' fixes, as lines of the file where they have a
		// place (the rest stays in pod_patch).
		lines, written := podPatchLines(d, head.Kind, r.PodFixes)
		r.Patch = append(r.Patch, lines...)
		r.written = written
		out = append(out, r)
		docs = append(docs, d)
	}
	return out, docs, nil
}

// chooseFix is the fix check writes for a denied object: of the
// alternatives the webhook's denial quotes, in its order, the first its
// pod's nodes can run (the GPU they have, at a count their instance type
// holds) that can be written into this document. Where none can, it is
// the first alternative, in words, with why it is not in the patch.
func chooseFix(d manifestDoc, kind string, engines []admission.Engine) (*memory.Alternative, []PatchLine, string) {
	for _, e := range engines {
		if len(e.Alternatives) == 0 {
			continue
		}
		why := ""
		for i, a := range e.Alternatives {
			var lines []PatchLine
			w := "it needs a change of node selection (another GPU, or more GPUs than the pinned instance type has), which check leaves to you"
			if e.Runs(a) {
				lines, w = fixEdits(d, kind, e, a)
			}
			if w == "" {
				return &a, lines, ""
			}
			// The note goes with the fix shown: the first.
			if i == 0 {
				why = w
			}
		}
		first := e.Alternatives[0]
		return &first, nil, why
	}
	return nil, nil, ""
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); !strings.HasPrefix(t, "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// writeCheckTable prints the results, the answer first; texts are the
// files as read, for the fixes' diffs.
func writeCheckTable(w io.Writer, rs []CheckResult, texts map[string]manifestText) error {
	writeCheckHeadline(w, rs)
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s:%d  %s/%s  %s\n", r.File, r.Line, r.Kind, r.Name, verdictWords(r.Verdict))
		writeCheckedRelease(w, r)
		for _, d := range r.Denials {
			fmt.Fprintf(w, "  denied   %s\n", d)
		}
		for _, x := range r.Warnings {
			fmt.Fprintf(w, "  warning  %s\n", x)
		}
		writePodFixes(w, r)
		if r.Fix != nil {
			fmt.Fprintf(w, "  fix      %s\n", r.Fix.Message)
		}
		for _, t := range r.ThenFixes {
			fmt.Fprintf(w, "  then     %s\n", t)
		}
		if r.PatchNote != "" {
			fmt.Fprintf(w, "  (not in the patch: %s)\n", r.PatchNote)
		}
		if len(r.Patch) > 0 {
			writeFixDiff(w, texts[r.File], r.Patch)
		}
	}
	return nil
}
