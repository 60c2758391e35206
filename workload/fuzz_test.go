package workload

import (
	"bytes"
	"io"
	"math"
	"strings"
	"testing"
)

// FuzzReplay: any log yields a bounded number of requests whose due times
// never go back and whose sizes are positive, or one error, without
// panicking.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(replayLog))
	f.Add([]byte(`{"id":"a","arrival_s":0,"prompt_tokens":100,"output_tokens":10}` + "\n"))
	f.Add([]byte("INFO 06-20 12:34:56 Received request x: prompt: 'a', params: SamplingParams(max_tokens=7), prompt_token_ids: [1, 2, 3]\n"))
	f.Add([]byte("ts=1700000000 prompt_tokens=3\nts=1699999999 prompt_tokens=4\n"))
	f.Add([]byte(`{"arrival_s":1e308,"prompt_tokens":99999999999,"output_tokens":-1}`))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	// The sweep's garbage: a count past the bound, a binary file, nothing.
	f.Add([]byte(`{"arrival_s":0,"prompt_tokens":1e15,"output_tokens":2}` + "\n"))
	f.Add([]byte(`{"arrival_s":0,"prompt_tokens":"x","output_tokens":[2]}` + "\n"))
	f.Add([]byte{0xff, 0, 0x13, 0x37, '\n'})
	f.Add([]byte("\n\n\n"))
	// Lines that name their endpoint, and one that names none known.
	f.Add([]byte(`{"arrival_s":0,"prompt_tokens":5,"output_tokens":2,"endpoint":"/v1/chat/completions"}` + "\n" + `{"arrival_s":1,"prompt_tokens":5,"output_tokens":2,"endpoint":7}` + "\n"))
	f.Add([]byte("INFO 06-20 12:34:56 [logger.py:41] Received request cmpl-3-0: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 300, lora_request: None.\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rp, err := newReplay(bytes.NewReader(b), 3, Fixed(1), Fixed(1), newRand(1, 3))
		if err != nil {
			return
		}
		prev := -1.0
		for i := 0; ; i++ {
			r, err := rp.Next()
			if err != nil {
				if msg := err.Error(); err != io.EOF && (msg == "" || strings.Contains(msg, "\n")) {
					t.Fatalf("error %q: want one line", msg)
				}
				return
			}
			if r.Prompt > maxTokens || r.Output > maxTokens {
				t.Fatalf("request %d %+v: past the %d tokens a request may have", i, r, maxTokens)
			}
			if i > len(b) {
				t.Fatalf("%d requests from %d bytes", i, len(b))
			}
			if r.Endpoint != "" && r.Endpoint != EndpointChat && r.Endpoint != EndpointCompletions {
				t.Fatalf("request %d calls endpoint %q", i, r.Endpoint)
			}
			if r.At < prev || r.Prompt <= 0 || r.Output <= 0 || math.IsNaN(r.At) || r.PrefixTokens > r.Prompt {
				t.Fatalf("request %d %+v after due %v", i, r, prev)
			}
			prev = r.At
		}
	})
}

// FuzzParse: the length, burst and bench parsers take any text and
// return either a usable value or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"fixed:7", "uniform:1-9", "12", "50x30000@60s", "x@", "vllm bench serve --random-input-len 10 --num-prompts 2",
		"--request-rate inf --max-concurrency 3 --random-range-ratio 0.5", "vllm bench serve --dataset-name sonnet", "--seed=5 --model 'a b'",
		"--dataset-name sharegpt --dataset-path f.json --sharegpt-output-len 2k --disable-shuffle --no-oversample",
		"--goodput ttft:2000 tpot:50 e2el:1e4 --percentile-metrics ttft,e2el --metric-percentiles 25,99.9 --metadata a=1 b=2",
		"--dataset-name custom --dataset-path x.jsonl --custom-output-len 7 --ramp-up-strategy linear",
		"--backend openai-chat --endpoint /v1/chat/completions", "--endpoint v1/completions/", "--backend tgi-chat --endpoint /v1/embeddings"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDist(s); err == nil && (d.Mean() < 0 || d.Mean() > maxTokens) {
			t.Fatalf("%q: %v", s, d)
		}
		if b, err := ParseBurst(s); err == nil && (b.Count <= 0 || b.Tokens <= 0 || b.At < 0) {
			t.Fatalf("%q: burst %+v", s, b)
		}
		if b, err := ParseBench(s); err == nil {
			if err := b.Spec.Validate(); err != nil {
				t.Fatalf("%q: a parsed bench command does not validate: %v", s, err)
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("%q: a two-line error: %v", s, err)
		}
		if e, err := ParseEndpoint(s); (err == nil) != (e == EndpointChat || e == EndpointCompletions) || (err != nil && strings.Contains(err.Error(), "\n") && !strings.Contains(s, "\n")) {
			t.Fatalf("%q: endpoint %q, %v", s, e, err)
		}
	})
}

// FuzzDataset: any bytes read as a ShareGPT or custom file give entries of
// bounded, non-negative lengths, or one error, without panicking.
func FuzzDataset(f *testing.F) {
	f.Add([]byte(`[{"conversations": [{"from": "human", "value": "Hi th\u00e9re, how are you?"}, {"from": "gpt", "value": "Fine."}]}, {"id": 1}]`))
	f.Add([]byte(`[{"conversations": [{"value": 3}, {"value": null}, []]}, [], "x", 1e5, true]`))
	f.Add([]byte("{\"prompt\": \"abc\", \"output_tokens\": 12}\n{\"prompt\": \"\\ud83d\"}\n"))
	f.Add([]byte(`[[[[{"conversations": {"value": "a"}}]]]]`))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, name := range []string{DatasetShareGPT, DatasetCustom} {
			entries, err := readDataset(bytes.NewReader(b), Dataset{Name: name})
			if err != nil {
				continue
			}
			// gzip may hold more text than its bytes.
			bound := int64(len(b))
			if len(b) > 1 && b[0] == 0x1f && b[1] == 0x8b {
				bound = maxDatasetBytes
			}
			if int64(len(entries)) > bound {
				t.Fatalf("%s: %d entries from %d bytes", name, len(entries), len(b))
			}
			for _, e := range entries {
				if e.prompt < 0 || e.output < 0 || int64(e.prompt) > EstimateTokens(bound) {
					t.Fatalf("%s: entry %+v from %d bytes", name, e, len(b))
				}
			}
			if _, _, err := sampleDataset(entries, Dataset{Name: name, Path: "f"}, 7); err == nil && len(entries) == 0 {
				t.Fatalf("%s: a sample of nothing", name)
			}
		}
	})
}
