package traffic

import (
	"bytes"
	"compress/gzip"
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzParseLine: never panics, and a record holds counts a log can hold.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"2025-06-20T12:34:56.789Z input_tokens=7420 output_tokens=312",
		`{"created":1718886896,"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
		"INFO 06-20 12:34:56 [logger.py:39] Received request x: params: SamplingParams(max_tokens=5), prompt_token_ids: [1, 2",
		"(APIServer pid=1) INFO 02-29 23:59:60 num_prompt_tokens: 4",
		"ts=9999999999999999999 input_tokens=1",
		"2025-06-20T12:34:56+99:99 input_tokens=0000000000001",
		"2025-06-20T12:34:56.99999999999999Z input_tokens=1",
		`{"created": 1718886896.9999999999, "usage": {"prompt_tokens": 1}}`,
		"INFO 06-20 12:34:56,12 input_tokens=3",
		"input_tokens=12345678_",
		"\x00_tokens=\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := ParseLine(line)
		if !ok {
			if r != (Record{}) {
				t.Fatalf("no record but %+v", r)
			}
			return
		}
		if r.Input < 0 || r.Output < 0 || r.Input >= 1e12 || r.Output >= 1e12 {
			t.Fatalf("counts %+v", r)
		}
		if r.HasTime && (r.Unix < -1e11 || r.Unix > 1e13) {
			t.Fatalf("time %d", r.Unix)
		}
		if r.Nano < 0 || r.Nano >= 1e9 || (!r.HasTime && r.Nano != 0) {
			t.Fatalf("nanoseconds %d (has time %v)", r.Nano, r.HasTime)
		}
	})
}

// FuzzRead: any bytes, plain or gzipped, read without panic; every
// request is counted once whatever the number of workers.
func FuzzRead(f *testing.F) {
	f.Add([]byte("input_tokens=1 output_tokens=2\nnoise\n\n2025-06-20T12:00:00Z prompt_tokens=3"), false)
	f.Add([]byte(`{"usage":{"prompt_tokens":1}}`+"\r\n"), true)
	f.Add([]byte{0x1f, 0x8b, 0x08}, false)
	f.Fuzz(func(t *testing.T, data []byte, zip bool) {
		if zip {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(data)
			w.Close()
			data = b.Bytes()
		}
		var got []int64
		for _, workers := range []int{1, 2} {
			p, err := NewProfile(Options{Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			err = Read(context.Background(), bytes.NewReader(data), p, ReadOptions{Workers: workers})
			if err != nil {
				continue // a broken gzip stream is an error, not a panic
			}
			if p.Requests() < 0 || p.Requests() != p.Input().Count() || p.Requests() != p.Total().Count() {
				t.Fatalf("requests %d, input count %d, total count %d", p.Requests(), p.Input().Count(), p.Total().Count())
			}
			got = append(got, p.Requests(), p.Skipped())
			p.Windows()
			p.Buckets()
		}
		if len(got) == 4 && (got[0] != got[2] || got[1] != got[3]) {
			t.Fatalf("serial %v vs parallel %v", got[:2], got[2:])
		}
	})
}

// FuzzReadSections: a file cut into chunks of any size at newlines, on one
// to three workers, counts what the serial stream reader counts.
func FuzzReadSections(f *testing.F) {
	f.Add([]byte("input_tokens=1 output_tokens=2\nnoise\n\n2025-06-20T12:00:00Z prompt_tokens=3"), uint8(7))
	f.Add([]byte("input_tokens=12345\ninput_tokens=6"), uint8(1))
	f.Add([]byte("\n\n\ninput_tokens=1\n"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		if len(data) == 0 {
			return
		}
		want, err := NewProfile(Options{Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := Read(context.Background(), bytes.NewReader(data), want, ReadOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{1, 3} {
			p, _ := NewProfile(Options{Window: time.Minute})
			var done atomic.Int64
			err := parseSections(context.Background(), bytes.NewReader(data), int64(len(data)), int64(chunk)+1, p, workers, &done)
			if err != nil {
				t.Fatal(err)
			}
			if p.Requests() != want.Requests() || p.Skipped() != want.Skipped() || p.Input().Summary() != want.Input().Summary() ||
				done.Load() != int64(len(data)) {
				t.Fatalf("chunks of %d on %d workers: %d requests, %d skipped, %d bytes; serial %d, %d",
					int(chunk)+1, workers, p.Requests(), p.Skipped(), done.Load(), want.Requests(), want.Skipped())
			}
		}
	})
}

// FuzzParseBounds: --buckets gives at most 8 positive, ascending bounds of
// at most 2^40 tokens, or one line of error.
func FuzzParseBounds(f *testing.F) {
	for _, s := range []string{"512,2048,8192", "2k,8K", "1,1", "0", "", "1,2,3,4,5,6,7,8,9", "1099511627776", "1073741824k", " 4 , 8 ", "-1,k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBounds(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error not one line: %v", s, err)
			}
			return
		}
		if len(b) == 0 || len(b) > 8 {
			t.Fatalf("%q: %d bounds", s, len(b))
		}
		for i, v := range b {
			if v <= 0 || v > 1<<40 || (i > 0 && v <= b[i-1]) {
				t.Fatalf("%q: bounds %v", s, b)
			}
		}
	})
}

// FuzzParseJSONRequest: headroom's own request lines (a --trace) are read
// without panic; what is accepted is inside the bounds, and what is not
// says why on one line.
func FuzzParseJSONRequest(f *testing.F) {
	for _, s := range []string{
		`{"arrival_s":0,"prompt_tokens":10,"output_tokens":2}`,
		`{"id":"a","arrival_s":1.5,"prompt_tokens":1e15,"output_tokens":2,"prefix_id":3,"prefix_tokens":8,"endpoint":"chat"}`,
		`{"arrival_s":-1}`,
		`{"arrival_s":"x","prompt_tokens":[1]}`,
		`{"arrival_s":1e308,"prompt_tokens":1.5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !IsJSONRequest(line) {
			return
		}
		j, err := ParseJSONRequest(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if j.ArrivalS < 0 || math.IsNaN(j.ArrivalS) || math.IsInf(j.ArrivalS, 0) || j.Prompt > MaxTokens || j.Output > MaxTokens || j.PrefixTokens > MaxTokens {
			t.Fatalf("accepted %+v", j)
		}
		if r := j.record(); r.Input < 0 || r.Output < 0 {
			t.Fatalf("record %+v", r)
		}
	})
}
