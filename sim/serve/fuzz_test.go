package serve

import (
	"errors"
	"testing"
)

// FuzzParseRequest: any body gives lengths the engine accepts or an
// error; never a panic, never a prompt + output past max-model-len.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"one two three","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a b"}]}],"max_completion_tokens":3}`), true)
	f.Add([]byte(`{"prompt":[1,2,3,4],"max_tokens":9223372036854775807}`), false)
	f.Add([]byte(`{"prompt_tokens":-5,"prompt":"x","max_tokens":-1}`), false)
	f.Add([]byte(`{"prompt":["a","b"]}`), false)
	f.Add([]byte(`{"model":"other"}`), true)
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		const maxLen = 4096
		p, err := parseRequest(body, chat, "m", maxLen)
		if err != nil {
			if re := (*requestError)(nil); errors.As(err, &re) && p != (parsed{}) {
				t.Fatal("an error with lengths")
			}
			return
		}
		if p.prompt < 1 || p.output < 1 || p.prompt+p.output > maxLen {
			t.Fatalf("accepted prompt %d + output %d over max-model-len %d", p.prompt, p.output, maxLen)
		}
	})
}
