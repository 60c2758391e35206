package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneNamePerQuantity walks what a user reads (help texts, the plan's
// table and JSON, doctor's remedies, the README and the docs) for the
// names and numbers that differed by where they were read: vLLM's flag is
// --kv-cache-memory-bytes (doctor and the help said --kv-cache-memory);
// non-torch is one number in the table and the JSON (the table added the
// CUDA context to it); the calibration set is the 57 vLLM 0.19.0
// start-ups, a subset said as "N of the 57" (it read 50, 52 or 57); a
// count of tokens in a table has thousands separators.
func TestOneNamePerQuantity(t *testing.T) {
	shortFlag := regexp.MustCompile(`--kv-cache-memory([^-]|$)`)
	var texts []string
	for _, cmd := range []string{"plan", "doctor", "check", "probe", "capacity", "simulate", "audit", "webhook"} {
		_, out, _ := run(t, offline, cmd, "--help")
		texts = append(texts, out)
	}
	_, out, _ := run(t, offline, "doctor", filepath.Join("..", "..", "doctor", "testdata", "corpus", "utilization-edge.log"), "--gpu", "H100-80GB")
	texts = append(texts, out)
	for _, s := range texts {
		if m := shortFlag.FindString(s); m != "" {
			t.Errorf("--kv-cache-memory without -bytes in:\n%s", s)
		}
	}

	args := []string{"plan", "--gpu", "H100-80GB", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "32768"}
	_, table, _ := run(t, offline, args...)
	_, js, _ := run(t, offline, append([]string{"plan", "-o", "json"}, args[1:]...)...)
	var r struct {
		PerGPU struct {
			NonTorch float64 `json:"non_torch_gib"`
			Context  float64 `json:"cuda_context_gib"`
		} `json:"per_gpu"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	_, legend, gib := cardLines(t, args[1:]...)
	cols := strings.Fields(strings.ReplaceAll(gib, " GiB", ""))
	names := regexp.MustCompile(`[▒▪] [a-zA-Z -]+?(\s{2,}|$)`).FindAllString(legend, -1)
	if len(cols) != 7 || len(names) != 2 || cols[2] != fmtGiB(r.PerGPU.NonTorch) || cols[3] != fmtGiB(r.PerGPU.Context) {
		t.Errorf("table non-torch %v / CUDA context, JSON %.2f / %.2f:\n%s\n%s", cols, r.PerGPU.NonTorch, r.PerGPU.Context, legend, gib)
	}

	set := regexp.MustCompile(`\b(\d+)( of (the )?(\d+))? (real )?vLLM 0\.19\.0 (H100 )?start-ups`)
	docs := []string{table}
	for _, f := range []string{"README.md", "docs/plan.md", "memory/README.md", "monitoring/README.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	found := 0
	for _, d := range docs {
		for _, m := range set.FindAllStringSubmatch(d, -1) {
			found++
			if m[1] != "57" && m[4] != "57" {
				t.Errorf("the calibration set named %q: it is the 57 start-ups, or N of the 57", m[0])
			}
		}
	}
	if found < 4 {
		t.Errorf("the calibration set is named %d times, want it in the table and the docs", found)
	}

	if m := regexp.MustCompile(`requests of \d{5,} tokens`).FindString(table); m != "" {
		t.Errorf("a count of tokens without separators in the table: %q", m)
	}
}

func fmtGiB(x float64) string { return fmt.Sprintf("%.2f", x) }
