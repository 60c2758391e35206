package telemetry

import (
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/vllm"
)

// specExposition is a server's spec-decode counters as vLLM's
// prometheus_client writes them (the _created samples included), two
// engines of k = 3: 100 drafts, 300 draft tokens, 153 accepted, 70, 49
// and 34 at positions 0, 1, 2 (vllm/specdecode_test.go's worked example).
const specExposition = `# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 60.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 40.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 1.7640e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 180.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 120.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 93.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 60.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct",position="0"} 42.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct",position="1"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct",position="2"} 21.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct",position="0"} 28.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct",position="1"} 19.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct",position="2"} 13.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 3.0
`

func TestParseSpecDecode(t *testing.T) {
	s, err := ParseVLLMMetrics(strings.NewReader(specExposition))
	if err != nil {
		t.Fatal(err)
	}
	c := s.SpecDecode
	if c == nil || c.Drafts != 100 || c.DraftTokens != 300 || c.Accepted != 153 || len(c.AcceptedPerPos) != 3 ||
		c.AcceptedPerPos[0] != 70 || c.AcceptedPerPos[1] != 49 || c.AcceptedPerPos[2] != 34 {
		t.Fatalf("spec decode %+v", c)
	}
	a, _ := c.Acceptance()
	if a.TokenAcceptance != 0.6986 {
		t.Errorf("α %v, want 153/219", a.TokenAcceptance)
	}
	if s.Names[vllm.MetricSpecAcceptedPerPos] != "vllm:spec_decode_num_accepted_tokens_per_pos_total" {
		t.Errorf("names %v", s.Names)
	}
	// A server without speculative decoding has none.
	s, err = ParseVLLMMetrics(strings.NewReader("vllm:num_requests_running 2\n"))
	if err != nil || s.SpecDecode != nil {
		t.Errorf("no counters: %+v, %v", s.SpecDecode, err)
	}
}

// A position label no server writes is left out with a note, and cannot
// size the positions.
func TestSpecDecodeHostilePositions(t *testing.T) {
	in := "vllm:spec_decode_num_drafts_total 5\n" +
		"vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"99999999\"} 1\n" +
		"vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 4\n"
	s, err := ParseVLLMMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.SpecDecode; c == nil || len(c.AcceptedPerPos) != 1 || c.AcceptedPerPos[0] != 4 || len(s.Dropped) != 1 {
		t.Errorf("spec decode %+v, dropped %v", c, s.Dropped)
	}
}

// watch's record: the acceptance of the drafts verified between its
// readings, not since the server started. Between the two readings 100
// drafts of 3 were verified, 153 accepted, 70, 49, 34 by position.
func TestWatchRecordsWindowAcceptance(t *testing.T) {
	before := VLLMSample{Names: map[vllm.Metric]string{}, SpecDecode: &vllm.SpecDecodeCounts{Drafts: 1000, DraftTokens: 3000, Accepted: 900, AcceptedPerPos: []float64{500, 250, 150}}}
	after := before
	after.SpecDecode = &vllm.SpecDecodeCounts{Drafts: 1100, DraftTokens: 3300, Accepted: 1053, AcceptedPerPos: []float64{570, 299, 184}}
	m := NewMonitor(AlertRules{}, 0)
	t0 := time.Unix(1_700_000_000, 0)
	r, _ := m.Observe(t0, &before, nil)
	if rec := r.Record(nil, nil); rec.SpecDecode != nil {
		t.Errorf("first reading: %+v, want none (no window yet)", rec.SpecDecode)
	}
	r, _ = m.Observe(t0.Add(30*time.Second), &after, nil)
	rec := r.Record(nil, nil)
	if s := rec.SpecDecode; s == nil || s.Drafts != 100 || s.AcceptedTokens != 153 || s.TokenAcceptance != 0.6986 || s.MeanAcceptanceLength != 2.53 {
		t.Errorf("window acceptance %+v", s)
	}
}
