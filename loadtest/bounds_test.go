package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"headroom.dev/headroom/workload"
)

// closedPort is a loopback address nothing listens on: every connection
// is refused at once.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func plainClient(base string) *Client {
	return &Client{Target: Target{BaseURL: base, Model: "m", Endpoint: EndpointCompletions, Timeout: 10 * time.Second, StallTimeout: 2 * time.Second},
		HTTP: NewHTTPClient(), Clock: RealClock{}}
}

// An endless stream of tokens is cut once it passes max_tokens by
// MaxExtraChunks, as a bad response: it grew the client's memory without
// bound (327 MiB after 30 s), keeping a gap for every chunk.
func TestEndlessStreamCut(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			if _, err := fmt.Fprint(w, "data: {\"choices\":[{\"text\":\" tok\"}]}\n\n"); err != nil {
				return
			}
			sent.Add(1)
		}
	}))
	defer srv.Close()
	o := plainClient(srv.URL).Do(context.Background(), Prompt{Seed: 1, Words: 3}, 100)
	if o.Err != ErrBadResponse || !strings.Contains(o.ErrText, "past 116 content chunks for max_tokens 100") {
		t.Errorf("%s: %s", o.Err, o.ErrText)
	}
	if len(o.ITL) > 116 {
		t.Errorf("%d gaps kept", len(o.ITL))
	}
}

// A prompt is streamed into the request body: the server reads the words
// the prompt generator makes, and the client never holds them. 2,000,000
// words (about 13 MB of text) leave the client's heap growth far below the
// text's size.
func TestPromptStreamedToServer(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int64
		buf := make([]byte, 64<<10)
		for {
			k, err := r.Body.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		got.Store(n)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\" tok\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	p := Prompt{Seed: 1, Stream: 2, Words: 2_000_000}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	o := plainClient(srv.URL).Do(context.Background(), p, 1)
	runtime.ReadMemStats(&after)
	if o.Err != "" {
		t.Fatalf("%s: %s", o.Err, o.ErrText)
	}
	if got.Load() < p.Len() {
		t.Errorf("the server read %d bytes, the prompt is %d", got.Load(), p.Len())
	}
	// The old client built the text (13 MB) and its JSON (13 MB more).
	if d := int64(after.HeapInuse) - int64(before.HeapInuse); d > 8<<20 {
		t.Errorf("heap grew %d MiB for a %d MiB prompt", d>>20, p.Len()>>20)
	}
}

// A burst of 5,000 requests at once against a refused port is paced
// through MaxInFlight connections: the goroutines stay bounded, the run
// ends, and the report says how many were sent late. --burst 1000000x1@0s
// started a goroutine a request and ran out of memory at 1.45 GiB.
func TestBurstBoundedInFlight(t *testing.T) {
	base := closedPort(t)
	spec := workload.Spec{Bursts: []workload.Burst{{Count: 5_000, Tokens: 1}}, Prompt: workload.Fixed(1), Output: workload.Fixed(1)}
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	r := run(t, Config{Client: plainClient(base), Stream: stream(t, spec), MaxInFlight: 64, Interval: time.Hour})
	close(stop)
	if r.Requests != 5_000 || r.Errors[ErrConnect] != 5_000 {
		t.Errorf("%d requests, errors %v", r.Requests, r.Errors)
	}
	// 64 requests, each a goroutine and its dial's, plus the run's own.
	if p := peak.Load(); p > 400 {
		t.Errorf("%d goroutines at the peak", p)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "while 64 were in flight, the most this client holds") {
		t.Errorf("notes: %q", r.Notes)
	}
}

// A closed loop past MaxInFlight is refused, naming both numbers.
func TestConcurrencyBound(t *testing.T) {
	spec := workload.Spec{Concurrency: 65, NumRequests: 1, Prompt: workload.Fixed(1), Output: workload.Fixed(1)}
	_, err := Run(context.Background(), Config{Client: plainClient(closedPort(t)), Stream: stream(t, spec), Concurrency: 65, MaxInFlight: 64})
	if !errors.Is(err, ErrTooManyInFlight) || !strings.Contains(err.Error(), "closed loop of 65 is past the 64 requests") {
		t.Errorf("%v", err)
	}
}

// An interrupt ends a run within a second, its report marked
// interrupted, however much is still due.
func TestInterruptEndsRun(t *testing.T) {
	spec := workload.Spec{Rate: 1000, Arrival: workload.Constant, NumRequests: 1_000_000, Prompt: workload.Fixed(1), Output: workload.Fixed(1)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	r, err := Run(ctx, Config{Client: plainClient(closedPort(t)), Stream: stream(t, spec), Interval: 100 * time.Millisecond})
	took := time.Since(start) - 300*time.Millisecond
	if err != nil {
		t.Fatal(err)
	}
	if took > time.Second || !strings.Contains(strings.Join(r.Notes, "\n"), "interrupted: the report covers what ran") {
		t.Errorf("ended %s after the interrupt; notes %q", took, r.Notes)
	}
}

// The warm-up gives up after its own timeout, not the run's --timeout
// (10 min), against a server that takes the request and never answers,
// and says before each request what it sends.
func TestWarmupTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	c := plainClient(srv.URL)
	c.Target.Timeout = 10 * time.Minute
	var told []string
	spec := workload.Spec{Rate: 1, NumRequests: 1, Prompt: workload.Fixed(1), Output: workload.Fixed(1)}
	start := time.Now()
	_, err := Run(context.Background(), Config{Client: c, Stream: stream(t, spec), Warmup: true, WarmupTimeout: 200 * time.Millisecond,
		OnWarmup: func(i, n, words int) { told = append(told, fmt.Sprintf("%d/%d %d", i, n, words)) }})
	// The bound is said as what it is: "the run was interrupted" before.
	if !errors.Is(err, ErrWarmup) || time.Since(start) > 5*time.Second || !strings.Contains(err.Error(), "no complete answer within 200ms (timeout; each warm-up request has 200ms)") {
		t.Errorf("after %s: %v", time.Since(start), err)
	}
	if strings.Join(told, ",") != "1/2 32" {
		t.Errorf("told %q", told)
	}
}
