package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
