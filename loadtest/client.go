package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// Endpoints of the OpenAI API: the workload's (one spelling for the
// traffic simulate prices and loadtest sends).
const (
	EndpointCompletions = workload.EndpointCompletions
	EndpointChat        = workload.EndpointChat
)

// Error kinds of a failed request, as reported in Result.Errors; an HTTP
// status is reported as "http_<code>".
const (
	ErrConnect      = "connect"       // no connection (refused, reset before an answer, DNS)
	ErrTimeout      = "timeout"       // the request or a gap between chunks took too long
	ErrBrokenStream = "broken_stream" // the stream ended before [DONE], or the connection broke mid-way
	ErrBadResponse  = "bad_response"  // not an SSE stream of OpenAI chunks
	ErrStreamError  = "stream_error"  // the server streamed an error object
	ErrNoContent    = "no_content"    // the stream ended properly without a content chunk
	ErrCanceled     = "canceled"      // the run was interrupted
)

// Clock is the time source: the real one in use, a fake in tests.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t, or with ctx's error when ctx ends first.
	SleepUntil(ctx context.Context, t time.Time) error
}

// RealClock is the wall clock (Go's monotonic reading for differences).
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// SleepUntil implements Clock.
func (RealClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Target is the server and how to talk to it.
type Target struct {
	// BaseURL is the server, e.g. http://localhost:8000; "/v1/..." is
	// appended unless it already ends in /v1.
	BaseURL string
	Model   string
	APIKey  string
	// User is the user and password --url carried (SplitUser), sent as
	// basic authentication: the URL printed in a report, a note or an
	// error never holds them.
	User     *url.Userinfo
	Endpoint string
	// IgnoreEOS asks vLLM to generate exactly max_tokens (its extension
	// of the API; other servers may refuse the field).
	IgnoreEOS bool
	// Timeout bounds one request from send to the end of its stream;
	// StallTimeout bounds the wait for each next chunk. 0 is no bound.
	Timeout, StallTimeout time.Duration
}

// authorize puts t's credentials on req.
func (t Target) authorize(req *http.Request) {
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	if t.User != nil {
		pw, _ := t.User.Password()
		req.SetBasicAuth(t.User.Username(), pw)
	}
}

// SplitUser takes the user and password out of a server URL
// ("http://user:pass@host:8000"), so that what is printed of it never
// shows them; nil when it has none.
func SplitUser(base string) (string, *url.Userinfo) {
	u, err := url.Parse(base)
	if err != nil || u.User == nil {
		return base, nil
	}
	user := u.User
	u.User = nil
	return u.String(), user
}

// URL returns the endpoint's URL.
func (t Target) URL() string {
	base := strings.TrimRight(t.BaseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	if t.Endpoint == EndpointChat {
		return base + "/chat/completions"
	}
	return base + "/completions"
}

// ParseBaseURL checks a server URL as people type it ("host:8000",
// "http://host:8000", ".../v1", ".../metrics") and returns it with a
// scheme.
func ParseBaseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("no --url: give the server's, e.g. http://localhost:8000")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--url %q is not a URL like http://localhost:8000", telemetry.RedactURL(s))
	}
	// Errors name the URL without the user and password it may carry.
	shown := telemetry.RedactURL(s)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--url %q: the scheme must be http or https", shown)
	}
	// The endpoints are appended to the path: a query or fragment would
	// take them in and send every request to the server's root.
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return "", fmt.Errorf("--url %q: give the server's base URL, without ? or #", shown)
	}
	if strings.Trim(u.Host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]") != "" {
		return "", fmt.Errorf("--url %q: %q is not a host name or address", shown, u.Host)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/chat/completions")
	u.Path = strings.TrimSuffix(u.Path, "/completions")
	// watch and the exporter take the same --url as the server's or its
	// metrics URL.
	u.Path = strings.TrimSuffix(u.Path, "/metrics")
	return strings.TrimRight(u.String(), "/"), nil
}

// Outcome is what one request measured. Times are from the moment the
// request was handed to the HTTP client.
type Outcome struct {
	// Due and Sent are from the start of the run; Sent - Due is how late
	// the client sent it.
	Due, Sent time.Duration
	// PromptWords is the prompt's length in words; Prompt the tokens asked for.
	PromptWords int
	Prompt      int64
	// Err is the error kind ("" for success) and ErrText its detail.
	Err, ErrText string
	// TTFT, E2E: see the package doc. ITL holds the gaps between
	// content chunks.
	TTFT, E2E time.Duration
	ITL       []time.Duration
	// Chunks counts the content chunks.
	Chunks int
	// Usage is the server's count; nil when the stream carried none.
	Usage *Usage
}

// OutputTokens is usage.completion_tokens, or the content chunks when the
// server sent no usage (one token per chunk, as vLLM streams by default).
func (o *Outcome) OutputTokens() int64 {
	if o.Usage != nil {
		return o.Usage.CompletionTokens
	}
	return int64(o.Chunks)
}

// TPOT is (E2E - TTFT) / (output tokens - 1); ok is false for one output
// token or fewer, where vllm bench serve leaves it out too.
func (o *Outcome) TPOT() (time.Duration, bool) {
	n := o.OutputTokens()
	if o.Err != "" || n <= 1 {
		return 0, false
	}
	return (o.E2E - o.TTFT) / time.Duration(n-1), true
}

// Client sends requests to a Target.
type Client struct {
	Target Target
	HTTP   *http.Client
	Clock  Clock
}

// body is the JSON request, its prompt streamed from p (our words need
// no JSON escaping): the fields, then the prompt's text as it is
// generated. max_tokens is the field both endpoints of vLLM read (chat
// also takes max_completion_tokens; older servers only max_tokens).
func (c *Client) body(p Prompt, maxTokens int64) (func() io.Reader, int64, error) {
	req := map[string]any{
		"model":          c.Target.Model,
		"max_tokens":     maxTokens,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"temperature":    0,
	}
	if c.Target.IgnoreEOS {
		req["ignore_eos"] = true
	}
	head, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	head = head[:len(head)-1] // the closing brace, which comes after the prompt
	tail := `"}`
	if c.Target.Endpoint == EndpointChat {
		head = append(head, `,"messages":[{"role":"user","content":"`...)
		tail = `"}]}`
	} else {
		head = append(head, `,"prompt":"`...)
	}
	n := int64(len(head)) + p.Len() + int64(len(tail))
	return func() io.Reader {
		return io.MultiReader(bytes.NewReader(head), p.Reader(), strings.NewReader(tail))
	}, n, nil
}

// MaxExtraChunks is how many content chunks past max_tokens a stream may
// carry before it is cut as a bad response: a server that honours
// max_tokens sends at most one a token, and the per-request gaps kept
// for the ITL are bounded by it (an endless stream grew without bound).
const MaxExtraChunks = 16

// Do sends one request with prompt p and max_tokens and reads its stream
// to the end, chunk by chunk: what it keeps is the gaps between content
// chunks, at most max_tokens + MaxExtraChunks of them. Its time is
// bounded by Target.Timeout and Target.StallTimeout; ctx's end cancels it
// (ErrCanceled).
func (c *Client) Do(ctx context.Context, p Prompt, maxTokens int64) Outcome {
	var o Outcome
	body, size, err := c.body(p, maxTokens)
	if err != nil {
		o.Err, o.ErrText = ErrBadResponse, err.Error()
		return o
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.Target.Timeout > 0 {
		var stop context.CancelFunc
		rctx, stop = context.WithTimeoutCause(rctx, c.Target.Timeout, errTimeout)
		defer stop()
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.Target.URL(), body())
	if err != nil {
		o.Err, o.ErrText = ErrConnect, err.Error()
		return o
	}
	req.ContentLength = size
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body()), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	c.Target.authorize(req)

	// A stall guard, armed by the first content chunk and re-armed by
	// every chunk after it: when it fires the request's context ends with
	// errStall and the body read returns. The wait for the first chunk is
	// queueing and prefill, which can rightly take minutes under load;
	// only Timeout bounds it.
	var stall *time.Timer
	arm := func() {}
	if c.Target.StallTimeout > 0 {
		arm = func() {
			if stall == nil {
				stall = time.AfterFunc(c.Target.StallTimeout, func() { cancel(errStall) })
				return
			}
			stall.Reset(c.Target.StallTimeout)
		}
		defer func() {
			if stall != nil {
				stall.Stop()
			}
		}()
	}

	start := c.Clock.Now()
	resp, err := c.HTTP.Do(req)
	if err != nil {
		o.Err, o.ErrText = c.classify(ctx, rctx, err, ErrConnect)
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		o.Err = fmt.Sprintf("http_%d", resp.StatusCode)
		o.ErrText = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
		return o
	}
	sse := NewSSEReader(resp.Body)
	var last time.Time
	events := 0
	for {
		data, err := sse.Next()
		now := c.Clock.Now()
		if err != nil {
			switch {
			case (err == io.EOF || err == io.ErrUnexpectedEOF) && events == 0:
				o.Err, o.ErrText = ErrBadResponse, fmt.Sprintf("no server-sent events in the answer (Content-Type %q)", resp.Header.Get("Content-Type"))
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				o.Err, o.ErrText = ErrBrokenStream, "the stream ended before [DONE]"
			case errors.Is(err, ErrEventTooLarge):
				o.Err, o.ErrText = ErrBadResponse, err.Error()
			default:
				o.Err, o.ErrText = c.classify(ctx, rctx, err, ErrBrokenStream)
			}
			break
		}
		events++
		if o.Chunks > 0 {
			arm()
		}
		ch, err := ParseChunk(data)
		if err != nil {
			o.Err, o.ErrText = ErrBadResponse, err.Error()
			break
		}
		if ch.Error != "" {
			o.Err, o.ErrText = ErrStreamError, ch.Error
			break
		}
		if ch.Usage != nil {
			u := *ch.Usage
			o.Usage = &u
		}
		if ch.Done {
			if o.Chunks == 0 {
				o.Err, o.ErrText = ErrNoContent, "the stream carried no content"
			}
			break
		}
		if ch.Content == "" {
			continue
		}
		if int64(o.Chunks) >= max(maxTokens, 1)+MaxExtraChunks {
			o.Err, o.ErrText = ErrBadResponse, fmt.Sprintf("the stream went on past %d content chunks for max_tokens %d: cut there", o.Chunks, maxTokens)
			break
		}
		if o.Chunks == 0 {
			o.TTFT = now.Sub(start)
		} else {
			o.ITL = append(o.ITL, now.Sub(last))
		}
		o.Chunks++
		last = now
	}
	if o.Chunks > 0 {
		o.E2E = last.Sub(start)
	}
	return o
}

var (
	errTimeout = errors.New("request timeout")
	errStall   = errors.New("no chunk within the stall timeout")
)

// classify names a transport error: the run's end, a timeout of ours, a
// refused connection, or fallback.
func (c *Client) classify(parent, rctx context.Context, err error, fallback string) (string, string) {
	if parent.Err() != nil {
		return ErrCanceled, "the run was interrupted"
	}
	switch cause := context.Cause(rctx); {
	case errors.Is(cause, errTimeout):
		return ErrTimeout, fmt.Sprintf("no complete answer within %s", c.Target.Timeout)
	case errors.Is(cause, errStall):
		return ErrTimeout, fmt.Sprintf("no chunk for %s", c.Target.StallTimeout)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrTimeout, err.Error()
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrConnect, err.Error()
	}
	return fallback, err.Error()
}
