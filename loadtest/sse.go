package loadtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxEventBytes bounds one SSE event. A vLLM chunk is a few hundred bytes
// (one or a few tokens and, in the last one, the usage object); a larger
// event comes from a server that is not streaming tokens, and reading it
// whole would let it take any amount of memory.
const MaxEventBytes = 1 << 20

// ErrEventTooLarge is returned for an event over MaxEventBytes.
var ErrEventTooLarge = errors.New("server-sent event larger than 1 MiB")

// doneMarker ends an OpenAI stream: "data: [DONE]".
var doneMarker = []byte("[DONE]")

// SSEReader reads the data of server-sent events (the WHATWG
// "text/event-stream" format): "data:" lines, joined by newlines, make one
// event, which a blank line ends; comments (":") and other fields (event,
// id, retry) are skipped. It allocates nothing per event beyond what the
// data needs.
type SSEReader struct {
	r    *bufio.Reader
	data []byte
	have bool
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the data of the next event; the slice is valid until the
// next call. At the end of the stream it returns io.EOF, or
// io.ErrUnexpectedEOF when the stream stopped inside an event. An event
// ended by the end of the stream instead of a blank line is still
// returned: some servers close right after their last event.
func (s *SSEReader) Next() ([]byte, error) {
	s.data, s.have = s.data[:0], false
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && s.have {
				return s.data, nil
			}
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			if s.have {
				return s.data, nil
			}
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		if s.have {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > MaxEventBytes {
			return nil, ErrEventTooLarge
		}
		s.data = append(s.data, value...)
		s.have = true
	}
}

// line reads one line without its "\n" or "\r\n". A line longer than
// MaxEventBytes is an error; a last line without a newline comes with
// io.EOF when it is empty, else alone (the EOF follows on the next call).
func (s *SSEReader) line() ([]byte, error) {
	line, err := readLine(s.r, MaxEventBytes)
	switch {
	case err == errLineTooLong:
		return nil, ErrEventTooLarge
	case err == io.EOF && len(line) > 0:
		// A final line without a newline: an event torn off.
		return line, io.EOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// errLineTooLong is readLine's error for a line over its limit; the
// reader is left inside that line.
var errLineTooLong = errors.New("line too long")

// readLine returns the next line with its "\n" (a last line without one
// comes with io.EOF), joining the pieces of a line longer than the
// reader's buffer, up to limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var long []byte
	for {
		frag, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(frag) > limit {
				return nil, errLineTooLong
			}
			long = append(long, frag...)
			continue
		}
		if long != nil {
			frag = append(long, frag...)
		}
		return frag, err
	}
}

// Chunk is what one streamed chunk of a completion says.
type Chunk struct {
	// Content is the generated text it carries: choices[0].text for
	// completions, choices[0].delta.content (or reasoning_content) for
	// chat. Empty for a role-only or usage-only chunk.
	Content string
	// HasChoices is true when the chunk has a choice, content or not.
	HasChoices bool
	// Usage is set by the chunk carrying "usage" (with
	// stream_options.include_usage, the last one).
	Usage *Usage
	// Done marks "[DONE]", the end of the stream.
	Done bool
	// Error is the message of an error object the server streamed
	// instead of tokens (vLLM does so when generation fails mid-way).
	Error string
}

// Usage is OpenAI's usage object.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

type chunkJSON struct {
	Choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// ParseChunk reads one event's data. Data that is not a JSON object is an
// error (the server is not streaming OpenAI chunks); negative token counts
// in usage are an error too.
func ParseChunk(data []byte) (Chunk, error) {
	d := bytes.TrimSpace(data)
	if bytes.Equal(d, doneMarker) {
		return Chunk{Done: true}, nil
	}
	var j chunkJSON
	if err := json.Unmarshal(d, &j); err != nil {
		return Chunk{}, fmt.Errorf("chunk is not JSON: %s", clip(d))
	}
	var c Chunk
	if len(j.Error) > 0 && !bytes.Equal(j.Error, []byte("null")) {
		c.Error = errorMessage(j.Error)
		return c, nil
	}
	if len(j.Choices) > 0 {
		c.HasChoices = true
		ch := j.Choices[0]
		switch {
		case ch.Text != nil:
			c.Content = *ch.Text
		case ch.Delta != nil:
			for _, p := range []*string{ch.Delta.Content, ch.Delta.ReasoningContent, ch.Delta.Reasoning} {
				if p != nil && *p != "" {
					c.Content = *p
					break
				}
			}
		}
	}
	if j.Usage != nil {
		if j.Usage.PromptTokens < 0 || j.Usage.CompletionTokens < 0 {
			return Chunk{}, fmt.Errorf("usage with negative token counts: %s", clip(d))
		}
		u := *j.Usage
		c.Usage = &u
	}
	return c, nil
}

// errorMessage reads {"message": ...} or a bare string; anything else is
// shown clipped.
func errorMessage(raw json.RawMessage) string {
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	return clip(raw)
}

// clip shortens outside text for a message.
func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return fmt.Sprintf("%q...", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
