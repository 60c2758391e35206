package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"headroom.dev/headroom/sim"
)

// apiErr reads an OpenAI error answer.
func apiErr(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("status %d: not an error object: %.200s", resp.StatusCode, b)
	}
	return resp.StatusCode, e.Error.Message
}

// A negative max_tokens is vLLM's own 400 (SamplingParams checks it
// before the length): "max_tokens must be at least 1, got -5.", not a
// context-length message about -3 tokens.
func TestNegativeMaxTokens(t *testing.T) {
	ts := start(t, 1)
	code, msg := apiErr(t, post(t, ts.URL+"/v1/completions", `{"prompt":"a b","max_tokens":-5}`))
	if code != http.StatusBadRequest || msg != "max_tokens must be at least 1, got -5." {
		t.Errorf("%d %q", code, msg)
	}
}

// A prompt is counted without holding it as words: 8 MiB of one-letter
// words ("a a a ...", 4,194,304 words) took a 64 MiB slice of strings on
// top of the body and its text; now the heap holds the decoder's copy and
// the text, about 2 × 8 MiB. Its count is ceil(4,194,304 × 4 / 3) =
// 5,592,406 tokens, over max-model-len 4096: the context-length 400.
func TestLongPromptBoundedHeap(t *testing.T) {
	ts := start(t, 1)
	body := `{"prompt":"` + strings.Repeat("a ", 4<<20) + `","max_tokens":1}`
	var code int
	var msg string
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, msg = apiErr(t, post(t, ts.URL+"/v1/completions", body))
	runtime.ReadMemStats(&after)
	if code != http.StatusBadRequest || !strings.Contains(msg, "you requested 5592407 tokens (5592406 in the messages, 1 in the completion)") {
		t.Errorf("%d %q", code, msg)
	}
	// Allocated in all while the request ran (the client's copy of the
	// body included): the words' slice alone would be 64 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 56<<20 {
		t.Errorf("%d MiB allocated for an 8 MiB prompt", got>>20)
	}
}

// A body past 32 MiB is 413 naming the bound, read no further.
func TestBodyTooLarge(t *testing.T) {
	ts := start(t, 1)
	body := io.MultiReader(strings.NewReader(`{"prompt":"`), io.LimitReader(repeatReader('a'), maxBody+1), strings.NewReader(`"}`))
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	code, msg := apiErr(t, resp)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "32 MiB") {
		t.Errorf("%d %q", code, msg)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// Past MaxRequests in flight a request gets 503 naming the bound.
func TestMaxRequests(t *testing.T) {
	e, err := sim.New(sim.Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, Timer: sim.Fixed(0.010), TokenEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Engine: e, Model: "m", MaxRequests: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	// Two long streams (4000 tokens at 10 ms a step: 40 s) hold the slots.
	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(context.Background())
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(rctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":4000,"stream":true}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for {
		s.mu.Lock()
		n := len(s.streams)
		s.mu.Unlock()
		if n == 2 {
			break
		}
		runtime.Gosched()
	}
	code, msg := apiErr(t, post(t, ts.URL+"/v1/completions", `{"prompt":"a","max_tokens":1}`))
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "2 requests in flight") {
		t.Errorf("%d %q", code, msg)
	}
	stop()
	wg.Wait()
}

// FuzzHandler: any body to either endpoint is answered with a status and
// a well-formed body (an OpenAI error object, or a completion); the
// server never panics and never hangs on it.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(`{"prompt":"one two","max_tokens":2}`), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`), true)
	f.Add([]byte(`{"prompt":[1,2,-3],"max_tokens":-5}`), false)
	f.Add([]byte(`{"prompt":[1,"x"]}`), false)
	f.Add([]byte(`{"prompt":[[1]]}`), false)
	f.Add([]byte(`{"messages":[{"content":[{"text":"a"}]}]} trailing`), true)
	f.Add([]byte("\xff\x00"), false)
	f.Add([]byte(`{"prompt":"x","max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`), false)
	e, err := sim.New(sim.Config{NumGPUBlocks: 1000, BlockSize: 16, MaxNumSeqs: 8, MaxNumBatchedTokens: 2048, MaxModelLen: 64, Timer: sim.Fixed(0.0001), TokenEvents: true})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Options{Engine: e, Model: "m", TimeScale: 1000})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	go func() { _ = s.Run(ctx) }()
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, bytes.NewReader(body)))
		out := rec.Body.Bytes()
		switch {
		case rec.Code == http.StatusOK && rec.Header().Get("Content-Type") == "text/event-stream":
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Fatalf("stream without [DONE]: %.200q", out)
			}
		case !json.Valid(out):
			t.Fatalf("status %d: body not JSON: %.200q", rec.Code, out)
		case rec.Code >= 500:
			t.Fatalf("status %d for %.200q: %s", rec.Code, body, out)
		}
	})
}
