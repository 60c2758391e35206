package loadtest

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func events(t *testing.T, in string) ([]string, error) {
	t.Helper()
	r := NewSSEReader(strings.NewReader(in))
	var out []string
	for range 1000 {
		d, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	t.Fatal("more than 1000 events")
	return nil, nil
}

func TestSSEReader(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
		err      error
	}{
		{"vLLM", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []string{`{"a":1}`, "[DONE]"}, io.EOF},
		{"CRLF, comments, other fields", ": ping\r\nevent: x\r\nid: 3\r\ndata: one\r\n\r\n", []string{"one"}, io.EOF},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, io.EOF},
		{"no space after colon", "data:x\n\n", []string{"x"}, io.EOF},
		{"last event without blank line", "data: a\n\ndata: b\n", []string{"a", "b"}, io.EOF},
		{"torn line", "data: a\n\ndata: {\"tr", []string{"a"}, io.ErrUnexpectedEOF},
		{"blank lines only", "\n\n\n", nil, io.EOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := events(t, c.in)
			if !errors.Is(err, c.err) || strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
}

func TestSSEReaderBounded(t *testing.T) {
	long := "data: " + strings.Repeat("x", MaxEventBytes+1) + "\n\n"
	if _, err := events(t, long); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("a line over 1 MiB: %v, want ErrEventTooLarge", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", MaxEventBytes/1000+2) + "\n"
	if _, err := events(t, many); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("an event over 1 MiB in many lines: %v, want ErrEventTooLarge", err)
	}
}

func TestParseChunk(t *testing.T) {
	for _, c := range []struct {
		in      string
		content string
		usage   *Usage
		done    bool
		errMsg  string
		bad     bool
	}{
		{in: `{"choices":[{"index":0,"text":" the"}]}`, content: " the"},
		{in: `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`},
		{in: `{"choices":[{"delta":{"content":"Hi"}}]}`, content: "Hi"},
		{in: `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, content: "hmm"},
		{in: `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, usage: &Usage{12, 5}},
		{in: `[DONE]`, done: true},
		{in: `{"error":{"message":"boom","code":500}}`, errMsg: "boom"},
		{in: `{"error":null,"choices":[{"text":"x"}]}`, content: "x"},
		{in: `not json`, bad: true},
		{in: `{"usage":{"prompt_tokens":-1}}`, bad: true},
	} {
		ch, err := ParseChunk([]byte(c.in))
		if (err != nil) != c.bad {
			t.Errorf("%s: error %v, want bad=%v", c.in, err, c.bad)
			continue
		}
		if ch.Content != c.content || ch.Done != c.done || ch.Error != c.errMsg ||
			(ch.Usage == nil) != (c.usage == nil) || (ch.Usage != nil && *ch.Usage != *c.usage) {
			t.Errorf("%s: got %+v", c.in, ch)
		}
	}
}

// FuzzSSE: any byte stream ends in a bounded number of events with an
// error, never a panic or a loop.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n",
		"data: a\r\ndata: b\r\n\r\n", ": c\n\nid: 1\nevent: e\ndata\n\n", "data:", "\r\r\n\n", "data: x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewSSEReader(strings.NewReader(string(b)))
		for i := 0; ; i++ {
			d, err := r.Next()
			if err != nil {
				return
			}
			if len(d) > len(b) {
				t.Fatalf("event of %d bytes from %d bytes of input", len(d), len(b))
			}
			if i > len(b) {
				t.Fatalf("%d events from %d bytes", i, len(b))
			}
			if _, err := ParseChunk(d); err != nil {
				continue
			}
		}
	})
}

// FuzzParseChunk: any data parses or fails, with usage never negative.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"text":" the"}]}`,
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5}}`,
		`{"error":{"message":"x"}}`, `{"error":"x"}`, `{"error":[1]}`, `[DONE]`, ` [DONE] `, `{"choices":null}`,
		`{"usage":{"prompt_tokens":1e30}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseChunk(b)
		if err == nil && c.Usage != nil && (c.Usage.PromptTokens < 0 || c.Usage.CompletionTokens < 0) {
			t.Fatalf("negative usage %+v", c.Usage)
		}
	})
}
