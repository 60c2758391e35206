package loadtest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"headroom.dev/headroom/internal/fakeopenai"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// client returns a client of srv with bounded requests: no test waits on
// a request longer than 10 s.
func client(srv *fakeopenai.Server, endpoint string) *Client {
	return &Client{
		Target: Target{BaseURL: srv.URL, Model: "stand-in", Endpoint: endpoint, IgnoreEOS: true,
			Timeout: 10 * time.Second, StallTimeout: 2 * time.Second},
		HTTP:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		Clock: RealClock{},
	}
}

// run runs cfg under a deadline of its own, so a hang fails the test
// instead of stopping the suite.
func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the run did not end within 30 s")
	}
	return r
}

// TestLatenciesFromFixedDelays checks TTFT, ITL, TPOT and E2E against a
// server that waits 80 ms from a request's arrival to its first token and
// then sends one token every 20 ms (its due times are absolute, so its
// own sleeping errors do not add up).
//
// Arithmetic, 16 output tokens: TTFT = 80 ms; 15 gaps of 20 ms, so ITL =
// 20 ms, E2E = 80 + 15 × 20 = 380 ms, TPOT = (380 − 80) / 15 = 20 ms.
//
// Tolerances. Below: a measured TTFT or E2E can never be shorter than the
// server's delay (the client's clock starts before the request leaves), so
// the only slack is the histogram's 0.4% bucket width. Above: loopback
// delivery, a timer firing late and Go scheduling on a loaded 2-core CI
// machine; 40 ms covers a run queue of several goroutines' time slices
// (25 ms was passed by 105.2 ms under the race detector at a load average
// of 20). It still tells TTFT from E2E (380 ms), and TPOT (±2.7 ms) from
// E2E / output tokens (23.75 ms).
// ITL p50 and TPOT are differences of two readings, each late by up to
// that, so ± the same bound. Medians, not maxima: one request delayed
// by a neighbour's burst of CPU would fail a bound on the maximum.
func TestLatenciesFromFixedDelays(t *testing.T) {
	for _, endpoint := range []string{EndpointCompletions, EndpointChat} {
		t.Run(endpoint, func(t *testing.T) {
			srv := fakeopenai.Start(fakeopenai.Options{TTFT: 80 * time.Millisecond, ITL: 20 * time.Millisecond})
			defer srv.Close()
			r := run(t, Config{Client: client(srv, endpoint), Concurrency: 4, Warmup: true,
				Stream: stream(t, workload.Spec{Concurrency: 4, NumRequests: 12, Prompt: workload.Fixed(200), Output: workload.Fixed(16)})})
			if r.Completed != 12 || r.Failed != 0 {
				t.Fatalf("completed %d, failed %d %v; want 12, 0", r.Completed, r.Failed, r.ErrorExamples)
			}
			const slack = 40.0
			within := func(name string, got, lo, hi float64) {
				t.Helper()
				if got < lo || got > hi {
					t.Errorf("%s = %.3f ms, want in [%.1f, %.1f]", name, got, lo, hi)
				}
			}
			within("TTFT p50", r.TTFT.P50, 80*0.996, 80+slack)
			within("E2E p50", r.E2E.P50, 380*0.996, 380+slack)
			within("ITL p50", r.ITL.P50, 20-slack/5, 20+slack/5)
			within("TPOT mean", r.TPOT.Mean, 20-slack/15, 20+slack/15)
			if r.ITL.Count != 12*15 {
				t.Errorf("ITL count %d, want 12 requests × 15 gaps = 180", r.ITL.Count)
			}
			if r.OutputTokens.Mean != 16 {
				t.Errorf("output tokens mean %v, want 16", r.OutputTokens.Mean)
			}
		})
	}
}

// TestPromptCalibration: the stand-in counts 7 + 1.5 × words prompt
// tokens. The warm-up's two lengths fit that line, so a request for 1000
// tokens becomes round((1000 − 7) / 1.5) = 662 words, served as 7 + 993 =
// 1000 tokens.
func TestPromptCalibration(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{TokensPerWord: 1.5, FixedTokens: 7})
	defer srv.Close()
	r := run(t, Config{Client: client(srv, EndpointChat), Concurrency: 2, Warmup: true,
		Stream: stream(t, workload.Spec{Concurrency: 2, NumRequests: 6, Prompt: workload.Fixed(1000), Output: workload.Fixed(2)})})
	if r.Calibration.TokensPerWord != 1.5 || r.Calibration.FixedTokens != 7 {
		t.Errorf("calibration %+v, want 1.5 tokens per word and 7 fixed", r.Calibration)
	}
	if r.PromptTokens.Served.P50 != 1000 || r.PromptTokens.Served.Max != 1000 {
		t.Errorf("served prompt tokens %+v, want 1000", r.PromptTokens.Served)
	}
	if r.PromptTokens.Requested.Mean != 1000 {
		t.Errorf("requested prompt tokens %+v, want 1000", r.PromptTokens.Requested)
	}
}

// TestErrorsByKind: every kind of failure is counted by its kind, and no
// request hangs: the stalled one ends at the 2 s stall timeout.
func TestErrorsByKind(t *testing.T) {
	faults := map[int64]fakeopenai.Fault{
		3: fakeopenai.HTTP500, 4: fakeopenai.Garbage, 5: fakeopenai.NotSSE, 6: fakeopenai.Stall,
		7: fakeopenai.CloseEarly, 8: fakeopenai.NoDone, 9: fakeopenai.StreamError,
	}
	srv := fakeopenai.Start(fakeopenai.Options{ITL: time.Millisecond,
		Fault: func(n int64) fakeopenai.Fault { return faults[n] }})
	defer srv.Close()
	// Requests 1 and 2 are the warm-up; 3..9 fail; 10..12 succeed.
	r := run(t, Config{Client: client(srv, EndpointCompletions), Concurrency: 1, Warmup: true,
		Stream: stream(t, workload.Spec{Concurrency: 1, NumRequests: 10, Prompt: workload.Fixed(50), Output: workload.Fixed(8)})})
	want := map[string]int64{"http_500": 1, ErrBadResponse: 2, ErrTimeout: 1, ErrBrokenStream: 2, ErrStreamError: 1}
	for k, v := range want {
		if r.Errors[k] != v {
			t.Errorf("errors[%s] = %d, want %d (all: %v)", k, r.Errors[k], v, r.Errors)
		}
	}
	if r.Failed != 7 || r.Completed != 3 || r.Requests != 10 {
		t.Errorf("requests %d, completed %d, failed %d; want 10, 3, 7", r.Requests, r.Completed, r.Failed)
	}
}

// TestFailEveryNth: a server failing every 4th request of 20 fails 5,
// and the error_rate SLO of 10% is missed at 25%.
func TestFailEveryNth(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{Fault: func(n int64) fakeopenai.Fault {
		if n%4 == 0 {
			return fakeopenai.HTTP500
		}
		return fakeopenai.None
	}})
	defer srv.Close()
	slos, err := slo.Parse("error_rate=10%,ttft_p99=5s")
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, Config{Client: client(srv, EndpointCompletions), Concurrency: 3, Stream: stream(t, workload.Spec{Concurrency: 3, NumRequests: 20, Prompt: workload.Fixed(20), Output: workload.Fixed(4)}), SLOs: slos})
	if r.Errors["http_500"] != 5 || r.Completed != 15 {
		t.Errorf("errors %v, completed %d; want 5 × http_500, 15", r.Errors, r.Completed)
	}
	if r.SLOsMet || r.SLOs[0].Measured != 0.25 || r.SLOs[0].Met || !r.SLOs[1].Met {
		t.Errorf("SLOs %+v met=%v; want error_rate 0.25 missed, TTFT met", r.SLOs, r.SLOsMet)
	}
	if r.Good != 15 {
		t.Errorf("good requests %d, want the 15 that succeeded (TTFT far under 5 s)", r.Good)
	}
}

// TestOpenLoopSendsOnTime: an open loop at a constant 50/s sends request i
// at i × 20 ms whatever the earlier ones do; every request takes 300 ms,
// so about 15 are in flight at once, which a closed loop would not do.
func TestOpenLoopSendsOnTime(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{TTFT: 100 * time.Millisecond, ITL: 50 * time.Millisecond})
	defer srv.Close()
	r := run(t, Config{Client: client(srv, EndpointCompletions), Stream: stream(t, workload.Spec{Rate: 50, Arrival: workload.Constant, NumRequests: 40, Prompt: workload.Fixed(20), Output: workload.Fixed(5)})})
	if r.Completed != 40 {
		t.Fatalf("completed %d of 40: %v", r.Completed, r.ErrorExamples)
	}
	// 39 gaps of 20 ms: 50/s; the late sends of a loaded machine move the
	// first and last by a few ms at most of the 780 ms span.
	if r.SendRate.Achieved < 45 || r.SendRate.Achieved > 55 {
		t.Errorf("achieved send rate %.2f/s, want 50 ± 10%%", r.SendRate.Achieved)
	}
	// 300 ms per request at 50/s: 15 in flight in steady state.
	if m := srv.MaxInFlight(); m < 12 {
		t.Errorf("at most %d in flight at the server; an open loop at 50/s with 300 ms requests holds about 15", m)
	}
}

// TestMetricsSeries: the series reads the stand-in's /metrics: 8 requests
// of 1.2 s in flight at once fill 8 of its 10 slots: KV usage 0.8.
func TestMetricsSeries(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{TTFT: 1200 * time.Millisecond, Capacity: 10, Preemptions: 3})
	defer srv.Close()
	url, _ := telemetry.NormalizeMetricsURL(srv.URL)
	r := run(t, Config{Client: client(srv, EndpointCompletions), Concurrency: 8, Stream: stream(t, workload.Spec{Concurrency: 8, NumRequests: 8, Prompt: workload.Fixed(10), Output: workload.Fixed(1)}), Scraper: &telemetry.Scraper{URL: url},
		Interval: 200 * time.Millisecond})
	if r.MaxKVUsage == nil || *r.MaxKVUsage != 0.8 {
		t.Errorf("max KV usage %v, want 0.8", r.MaxKVUsage)
	}
	if r.MaxRunning == nil || *r.MaxRunning != 8 {
		t.Errorf("max running %v, want 8", r.MaxRunning)
	}
	// The counter stood at 3 all along: no preemption during the run.
	if r.Preemptions == nil || *r.Preemptions != 0 {
		t.Errorf("preemptions %v, want 0", r.Preemptions)
	}
	if len(r.Series) < 5 {
		t.Errorf("%d points over 1.2 s at 200 ms, want at least 5", len(r.Series))
	}
}

// TestNoMetrics: a server without /metrics is measured without them, with
// a note.
func TestNoMetrics(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{NoMetrics: true})
	defer srv.Close()
	url, _ := telemetry.NormalizeMetricsURL(srv.URL)
	r := run(t, Config{Client: client(srv, EndpointCompletions), Concurrency: 1, Stream: stream(t, workload.Spec{Concurrency: 1, NumRequests: 2, Prompt: workload.Fixed(10), Output: workload.Fixed(2)}), Scraper: &telemetry.Scraper{URL: url}})
	if r.MaxKVUsage != nil || len(r.Notes) == 0 || r.Completed != 2 {
		t.Errorf("kv %v, notes %q, completed %d; want none, a note, 2", r.MaxKVUsage, r.Notes, r.Completed)
	}
}

// TestWarmupFails: a server that is not there fails the warm-up.
func TestWarmupFails(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{})
	srv.Close()
	c := client(srv, EndpointCompletions)
	_, err := Run(context.Background(), Config{Client: c, Concurrency: 1, Warmup: true,
		Stream: stream(t, workload.Spec{Concurrency: 1, NumRequests: 1, Prompt: workload.Fixed(10), Output: workload.Fixed(2)})})
	if err == nil {
		t.Fatal("no error from a closed server")
	}
}

// items is a stream of fixed requests.
type items []workload.Request

func (s *items) Next() (workload.Request, error) {
	if len(*s) == 0 {
		return workload.Request{}, io.EOF
	}
	r := (*s)[0]
	*s = (*s)[1:]
	return r, nil
}

// A logged request calls the endpoint it called (its line says), the
// others the target's: the server sees as many chats as the log has.
func TestRequestsCallTheirOwnEndpoint(t *testing.T) {
	srv := fakeopenai.Start(fakeopenai.Options{ITL: time.Millisecond})
	defer srv.Close()
	st := items{
		{At: 0, Prompt: 20, Output: 2, Endpoint: workload.EndpointChat},
		{At: 0, Prompt: 20, Output: 2},
		{At: 0, Prompt: 20, Output: 2, Endpoint: workload.EndpointCompletions},
		{At: 0, Prompt: 20, Output: 2, Endpoint: workload.EndpointChat},
	}
	r := run(t, Config{Client: client(srv, EndpointCompletions), Concurrency: 2, Stream: &st})
	if r.Completed != 4 || srv.Chats() != 2 {
		t.Errorf("completed %d, %d chats at the server; want 4 and 2", r.Completed, srv.Chats())
	}
}
