package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// simulate with the draft, as a user pastes it: Qwen2.5-7B on one
// L4 with a 0.5B draft at 5 drafts, --acceptance-rate 0.7 (2.94 tokens a
// step: 1 + 0.7 + 0.49 + 0.343 + 0.2401 + 0.16807). At concurrency 1 the
// TPOT is 1.5–2.9× lower than without the draft (the 2.94 tokens a step,
// less the draft's five passes); at concurrency 32 the gain is smaller
// (verifying 6 tokens for 32 requests is a compute-bound step on an L4,
// and the passes grow with the batch). The JSON says what was simulated
// and what vLLM's counters would read.
func TestSimulateSpeculative(t *testing.T) {
	const draft = `{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}`
	type out struct {
		TPOT struct {
			P50 float64 `json:"p50"`
		} `json:"tpot_ms"`
		Split       map[string]float64 `json:"step_time_split"`
		Speculative *struct {
			Method           string  `json:"method"`
			K                int     `json:"num_speculative_tokens"`
			TokenAcceptance  float64 `json:"token_acceptance"`
			AcceptanceSource string  `json:"acceptance_source"`
			TokensPerStep    float64 `json:"tokens_per_step"`
			Drafter          string  `json:"drafter"`
		} `json:"speculative"`
		SpecDecode *struct {
			MeanAcceptanceLength float64 `json:"mean_acceptance_length"`
			TokenAcceptance      float64 `json:"token_acceptance"`
		} `json:"spec_decode"`
	}
	sim := func(c string, spec bool) out {
		t.Helper()
		args := []string{"simulate", "--gpu", "L4", "--vllm-version", "0.27.1", "--concurrency", c, "--num-requests", "64",
			"--prompt-tokens", "200", "--output-tokens", "120", "-o", "json"}
		if spec {
			args = append(args, "--speculative-config", draft, "--acceptance-rate", "0.7")
		}
		args = append(args, "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096", "--gpu-memory-utilization", "0.90", "--max-num-seqs", "128")
		code, stdout, stderr := run(t, offline, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	base1, spec1 := sim("1", false), sim("1", true)
	base32, spec32 := sim("32", false), sim("32", true)
	g1, g32 := base1.TPOT.P50/spec1.TPOT.P50, base32.TPOT.P50/spec32.TPOT.P50
	t.Logf("TPOT p50: %.1f → %.1f ms at concurrency 1 (%.2f×), %.1f → %.1f ms at 32 (%.2f×)", base1.TPOT.P50, spec1.TPOT.P50, g1, base32.TPOT.P50, spec32.TPOT.P50, g32)
	if g1 < 1.5 || g1 > 2.9 {
		t.Errorf("concurrency 1: TPOT %.2f× lower, want 1.5–2.9×", g1)
	}
	if g32 >= g1 {
		t.Errorf("the gain does not shrink: %.2f× at 32, %.2f× at 1", g32, g1)
	}
	s := spec1.Speculative
	if s == nil || s.Method != "draft_model" || s.K != 5 || s.TokenAcceptance != 0.7 || s.AcceptanceSource != "--acceptance-rate" || s.TokensPerStep != 2.941 || s.Drafter != "Qwen/Qwen2.5-0.5B-Instruct" {
		t.Errorf("speculative: %+v", s)
	}
	if d := spec1.SpecDecode; d == nil || d.TokenAcceptance < 0.65 || d.TokenAcceptance > 0.75 {
		t.Errorf("spec_decode: %+v", d)
	}
	if spec1.Split["draft_s"] <= 0 || base1.Split["draft_s"] != 0 {
		t.Errorf("draft_s %v with the draft, %v without", spec1.Split["draft_s"], base1.Split["draft_s"])
	}
}

// --acceptance-rate is refused in one line (exit 2) without a speculative
// config and outside (0, 1]; its default is named in the table.
func TestAcceptanceRateFlag(t *testing.T) {
	base := []string{"simulate", "--gpu", "L4", "--concurrency", "1", "--num-requests", "4", "--prompt-tokens", "100", "--output-tokens", "20"}
	tail := []string{"--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--acceptance-rate", "0.5"}, "give --speculative-config"},
		{[]string{"--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`, "--acceptance-rate", "1.5"}, "at most 1"},
		{[]string{"--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`, "--acceptance-rate", "-0.1"}, "above 0"},
	} {
		code, _, stderr := run(t, offline, append(append(base, c.args...), tail...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
	code, stdout, _ := run(t, offline, append(append(base, "--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`), tail...)...)
	if code != 0 || !strings.Contains(stdout, "speculative decoding: ngram, k = 3, per-token acceptance 0.57 (the method's default; give --acceptance-rate)") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

// watch's live line gives the window's drafts: 100 drafts of 3, 153
// accepted (51%), 70, 49, 34 by position: per token 153 / 219 = 0.70.
func TestWatchLineDrafts(t *testing.T) {
	v := &telemetry.VLLMSample{Names: map[vllm.Metric]string{}}
	r := telemetry.Reading{Time: time.Unix(0, 0), VLLM: v,
		Delta: telemetry.Delta{SpecDecode: &vllm.SpecDecodeCounts{Drafts: 100, DraftTokens: 300, Accepted: 153, AcceptedPerPos: []float64{70, 49, 34}}}}
	if line := watchLine(r, nil); !strings.Contains(line, "drafts 51% accepted (per token 0.70)") {
		t.Errorf("line %q", line)
	}
	r.Delta.SpecDecode = nil
	if line := watchLine(r, nil); strings.Contains(line, "drafts") {
		t.Errorf("line without drafts %q", line)
	}
}

// loadtest's line of the server's drafts, the same worked counts.
func TestAcceptanceLine(t *testing.T) {
	a, _ := vllm.SpecDecodeCounts{Drafts: 100, DraftTokens: 300, Accepted: 153, AcceptedPerPos: []float64{70, 49, 34}}.Acceptance()
	want := "100 verified, 51.0% of their 300 tokens accepted, mean acceptance length 2.53 (by position 0.70 0.49 0.34); per token 0.70: simulate with --acceptance-rate 0.70"
	if got := acceptanceLine(a); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
