package traffic

import (
	"testing"
	"time"
)

func unix(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		ok   bool
		want Record
	}{
		{name: "seed key=value",
			line: "2025-06-20T12:34:56.789Z INFO request_id=abc input_tokens=7420 output_tokens=312 latency_ms=1834",
			ok:   true, want: Record{Input: 7420, Output: 312, Unix: unix("2025-06-20T12:34:56Z"), Nano: 789_000_000, HasTime: true}},
		{name: "prompt and completion, no time",
			line: "model=llama prompt_tokens=128 completion_tokens=64",
			ok:   true, want: Record{Input: 128, Output: 64}},
		{name: "key: value and quoted",
			line: `input_tokens: 900 output_tokens="45"`,
			ok:   true, want: Record{Input: 900, Output: 45}},
		{name: "OpenAI chat completion with usage",
			line: `{"id":"chatcmpl-1","object":"chat.completion","created":1718886896,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":7420,"completion_tokens":312,"total_tokens":7732,"prompt_tokens_details":{"cached_tokens":0}}}`,
			ok:   true, want: Record{Input: 7420, Output: 312, Unix: 1718886896, HasTime: true}},
		{name: "batch output, usage nested in response.body",
			line: `{"id":"batch_req_1","custom_id":"r1","response":{"status_code":200,"body":{"usage":{"prompt_tokens":33,"completion_tokens":7}}},"error":null}`,
			ok:   true, want: Record{Input: 33, Output: 7}},
		{name: "Responses API input/output tokens, time in ms",
			line: `{"timestamp":1718886896123,"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1024},"output_tokens":100}}`,
			ok:   true, want: Record{Input: 2048, Output: 100, Unix: 1718886896, Nano: 123_000_000, HasTime: true}},
		{name: "key inside a JSON string is text",
			line: `{"prompt":"say \"prompt_tokens\": 99","usage":{"prompt_tokens":12,"completion_tokens":3}}`,
			ok:   true, want: Record{Input: 12, Output: 3}},
		{name: "prompt_tokens_details alone is not a count",
			line: `{"usage":{"prompt_tokens_details":{"cached_tokens":5}}}`},
		{name: "cached_tokens is not a count", line: "cached_tokens=5"},
		{name: "total only", line: `{"usage":{"total_tokens":300}}`},
		{name: "embedding usage has no output",
			line: `{"object":"list","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			ok:   true, want: Record{Input: 8}},
		{name: "offset time",
			line: "2025-06-20 14:34:56+02:00 input_tokens=1 output_tokens=2",
			ok:   true, want: Record{Input: 1, Output: 2, Unix: unix("2025-06-20T12:34:56Z"), HasTime: true}},
		{name: "bracketed time, comma fraction",
			line: "[2025-06-20 12:34:56,123] input_tokens=1 output_tokens=2",
			ok:   true, want: Record{Input: 1, Output: 2, Unix: unix("2025-06-20T12:34:56Z"), Nano: 123_000_000, HasTime: true}},
		{name: "ts key",
			line: "ts=2025-06-20T12:34:56Z input_tokens=1 output_tokens=2",
			ok:   true, want: Record{Input: 1, Output: 2, Unix: unix("2025-06-20T12:34:56Z"), HasTime: true}},
		{name: "vLLM request log, ids listed",
			line: "INFO 06-20 12:34:56 [logger.py:39] Received request chatcmpl-9: prompt: 'hi there', params: SamplingParams(n=1, temperature=0.7, max_tokens=256, min_tokens=0), prompt_token_ids: [128000, 6151, 1070], lora_request: None.",
			// 06-20 of the year 2000 (no year in vLLM's format).
			// A chat's request id (serving_chat.py's chatcmpl-).
			ok: true, want: Record{Input: 3, Output: 256, OutputIsLimit: true, Unix: unix("2000-06-20T12:34:56Z"), HasTime: true, NoYear: true, Endpoint: EndpointChat}},
		{name: "vLLM V1 prefix and num_prompt_tokens",
			line: "(APIServer pid=1) INFO 06-20 12:34:56 [logger.py:41] Received request cmpl-3: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 4821, lora_request: None.",
			ok:   true, want: Record{Input: 4821, Output: 64, OutputIsLimit: true, Unix: unix("2000-06-20T12:34:56Z"), HasTime: true, NoYear: true, Endpoint: EndpointCompletions}},
		{name: "microseconds, offset",
			line: "2025-06-20T14:34:56.000250+02:00 input_tokens=1 output_tokens=2",
			ok:   true, want: Record{Input: 1, Output: 2, Unix: unix("2025-06-20T12:34:56Z"), Nano: 250_000, HasTime: true}},
		{name: "nanoseconds, digits past the ninth dropped",
			line: "2025-06-20T12:34:56.1234567899Z input_tokens=1",
			ok:   true, want: Record{Input: 1, Unix: unix("2025-06-20T12:34:56Z"), Nano: 123_456_789, HasTime: true}},
		{name: "JSON seconds with decimals",
			line: `{"created": 1718886896.25, "usage": {"prompt_tokens": 5, "completion_tokens": 1}}`,
			ok:   true, want: Record{Input: 5, Output: 1, Unix: 1718886896, Nano: 250_000_000, HasTime: true}},
		{name: "time in microseconds",
			line: "ts=1718886896000007 input_tokens=9",
			ok:   true, want: Record{Input: 9, Unix: 1718886896, Nano: 7_000, HasTime: true}},
		{name: "time in nanoseconds",
			line: "ts=1718886896000000042 input_tokens=9",
			ok:   true, want: Record{Input: 9, Unix: 1718886896, Nano: 42, HasTime: true}},
		{name: "vLLM format with a millisecond handler",
			line: "INFO 06-20 12:34:56.500 [logger.py:41] Received request cmpl-3: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 48, lora_request: None.",
			ok:   true, want: Record{Input: 48, Output: 64, OutputIsLimit: true, Unix: unix("2000-06-20T12:34:56Z"), Nano: 500_000_000, HasTime: true, NoYear: true, Endpoint: EndpointCompletions}},
		{name: "side by side, output first",
			line: "level=info output_tokens=3 input_tokens=5 status=200",
			ok:   true, want: Record{Input: 5, Output: 3}},
		{name: "side by side, the neighbour not a count: the next one is",
			line: "input_tokens=5 output_tokens=x output_tokens=7",
			ok:   true, want: Record{Input: 5, Output: 7}},
		{name: "side by side, first of each kind wins",
			line: "input_tokens=5 output_tokens=9 input_tokens=1 output_tokens=2",
			ok:   true, want: Record{Input: 5, Output: 9}},
		{name: "side by side at the end of the line",
			line: "input_tokens=5 output_tokens=9",
			ok:   true, want: Record{Input: 5, Output: 9}},
		{name: "thirteen digits is no count", line: "input_tokens=1234567890123 output_tokens=x"},
		{name: "decimal is no count", line: "input_tokens=12.5"},
		{name: "negative is no count", line: "input_tokens=-5"},
		{name: "invalid date is no time",
			line: "2025-02-30T12:00:00Z input_tokens=1",
			ok:   true, want: Record{Input: 1}},
		{name: "empty", line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLine([]byte(tt.line))
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseLine(%q)\n got %+v, %v\nwant %+v, %v", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestFractionCachedMinute: the second line of a minute takes the cached
// path, which reads its fraction as the full parse does.
func TestFractionCachedMinute(t *testing.T) {
	var c dateCache
	for i, tt := range []struct {
		line string
		nano int32
	}{
		{"2026-11-20T10:00:00.000Z level=info input_tokens=1", 0},
		{"2026-11-20T10:00:01.042Z level=info input_tokens=1", 42_000_000},
		{"2026-11-20T10:00:59.999999Z input_tokens=1", 999_999_000},
		{"2026-11-20T10:00:07Z input_tokens=1", 0},
	} {
		var r Record
		if !c.parse([]byte(tt.line), &r) || r.Nano != tt.nano || r.Unix != unix("2026-11-20T10:00:00Z")+[]int64{0, 1, 59, 7}[i] {
			t.Errorf("%q: %+v, want nano %d", tt.line, r, tt.nano)
		}
	}
}

// TestDaysFromCivil checks the calendar against the standard library.
func TestDaysFromCivil(t *testing.T) {
	for _, d := range []string{"1970-01-01", "2000-02-29", "2024-12-31", "2100-03-01", "2038-01-19"} {
		tm, _ := time.Parse("2006-01-02", d)
		got := daysFromCivil(int64(tm.Year()), int64(tm.Month()), int64(tm.Day())) * 86400
		if got != tm.Unix() {
			t.Errorf("%s: %d, want %d", d, got, tm.Unix())
		}
	}
}
