package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/internal/kubetest"
)

// auditListKinds are the resources an audit lists, for the fake client.
var auditListKinds = map[schema.GroupVersionResource]string{
	{Group: "apps", Version: "v1", Resource: "deployments"}:                          "DeploymentList",
	{Group: "apps", Version: "v1", Resource: "statefulsets"}:                         "StatefulSetList",
	{Version: "v1", Resource: "pods"}:                                                "PodList",
	{Version: "v1", Resource: "nodes"}:                                               "NodeList",
	{Version: "v1", Resource: "configmaps"}:                                          "ConfigMapList",
	{Group: "kaito.sh", Version: "v1beta1", Resource: "workspaces"}:                  "WorkspaceList",
	{Group: "kaito.sh", Version: "v1alpha1", Resource: "workspaces"}:                 "WorkspaceList",
	{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}: "LeaderWorkerSetList",
	{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}:  "InferenceServiceList",
	{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}:      "HorizontalPodAutoscalerList",
}

// auditOf audits a cluster that holds only the manifest's objects (in the
// namespace "default"), through a fake API server.
func auditOf(t *testing.T, path string) audit.Report {
	t.Helper()
	var objs []runtime.Object
	for _, o := range kubetest.ReadObjects(t, path) {
		o.SetNamespace("default")
		objs = append(objs, o)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), auditListKinds, objs...)
	r, err := audit.Run(context.Background(), client, audit.Options{AllNamespaces: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The deployments of testdata/deployments, each a manifest whose GPU is
// named by the headroom.dev/gpu annotation and whose image names the vLLM
// release. Each is fed to the webhook (check), plan (its flags after --),
// and doctor (the manifest); they must give the same verdict and the same
// first change to make.
var deployments = []struct {
	file, gpu, version string
	args               []string
	fits, thin         bool
}{
	{"too-long.yaml", "L4", "0.11.0", []string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072"}, false, false},
	{"edge.yaml", "L4", "0.11.0", []string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=8192", "--gpu-memory-utilization=0.95"}, false, false},
	{"thin.yaml", "L4", "0.11.0", []string{"meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=8192", "--gpu-memory-utilization=0.91"}, true, true},
	{"fits.yaml", "H100-80GB", "0.11.0", []string{"Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"}, true, false},
}

var flagValueRe = regexp.MustCompile(`(--[a-z-]+)[ =]([^ ]+)`)

// TestCommandsAgree: plan, doctor and the webhook (headroom check) on the
// same deployment.
func TestCommandsAgree(t *testing.T) {
	for _, d := range deployments {
		t.Run(d.file, func(t *testing.T) {
			path := filepath.Join("testdata", "deployments", d.file)

			code, out, errs := run(t, offline, "check", path, "-o", "json")
			var checked []CheckResult
			if err := json.Unmarshal([]byte(out), &checked); err != nil || len(checked) != 1 {
				t.Fatalf("check: exit %d, %v: %s %s", code, err, out, errs)
			}
			c := checked[0]

			code2, out2, errs2 := run(t, offline, append([]string{"plan", "--gpu", d.gpu, "--vllm-version", d.version, "-o", "json", "--", "vllm", "serve"}, d.args...)...)
			var plan struct {
				Fits     bool `json:"fits"`
				Warnings []struct {
					Code string `json:"code"`
				} `json:"warnings"`
				Alternatives []struct {
					Args []string `json:"args"`
				} `json:"alternatives"`
				Command     string `json:"vllm_command"`
				Recommended struct {
					MaxNumSeqs int `json:"max_num_seqs"`
				} `json:"recommended"`
			}
			if err := json.Unmarshal([]byte(out2), &plan); err != nil {
				t.Fatalf("plan: exit %d, %v: %s", code2, err, errs2)
			}

			code3, out3, errs3 := run(t, offline, "doctor", path, "--gpu", d.gpu, "-o", "json")
			var doc struct {
				Findings []struct {
					Code     string `json:"code"`
					Remedies []struct {
						Args []string `json:"args"`
					} `json:"remedies"`
				} `json:"findings"`
				Command string `json:"suggested_command"`
			}
			if err := json.Unmarshal([]byte(out3), &doc); err != nil {
				t.Fatalf("doctor: exit %d, %v: %s", code3, err, errs3)
			}

			a := auditOf(t, path)
			if len(a.Workloads) != 1 {
				t.Fatalf("audit: %+v", a.Workloads)
			}
			w := a.Workloads[0]

			// The same verdict: admitted, fits, healthy and ok; or denied,
			// does not fit, findings (exit 1 from the three commands) and
			// will not start.
			if d.fits != (w.Status != audit.LevelWillNotStart) {
				t.Errorf("audit status %s, want fits=%t; findings %+v", w.Status, d.fits, w.Findings)
			}
			// One max-num-seqs rule: without traffic the value in use is
			// kept by plan, the webhook and audit alike (audit says what the
			// cache holds, at most as information, and names no other value).
			if len(w.Engines) != 1 || w.Engines[0].MaxNumSeqs != plan.Recommended.MaxNumSeqs {
				t.Errorf("audit engines %+v, plan recommends max-num-seqs %d", w.Engines, plan.Recommended.MaxNumSeqs)
			}
			for _, f := range w.Findings {
				if strings.Contains(f.Message, "set --max-num-seqs") || (f.Code == audit.CodeSeqsBeyondCache && f.Level != audit.LevelInfo) {
					t.Errorf("audit finding %+v contradicts plan's max-num-seqs %d", f, plan.Recommended.MaxNumSeqs)
				}
			}
			if d.thin {
				// It starts, with too thin a margin: the webhook warns (it
				// admitted this silently while doctor flagged it), plan
				// fits with thin_margin, doctor finds utilization_edge
				// (exit 1: a finding), audit ranks it at risk; and all
				// three name the same utilization to set.
				if c.Verdict != "warned" || code != 0 || !plan.Fits || code2 != 0 || len(plan.Warnings) == 0 || plan.Warnings[0].Code != "thin_margin" ||
					len(doc.Findings) == 0 || doc.Findings[0].Code != "utilization_edge" || code3 != 1 || w.Status != audit.LevelRisk {
					t.Fatalf("want all to agree the margin is thin: check %s (exit %d), plan fits=%t %+v (exit %d), doctor %+v (exit %d), audit %s",
						c.Verdict, code, plan.Fits, plan.Warnings, code2, doc.Findings, code3, w.Status)
				}
				r := doc.Findings[0].Remedies
				want := regexp.MustCompile(`--gpu-memory-utilization (\d\.\d\d) is the most`).FindStringSubmatch(strings.Join(c.Warnings, " "))
				if len(r) == 0 || len(r[0].Args) != 2 || want == nil || r[0].Args[1] != want[1] || !strings.Contains(plan.Command, "--gpu-memory-utilization "+want[1]) {
					t.Errorf("doctor's remedy %+v, the webhook's warning %q, plan's command %q: want one utilization", r, c.Warnings, plan.Command)
				}
				return
			}
			if d.fits {
				if c.Verdict == "denied" || code != 0 || !plan.Fits || code2 != 0 || len(doc.Findings) != 0 || code3 != 0 {
					t.Fatalf("want all to agree it fits: check %s (exit %d), plan fits=%t (exit %d), doctor %d findings (exit %d)",
						c.Verdict, code, plan.Fits, code2, len(doc.Findings), code3)
				}
				return
			}
			if c.Verdict != "denied" || code != 1 || plan.Fits || code2 != 1 || len(doc.Findings) == 0 || code3 != 1 {
				t.Fatalf("want all to agree it does not fit: check %s (exit %d), plan fits=%t (exit %d), doctor %d findings (exit %d)",
					c.Verdict, code, plan.Fits, code2, len(doc.Findings), code3)
			}
			// The same first change: the webhook's fix is plan's first
			// alternative (the least change that fits).
			if c.Fix == nil || len(plan.Alternatives) == 0 || strings.Join(c.Fix.Args, " ") != strings.Join(plan.Alternatives[0].Args, " ") {
				t.Fatalf("check's fix %+v, plan's first alternative %+v", c.Fix, plan.Alternatives)
			}
			// The same recommended values: every flag doctor's suggested
			// command sets has the value of plan's recommended command.
			flags := func(cmd string) map[string]string {
				m := map[string]string{}
				for _, x := range flagValueRe.FindAllStringSubmatch(cmd, -1) {
					m[x[1]] = x[2]
				}
				return m
			}
			want, got := flags(plan.Command), flags(doc.Command)
			if len(got) == 0 {
				t.Fatalf("doctor suggests no command")
			}
			for f, v := range got {
				if want[f] != v {
					t.Errorf("doctor sets %s %s, plan recommends %q: %q vs %q", f, v, want[f], doc.Command, plan.Command)
				}
			}
		})
	}
}

// TestCheckPatchPasses: the patch check prints, applied to the manifest,
// gives one the webhook admits.
func TestCheckPatchPasses(t *testing.T) {
	for _, name := range []string{"too-long.yaml", "edge.yaml"} {
		path := filepath.Join("testdata", "deployments", name)
		code, out, errs := run(t, offline, "check", path, "-o", "json")
		var rs []CheckResult
		if err := json.Unmarshal([]byte(out), &rs); err != nil || code != 1 || len(rs) != 1 || len(rs[0].Patch) == 0 {
			t.Fatalf("%s: exit %d, %v, %s %s", name, code, err, out, errs)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := len(rs[0].Patch) - 1; i >= 0; i-- {
			p := rs[0].Patch[i]
			if p.Old == "" {
				lines = append(lines[:p.Line-1], append([]string{p.New}, lines[p.Line-1:]...)...)
				continue
			}
			if lines[p.Line-1] != p.Old {
				t.Fatalf("%s:%d is %q, the patch says %q", name, p.Line, lines[p.Line-1], p.Old)
			}
			lines[p.Line-1] = p.New
		}
		fixed := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(fixed, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs = run(t, offline, "check", fixed)
		if code != 0 || !strings.HasPrefix(out, "ADMITTED") {
			t.Errorf("%s patched: exit %d: %s %s", name, code, out, errs)
		}
	}
}

// TestOutputStyle: -o yaml where -o exists (doctor lacked it), and one
// flag name for an endpoint (watch's --url; --metrics-url kept, deprecated).
func TestOutputStyle(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", filepath.Join("testdata", "deployments", "fits.yaml"), "--gpu", "H100-80GB", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "findings: []") || !strings.Contains(out, "disagreements: []") {
		t.Errorf("doctor -o yaml: exit %d: %s %s", code, out, errs)
	}
	code, _, errs = run(t, offline, "watch")
	if code != 2 || !strings.Contains(errs, "no --url") {
		t.Errorf("watch without --url: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, offline, "watch", "--metrics-url", "")
	if code != 2 || !strings.Contains(errs, "--metrics-url is deprecated; use --url") {
		t.Errorf("watch --metrics-url: exit %d: %s", code, errs)
	}
}

// TestSimulateStyle: a column headed ms holds milliseconds only (13,700,
// not 13.7s); the step time's fit is behind -v; --profile sets the lengths
// (or is refused where something else sets them).
func TestSimulateStyle(t *testing.T) {
	if got := ms(13700); got != "13,700" {
		t.Errorf("ms(13700) = %q, want 13,700 in a column headed ms", got)
	}
	if got := msUnit(13700); got != "13.7s" {
		t.Errorf("msUnit(13700) = %q", got)
	}
	code, prof, errs := run(t, offline, "profile", writeLog(t, false), "-o", "json")
	if code != 0 {
		t.Fatalf("profile: exit %d: %s", code, errs)
	}
	profile := writeFile(t, "profile.json", prof)
	base := append(append([]string{}, simBase...), "--rate", "2", "--num-requests", "20", "--step-time", "fixed:10ms", "--profile", profile)
	code, out, errs := run(t, offline, base...)
	if code != 0 || !strings.Contains(out, "prompts "+profile+" input_tokens, outputs "+profile+" output_tokens") {
		t.Errorf("simulate --profile: exit %d: want the profile's lengths:\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, offline, append(append([]string{}, simBase...), "--rate", "2", "--num-requests", "20")...)
	if code != 0 || !strings.Contains(out, "step time: roofline (-v or -o json for how it was fitted)") {
		t.Errorf("simulate: exit %d: want the step time's fit behind -v:\n%s", code, out)
	}
	code, out, _ = run(t, offline, append(append([]string{}, simBase...), "--rate", "2", "--num-requests", "20", "-v")...)
	if code != 0 || !strings.Contains(out, "step time: roofline (fitted on") {
		t.Errorf("simulate -v: exit %d: want the step time's fit:\n%s", code, out)
	}
	code, _, errs = run(t, offline, append(base, "--prompt-tokens", "100", "--output-tokens", "10")...)
	if code != 2 || !strings.Contains(errs, "--profile sets the prompt and output lengths") {
		t.Errorf("--profile with both lengths: exit %d: %s", code, errs)
	}
}

// TestDoctorCitesTheValue: a finding about a flag's value cites the
// manifest line that holds the value (too-long.yaml:24 is "131072", the
// item after "- --max-model-len"; edge.yaml:27 sets the utilization).
func TestDoctorCitesTheValue(t *testing.T) {
	for _, tt := range []struct {
		file, code string
		line       int
	}{{"too-long.yaml", "max_model_len_too_large", 24}, {"edge.yaml", "utilization_edge", 27}} {
		path := filepath.Join("testdata", "deployments", tt.file)
		_, out, errs := run(t, offline, "doctor", path, "--gpu", "L4", "-o", "json")
		var d struct {
			Findings []struct {
				Code     string `json:"code"`
				Evidence []struct {
					Source string `json:"source"`
					Line   int    `json:"line"`
				} `json:"evidence"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%s: %v: %s", tt.file, err, errs)
		}
		cited := false
		for _, f := range d.Findings {
			for _, e := range f.Evidence {
				cited = cited || (f.Code == tt.code && e.Source == path && e.Line == tt.line)
			}
		}
		if !cited {
			t.Errorf("%s: want %s cited at line %d: %s", tt.file, tt.code, tt.line, out)
		}
	}
}

// TestPlanGPUsGiven: Llama-3.1-70B on --gpu 2xA100-80GB at 32768 tokens is
// planned on both GPUs (tp 2, said on the line after the answer): 131.45
// GiB of weights are 65.7 GiB a GPU. One request of 32768 tokens needs
// 32768 × 160 KiB (80 layers × 8 KV heads × 128 × 2 × 2 bytes, halved by
// tp 2) = 5 GiB of KV cache; at the default 0.92 about 3 GiB is left, at
// 0.96 another 3.2 GiB of the 79.15 GiB card: the utilization alone fits,
// and is the first alternative, before an fp8 KV cache (utilization before
// dtype), and more of the same GPU before another GPU.
func TestPlanGPUsGiven(t *testing.T) {
	code, out, errs := run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "2xA100-80GB", "--max-model-len", "32768", "-o", "json")
	var r struct {
		Answer   string `json:"answer"`
		Layout   string `json:"layout_chosen"`
		Settings struct {
			TP int `json:"tensor_parallel_size"`
		} `json:"settings"`
		Alternatives []struct {
			Code string `json:"code"`
			GPU  string `json:"gpu"`
		} `json:"alternatives"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 {
		t.Fatalf("exit %d, %v: %s", code, err, errs)
	}
	if r.Settings.TP != 2 || !strings.Contains(r.Layout, "--tensor-parallel-size 2") || len(r.Alternatives) == 0 || r.Alternatives[0].Code != "utilization" {
		t.Fatalf("tp %d, layout %q, alternatives %+v: want tp 2 on the GPUs given, the utilization first", r.Settings.TP, r.Layout, r.Alternatives)
	}
	seenOther := false
	for _, a := range r.Alternatives {
		if a.GPU != "" && a.GPU != "A100-80GB" {
			seenOther = true
		} else if seenOther {
			t.Errorf("alternatives %+v: the GPU in use after another GPU", r.Alternatives)
		}
	}
	// The table says the answer, then the layout.
	_, out, _ = run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "2xA100-80GB", "--max-model-len", "32768")
	lines := strings.SplitN(out, "\n", 3)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "DOES NOT FIT: meta-llama/Llama-3.1-70B-Instruct on 2 × A100-80GB, tp 2 pp 1; would fit: --gpu-memory-utilization 0.96") ||
		!strings.Contains(lines[1], "--tensor-parallel-size 2") {
		t.Errorf("first lines:\n%s", strings.Join(lines[:2], "\n"))
	}
}

// TestCanonicalModelAndYours: the alias typed (llama-3.1-8b-instruct, a
// catalog name vLLM cannot load) becomes the Hub id in every command to
// paste, and a max-model-len the user did not give is never "yours".
func TestCanonicalModelAndYours(t *testing.T) {
	_, out, errs := run(t, offline, "plan", "--model", "llama-3.1-8b-instruct", "--gpu", "L4", "-o", "json")
	var r struct {
		Command     string `json:"vllm_command"`
		Recommended struct {
			Why []string `json:"why"`
		} `json:"recommended"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if !strings.HasPrefix(r.Command, "vllm serve meta-llama/Llama-3.1-8B-Instruct ") {
		t.Errorf("command %q, want the Hub id", r.Command)
	}
	if why := strings.Join(r.Recommended.Why, "\n"); strings.Contains(why, "yours") {
		t.Errorf("no --max-model-len given, yet: %s", why)
	}
	_, out, _ = run(t, offline, "doctor", filepath.Join("..", "..", "doctor", "testdata", "corpus", "seed001-oom.txt"), "--gpu", "A100-80GB", "-o", "json",
		"--", "vllm", "serve", "llama-3.1-8b-instruct", "--max-model-len", "8192", "--gpu-memory-utilization", "0.99")
	var d struct {
		Command string `json:"suggested_command"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || !strings.HasPrefix(d.Command, "vllm serve meta-llama/Llama-3.1-8B-Instruct ") {
		t.Errorf("doctor's command %q (%v), want the Hub id", d.Command, err)
	}
}

// TestCheckBadInput: one line, exit 2, naming the file.
func TestCheckBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noKind := filepath.Join(dir, "nokind.yaml")
	if err := os.WriteFile(noKind, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check"},
		{"check", filepath.Join(dir, "missing.yaml")},
		{"check", bad},
		{"check", noKind},
		{"check", filepath.Join("testdata", "deployments", "fits.yaml"), "-o", "xml"},
	} {
		code, out, errs := run(t, offline, args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || (len(args) > 1 && args[1] != filepath.Join("testdata", "deployments", "fits.yaml") && !strings.Contains(errs, filepath.Base(args[1]))) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// TestThousandsInTablesOnly: a count of tokens has separators in a table
// and none in JSON; flag values stay as they are pasted.
func TestThousandsInTablesOnly(t *testing.T) {
	args := []string{"plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--vllm-version", "0.19.0"}
	_, table, _ := run(t, offline, args...)
	if m := regexp.MustCompile(`\b\d{4,} tokens`).FindString(table); m != "" {
		t.Errorf("table writes %q without separators:\n%s", m, table)
	}
	if !strings.Contains(table, "one request of 131,072 tokens") || !regexp.MustCompile(`--max-model-len \d{5} `).MatchString(table) {
		t.Errorf("want counts separated and flag values bare:\n%s", table)
	}
	_, js, _ := run(t, offline, append(args, "-o", "json")...)
	if strings.Contains(js, "131,072") || !strings.Contains(js, "one request of 131072 tokens") {
		t.Errorf("JSON has a separated count:\n%s", js)
	}
}
