package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"headroom.dev/headroom/sim"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// defaultCompletionTokens is max_tokens of /v1/completions when a request
// gives none (OpenAI's and vLLM's default).
const defaultCompletionTokens = 16

// tokenText is the text of every generated token.
const tokenText = " tok"

// genRequest is the part of an OpenAI request the simulation reads.
type genRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// PromptTokens is an extension: the prompt's length in tokens,
	// overriding the count from the text.
	PromptTokens *int `json:"prompt_tokens"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// apiError is OpenAI's error body, as vLLM writes it.
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

// wordsToTokens is the documented rule: ceil(words × 4 / 3).
func wordsToTokens(words int) int { return (words*4 + 2) / 3 }

// promptTokens counts a completion prompt: token ids, or words of text.
func promptTokens(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New("prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return wordsToTokens(len(strings.Fields(text))), nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return len(ids), nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return wordsToTokens(len(strings.Fields(texts[0]))), nil
	}
	return 0, errors.New("prompt must be a string, a list of one string, or a list of token ids")
}

// chatTokens counts the words of every message's text.
func chatTokens(msgs []chatMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, errors.New("messages is required")
	}
	words := 0
	for _, m := range msgs {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			words += len(strings.Fields(text))
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return 0, errors.New("message content must be a string or a list of parts")
		}
		for _, p := range parts {
			words += len(strings.Fields(p.Text))
		}
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
	var req genRequest
	if err := json.Unmarshal(body, &req); err != nil {
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
	default:
		prompt, err = promptTokens(req.Prompt)
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
	if output < 1 || prompt > maxLen || output > maxLen-prompt {
		return parsed{}, &requestError{http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			maxLen, int64(prompt)+int64(output), prompt, output)}
	}
	p := parsed{prompt: prompt, output: output, stream: req.Stream}
	p.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return p, nil
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		apiError(w, http.StatusBadRequest, "BadRequestError", "could not read the request body (at most 32 MiB)")
		return
	}
	req, err := parseRequest(body, chat, s.opt.Model, s.e.Config().MaxModelLen)
	if re := (*requestError)(nil); errors.As(err, &re) && re.status == http.StatusNotFound {
		apiError(w, http.StatusNotFound, "NotFoundError", re.msg)
		return
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	prompt, output := req.prompt, req.output
	h, st, err := s.submit(prompt, output)
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
	sent := 0
	for {
		select {
		case <-st.notify:
		case <-ctx.Done():
			s.abort(h)
			return
		}
		gen, done, finish := s.snapshot(st)
		if req.stream {
			for ; sent < gen; sent++ {
				var fr *string
				if done && sent == gen-1 {
					fr = &finish
				}
				resp.token(fr)
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

func (r *responder) token(finish *string) {
	r.chunk(map[string]any{"content": tokenText}, finish)
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
