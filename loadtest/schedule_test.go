package loadtest

import (
	"bytes"
	"compress/gzip"
	"math"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/slo"
)

func take(t *testing.T, s Schedule, n int) []Item {
	t.Helper()
	var out []Item
	for range n {
		it, ok, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, it)
	}
	return out
}

func TestParseBursts(t *testing.T) {
	b, err := ParseBursts("5x100@2s, 50x30000@60ms")
	if err != nil {
		t.Fatal(err)
	}
	want := []Burst{{50, 30000, 60 * time.Millisecond}, {5, 100, 2 * time.Second}}
	if len(b) != 2 || b[0] != want[0] || b[1] != want[1] {
		t.Errorf("got %+v, want %+v (sorted by time)", b, want)
	}
	for _, bad := range []string{"50x30000", "0x10@1s", "5x0@1s", "5x10@-1s", "5x10@soon", "x10@1s"} {
		if _, err := ParseBursts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestSyntheticConstant: 4/s constant is one request every 250 ms; the
// burst of 3 at 600 ms goes between the arrivals at 500 and 750 ms.
func TestSyntheticConstant(t *testing.T) {
	s := &Synthetic{Rate: 4, Arrival: ArrivalConstant, Prompt: 10, Output: 3,
		Bursts: []Burst{{Count: 3, Prompt: 999, At: 600 * time.Millisecond}}}
	got := take(t, s, 7)
	ms := time.Millisecond
	want := []Item{{250 * ms, 10, 3}, {500 * ms, 10, 3}, {600 * ms, 999, 3}, {600 * ms, 999, 3}, {600 * ms, 999, 3}, {750 * ms, 10, 3}, {1000 * ms, 10, 3}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestSyntheticPoisson: exponential gaps of mean 1/R. Over 20000 arrivals
// at 10/s the mean gap is 100 ms with a standard error of 100/sqrt(20000)
// = 0.7 ms, so ±3 ms is over four standard errors; the standard deviation
// of an exponential equals its mean (100 ms, same bound ×2). The same seed
// gives the same times.
func TestSyntheticPoisson(t *testing.T) {
	const n = 20000
	items := take(t, &Synthetic{Rate: 10, Prompt: 1, Output: 1, Seed: 7}, n)
	var sum, sq float64
	prev := time.Duration(0)
	for _, it := range items {
		g := (it.Due - prev).Seconds() * 1000
		prev = it.Due
		sum += g
		sq += g * g
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-100) > 3 || math.Abs(sd-100) > 6 {
		t.Errorf("gap mean %.2f ms, sd %.2f ms; want 100 ± 3, 100 ± 6", mean, sd)
	}
	again := take(t, &Synthetic{Rate: 10, Prompt: 1, Output: 1, Seed: 7}, 5)
	for i := range again {
		if again[i] != items[i] {
			t.Fatalf("seed 7 gave %v then %v", items[i], again[i])
		}
	}
}

// The log: three requests in second :00, one in :02 (as JSON usage), a
// line going back to :01 and one without a time (both sent with :02's),
// and a line without counts (skipped).
const replayLog = `2026-11-20T10:00:00Z input_tokens=100 output_tokens=10
2026-11-20T10:00:00Z input_tokens=200 output_tokens=20
2026-11-20T10:00:00Z input_tokens=300 output_tokens=30
2026-11-20 10:00:02 {"usage": {"prompt_tokens": 400, "completion_tokens": 40}}
2026-11-20T10:00:01Z input_tokens=500 output_tokens=50
output_tokens=60
2026-11-20T10:00:02Z health check ok
`

// TestReplay: the three requests of :00 are spread over that second (0,
// 1/3, 2/3 s); :02 holds three (its own, the late :01 and the untimed
// one) at 2, 2+1/3, 2+2/3 s; at speedup 2 every time halves. The untimed
// line's missing prompt takes the default (77).
func TestReplay(t *testing.T) {
	for _, gz := range []bool{false, true} {
		in := []byte(replayLog)
		if gz {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(in)
			w.Close()
			in = b.Bytes()
		}
		p, err := NewReplay(bytes.NewReader(in), 2)
		if err != nil {
			t.Fatal(err)
		}
		p.DefaultPrompt, p.DefaultOutput = 77, 88
		got := take(t, p, 100)
		third := time.Second / 3
		want := []Item{
			{0, 100, 10}, {third / 2, 200, 20}, {2 * third / 2, 300, 30},
			{time.Second, 400, 40}, {(2*time.Second + third) / 2, 500, 50}, {(2*time.Second + 2*third) / 2, 77, 60},
		}
		if len(got) != len(want) {
			t.Fatalf("gzip %v: %d items %+v, want %d", gz, len(got), got, len(want))
		}
		for i := range want {
			if d := got[i].Due - want[i].Due; d < -time.Microsecond || d > time.Microsecond || got[i].Prompt != want[i].Prompt || got[i].Output != want[i].Output {
				t.Errorf("gzip %v: item %d = %+v, want %+v", gz, i, got[i], want[i])
			}
		}
		if p.OutOfOrder != 1 || p.Skipped != 1 {
			t.Errorf("out of order %d, skipped %d; want 1, 1", p.OutOfOrder, p.Skipped)
		}
	}
}

// TestReplayUntimed: a log without times takes its due times from Untimed.
func TestReplayUntimed(t *testing.T) {
	p, err := NewReplay(strings.NewReader("input_tokens=5 output_tokens=6\nprompt_tokens=7 completion_tokens=8\n"), 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Untimed = &Synthetic{Rate: 2, Arrival: ArrivalConstant}
	got := take(t, p, 10)
	want := []Item{{500 * time.Millisecond, 5, 6}, {time.Second, 7, 8}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// FuzzReplay: any log yields a bounded number of items whose due times
// never go back, without panicking.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(replayLog))
	f.Add([]byte("INFO 06-20 12:34:56 Received request x: prompt: 'a', params: SamplingParams(max_tokens=7), prompt_token_ids: [1, 2, 3]\n"))
	f.Add([]byte("ts=1700000000 prompt_tokens=3\nts=1699999999 prompt_tokens=4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := NewReplay(bytes.NewReader(b), 3)
		if err != nil {
			return
		}
		p.DefaultPrompt, p.DefaultOutput = 1, 1
		prev := time.Duration(-1)
		for i := 0; ; i++ {
			it, ok, err := p.Next()
			if err != nil || !ok {
				return
			}
			if i > len(b) {
				t.Fatalf("%d items from %d bytes", i, len(b))
			}
			if it.Due < prev || it.Prompt <= 0 || it.Output <= 0 {
				t.Fatalf("item %d %+v after due %v", i, it, prev)
			}
			prev = it.Due
		}
	})
}

// FuzzFlags: the --slo and --burst parsers take any text.
func FuzzFlags(f *testing.F) {
	for _, s := range []string{"ttft_p99=2s,tpot_p99=100ms", "error_rate=1%", "50x30000@60s,1x1@0s", "=,", "e2e_max=1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if slos, err := slo.Parse(s); err == nil {
			for _, x := range slos {
				if x.Metric != "error_rate" && x.Limit <= 0 {
					t.Fatalf("%q: bound %v", s, x.Limit)
				}
			}
		}
		if bs, err := ParseBursts(s); err == nil {
			for _, b := range bs {
				if b.Count <= 0 || b.Prompt <= 0 || b.At < 0 {
					t.Fatalf("%q: burst %+v", s, b)
				}
			}
		}
	})
}

// TestReplaySubsecond: a log with fractions of a second keeps its own
// times (0, 0.25 and 1.5 s after the first line, at speedup 1); the line
// without a time goes with the line before it.
func TestReplaySubsecond(t *testing.T) {
	p, err := NewReplay(strings.NewReader(`2026-11-20T10:00:00.100Z input_tokens=1 output_tokens=1
2026-11-20T10:00:00.350Z input_tokens=2 output_tokens=1
2026-11-20T10:00:01.600Z input_tokens=3 output_tokens=1
input_tokens=4 output_tokens=1
`), 1)
	if err != nil {
		t.Fatal(err)
	}
	got := take(t, p, 10)
	ms := time.Millisecond
	want := []time.Duration{0, 250 * ms, 1500 * ms, 1500 * ms}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if d := got[i].Due - w; d < -time.Microsecond || d > time.Microsecond || got[i].Prompt != int64(i+1) {
			t.Errorf("item %d = %+v, want due %v", i, got[i], w)
		}
	}
}
