package sim

import (
	"bytes"
	"context"
	"testing"
)

// FuzzLineSource: any input reads as requests or one error; requests it
// returns have no negative field, and the engine takes them without
// panicking or spinning.
func FuzzLineSource(f *testing.F) {
	f.Add([]byte(`{"id":"a","arrival_s":0,"prompt_tokens":100,"output_tokens":10}` + "\n"))
	f.Add([]byte("2025-06-01T10:00:00Z prompt_tokens=812 completion_tokens=64\n2025-06-01T10:00:01Z prompt_tokens=8 completion_tokens=6\n"))
	f.Add([]byte(`{"created": 1717236000, "usage": {"prompt_tokens": 9, "completion_tokens": 3}}` + "\n"))
	f.Add([]byte("INFO 06-20 12:34:56 Received request cmpl-1: prompt: 'x', params: SamplingParams(max_tokens=16), prompt_token_ids: [1, 2, 3]\n"))
	f.Add([]byte(`{"arrival_s":1e308,"prompt_tokens":99999999999,"output_tokens":-1}`))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := NewLineSource(bytes.NewReader(data), 0)
		if err != nil {
			return
		}
		e, err := New(Config{NumGPUBlocks: 64, BlockSize: 16, MaxNumSeqs: 4, MaxNumBatchedTokens: 256, MaxModelLen: 512})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		probe := &countingSource{src: src, n: &n, t: t}
		_, _ = Run(context.Background(), e, probe, RunOptions{})
	})
}

type countingSource struct {
	src *LineSource
	n   *int
	t   *testing.T
}

func (c *countingSource) Next() (Request, error) {
	r, err := c.src.Next()
	if err == nil {
		*c.n++
		if r.Arrival < 0 || r.PromptTokens < 0 || r.OutputTokens < 0 {
			c.t.Fatalf("negative field in %+v", r)
		}
	}
	return r, err
}
