package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"headroom.dev/headroom/sim"
)

// A stand-in with speculative decoding, 3 drafts all accepted: a
// completion of 10 tokens streams as vLLM streams it, a step's tokens in
// one chunk: 1 (the prompt's step), 4, 4, 1. /metrics counts 2 drafts of 3
// tokens, all 6 accepted, 2 at each position (sim's worked example).
func TestSpeculativeStreamAndCounters(t *testing.T) {
	ts := startWith(t, sim.Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, Timer: sim.Fixed(0.010), TokenEvents: true,
		Speculation: &sim.Speculation{K: 3, Acceptance: 1, Lookahead: 3}}, 100)

	lines := sse(t, post(t, ts.URL+"/v1/completions", `{"prompt":"one two three four five six","max_tokens":10,"stream":true}`))
	var sizes []int
	for _, l := range lines {
		if l == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(l), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("chunk %s (%v)", l, err)
		}
		sizes = append(sizes, strings.Count(c.Choices[0].Text, tokenText))
	}
	if len(sizes) != 4 || sizes[0] != 1 || sizes[1] != 4 || sizes[2] != 4 || sizes[3] != 1 {
		t.Errorf("tokens per chunk %v, want [1 4 4 1]", sizes)
	}
	fams := metrics(t, ts.URL)
	for name, want := range map[string]float64{"vllm:spec_decode_num_drafts_total": 2, "vllm:spec_decode_num_draft_tokens_total": 6, "vllm:spec_decode_num_accepted_tokens_total": 6} {
		if f := fams[name]; f == nil || f.Metric[0].Counter.GetValue() != want {
			t.Errorf("%s: %v, want %v", name, f, want)
		}
	}
	per := fams["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
	if per == nil || len(per.Metric) != 3 {
		t.Fatalf("per position: %v", per)
	}
	for _, m := range per.Metric {
		if m.Counter.GetValue() != 2 {
			t.Errorf("position %v: %v accepted, want 2", m.Label, m.Counter.GetValue())
		}
	}
}
