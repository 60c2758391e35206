package report

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/memory"
)

// A flag the release refuses is the answer, not a memory change; a draft
// the catalog holds is read offline, one it does not is named; the
// features line says what the features add.
func TestFeatureReport(t *testing.T) {
	build := func(cmd string) Report {
		t.Helper()
		e, err := Gather(context.Background(), offlineEnv(), Request{GPU: "L4", Version: "0.27.1", Offline: true, Command: strings.Fields(cmd)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Build(e, memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := build("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --max-num-active-seqs 8")
	if !strings.HasPrefix(r.Answer, "DOES NOT START: ") || !strings.Contains(r.Answer, "--max-num-active-seqs (added in 0.29.0, after vLLM 0.27.1)") {
		t.Errorf("answer %q", r.Answer)
	}

	r = build(`vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --enable-lora --speculative-config {"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":2}`)
	line := FeaturesLine(r.Features)
	for _, want := range []string{"LoRA 1 × rank 16", "speculative draft_model, 2 tokens a step", "drafter Qwen/Qwen2.5-0.5B-Instruct", "24 KV layers", "V1 model runner"} {
		if !strings.Contains(line, want) {
			t.Errorf("features line %q lacks %q", line, want)
		}
	}

	r = build(`vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --speculative-config {"model":"nobody/not-a-draft","num_speculative_tokens":2}`)
	codes := ""
	for _, w := range r.Warnings {
		codes += w.Code + " "
	}
	if !strings.Contains(codes, memory.CodeDraftNotRead) || !strings.Contains(strings.Join(r.Notes, "\n"), "the draft nobody/not-a-draft was not read") {
		t.Errorf("an unread draft: warnings %s, notes %q", codes, r.Notes)
	}
}
