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

// evenly is n requests of 1 prompt and out output tokens, one every gap
// seconds from gap.
func evenly(n int, gap float64, out int) *sliceSource {
	s := make(sliceSource, n)
	for i := range s {
		s[i] = Request{ID: "r", Arrival: gap * float64(i+1), PromptTokens: 1, OutputTokens: out}
	}
	return &s
}

// One sequence at a time, 10 steps of 10 ms a request (the prompt's step
// samples the first token, 9 decodes the rest): the engine serves 10
// requests a second. 25 a second arrive: the backlog grows by 15 a
// second, so the run is behind, at the rates of the second half of the
// sends (8 to 16 s: 200 arrive; the engine computes 110 tokens a second,
// each request's prompt token and 10 sampled ones, and a request brings
// 11: 10 a second), and 3 replicas would hold it (25 / 10, rounded up).
// 8 a second it keeps up.
// Requests longer than half the sending: 15 a second for 30 s, each of 1
// prompt token and 3,000 sampled, 100 at a time on a fixed 10 ms step. A
// request takes 30 s, so none is answered in the later half of the sends
// (15 to 30 s), where a count of answers says the engine serves nothing.
// It computes 100 tokens a step, 10,000 a second, of 3,001 a request: 3.33
// requests a second (100 running ÷ 30 s), and 5 replicas would hold 15.
func TestRunFellBehindLongRequests(t *testing.T) {
	cfg := Config{NumGPUBlocks: 20000, BlockSize: 16, MaxNumSeqs: 100, MaxNumBatchedTokens: 256, MaxModelLen: 4096, Timer: Fixed(0.01)}
	rep, err := Run(context.Background(), newEngine(t, cfg), evenly(450, 1.0/15, 3000), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rep.FellBehind
	if b == nil || !near(b.ServedPerS, 10000.0/3001, 0.03) || b.Replicas != 5 || !near(b.ArrivalsPerS, 15, 0.01) {
		t.Fatalf("fell behind: %+v", b)
	}
}

func TestRunFellBehindFromRates(t *testing.T) {
	cfg := Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxModelLen: 64, Timer: Fixed(0.01)}
	rep, err := Run(context.Background(), newEngine(t, cfg), evenly(400, 0.04, 10), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := rep.FellBehind
	if b == nil || b.InFlightBound != 0 || !near(b.ArrivalsPerS, 25, 0.01) || !near(b.ServedPerS, 10, 0.02) || b.Replicas != 3 || !near(b.SinceS, 8, 0.01) || !near(b.AtS, 16, 0.001) {
		t.Fatalf("fell behind: %+v", b)
	}
	// Every request is still answered: the run is whole, only judged.
	if rep.Requests != 400 {
		t.Errorf("%d requests answered", rep.Requests)
	}
	if got := b.Say("one L4"); !strings.HasPrefix(got, "one L4 serves about 10.0 req/s of this traffic; 25 arrive; the queue grows without bound (about 3 replicas would hold it: 25 ÷ 10.0, rounded up, a first estimate); ") {
		t.Errorf("%q", got)
	}
	rep, err = Run(context.Background(), newEngine(t, cfg), evenly(400, 0.125, 10), RunOptions{})
	if err != nil || rep.FellBehind != nil {
		t.Errorf("8 req/s: %v %+v", err, rep.FellBehind)
	}
	// A closed loop's arrivals wait for answers: never behind.
	rep, err = Run(context.Background(), newEngine(t, cfg), evenly(400, 0.04, 10), RunOptions{Concurrency: 4})
	if err != nil || rep.FellBehind != nil {
		t.Errorf("closed loop: %v %+v", err, rep.FellBehind)
	}
}

// Requests all due at once past the in-flight bound stop the run there,
// with the bound named and no arrival rate (they came at once).
func TestRunInFlightBound(t *testing.T) {
	cfg := Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxModelLen: 64, Timer: Fixed(0.01)}
	rep, err := Run(context.Background(), newEngine(t, cfg), evenly(1000, 0, 10), RunOptions{MaxBacklog: 100})
	if err != nil {
		t.Fatal(err)
	}
	if b := rep.FellBehind; b == nil || b.InFlightBound != 100 || b.InFlight != 101 || b.ArrivalsPerS != 0 ||
		b.Say("one L4") != "the requests arrive at once, faster than one L4 answers any; the run stopped at t=0.0 s with 101 requests in flight, the simulator's bound of 100" {
		t.Errorf("%+v", b)
	}
	for _, c := range []struct{ seqs, want int }{{1, 100_000}, {1024, 102_400}, {100_000, 1_000_000}, {1_000_000_000, 1_000_000}} {
		if got := DefaultMaxBacklog(c.seqs); got != c.want {
			t.Errorf("DefaultMaxBacklog(%d) = %d, want %d", c.seqs, got, c.want)
		}
	}
}

// Requests due past the horizon (100 years: float64 seconds resolve a
// microsecond up to about 140) are counted, not sent; a window of the
// series at an absurd time merges instead of indexing out of range.
func TestRunHorizon(t *testing.T) {
	cfg := Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 4, MaxNumBatchedTokens: 64, MaxModelLen: 64, Timer: Fixed(0.01)}
	src := sliceSource{{ID: "a", Arrival: 1, PromptTokens: 4, OutputTokens: 2}, {ID: "b", Arrival: 1e20, PromptTokens: 4, OutputTokens: 2},
		{ID: "c", Arrival: 1e300, PromptTokens: 4, OutputTokens: 2}, {ID: "d", Arrival: math.Inf(1), PromptTokens: 4, OutputTokens: 2}}
	rep, err := Run(context.Background(), newEngine(t, cfg), &src, RunOptions{})
	if err != nil || rep.Requests != 1 || rep.BeyondHorizon != 3 {
		t.Fatalf("%v: %d requests, %d beyond", err, rep.Requests, rep.BeyondHorizon)
	}
	s := newStats(RunOptions{})
	for _, at := range []float64{1, 1e300, math.MaxFloat64} {
		s.window(at).Finished++
	}
	var finished int64
	for _, w := range s.rep.Series {
		finished += w.Finished
	}
	if len(s.rep.Series) > 720 || finished != 3 {
		t.Errorf("%d windows of %g s, first %+v", len(s.rep.Series), s.rep.WindowS, s.rep.Series[0])
	}
}

// A request whose prompt and output pass max-model-len is refused as
// vLLM's OpenAI server refuses it (400), not cut short.
func TestAddExceedsContext(t *testing.T) {
	e := newEngine(t, Config{NumGPUBlocks: 100, BlockSize: 16, MaxNumSeqs: 2, MaxNumBatchedTokens: 64, MaxModelLen: 64})
	_, err := e.Add(Request{ID: "a", PromptTokens: 60, OutputTokens: 5})
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Reason != RejectExceedsContext || rej.Detail != "max-model-len is 64 tokens; 60 prompt + 5 output tokens ask for 65 (vLLM answers 400)" {
		t.Errorf("%v", err)
	}
	if _, err := e.Add(Request{ID: "b", PromptTokens: 60, OutputTokens: 4}); err != nil {
		t.Errorf("60 + 4 = 64 fits: %v", err)
	}
}

// The engine of TestRunFellBehindFromRates serves 10 requests a second
// (one at a time, ten 10 ms steps each), behind an API server that takes
// 1 ms of CPU a request. 400 requests 1e-12 s apart all arrive in 4e-10
// s, before its first step ends (the API server still holds all but the
// first): a burst, which the engine drains as it does the same 400 sent
// at once (--rate inf), in the same time, so it is not behind. 400 sent 1 ms
// apart last 0.4 s, 40 steps: 20 steps end in the sends' later half (more
// than the 16 that show the engine's pace) while 200 arrive and 2 are
// answered, a rate of 1,000 a second it falls behind.
func TestRunBurstIsNotBehind(t *testing.T) {
	cfg := Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxModelLen: 64, Timer: Fixed(0.01)}
	fe := RunOptions{FrontEnd: FrontEnd{Request: 0.001}}
	var took []float64
	for _, gap := range []float64{1e-12, 0} {
		rep, err := Run(context.Background(), newEngine(t, cfg), evenly(400, gap, 10), fe)
		if err != nil || rep.FellBehind != nil || rep.Requests != 400 {
			t.Errorf("gap %g s: %v, behind %+v, %d requests", gap, err, rep.FellBehind, rep.Requests)
		}
		took = append(took, rep.DurationS)
	}
	if !near(took[0], took[1], 1e-6) {
		t.Errorf("the burst took %.6f s, all at once %.6f s", took[0], took[1])
	}
	rep, err := Run(context.Background(), newEngine(t, cfg), evenly(400, 0.001, 10), fe)
	if err != nil || rep.FellBehind == nil || !near(rep.FellBehind.ArrivalsPerS, 1000, 0.01) {
		t.Errorf("1 ms apart: %v, behind %+v", err, rep.FellBehind)
	}
}

// The sum a replicas estimate shows gives it: 1.63 ÷ 0.136 = 11.99, 12
// replicas; the line's own rates, 1.6 and 0.1, would divide to 16. Two
// serving replicas at 20 req/s between them against 25 arriving: 25 ÷ 20
// × 2 = 2.5, 3.
func TestBacklogDivisionGivesTheEstimate(t *testing.T) {
	for _, c := range []struct {
		b    Backlog
		want string
	}{
		{Backlog{ArrivalsPerS: 1.63, ServedPerS: 0.136, Replicas: 12}, "(about 12 replicas would hold it: 1.63 ÷ 0.136, rounded up"},
		{Backlog{ArrivalsPerS: 25, ServedPerS: 20, Replicas: 3, ServingReplicas: 2}, "(about 3 replicas would hold it: 25 ÷ 20 × 2, rounded up"},
	} {
		if got := c.b.Say("x"); !strings.Contains(got, c.want) {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// One request of 1 prompt token and 400 output tokens on a step of an
// hour: 400 steps, the last token at 400 h = 1,440,000 s (16.7 days),
// past the histograms' 2^40 µs (12.7 days). Its E2E max is exact,
// 1,440,000,000 ms (and its mean, the one request's), TTFT one step,
// 3,600,000 ms; the report counts the latency past the range.
func TestLatencyPastHistogramRange(t *testing.T) {
	cfg := Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 1, MaxNumBatchedTokens: 64, MaxModelLen: 1024, Timer: Fixed(3600)}
	rep, err := Run(context.Background(), newEngine(t, cfg), evenly(1, 0, 400), RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.E2E.Max != 1_440_000_000 || rep.E2E.Mean != 1_440_000_000 || rep.TTFT.Max != 3_600_000 || rep.LatenciesPastRange != 1 {
		t.Errorf("E2E max %.0f ms, mean %.0f ms, TTFT max %.0f ms, %d past the range", rep.E2E.Max, rep.E2E.Mean, rep.TTFT.Max, rep.LatenciesPastRange)
	}
}
