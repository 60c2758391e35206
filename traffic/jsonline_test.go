package traffic

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The rules every reader of request logs shares, as profile reads them
// (simulate's --requests reads by the same functions, workload's tests
// hold it): headroom's own lines (simulate and loadtest --trace) carry
// their time in arrival_s, and are read strictly; a count past MaxTokens
// is refused; gzip cut short is an error, not a shorter log.
func TestProfileSharesTheRules(t *testing.T) {
	read := func(t *testing.T, data []byte, workers int) (*Profile, error) {
		t.Helper()
		p, _ := NewProfile(Options{Window: time.Minute})
		return p, Read(context.Background(), bytes.NewReader(data), p, ReadOptions{Workers: workers})
	}
	// 240 requests 0.5 s apart span 120 s: two windows of a minute, 120
	// requests each; the trace's other fields are read past.
	var b bytes.Buffer
	for i := range 240 {
		fmt.Fprintf(&b, `{"id":"r%d","arrival_s":%g,"first_token_s":%g,"finish_s":%g,"prompt_tokens":%d,"output_tokens":%d,"preemptions":0}`+"\n", i, float64(i)/2, float64(i)/2+0.1, float64(i)/2+1, 100+i, 10)
	}
	for _, w := range []int{1, 3} {
		p, err := read(t, b.Bytes(), w)
		win := p.Windows()
		if err != nil || p.Requests() != 240 || p.Timed() != 240 || len(win.Windows) != 2 || win.Windows[0].Requests != 120 || win.Windows[1].Requests != 120 || !win.NoYear {
			t.Errorf("%d workers: %v, %d requests, %d timed, windows %+v", w, err, p.Requests(), p.Timed(), win.Windows)
		}
	}
	for line, want := range map[string]string{
		`{"arrival_s":0,"prompt_tokens":99999999999,"output_tokens":5}`: "prompt_tokens 99999999999: more than the 10000000 tokens a request may have",
		`{"arrival_s":0,"prompt_tokens":-5,"output_tokens":5}`:          "prompt_tokens -5: want a whole number of tokens, not negative",
		`{"arrival_s":0,"prompt_tokens":"abc","output_tokens":5}`:       `prompt_tokens "abc": want a whole number of tokens`,
		`{"arrival_s":-1,"prompt_tokens":5,"output_tokens":5}`:          "arrival_s must be a number of seconds, not negative",
		`2025-06-20T12:00:00Z input_tokens=99999999999 output_tokens=5`: "99999999999 prompt and 5 output tokens: more than the 10000000",
	} {
		if _, err := read(t, []byte("input_tokens=10 output_tokens=5\n"+line+"\n"), 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
	// 2,000 lines gzipped, cut at two thirds: an error, as simulate's,
	// where it was read as the lines before the cut.
	var plain bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&plain, "input_tokens=%d output_tokens=%d\n", 100+i%977, 1+i%301)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(plain.Bytes())
	zw.Close()
	cut := z.Bytes()[:z.Len()*2/3]
	for _, w := range []int{1, 2} {
		if _, err := read(t, cut, w); !errors.Is(err, ErrGzipTruncated) {
			t.Errorf("%d workers: truncated gzip: %v", w, err)
		}
	}
	name := filepath.Join(t.TempDir(), "cut.log.gz")
	if err := os.WriteFile(name, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := NewProfile(Options{})
	if err := ReadFile(context.Background(), name, p, ReadOptions{Workers: 2}); !errors.Is(err, ErrGzipTruncated) {
		t.Errorf("ReadFile: truncated gzip: %v", err)
	}
	// A plain file, read in sections, fails on a bad line too.
	name = filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(name, []byte(strings.Repeat("input_tokens=10 output_tokens=5\n", 1000)+`{"arrival_s":0,"prompt_tokens":-5}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadFile(context.Background(), name, p, ReadOptions{Workers: 2}); err == nil || !strings.Contains(err.Error(), "not negative") {
		t.Errorf("ReadFile: a negative count: %v", err)
	}
}
