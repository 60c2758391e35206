package sim

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

func TestParseDistAndBurst(t *testing.T) {
	for in, want := range map[string]string{"fixed:7": "fixed:7", "12": "fixed:12", "uniform:16-2000": "uniform:16-2000"} {
		d, err := ParseDist(in)
		if err != nil || d.String() != want {
			t.Errorf("%s: %v %v", in, d, err)
		}
	}
	for _, bad := range []string{"uniform:9-3", "normal:5", "fixed:-1", "uniform:a-b"} {
		if _, err := ParseDist(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	b, err := ParseBurst("50x30000@60s")
	if err != nil || b != (Burst{Count: 50, Tokens: 30000, At: 60}) {
		t.Errorf("burst: %+v %v", b, err)
	}
	for _, bad := range []string{"50x30000", "x@1s", "0x5@1s", "5x5@soon"} {
		if _, err := ParseBurst(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// 20 req/s for 1000 s is a Poisson count of mean 20000 and standard
// deviation sqrt(20000) ≈ 141; the burst's 3 requests come at 500 s in
// order; the same seed gives the same stream.
func TestSynthetic(t *testing.T) {
	gen := func() []Request {
		s := &Synthetic{Rate: 20, Duration: 1000, Prompt: UniformDist{16, 2000}, Output: FixedDist(5), Bursts: []Burst{{3, 9000, 500}}, Seed: 1}
		var out []Request
		for {
			r, err := s.Next()
			if errors.Is(err, io.EOF) {
				return out
			}
			out = append(out, r)
		}
	}
	a, b := gen(), gen()
	if len(a) != len(b) || a[len(a)/2] != b[len(b)/2] {
		t.Fatal("same seed, different streams")
	}
	if n := len(a) - 3; math.Abs(float64(n)-20000) > 5*141 {
		t.Errorf("%d Poisson arrivals, want about 20000", n)
	}
	burst := 0
	for i, r := range a {
		if i > 0 && r.Arrival < a[i-1].Arrival {
			t.Fatalf("unsorted at %d", i)
		}
		if r.PromptTokens < 16 || r.PromptTokens > 2000 {
			if r.PromptTokens != 9000 || r.Arrival != 500 {
				t.Errorf("request %+v outside the distribution", r)
			}
			burst++
		}
	}
	if burst != 3 {
		t.Errorf("burst requests: %d, want 3", burst)
	}
}

// The quantile distribution of p50 = 100, p90 = 1000 (and 0 → 10,
// 1 → 2000): a quarter of the draws fall below (10 + 100) / 2 = 55, the
// midpoint of the first segment.
func TestQuantileDist(t *testing.T) {
	d := QuantileDist{Points: []QuantilePoint{{0, 10}, {0.5, 100}, {0.9, 1000}, {1, 2000}}}
	s := &Synthetic{Rate: 1000, Duration: 100, Prompt: d, Output: FixedDist(1), Seed: 3}
	below, n := 0, 0
	for {
		r, err := s.Next()
		if err != nil {
			break
		}
		n++
		if r.PromptTokens <= 55 {
			below++
		}
	}
	if f := float64(below) / float64(n); math.Abs(f-0.25) > 0.01 {
		t.Errorf("share below 55: %.3f, want 0.25", f)
	}
}

func TestLineSource(t *testing.T) {
	in := `{"id":"a","arrival_s":0,"prompt_tokens":100,"output_tokens":10}

{"arrival_s":1.5,"prompt_tokens":50,"output_tokens":5,"prefix_id":3,"prefix_tokens":32}
`
	src, _ := NewLineSource(strings.NewReader(in), 0.5)
	r1, err1 := src.Next()
	r2, err2 := src.Next()
	_, err3 := src.Next()
	if err1 != nil || err2 != nil || !errors.Is(err3, io.EOF) {
		t.Fatal(err1, err2, err3)
	}
	// Speedup 0.5 stretches time: 1.5 s becomes 3 s.
	if r1.ID != "a" || r2.ID != "3" || r2.Arrival != 3 || r2.PrefixID != 3 || r2.PrefixTokens != 32 {
		t.Errorf("%+v %+v", r1, r2)
	}

	logs := `2025-06-01T10:00:00Z prompt_tokens=812 completion_tokens=64
2025-06-01T10:00:30Z prompt_tokens=90 completion_tokens=12
`
	src, _ = NewLineSource(strings.NewReader(logs), 10)
	_, _ = src.Next()
	r, err := src.Next()
	if err != nil || r.Arrival != 3 || r.PromptTokens != 90 || r.OutputTokens != 12 {
		t.Errorf("log line: %+v %v (want arrival 30 s / speedup 10 = 3 s)", r, err)
	}

	// Sub-second log times keep their fraction: 10:00:00.250 to 10:00:01.750
	// is 1.5 s apart.
	logs = `2025-06-01T10:00:00.250Z prompt_tokens=8 completion_tokens=2
2025-06-01T10:00:01.750Z prompt_tokens=9 completion_tokens=3
`
	src, _ = NewLineSource(strings.NewReader(logs), 1)
	_, _ = src.Next()
	if r, err := src.Next(); err != nil || math.Abs(r.Arrival-1.5) > 1e-9 {
		t.Errorf("sub-second log line: %+v %v (want arrival 1.5 s)", r, err)
	}

	for in, want := range map[string]string{
		"{\"arrival_s\":1}\n":                                        "line 1: a JSON request needs",
		"\n\nhello world\n":                                          "line 3: not a request",
		"prompt_tokens=5 completion_tokens=3\n":                      "no arrival time",
		"{\"arrival_s\":-1,\"prompt_tokens\":1,\"output_tokens\":1}": "must not be negative",
	} {
		src, _ := NewLineSource(strings.NewReader(in), 0)
		if _, err := src.Next(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}
