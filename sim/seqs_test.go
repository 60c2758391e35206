package sim

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
)

func TestBetterTrial(t *testing.T) {
	trial := func(seqs int, rejected, preempt int64, e2e float64) SeqsTrial {
		return SeqsTrial{MaxNumSeqs: seqs, Rejected: rejected, Preemptions: preempt, E2EP99MS: e2e}
	}
	for _, c := range []struct {
		a, b SeqsTrial
		want bool
	}{
		{trial(8, 0, 9, 900), trial(256, 1, 0, 100), true},     // no rejection beats a faster run that rejects
		{trial(8, 0, 9, 900), trial(256, 0, 0, 930), true},     // then the lower E2E p99
		{trial(8, 0, 9, 900), trial(256, 0, 0, 910), false},    // within 2% the tails are the same: fewer preemptions
		{trial(8, 0, 1, 900), trial(256, 0, 2, 900), true},     // then fewer preemptions
		{trial(64, 0, 0, 4637), trial(128, 0, 0, 4669), false}, // 0.7% better by holding back a burst: the larger wins
		{trial(256, 0, 1, 900), trial(8, 0, 1, 900), true},     // then the larger max-num-seqs
		{trial(8, 0, 1, 900), trial(256, 0, 1, 900), false},
	} {
		if got := BetterTrial(c.a, c.b); got != c.want {
			t.Errorf("BetterTrial(%+v, %+v) = %v", c.a, c.b, got)
		}
	}
}

func TestSeqsCandidates(t *testing.T) {
	got := SeqsCandidates(256, 37, 64, 0, 300)
	want := []int{256, 8, 16, 32, 64, 128, 37}
	if len(got) != len(want) {
		t.Fatalf("SeqsCandidates = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("SeqsCandidates = %v, want %v", got, want)
		}
	}
}

// slice replays fixed requests.
type slice struct {
	reqs []Request
	i    int
}

func (s *slice) Next() (Request, error) {
	if s.i >= len(s.reqs) {
		return Request{}, io.EOF
	}
	s.i++
	return s.reqs[s.i-1], nil
}

// Four requests of 16 prompt and 10 output tokens arrive together; the
// pool holds them all (2 blocks of 16 each at most, of 100). Every step
// lasts 10 ms and a request takes 10 steps (the first token with its
// prefill, 9 decode steps), so its E2E is 100 ms × the wave it runs in:
//
//	max-num-seqs 1: waves of 1 → E2E 100, 200, 300, 400 ms: p99 400 ms
//	max-num-seqs 2: waves of 2 → 100, 100, 200, 200 ms: p99 200 ms
//	max-num-seqs 4 and 8: one wave → 100 ms each: p99 100 ms, the same
//	run, so the larger (8) wins the tie.
//
// No run preempts. p99 comes from the histogram, within 0.4%.
func TestChooseMaxNumSeqsQueueing(t *testing.T) {
	open := func() (Source, func(), error) {
		var reqs []Request
		for i := 0; i < 4; i++ {
			reqs = append(reqs, Request{ID: string(rune('a' + i)), PromptTokens: 16, OutputTokens: 10})
		}
		return &slice{reqs: reqs}, func() {}, nil
	}
	cfg := func(n int) (Config, bool, error) {
		return Config{NumGPUBlocks: 101, BlockSize: 16, MaxNumSeqs: n, MaxNumBatchedTokens: 2048, MaxModelLen: 1024,
			Timer: Fixed(0.010)}, n != 16, nil
	}
	c, err := ChooseMaxNumSeqs(context.Background(), SeqsSearch{Candidates: []int{8, 1, 2, 4, 1, 16}, Config: cfg, Open: open, Reference: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 1 once (the duplicate is dropped), 16 left out (does not fit).
	wantP99 := map[int]float64{8: 100, 1: 400, 2: 200, 4: 100}
	if len(c.Trials) != len(wantP99) {
		t.Fatalf("trials: %+v", c.Trials)
	}
	for _, tr := range c.Trials {
		if w := wantP99[tr.MaxNumSeqs]; math.Abs(tr.E2EP99MS-w) > w*0.004 || tr.Preemptions != 0 || tr.Requests != 4 {
			t.Errorf("max-num-seqs %d: E2E p99 %.1f ms, %d preemptions, %d finished; want %.0f ms, 0, 4", tr.MaxNumSeqs, tr.E2EP99MS, tr.Preemptions, tr.Requests, w)
		}
	}
	if c.MaxNumSeqs != 8 {
		t.Fatalf("chose %d, want 8", c.MaxNumSeqs)
	}
	if want := "max-num-seqs 8: chosen by simulating the traffic (4 values tried): E2E p99 100 ms, 0 preemptions; 1 would give E2E p99 400 ms, 0 preemptions"; c.Reason != want {
		t.Errorf("reason:\n got %s\nwant %s", c.Reason, want)
	}
	// Against 4 the reason names the tie.
	c, err = ChooseMaxNumSeqs(context.Background(), SeqsSearch{Candidates: []int{8, 4}, Config: cfg, Open: open, Reference: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.Reason, "; 4 gives the same run, and the larger value leaves room for more") {
		t.Errorf("reason: %s", c.Reason)
	}
	// Nothing fits: an error, not a choice.
	if _, err := ChooseMaxNumSeqs(context.Background(), SeqsSearch{Candidates: []int{16}, Config: cfg, Open: open}); err != ErrNoCandidate {
		t.Errorf("no candidate: %v", err)
	}
}

func TestLimit(t *testing.T) {
	l := &Limit{Src: &sliceSource{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}}, N: 3}
	n := 0
	for {
		if _, err := l.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("Limit passed %d requests, want 3", n)
	}
}
