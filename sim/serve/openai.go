package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/sim"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// defaultCompletionTokens is max_tokens of /v1/completions when a request
// gives none (OpenAI's and vLLM's default).
const defaultCompletionTokens = 16

// tokenText is the text of every generated token.
const tokenText = " tok"

// genRequest is the part of an OpenAI request the simulation reads. The
// prompt and the messages are counted as they are decoded (promptCount,
// contentCount): their text is never held as a slice of words.
type genRequest struct {
	Model               string        `json:"model"`
	Prompt              *promptCount  `json:"prompt"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Stream              bool          `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// PromptTokens is an extension: the prompt's length in tokens,
	// overriding the count from the text.
	PromptTokens *int `json:"prompt_tokens"`
}

type chatMessage struct {
	Role    string       `json:"role"`
	Content contentCount `json:"content"`
}

// apiError is OpenAI's error body, as vLLM writes it.
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

// wordsToTokens is the documented rule: ceil(words × 4 / 3).
func wordsToTokens(words int) int { return (words*4 + 2) / 3 }

// countWords is len(strings.Fields(s)) without the slice: a 32 MiB prompt
// of one-letter words would be a 256 MiB slice of strings.
func countWords(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// promptCount is a completion prompt, counted in tokens as it is decoded:
// a string's words, a list of one string, or a list of token ids (counted
// without decoding them into a slice).
type promptCount struct {
	tokens int
	set    bool
}

var errPromptShape = errors.New("prompt must be a string, a list of one string, or a list of token ids")

func (p *promptCount) UnmarshalJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return nil
	case len(raw) > 0 && raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return err
		}
		p.tokens, p.set = wordsToTokens(countWords(text)), true
		return nil
	case len(raw) > 0 && raw[0] == '[':
		if n, ok := countIDs(raw); ok {
			p.tokens, p.set = n, true
			return nil
		}
		var texts []string
		if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
			p.tokens, p.set = wordsToTokens(countWords(texts[0])), true
			return nil
		}
	}
	return errPromptShape
}

// countIDs counts a JSON array of integers (the decoder has checked it is
// valid JSON); ok is false for any other array.
func countIDs(raw []byte) (int, bool) {
	inner := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(inner) == 0 {
		return 0, true
	}
	n := 0
	for len(inner) > 0 {
		elem := inner
		if i := bytes.IndexByte(inner, ','); i >= 0 {
			elem, inner = inner[:i], inner[i+1:]
		} else {
			inner = nil
		}
		elem = bytes.TrimSpace(elem)
		if len(elem) > 0 && elem[0] == '-' {
			elem = elem[1:]
		}
		if len(elem) == 0 {
			return 0, false
		}
		for _, c := range elem {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n++
	}
	return n, true
}

// contentCount is a chat message's content counted in words: a string,
// or a list of parts whose text is counted.
type contentCount struct{ words int }

func (c *contentCount) UnmarshalJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return err
		}
		c.words = countWords(text)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return errors.New("message content must be a string or a list of parts")
	}
	for _, p := range parts {
		c.words += countWords(p.Text)
	}
	return nil
}

// chatTokens counts the words of every message's text.
func chatTokens(msgs []chatMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, errors.New("messages is required")
	}
	words := 0
	for _, m := range msgs {
		words += m.Content.words
	}
	return wordsToTokens(words), nil
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.opt.Model, "object": "model", "created": s.opt.Clock.Now().Unix(), "owned_by": "vllm", "root": s.opt.Model,
		"max_model_len": s.e.Config().MaxModelLen,
		// Says what it is, so that loadtest never takes its steps for a
		// GPU's (sim.StandInField).
		sim.StandInField: true,
	}}})
}

// parsed is what a generation request asks for.
type parsed struct {
	prompt, output       int
	stream, includeUsage bool
}

// requestError is a request the server answers with an error status;
// msg is vLLM's wording.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

// parseRequest reads a completion (chat false) or chat request body for
// a model of maxLen tokens: the prompt and output lengths the engine will
// see, or an error to answer with 400 (or a *requestError's status).
func parseRequest(body []byte, chat bool, model string, maxLen int) (parsed, error) {
	return decodeRequest(bytes.NewReader(body), chat, model, maxLen)
}

// bodyTooLarge is the answer to a body past maxBody, read or declared.
func bodyTooLarge() *requestError {
	return &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes (%d MiB), the most this server reads", maxBody, maxBody>>20)}
}

// decodeRequest is parseRequest reading the body as it decodes: one copy
// of the JSON in the decoder, none in a body buffer.
func decodeRequest(body io.Reader, chat bool, model string, maxLen int) (parsed, error) {
	var req genRequest
	dec := json.NewDecoder(body)
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return parsed{}, bodyTooLarge()
		}
		if errors.Is(err, graceful.ErrSlowBody) {
			return parsed{}, graceful.ErrSlowBody
		}
		if errors.Is(err, errPromptShape) {
			return parsed{}, errPromptShape
		}
		return parsed{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if req.Model != "" && req.Model != model {
		return parsed{}, &requestError{http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model)}
	}
	var prompt int
	var err error
	switch {
	case req.PromptTokens != nil:
		prompt = *req.PromptTokens
	case chat:
		prompt, err = chatTokens(req.Messages)
	case req.Prompt == nil || !req.Prompt.set:
		err = errors.New("prompt is required")
	default:
		prompt = req.Prompt.tokens
	}
	if err != nil {
		return parsed{}, err
	}
	prompt = max(prompt, 1)
	output := defaultCompletionTokens
	if chat {
		output = maxLen - prompt
	}
	for _, v := range []*int{req.MaxCompletionTokens, req.MaxTokens} {
		if v != nil {
			output = *v
		}
	}
	if output < 1 {
		// vLLM's SamplingParams: "max_tokens must be at least 1, got -5."
		return parsed{}, &requestError{http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d.", output)}
	}
	if prompt > maxLen || output > maxLen-prompt {
		return parsed{}, &requestError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			maxLen, int64(prompt)+int64(output), prompt, output)}
	}
	p := parsed{prompt: prompt, output: output, stream: req.Stream}
	p.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return p, nil
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	// A large body is decoded under the parse gate: a 32 MiB prompt is
	// held by at most Parsers requests at once.
	// A body declared past the bound is refused before it holds a slot:
	// two clients declaring 10 GB held both for a minute.
	if r.ContentLength > maxBody {
		re := bodyTooLarge()
		apiError(w, re.status, "BadRequestError", re.msg)
		return
	}
	release := func() {}
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	if r.ContentLength < 0 || r.ContentLength > SmallBody {
		var err error
		if release, err = s.parse.EnterFrom(r.Context(), graceful.ClientOf(r)); err != nil {
			w.Header().Set("Retry-After", "1")
			apiError(w, graceful.Status(err), "ServiceUnavailableError", err.Error())
			return
		}
		// A slot is held while the body arrives: it must keep coming (graceful.TimedBody).
		body = graceful.TimedBody(w, body)
	}
	req, err := decodeRequest(body, chat, s.opt.Model, s.e.Config().MaxModelLen)
	release()
	if errors.Is(err, graceful.ErrSlowBody) {
		apiError(w, http.StatusRequestTimeout, "BadRequestError", err.Error())
		return
	}
	if re := (*requestError)(nil); errors.As(err, &re) && re.status == http.StatusNotFound {
		apiError(w, http.StatusNotFound, "NotFoundError", re.msg)
		return
	} else if errors.As(err, &re) && re.status == http.StatusRequestEntityTooLarge {
		apiError(w, http.StatusRequestEntityTooLarge, "BadRequestError", re.msg)
		return
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	prompt, output := req.prompt, req.output
	h, st, err := s.submit(prompt, output)
	if errors.Is(err, errFull) {
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", fmt.Sprintf("%d requests in flight, the most this server holds; retry later", s.opt.MaxRequests))
		return
	}
	if err != nil {
		var rej *sim.Rejection
		if errors.As(err, &rej) {
			apiError(w, http.StatusBadRequest, "BadRequestError", rej.Error())
			return
		}
		apiError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	s.mu.Lock()
	s.seq++
	id := fmt.Sprintf("%s-%d", map[bool]string{true: "chatcmpl", false: "cmpl"}[chat], s.seq)
	s.mu.Unlock()
	resp := responder{w: w, chat: chat, id: id, model: s.opt.Model, created: s.opt.Clock.Now().Unix(), prompt: prompt}
	ctx := r.Context()
	if req.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if chat {
			resp.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		}
		resp.flush()
	}
	// sent is the tokens streamed; walked the tokens whose steps were
	// looked at (more than sent while a stream interval holds them).
	sent, walked := 0, 0
	for {
		select {
		case <-st.notify:
		case <-ctx.Done():
			s.abort(h)
			return
		}
		gen, done, finish, steps := s.snapshot(st)
		if req.stream {
			// vLLM streams a step's tokens as one chunk: one token a step,
			// or with speculative decoding the accepted drafts and the
			// token after them (steps marks where each step ended). With
			// --stream-interval its output processor sends a request's
			// first step at once, then what has gathered at the end of the
			// step where it reaches the interval, and the rest with the
			// last.
			for walked < gen {
				end := walked + 1
				for len(steps) > 0 && steps[0] <= walked {
					steps = steps[1:]
				}
				if len(steps) > 0 {
					end = min(steps[0], gen)
				}
				walked = end
				last := done && end == gen
				if sent > 0 && !last && end-sent < max(s.opt.StreamInterval, 1) {
					continue
				}
				var fr *string
				if last {
					fr = &finish
				}
				resp.tokens(end-sent, fr)
				sent = end
			}
			resp.flush()
		}
		if !done {
			continue
		}
		if req.stream {
			if req.includeUsage {
				resp.usage(gen)
			}
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
			resp.flush()
			return
		}
		resp.whole(gen, finish)
		return
	}
}

// responder writes one request's answer in OpenAI's shapes.
type responder struct {
	w       http.ResponseWriter
	chat    bool
	id      string
	model   string
	created int64
	prompt  int
}

func (r *responder) flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *responder) object(chunk bool) string {
	switch {
	case r.chat && chunk:
		return "chat.completion.chunk"
	case r.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (r *responder) event(v any) {
	b, _ := json.Marshal(v)
	_, _ = fmt.Fprintf(r.w, "data: %s\n\n", b)
}

// chunk writes one streamed choice: a chat delta or a completion's text.
func (r *responder) chunk(delta map[string]any, finish *string) {
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish}
	if r.chat {
		choice["delta"] = delta
	} else {
		choice["text"] = delta["content"]
	}
	r.event(map[string]any{"id": r.id, "object": r.object(true), "created": r.created, "model": r.model, "choices": []any{choice}})
}

// tokens writes n tokens as one chunk.
func (r *responder) tokens(n int, finish *string) {
	r.chunk(map[string]any{"content": strings.Repeat(tokenText, n)}, finish)
}

func (r *responder) usageOf(gen int) map[string]any {
	return map[string]any{"prompt_tokens": r.prompt, "completion_tokens": gen, "total_tokens": r.prompt + gen}
}

// usage is the last chunk with stream_options.include_usage: no
// choices, the usage.
func (r *responder) usage(gen int) {
	r.event(map[string]any{"id": r.id, "object": r.object(true), "created": r.created, "model": r.model, "choices": []any{}, "usage": r.usageOf(gen)})
}

func (r *responder) whole(gen int, finish string) {
	text := strings.Repeat(tokenText, gen)
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish}
	if r.chat {
		choice["message"] = map[string]any{"role": "assistant", "content": text}
	} else {
		choice["text"] = text
	}
	r.w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(r.w).Encode(map[string]any{"id": r.id, "object": r.object(false), "created": r.created, "model": r.model,
		"choices": []any{choice}, "usage": r.usageOf(gen)})
}
