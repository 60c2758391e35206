package sim

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

type sliceSource []Request

func (s *sliceSource) Next() (Request, error) {
	if len(*s) == 0 {
		return Request{}, io.EOF
	}
	r := (*s)[0]
	*s = (*s)[1:]
	return r, nil
}

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// The max-num-seqs trace of TestMaxNumSeqsBinds through Run: TTFT 1, 1
// and 3 s (mean 1666.67 ms), E2E 2, 2, 4 s, TPOT (2 − 1) / 1 = 1 s each;
// 4 steps over 4 s; C waits through steps 1 and 2.
func TestRunReport(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	src := sliceSource{{ID: "A", PromptTokens: 4, OutputTokens: 2}, {ID: "B", PromptTokens: 4, OutputTokens: 2}, {ID: "C", PromptTokens: 4, OutputTokens: 2},
		{ID: "X", Arrival: 5, PromptTokens: 64, OutputTokens: 1}}
	var trace []string
	rep, err := Run(context.Background(), e, &src, RunOptions{Window: 1, OnFinish: func(ev Event) { trace = append(trace, ev.ID) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 3 || rep.Steps != 4 || rep.DurationS != 4 || rep.MaxWaiting != 1 || rep.MaxRunning != 2 {
		t.Errorf("report: %+v", rep)
	}
	if rep.Rejected != 1 || rep.RejectedBy[RejectPromptTooLong] != 1 {
		t.Errorf("rejections: %d %v", rep.Rejected, rep.RejectedBy)
	}
	// Histogram quantiles lie within 0.4% of the exact value.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"ttft mean", rep.TTFT.Mean, 1666.67}, {"ttft p50", rep.TTFT.P50, 1000}, {"ttft max", rep.TTFT.Max, 3000},
		{"e2e p99", rep.E2E.P99, 4000}, {"tpot mean", rep.TPOT.Mean, 1000}, {"req/s", rep.RequestsPerS, 0.75},
	}
	for _, c := range checks {
		if !near(c.got, c.want, 0.004) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if strings.Join(trace, ",") != "A,B,C" {
		t.Errorf("trace order: %v", trace)
	}
	// Windows of 1 s: steps start at 0, 1, 2, 3; A and B finish in
	// window 1, C in window 3.
	if len(rep.Series) != 4 || rep.Series[1].Finished != 2 || rep.Series[3].Finished != 1 || rep.Series[0].Waiting != 1 {
		t.Errorf("series: %+v", rep.Series)
	}
}

func TestRunUnsorted(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	src := sliceSource{{ID: "A", Arrival: 2, PromptTokens: 4, OutputTokens: 2}, {ID: "B", Arrival: 1, PromptTokens: 4, OutputTokens: 2}}
	if _, err := Run(context.Background(), e, &src, RunOptions{}); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("got %v, want ErrUnsorted", err)
	}
}

// A series longer than MaxWindows merges pairs of windows: 9 windows of
// 1 s over a bound of 4 become windows of 4 s (two merges).
func TestSeriesBounded(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	var src sliceSource
	for i := range 9 {
		src = append(src, Request{ID: "r", Arrival: float64(i), PromptTokens: 4, OutputTokens: 1})
	}
	rep, err := Run(context.Background(), e, &src, RunOptions{Window: 1, MaxWindows: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.WindowS != 4 || len(rep.Series) != 3 || rep.Series[0].Finished != 4 || rep.Series[2].Finished != 1 {
		t.Errorf("window %v, series %+v", rep.WindowS, rep.Series)
	}
}
