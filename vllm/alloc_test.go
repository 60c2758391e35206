package vllm

import "testing"

func TestExpandableSegmentsSafe(t *testing.T) {
	for _, tc := range []struct {
		tp, pp int
		sleep  bool
		safe   bool
	}{
		{0, 0, false, true}, // unset sizes are vLLM's default of 1
		{1, 1, false, true},
		{2, 1, false, false},
		{1, 2, false, false},
		{1, 1, true, false},
	} {
		safe, why := ExpandableSegmentsSafe(tc.tp, tc.pp, tc.sleep)
		if safe != tc.safe || (safe != (why == "")) {
			t.Errorf("tp %d pp %d sleep %v: safe %v (%q), want %v", tc.tp, tc.pp, tc.sleep, safe, why, tc.safe)
		}
	}
}
