package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"headroom.dev/headroom/doctor"
)

const corpus = "../../doctor/testdata/corpus/"

// TestDoctorJSONContract: the fields the issue names, most likely first,
// exit 1 when something is wrong.
func TestDoctorJSONContract(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", corpus+"preemption", "--gpu", "H100-80GB", "-o", "json")
	if code != ExitNoFit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d struct {
		Findings []struct {
			Code       string  `json:"code"`
			Confidence float64 `json:"confidence"`
			Evidence   []struct {
				Source string `json:"source"`
				Line   int    `json:"line"`
				Text   string `json:"text"`
			} `json:"evidence"`
			Remedies []struct {
				Action string   `json:"action"`
				Args   []string `json:"args"`
				Why    string   `json:"why"`
			} `json:"remedies"`
		} `json:"findings"`
		DeadEnds []map[string]string `json:"dead_ends"`
		Memory   map[string]any      `json:"memory"`
	}
	var figures struct {
		Memory struct {
			Plan struct {
				KVTokens    int64   `json:"kv_cache_tokens"`
				Utilization float64 `json:"gpu_memory_utilization"`
			} `json:"plan"`
			Recommended struct {
				KVTokens    int64   `json:"kv_cache_tokens"`
				Utilization float64 `json:"gpu_memory_utilization"`
				MaxNumSeqs  int64   `json:"max_num_seqs"`
			} `json:"recommended"`
			Traffic struct {
				Total struct {
					P90 int64 `json:"p90"`
				} `json:"total_tokens"`
			} `json:"traffic"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &figures); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Findings) == 0 || d.Findings[0].Code != "kv_cache_pressure" {
		t.Fatalf("findings %+v", d.Findings)
	}
	f := d.Findings[0]
	if f.Confidence < 0.75 || len(f.Evidence) == 0 || f.Evidence[0].Line == 0 {
		t.Errorf("finding %+v", f)
	}
	// The first remedy lowers --max-num-seqs from vLLM's V0 default (256)
	// to what the KV cache holds at the traffic's p90 length: the report's
	// one recommendation, at the recommended utilization (so that flag is
	// part of the remedy): its KV tokens divided by that length, rounded
	// down. The long requests of requests.log are 7,420 + 512 = 7,932
	// tokens; the p90 read from the histogram lies within 1% of them.
	rec := figures.Memory.Recommended
	p90, kv := figures.Memory.Traffic.Total.P90, rec.KVTokens
	if p90 < 7932*99/100 || p90 > 7932 || kv <= 0 {
		t.Fatalf("p90 %d (want about 7,932), KV tokens %d", p90, kv)
	}
	want := strconv.FormatInt(min(kv/p90, 256), 10)
	r := f.Remedies[0]
	args := []string{"--max-num-seqs", want}
	if rec.Utilization != figures.Memory.Plan.Utilization {
		args = append([]string{"--gpu-memory-utilization", strconv.FormatFloat(rec.Utilization, 'f', 2, 64)}, args...)
	}
	if r.Action != "set_flag" || strings.Join(r.Args, " ") != strings.Join(args, " ") || strconv.FormatInt(rec.MaxNumSeqs, 10) != want ||
		!strings.HasPrefix(r.Why, "--max-num-seqs 256 -> "+want+": "+want+" requests of ") {
		t.Errorf("remedy %+v, want %v (%d KV tokens / %d), the recommendation's %d", r, args, kv, p90, rec.MaxNumSeqs)
	}
	if len(d.DeadEnds) == 0 || d.Memory["traffic"] == nil || d.Memory["plan"] == nil {
		t.Errorf("dead ends %v memory %v", d.DeadEnds, d.Memory)
	}
}

func TestDoctorTextAndMarkdown(t *testing.T) {
	code, out, _ := run(t, offline, "doctor", corpus+"capture-oom.log")
	if code != ExitNoFit || !strings.Contains(out, "1. outside_budget:") || !strings.Contains(out, "--gpu-memory-utilization 0.94") ||
		!strings.Contains(out, "Dead ends") || !strings.Contains(out, "capture-oom.log:20:") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, offline, "doctor", corpus+"maxlen.log", "-o", "markdown")
	if code != ExitNoFit || !strings.Contains(out, "### 1. `max_model_len_too_large`") || !strings.Contains(out, "```") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestDoctorHealthy(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", corpus+"healthy.log")
	if code != ExitFits || !strings.Contains(out, "nothing wrong") {
		t.Errorf("exit %d: %s %s", code, out, errs)
	}
}

// TestDoctorPastedCommand: the seed's OOM text plus the deployment's
// command and GPU give computed remedies.
func TestDoctorPastedCommand(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", corpus+"seed001-oom.txt", "--gpu", "A100-80GB", "-o", "json",
		"--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "256", "--max-model-len", "8192")
	if code != ExitNoFit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// No request log: max-num-seqs keeps the value in use (plan's one
	// rule), and the remedy says what would size it.
	if strings.Contains(out, `"--max-num-seqs"`) || !strings.Contains(out, "size --max-num-seqs by the traffic") || strings.Contains(out, `\u003e`) {
		t.Errorf("want no max-num-seqs value without traffic, and how to size it:\n%s", out)
	}
}

func TestDoctorBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "notes.txt")
	os.WriteFile(empty, []byte("nothing here\n"), 0o644)
	for _, args := range [][]string{
		{"doctor"},
		{"doctor", filepath.Join(dir, "missing.log")},
		{"doctor", empty},
		{"doctor", corpus + "healthy.log", "-o", "xml"},
	} {
		code, _, errs := run(t, offline, args...)
		if code != ExitBadInput || strings.Count(strings.TrimSpace(errs), "\n") != 0 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestDoctorSourcesShown: the L4 log's measured KV cache (3.50 GiB = 1792
// blocks of 2 MiB = 28,672 tokens, see doctor's TestMeasuredOutranksPlan)
// is what the table and the JSON show, each number with its source.
func TestDoctorSourcesShown(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", corpus+"maxlen-l4.log", "--gpu", "L4")
	if code != ExitNoFit || !strings.Contains(out, "1) --max-model-len 28672\n") ||
		!strings.Contains(out, "KV cache 3.50 GiB (28,672 tokens, derived from the GiB and the page size)") ||
		!strings.Contains(out, "weights 14.99 GiB (log)") || !strings.Contains(out, "KV 3.50 GiB (log) = 28,672 tokens (derived;") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	_, out, _ = run(t, offline, "doctor", corpus+"maxlen-l4.log", "--gpu", "L4", "-o", "json")
	var d struct {
		Memory struct {
			Plan struct {
				Sources map[string]string `json:"sources"`
			} `json:"plan"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if s := d.Memory.Plan.Sources; s["kv_cache_bytes"] != "log" || s["weights_bytes"] != "log" || s["activation_bytes"] != "derived" || s["non_torch_bytes"] != "plan" {
		t.Errorf("sources %v", s)
	}
}

// TestDoctorRuntimeOOMPastes: the run-time OOM with the deployment's
// command. Every flag remedy has its flags, and the suggested command
// carries the first: 0.95 lowered to 0.92 (doctor's
// TestRuntimeOOMIsOutsideTheBudget has the arithmetic), kept in the
// command though it is the release's default, as the change is the point.
func TestDoctorRuntimeOOMPastes(t *testing.T) {
	code, out, errs := run(t, offline, "doctor", corpus+"runtime-oom.log", "--gpu", "H100-80GB", "-o", "json", "--",
		"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768", "--gpu-memory-utilization", "0.95", "--max-num-seqs", "512")
	if code != ExitNoFit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d struct {
		Findings []struct {
			Code     string `json:"code"`
			Remedies []struct {
				Action string   `json:"action"`
				Args   []string `json:"args"`
			} `json:"remedies"`
		} `json:"findings"`
		Command *string `json:"suggested_command"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Findings) == 0 || d.Findings[0].Code != "outside_budget" {
		t.Fatalf("findings %+v", d.Findings)
	}
	for _, f := range d.Findings {
		for _, r := range f.Remedies {
			if r.Action == "set_flag" && len(r.Args) == 0 {
				t.Errorf("%s: a set_flag remedy with no flags", f.Code)
			}
		}
	}
	if d.Command == nil || !strings.Contains(*d.Command, "--gpu-memory-utilization 0.92") {
		t.Errorf("suggested command %v", d.Command)
	}
}

// TestDoctorProbeAgreesWithCheck: the same pod as a manifest (check) and
// as kubectl describe (doctor) gets the same startup probe: Qwen2.5-7B on
// an L4 starts in about 30 s + 15 s reading 15 GB locally + 60 s = 1m45s,
// a probe allows twice that, 210 s, or 21 periods of 10 s.
func TestDoctorProbeAgreesWithCheck(t *testing.T) {
	_, out, errs := run(t, offline, "check", filepath.Join("testdata", "check", "deploy-probe.yaml"))
	if !strings.Contains(out, "add a startupProbe with periodSeconds 10 and failureThreshold 21") {
		t.Fatalf("check:\n%s%s", out, errs)
	}
	_, out, errs = run(t, offline, "doctor", corpus+"describe-probe.txt", "-o", "json")
	var d struct {
		Findings []struct {
			Code     string `json:"code"`
			Remedies []struct {
				Args []string `json:"args"`
			} `json:"remedies"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if len(d.Findings) == 0 || d.Findings[0].Code != "k8s_scheduling" || !strings.Contains(strings.Join(d.Findings[0].Remedies[0].Args, " "), "startupProbe.failureThreshold 21") {
		t.Errorf("doctor: %+v", d.Findings)
	}
}

// TestDoctorSkipsBinaryFiles: a directory is read file by file; a core
// dump beside the OOM message is skipped with a note, and only inputs of
// which nothing is text are bad input.
func TestDoctorSkipsBinaryFiles(t *testing.T) {
	dir := t.TempDir()
	oom, err := os.ReadFile(corpus + "seed001-oom.txt")
	if err != nil {
		t.Fatal(err)
	}
	core := []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x3e\x00")
	os.WriteFile(filepath.Join(dir, "core.dump"), core, 0o644)
	os.WriteFile(filepath.Join(dir, "oom.txt"), oom, 0o644)
	code, out, errs := run(t, offline, "doctor", dir)
	if code != ExitNoFit || !strings.Contains(out, "core.dump: nothing recognised") || !strings.Contains(out, "not text: skipped") {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
	only := filepath.Join(t.TempDir(), "core.dump")
	os.WriteFile(only, core, 0o644)
	code, _, errs = run(t, offline, "doctor", only)
	if code != ExitBadInput || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "nothing recognised") {
		t.Errorf("binary alone: exit %d, stderr %q", code, errs)
	}
}

// TestDoctorHelpNamesEveryCause: the help's list of causes is the
// package's, so none is left out.
func TestDoctorHelpNamesEveryCause(t *testing.T) {
	_, out, _ := run(t, offline, "doctor", "--help")
	flat := strings.Join(strings.Fields(out), " ")
	for _, c := range doctor.Codes() {
		if !strings.Contains(flat, c) {
			t.Errorf("doctor --help does not name %s", c)
		}
	}
}

// TestDoctorSaysWhatWasLeftOut: /metrics with a NaN KV usage and 1e308
// preemptions gives no figure; the text says which values were left out
// instead of printing 0.0% and 0 preemptions.
func TestDoctorSaysWhatWasLeftOut(t *testing.T) {
	_, out, errs := run(t, offline, "doctor", corpus+"metrics-bad.txt")
	if strings.Contains(out, "KV cache usage up to") || strings.Contains(out, "0 preemptions") ||
		!strings.Contains(out, "no KV cache usage or preemption count in the evidence") ||
		!strings.Contains(out, "vllm:gpu_cache_usage_perc is NaN") {
		t.Errorf("%s%s", out, errs)
	}
}

// TestDoctorSuggestedCommandWhen: where the command answers only what the
// planner predicts beside an OOMKill, its heading says the limit comes
// first.
func TestDoctorSuggestedCommandWhen(t *testing.T) {
	_, out, _ := run(t, offline, "doctor", corpus+"describe2.txt")
	if !strings.HasPrefix(out, "host_memory_limit (high confidence)") ||
		!strings.Contains(out, "Suggested command (for what the planner predicts at these settings (outside_budget), which nothing in the evidence shows yet; host_memory_limit's fix comes first: resources.limits.memory: 11Gi") ||
		!strings.Contains(out, "predicted by the planner for these settings; nothing in the evidence shows it yet") {
		t.Errorf("%s", out)
	}
}
