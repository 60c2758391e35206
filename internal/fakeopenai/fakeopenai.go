// Package fakeopenai is an OpenAI-compatible streaming server for tests of
// the load tester: it streams tokens with fixed delays, so the latencies a
// client measures can be checked against the arithmetic of those delays,
// and it can fail, send garbage, stall or hang up on chosen requests. It
// serves vLLM's /metrics names (running, waiting, KV usage, preemptions)
// from its own count of requests in flight. It listens on loopback only.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the server does to one request.
type Fault int

// Faults.
const (
	None        Fault = iota
	HTTP500           // answer 500 with a JSON error
	Garbage           // 200, then a data line that is not JSON
	NotSSE            // 200 with an HTML page
	Stall             // two tokens, then nothing until the client leaves (at most MaxStall)
	CloseEarly        // two tokens, then the connection is cut
	NoDone            // every token and the usage, then the stream ends without [DONE]
	StreamError       // one token, then an error object in the stream
)

// MaxStall bounds a stalled answer, so a client that never gives up does
// not hold the test forever.
const MaxStall = 30 * time.Second

// Options shape the server.
type Options struct {
	// TTFT is the delay from the request's arrival to its first content
	// chunk; ITL the delay between content chunks. Each chunk is one token.
	TTFT, ITL time.Duration
	// The prompt's usage.prompt_tokens is FixedTokens +
	// round(TokensPerWord × words), words split on spaces (a tokenizer
	// stand-in with a known rate). 0 is 1.5 tokens per word.
	TokensPerWord float64
	FixedTokens   int64
	// Capacity is the requests that fill the "KV cache" of /metrics:
	// usage = in flight / Capacity (at most 1). 0 is 100.
	Capacity int
	// Fault picks the fault of the n-th request (1-based); nil is none.
	Fault func(n int64) Fault
	// Preemptions is the value /metrics reports for the counter.
	Preemptions float64
	// NoMetrics answers 404 on /metrics, like a server that is not vLLM.
	NoMetrics bool
}

// Server is a running stand-in.
type Server struct {
	*httptest.Server
	opt      Options
	n        atomic.Int64
	inflight atomic.Int64
	maxIn    atomic.Int64
	chats    atomic.Int64
	mu       sync.Mutex
	arrivals []time.Time
}

// Start serves opt on a loopback port; Close stops it.
func Start(opt Options) *Server {
	if opt.TokensPerWord == 0 {
		opt.TokensPerWord = 1.5
	}
	if opt.Capacity == 0 {
		opt.Capacity = 100
	}
	s := &Server{opt: opt}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"stand-in","object":"model"}]}`)
	})
	s.Server = httptest.NewServer(mux)
	return s
}

// Arrivals returns when each request arrived, in order of arrival.
func (s *Server) Arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...)
}

// Chats is how many requests came to /v1/chat/completions.
func (s *Server) Chats() int64 { return s.chats.Load() }

// MaxInFlight is the most requests the server held at once.
func (s *Server) MaxInFlight() int64 { return s.maxIn.Load() }

type request struct {
	Prompt    string `json:"prompt"`
	MaxTokens int64  `json:"max_tokens"`
	Messages  []struct {
		Content string `json:"content"`
	} `json:"messages"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	arrived := time.Now()
	n := s.n.Add(1)
	if chat {
		s.chats.Add(1)
	}
	s.mu.Lock()
	s.arrivals = append(s.arrivals, arrived)
	s.mu.Unlock()
	in := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		m := s.maxIn.Load()
		if in <= m || s.maxIn.CompareAndSwap(m, in) {
			break
		}
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad JSON"}}`, http.StatusBadRequest)
		return
	}
	text := req.Prompt
	if chat && len(req.Messages) > 0 {
		text = req.Messages[0].Content
	}
	words := int64(len(strings.Fields(text)))
	promptTokens := s.opt.FixedTokens + int64(math.Round(s.opt.TokensPerWord*float64(words)))
	out := max(req.MaxTokens, 1)

	fault := None
	if s.opt.Fault != nil {
		fault = s.opt.Fault(n)
	}
	switch fault {
	case HTTP500:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"engine failed"}}`)
		return
	case NotSSE:
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>502 Bad Gateway</body></html>\n")
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk := func(tok string) map[string]any {
		if chat {
			return map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": tok}}}}
		}
		return map[string]any{"object": "text_completion", "choices": []any{map[string]any{"index": 0, "text": tok}}}
	}
	if chat {
		// vLLM's first chat chunk carries the role and no content.
		send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}}}})
	}
	due := arrived.Add(s.opt.TTFT)
	for i := int64(0); i < out; i++ {
		sleepUntil(r, due)
		if r.Context().Err() != nil {
			return
		}
		if fault == Garbage && i == 1 {
			fmt.Fprint(w, "data: {\"choices\": [tok\n\n")
			fl.Flush()
			return
		}
		if fault == StreamError && i == 1 {
			send(map[string]any{"error": map[string]any{"message": "generation failed", "code": 500}})
			return
		}
		if (fault == Stall || fault == CloseEarly) && i == 2 {
			if fault == CloseEarly {
				panic(http.ErrAbortHandler)
			}
			select {
			case <-r.Context().Done():
			case <-time.After(MaxStall):
			}
			return
		}
		send(chunk("tok "))
		due = due.Add(s.opt.ITL)
	}
	send(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": promptTokens, "completion_tokens": out, "total_tokens": promptTokens + out}})
	if fault == NoDone {
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// sleepUntil waits for t or the client's leaving.
func sleepUntil(r *http.Request, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-r.Context().Done():
	}
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	if s.opt.NoMetrics {
		http.NotFound(w, nil)
		return
	}
	in := s.inflight.Load()
	usage := math.Min(float64(in)/float64(s.opt.Capacity), 1)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	const l = `{engine="0",model_name="stand-in"}`
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running%s %d\n", l, in)
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting%s 0\n", l)
	fmt.Fprintf(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc%s %g\n", l, usage)
	fmt.Fprintf(w, "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total%s %g\n", l, s.opt.Preemptions)
}
