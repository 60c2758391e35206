package workload

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func take(t *testing.T, s Stream, n int) []Request {
	t.Helper()
	var out []Request
	for len(out) < n {
		r, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func osOpen(name string) (io.ReadCloser, error) { return os.Open(name) }

func open(t *testing.T, s Spec) Stream {
	t.Helper()
	st, _, err := s.Open(osOpen)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestParseDistAndBurst(t *testing.T) {
	for in, want := range map[string]string{"fixed:7": "fixed:7", "12": "fixed:12", "uniform:16-2000": "uniform:16-2000"} {
		d, err := ParseDist(in)
		if err != nil || d.String() != want {
			t.Errorf("%s: %v %v", in, d, err)
		}
	}
	for _, bad := range []string{"uniform:9-3", "normal:5", "fixed:-1", "uniform:a-b", "99999999999"} {
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
	spec := Spec{Rate: 20, Duration: 1000, Prompt: Uniform{16, 2000}, Output: Fixed(5), Bursts: []Burst{{3, 9000, 500}}, Seed: 1}
	a, b := take(t, open(t, spec), 1e6), take(t, open(t, spec), 1e6)
	if len(a) != len(b) || a[len(a)/2] != b[len(b)/2] {
		t.Fatal("same seed, different streams")
	}
	if n := len(a) - 3; math.Abs(float64(n)-20000) > 5*141 {
		t.Errorf("%d Poisson arrivals, want about 20000", n)
	}
	burst := 0
	for i, r := range a {
		if i > 0 && r.At < a[i-1].At {
			t.Fatalf("unsorted at %d", i)
		}
		if r.Prompt < 16 || r.Prompt > 2000 {
			if r.Prompt != 9000 || r.At != 500 {
				t.Errorf("request %+v outside the distribution", r)
			}
			burst++
		}
	}
	if burst != 3 {
		t.Errorf("burst requests: %d, want 3", burst)
	}
}

// Constant arrivals at 4 req/s are due at 0.25, 0.5, 0.75 ...; a closed
// loop without a rate has every request due at 0; without a bound a
// synthetic workload is vllm bench serve's 1000 requests.
func TestArrivals(t *testing.T) {
	got := take(t, open(t, Spec{Rate: 4, Arrival: Constant, NumRequests: 3, Prompt: Fixed(1), Output: Fixed(1)}), 10)
	if len(got) != 3 || got[0].At != 0.25 || got[1].At != 0.5 || got[2].At != 0.75 {
		t.Errorf("constant: %+v", got)
	}
	got = take(t, open(t, Spec{Concurrency: 8, Prompt: Fixed(1), Output: Fixed(1)}), 2000)
	if len(got) != DefaultNumRequests || got[999].At != 0 {
		t.Errorf("closed loop: %d requests, the last due at %v", len(got), got[len(got)-1].At)
	}
	got = take(t, open(t, Spec{Rate: math.Inf(1), NumRequests: 5, Prompt: Fixed(1), Output: Fixed(1)}), 10)
	if len(got) != 5 || got[4].At != 0 {
		t.Errorf("inf: %+v", got)
	}
}

// Gamma gaps of shape k and mean 1/rate have variance 1/(k × rate²): at
// rate 10, shape 0.25 (bursty) the gaps' coefficient of variation is 2,
// at shape 4 it is 0.5; the mean stays 0.1 s.
func TestBurstiness(t *testing.T) {
	for _, k := range []float64{0.25, 1, 4} {
		rs := take(t, open(t, Spec{Rate: 10, Burstiness: k, NumRequests: 200000, Prompt: Fixed(1), Output: Fixed(1), Seed: 7}), 200000)
		var sum, sq, prev float64
		for _, r := range rs {
			g := r.At - prev
			prev = r.At
			sum += g
			sq += g * g
		}
		n := float64(len(rs))
		mean := sum / n
		cv := math.Sqrt(sq/n-mean*mean) / mean
		if math.Abs(mean-0.1) > 0.002 || math.Abs(cv-1/math.Sqrt(k)) > 0.03/math.Sqrt(k) {
			t.Errorf("shape %g: mean gap %.4f, cv %.3f; want 0.1 and %.3f", k, mean, cv, 1/math.Sqrt(k))
		}
	}
}

// --range-ratio 0.5 around 1000 draws uniformly from 500 to 1500, as
// vllm bench serve's random dataset does; a prefix of 64 is added in
// front of every prompt and shared.
func TestRangeRatioAndPrefix(t *testing.T) {
	rs := take(t, open(t, Spec{Rate: math.Inf(1), NumRequests: 20000, Prompt: RangeOf(1000, 0.5), Output: RangeOf(100, 0.5), PrefixTokens: 64, Seed: 3}), 20000)
	lo, hi, sum := 1<<30, 0, 0
	for _, r := range rs {
		p := r.Prompt - 64
		lo, hi, sum = min(lo, p), max(hi, p), sum+p
		if r.PrefixID != 1 || r.PrefixTokens != 64 || r.Output < 50 || r.Output > 150 {
			t.Fatalf("%+v", r)
		}
	}
	if lo != 500 || hi != 1500 || math.Abs(float64(sum)/20000-1000) > 5 {
		t.Errorf("prompts %d..%d mean %.1f, want 500..1500 mean 1000", lo, hi, float64(sum)/20000)
	}
}

// The quantile distribution of p50 = 100, p90 = 1000 (and 0 → 10,
// 1 → 2000): a quarter of the draws fall below (10 + 100) / 2 = 55, the
// midpoint of the first segment; its mean is 0.5 × 55 + 0.4 × 550 + 0.1 ×
// 1500 = 397.5.
func TestQuantileDist(t *testing.T) {
	d := Quantile{Points: []QuantilePoint{{0, 10}, {0.5, 100}, {0.9, 1000}, {1, 2000}}}
	if d.Mean() != 397.5 {
		t.Errorf("mean %v", d.Mean())
	}
	rs := take(t, open(t, Spec{Rate: 1000, Duration: 100, Prompt: d, Output: Fixed(1), Seed: 3}), 1e6)
	below := 0
	for _, r := range rs {
		if r.Prompt <= 55 {
			below++
		}
	}
	if f := float64(below) / float64(len(rs)); math.Abs(f-0.25) > 0.01 {
		t.Errorf("share below 55: %.3f, want 0.25", f)
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayJSONLines(t *testing.T) {
	log := writeTemp(t, "r.jsonl", `{"id":"a","arrival_s":0,"prompt_tokens":100,"output_tokens":10}

{"arrival_s":1.5,"prompt_tokens":50,"output_tokens":5,"prefix_id":3,"prefix_tokens":32}
`)
	// Speedup 0.5 stretches time: 1.5 s becomes 3 s.
	rs := take(t, open(t, Spec{Log: log, Speedup: 0.5}), 10)
	if len(rs) != 2 || rs[0].ID != "a" || rs[1].ID != "line-3" || rs[1].At != 3 || rs[1].PrefixID != 3 || rs[1].PrefixTokens != 32 || rs[1].Prompt != 50 {
		t.Errorf("%+v", rs)
	}
	bad := writeTemp(t, "bad.jsonl", `{"arrival_s":-1,"prompt_tokens":1,"output_tokens":1}`)
	if _, _, err := (Spec{Log: bad, Speedup: 1}).Open(osOpen); err == nil || !strings.Contains(err.Error(), "not negative") {
		t.Errorf("negative arrival: %v", err)
	}
}

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
// line's missing prompt is drawn from the Spec's prompt lengths (77).
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
		rp, err := newReplay(bytes.NewReader(in), 2, Fixed(77), Fixed(88), newRand(1, 3))
		if err != nil {
			t.Fatal(err)
		}
		got := take(t, rp, 100)
		third := 1.0 / 3
		want := []Request{
			{At: 0, Prompt: 100, Output: 10}, {At: third / 2, Prompt: 200, Output: 20}, {At: 2 * third / 2, Prompt: 300, Output: 30},
			{At: 1, Prompt: 400, Output: 40}, {At: (2 + third) / 2, Prompt: 500, Output: 50}, {At: (2 + 2*third) / 2, Prompt: 77, Output: 60},
		}
		if len(got) != len(want) {
			t.Fatalf("gzip %v: %d requests %+v, want %d", gz, len(got), got, len(want))
		}
		for i := range want {
			if math.Abs(got[i].At-want[i].At) > 1e-9 || got[i].Prompt != want[i].Prompt || got[i].Output != want[i].Output {
				t.Errorf("gzip %v: request %d = %+v, want %+v", gz, i, got[i], want[i])
			}
		}
		if rp.OutOfOrder != 1 || rp.Skipped != 1 {
			t.Errorf("out of order %d, skipped %d; want 1, 1", rp.OutOfOrder, rp.Skipped)
		}
	}
}

// TestReplaySubsecond: a log with fractions of a second keeps its own
// times (0, 0.25 and 1.5 s after the first line, at speedup 1); the line
// without a time goes with the line before it.
func TestReplaySubsecond(t *testing.T) {
	log := writeTemp(t, "r.log", `2026-11-20T10:00:00.100Z input_tokens=1 output_tokens=1
2026-11-20T10:00:00.350Z input_tokens=2 output_tokens=1
2026-11-20T10:00:01.600Z input_tokens=3 output_tokens=1
input_tokens=4 output_tokens=1
`)
	got := take(t, open(t, Spec{Log: log, Speedup: 1}), 10)
	want := []float64{0, 0.25, 1.5, 1.5}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if math.Abs(got[i].At-w) > 1e-6 || got[i].Prompt != i+1 {
			t.Errorf("request %d = %+v, want due %v", i, got[i], w)
		}
	}
}

// A log without times takes the Spec's arrivals (its sizes at --rate), and
// without a rate or a closed loop cannot be replayed.
func TestReplayUntimed(t *testing.T) {
	log := writeTemp(t, "r.log", "input_tokens=5 output_tokens=6\nprompt_tokens=7 completion_tokens=8\n")
	got := take(t, open(t, Spec{Log: log, Speedup: 1, Rate: 2, Arrival: Constant}), 10)
	if len(got) != 2 || got[0].At != 0.5 || got[0].Prompt != 5 || got[1].At != 1 || got[1].Output != 8 {
		t.Errorf("got %+v", got)
	}
	if _, _, err := (Spec{Log: log, Speedup: 1}).Open(osOpen); err == nil || !strings.Contains(err.Error(), "--rate or --concurrency") {
		t.Errorf("untimed without a rate: %v", err)
	}
}

// Every way to spell a workload wrong is one line naming the flag.
func TestBadSpecs(t *testing.T) {
	f := Fixed(10)
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Prompt: f, Output: f}, "no traffic"},
		{Spec{Rate: -1, Prompt: f, Output: f}, "--rate"},
		{Spec{Rate: 1e12, Duration: 1, Prompt: f, Output: f}, "1 trillion requests: at most 10000000"},
		{Spec{Rate: 5, NumRequests: 20_000_000, Prompt: f, Output: f}, "at most 10000000"},
		{Spec{Rate: 5, Arrival: "uniform", Prompt: f, Output: f}, "--arrival"},
		{Spec{Rate: 5, Burstiness: -1, Prompt: f, Output: f}, "--burstiness"},
	} {
		if err := c.spec.Validate(); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func flags(t *testing.T, args ...string) (Spec, Read, error) {
	t.Helper()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Spec(fs, func(name string) (io.ReadCloser, error) { return os.Open(name) })
}

func TestFlags(t *testing.T) {
	s, _, err := flags(t, "--rate", "inf", "--num-requests", "500", "--prompt-tokens", "4000", "--output-tokens", "200", "--range-ratio", "0.1")
	if err != nil || !math.IsInf(s.Rate, 1) || s.NumRequests != 500 || s.Prompt != (Uniform{3600, 4400}) || s.Output != (Uniform{180, 220}) {
		t.Errorf("%+v %v", s, err)
	}
	// vllm bench serve's names are ours.
	s, _, err = flags(t, "--request-rate", "4", "--num-prompts", "20", "--random-input-len", "100", "--random-output-len", "10", "--random-range-ratio", "0.5", "--max-concurrency", "2")
	if err != nil || s.Rate != 4 || s.NumRequests != 20 || s.Prompt != (Uniform{50, 150}) || s.Output != (Uniform{5, 15}) || s.Concurrency != 2 {
		t.Errorf("bench names: %+v %v", s, err)
	}
	s, rd, err := flags(t, "--concurrency", "4", "--input-tokens", "uniform:10-20", "--output-tokens", "5")
	if err != nil || s.Prompt != (Uniform{10, 20}) || len(rd.Notices) != 1 || !strings.Contains(rd.Notices[0], "--prompt-tokens") {
		t.Errorf("old spelling: %+v %+v %v", s, rd, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency must be 1 or more"},
		{[]string{"--rate", "1", "--range-ratio", "-0.5"}, "--range-ratio -0.5"},
		{[]string{"--rate", "1", "--prompt-tokens", "uniform:1-9", "--range-ratio", "0.2"}, "around fixed lengths"},
		{[]string{"--concurrency", "2", "--burst", "5x5@1s"}, "open loop"},
		{[]string{"--rate", "1", "--prompt-tokens", "normal:5"}, "token length"},
		{[]string{"--bench", "vllm bench serve --dataset-name sharegpt", "--rate", "2"}, "give one"},
	} {
		if _, _, err := flags(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	// A profile file gives both lengths.
	prof := writeTemp(t, "p.json", `{"input_tokens":{"count":10,"mean":120,"p50":100,"p90":200,"p99":300,"max":400},"output_tokens":{"count":10,"mean":12,"p50":10,"p90":20,"p99":30,"max":40}}`)
	s, _, err = flags(t, "--rate", "1", "--prompt-tokens", prof, "--output-tokens", prof)
	if err != nil || !strings.HasSuffix(s.Prompt.String(), "input_tokens") || !strings.HasSuffix(s.Output.String(), "output_tokens") {
		t.Errorf("profile: %v %v %v", s.Prompt, s.Output, err)
	}
}

func TestParseBench(t *testing.T) {
	b, err := ParseBench(`vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --model Qwen/Qwen3-14B --dataset-name random \
  --random-input-len 4000 --random-output-len 200 --num-prompts 500 --seed 42 --ignore-eos --percentile-metrics ttft,tpot`)
	if err != nil {
		t.Fatal(err)
	}
	s := b.Spec
	if b.Model != "Qwen/Qwen3-14B" || b.Backend != "openai-chat" || *b.Seed != 42 || !math.IsInf(s.Rate, 1) || s.NumRequests != 500 ||
		s.Prompt != Fixed(4000) || s.Output != Fixed(200) || s.Concurrency != 0 {
		t.Errorf("%+v %+v", b, s)
	}
	b, err = ParseBench("--model m --request-rate 4 --burstiness 0.5 --max-concurrency 16 --random-range-ratio 0.25 --random-prefix-len 100")
	if err != nil || b.Spec.Rate != 4 || b.Spec.Burstiness != 0.5 || b.Spec.Concurrency != 16 || b.Spec.Prompt != (Uniform{768, 1280}) || b.Spec.PrefixTokens != 100 || b.Spec.NumRequests != 1000 {
		t.Errorf("%+v %v", b.Spec, err)
	}
	for in, want := range map[string]string{
		"vllm bench serve --dataset-name sonnet --dataset-path x.txt": "--dataset-name sonnet: headroom replays the random, sharegpt or custom datasets",
		"vllm bench serve --dataset-name custom":                      "--dataset-name custom needs --dataset-path FILE",
		"vllm bench serve --frobnicate 3 --zap":                       "--frobnicate, --zap not known",
		"vllm bench serve --use-beam-search":                          "--use-beam-search (beam search): traffic headroom does not send",
		"vllm bench serve --goodput ttft:2000 itl:5":                  `--goodput "itl:5": the targets are ttft, tpot and e2el`,
		"vllm bench serve --goodput":                                  "--goodput needs a value",
		"vllm bench serve --metric-percentiles 50,101":                "--metric-percentiles",
		"vllm bench serve --percentile-metrics ttft,e2e":              "--percentile-metrics",
		"vllm bench serve --random-range-ratio -0.1":                  "--random-range-ratio -0.1",
		"vllm bench serve --num-prompts 0":                            "--num-prompts 0",
		"vllm bench serve --request-rate fast":                        "not a number",
		"vllm serve m":                                                "want a 'vllm bench serve",
		"vllm bench serve --model 'unterminated":                      "--bench",
		"vllm bench serve --max-concurrency 0":                        "--max-concurrency 0",
	} {
		if _, err := ParseBench(in); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// A trace read back as a request log replays the requests it recorded at
// the times they were sent.
func TestTraceReplays(t *testing.T) {
	name := t.TempDir() + "/trace.jsonl"
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	tw := NewTraceWriter(f)
	due := 0.5
	tw.Write(Trace{ID: "a", Arrival: 0.25, FirstToken: 0.3, Finish: 0.9, Prompt: 100, Output: 10})
	tw.Write(Trace{ID: "b", Due: &due, Arrival: 0.75, FirstToken: 0.8, Finish: 1.2, Prompt: 200, Output: 20, Error: "timeout"})
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	got := take(t, open(t, Spec{Log: name, Speedup: 1}), 10)
	if len(got) != 2 || got[0].ID != "a" || got[0].At != 0.25 || got[0].Prompt != 100 || got[1].At != 0.75 || got[1].Output != 20 {
		t.Errorf("replayed %+v", got)
	}
}

// A day's rate from 2 to 40 req/s: over 24 h the mean is (2 + 40) / 2 =
// 21 req/s, so 1,814,400 requests expected. The rate is 2 + 38 × (1 −
// cos 2πx)/2 at x days; cos 2πx averages sin(2πh)/(2πh) over [−h, h]
// and −sin(2πh)/(2πh) over [1/2 − h, 1/2 + h]. The hour around noon (h =
// 1/48): 2 + 38 × (1 + 0.997147)/2 = 39.946 req/s; the first hour (the
// mean over [0, 1/24] is that over [−1/24, 1/24]): 2 + 38 × (1 −
// 0.988616)/2 = 2.2163 req/s.
func TestDiurnalRate(t *testing.T) {
	spec := Spec{Rate: 2, PeakRate: 40, Duration: 24 * 3600, Prompt: Fixed(1), Output: Fixed(1), Seed: 5}
	st, _, err := spec.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	var n, peak, first int
	for {
		r, err := st.Next()
		if err != nil {
			break
		}
		n++
		switch {
		case r.At < 3600:
			first++
		case r.At >= 11.5*3600 && r.At < 12.5*3600:
			peak++
		}
	}
	// Poisson counts: within 4 standard deviations (√N).
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"day", float64(n), 1814400}, {"peak hour", float64(peak), 39.946 * 3600}, {"first hour", float64(first), 2.2163 * 3600}} {
		if math.Abs(c.got-c.want) > 4*math.Sqrt(c.want) {
			t.Errorf("%s: %.0f requests, want %.0f ± %.0f", c.name, c.got, c.want, 4*math.Sqrt(c.want))
		}
	}
	if got := spec.RateAt(12 * 3600); got != 40 {
		t.Errorf("rate at noon %g, want 40", got)
	}
	for _, bad := range []Spec{
		{Rate: 50, PeakRate: 40, Prompt: Fixed(1), Output: Fixed(1)},
		{Rate: 2, PeakRate: 40, Arrival: Constant, Prompt: Fixed(1), Output: Fixed(1)},
		{Rate: 2, PeakRate: 40, Burstiness: 0.5, Prompt: Fixed(1), Output: Fixed(1)},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// Token counts read the k suffix as --max-model-len does (vLLM's
// human_readable_int: k = 1000, K = 1024): --prompt-tokens 2k is 2000.
func TestTokenSuffix(t *testing.T) {
	s, _, err := flags(t, "--rate", "1", "--prompt-tokens", "2k", "--output-tokens", "uniform:1k-2K", "--prefix-tokens", "1.5k", "--burst", "5x30k@1s")
	if err != nil {
		t.Fatal(err)
	}
	if s.Prompt != Fixed(2000) || s.Output != (Uniform{1000, 2048}) || s.PrefixTokens != 1500 || s.Bursts[0].Tokens != 30000 {
		t.Errorf("%v %v %d %+v", s.Prompt, s.Output, s.PrefixTokens, s.Bursts)
	}
	b, err := ParseBench("vllm bench serve --random-input-len 4k --random-output-len 200")
	if err != nil || b.Spec.Prompt != Fixed(4000) {
		t.Errorf("bench: %v %v", b.Spec.Prompt, err)
	}
	for _, bad := range []string{"2x", "k", "-1k", "20000000k"} {
		if _, err := ParseDist(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// The command issue 30 pasted, refused before: --goodput's space-separated
// targets, the percentile flags and output flags that change no request.
func TestBenchOutputFlags(t *testing.T) {
	b, err := ParseBench(`vllm bench serve --model Qwen/Qwen3-8B --dataset-name random --random-input-len 2000 --num-prompts 200 \
  --goodput ttft:2000 tpot:50 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99.9 --save-result --result-dir /tmp \
  --temperature 0 --metadata a=1 b=2 --lora-modules x y --ready-check-timeout-sec 0`)
	if err != nil {
		t.Fatal(err)
	}
	o := b.Output
	if o.Goodput.String() != "ttft:2000 tpot:50" || strings.Join(o.Metrics, ",") != "ttft,tpot,itl,e2el" || len(o.Percentiles) != 3 || o.Percentiles[2] != 99.9 {
		t.Errorf("%+v", o)
	}
	if len(b.Notices) != 1 || !strings.Contains(b.Notices[0], "--lora-modules") {
		t.Errorf("notices %v", b.Notices)
	}
	if d := DefaultBenchOutput(); strings.Join(d.Metrics, ",") != "ttft,tpot,itl" || len(d.Percentiles) != 1 || d.Percentiles[0] != 99 || d.Goodput != nil {
		t.Errorf("defaults %+v", d)
	}
	// As flags of simulate and loadtest, and beside --bench (where they win).
	_, rd, err := flags(t, "--rate", "1", "--goodput", "ttft:2000,e2el:9000", "--metric-percentiles", "25,75")
	if err != nil || rd.Output.Goodput.String() != "ttft:2000 e2el:9000" || rd.Output.Percentiles[1] != 75 {
		t.Errorf("%+v %v", rd.Output, err)
	}
	_, rd, err = flags(t, "--bench", "--goodput ttft:1 --metric-percentiles 10", "--metric-percentiles", "20")
	if err != nil || rd.Output.Goodput.String() != "ttft:1" || rd.Output.Percentiles[0] != 20 {
		t.Errorf("%+v %v", rd.Output, err)
	}
	// A request meets goodput when every target holds; TPOT 0 (one output
	// token) meets any.
	g := Goodput{{"ttft", 2000}, {"tpot", 50}}
	if !g.Meets(2000, 0, 1e9) || g.Meets(2000.1, 10, 0) || g.Meets(10, 51, 0) {
		t.Error("Meets")
	}
	if PercentileLabel(99) != "P99" || PercentileLabel(99.9) != "P99.9" {
		t.Error("labels")
	}
	// A summary has p50, p90, p95, p99 and the max: only others are asked
	// of a run.
	if e := (BenchOutput{Percentiles: []float64{25, 50, 99.9, 100, 25}}).Extra(); fmt.Sprint(e) != "[25 99.9]" || DefaultBenchOutput().Extra() != nil {
		t.Errorf("extra %v", e)
	}
}

// The endpoint a traffic calls: bench's default backend posts to
// /v1/completions, openai-chat to /v1/chat/completions; --endpoint names
// it as bench does or as loadtest always did, and beside --bench wins.
func TestEndpoint(t *testing.T) {
	for cmd, want := range map[string]string{
		"vllm bench serve --model m":                                                         EndpointCompletions,
		"vllm bench serve --backend vllm --endpoint /v1/completions":                         EndpointCompletions,
		"vllm bench serve --backend openai-chat --endpoint /v1/chat/completions":             EndpointChat,
		"vllm bench serve --backend openai --endpoint /v1/chat/completions --num-prompts 10": EndpointChat,
	} {
		b, err := ParseBench(cmd)
		if err != nil || b.Spec.Endpoint != want || b.Spec.Chat() != (want == EndpointChat) {
			t.Errorf("%s: %q %v, want %q", cmd, b.Spec.Endpoint, err, want)
		}
	}
	if _, err := ParseBench("vllm bench serve --endpoint /v1/embeddings"); err == nil || !strings.Contains(err.Error(), `--endpoint "/v1/embeddings": use completions or chat`) {
		t.Errorf("embeddings: %v", err)
	}
	s, _, err := flags(t, "--rate", "1")
	if err != nil || s.Endpoint != EndpointCompletions || strings.Contains(s.Describe(), "chat") {
		t.Errorf("default: %q %v", s.Endpoint, err)
	}
	s, _, err = flags(t, "--rate", "1", "--endpoint", "chat")
	if err != nil || !s.Chat() || !strings.HasSuffix(s.Describe(), "to /v1/chat/completions") {
		t.Errorf("chat: %q %q %v", s.Endpoint, s.Describe(), err)
	}
	s, _, err = flags(t, "--bench", "--backend openai-chat --endpoint /v1/chat/completions", "--endpoint", "/v1/completions")
	if err != nil || s.Chat() {
		t.Errorf("--endpoint beside --bench: %q %v", s.Endpoint, err)
	}
	if _, _, err = flags(t, "--rate", "1", "--endpoint", "embeddings"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad endpoint: %v", err)
	}
	if err := (Spec{Rate: 1, Prompt: Fixed(1), Output: Fixed(1), Endpoint: "x"}).Validate(); err == nil {
		t.Error("a Spec of endpoint x validated")
	}
}

// A vLLM log says which endpoint each request called (its request ids),
// a JSON line in its "endpoint": each request calls its own, the others
// the Spec's, and the note counts those that call another than the Spec's.
func TestLogRequestsCallTheirOwnEndpoint(t *testing.T) {
	log := writeTemp(t, "vllm.log", `INFO 06-20 12:34:56 [logger.py:41] Received request chatcmpl-1: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 100, lora_request: None.
INFO 06-20 12:34:57 [logger.py:41] Received request chatcmpl-2: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 200, lora_request: None.
INFO 06-20 12:34:58 [logger.py:41] Received request cmpl-3-0: params: SamplingParams(n=1, max_tokens=64), num_prompt_tokens: 300, lora_request: None.
{"arrival_s": 3, "prompt_tokens": 10, "output_tokens": 5}
{"arrival_s": 4, "prompt_tokens": 10, "output_tokens": 5, "endpoint": "/v1/chat/completions"}
`)
	for _, c := range []struct {
		endpoint, note string
	}{
		{"", "request log: 3 called /v1/chat/completions (their lines say so"},
		{EndpointChat, "request log: 1 called /v1/completions (their lines say so"},
	} {
		st := open(t, Spec{Log: log, Speedup: 1, Endpoint: c.endpoint})
		got := take(t, st, 10)
		var ends []string
		for _, r := range got {
			ends = append(ends, r.Endpoint)
		}
		if want := []string{EndpointChat, EndpointChat, EndpointCompletions, "", EndpointChat}; !slices.Equal(ends, want) {
			t.Fatalf("endpoints %q, want %q", ends, want)
		}
		if n := LogNote(st); !strings.HasPrefix(n, c.note) {
			t.Errorf("endpoint %q: note %q, want %q", c.endpoint, n, c.note)
		}
	}
	bad := writeTemp(t, "bad.jsonl", `{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "endpoint": "embeddings"}`+"\n")
	if _, _, err := (Spec{Log: bad, Speedup: 1}).Open(osOpen); err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "use completions or chat") {
		t.Errorf("a bad endpoint: %v", err)
	}
}

// A burst is added on top of the traffic it is given with: --rate 5
// --num-requests 100 --burst 50x30000@60s is the 100 Poisson requests
// (100 at 5 req/s end near 20 s: the burst comes after them) and then the
// 50 prompts of 30,000 tokens at 60 s, 150 in all; at 10 s the burst lands
// among the Poisson requests and still adds 50. With --duration 30s a
// burst at 60 s would come after the traffic ends, which is refused, not
// dropped; at 20 s it is 5 × 30 = 150 (± 5 × √150 ≈ 61) Poisson requests
// and the 50 of the burst.
func TestBurstOnTop(t *testing.T) {
	for _, at := range []float64{60, 10} {
		spec := Spec{Rate: 5, NumRequests: 100, Prompt: Fixed(1024), Output: Fixed(128), Bursts: []Burst{{50, 30000, at}}, Seed: 1}
		reqs := take(t, open(t, spec), 1e6)
		big := 0
		for _, r := range reqs {
			if r.Prompt == 30000 {
				big++
				if r.At != at {
					t.Errorf("burst at %g: a burst request due at %g", at, r.At)
				}
			}
		}
		if len(reqs) != 150 || big != 50 {
			t.Errorf("burst at %gs: %d requests, %d of 30000 tokens; want 150 and 50", at, len(reqs), big)
		}
	}
	late := Spec{Rate: 5, Duration: 30, Prompt: Fixed(1024), Output: Fixed(128), Bursts: []Burst{{50, 30000, 60}}}
	if err := late.Validate(); err == nil || !strings.Contains(err.Error(), "--burst 50x30000@1m0s comes after the traffic ends (--duration 30s)") {
		t.Errorf("a burst past --duration: %v", err)
	}
	within := late
	within.Bursts = []Burst{{50, 30000, 20}}
	reqs := take(t, open(t, within), 1e6)
	if n := len(reqs) - 50; math.Abs(float64(n)-150) > 5*math.Sqrt(150) || reqs[len(reqs)-1].At > 30 {
		t.Errorf("--duration 30s with a burst at 20 s: %d requests besides the burst's", n)
	}
	logged := Spec{Log: "requests.jsonl", Speedup: 1, Bursts: []Burst{{5, 100, 1}}}
	if err := logged.Validate(); err == nil || !strings.Contains(err.Error(), "not with --requests") {
		t.Errorf("a burst with a log: %v", err)
	}
	// Without a burst, the bound cuts the same stream as before: the
	// first requests of a bounded and of an unbounded traffic agree.
	a := take(t, open(t, Spec{Rate: 5, NumRequests: 10, Prompt: Uniform{1, 100}, Output: Fixed(8), Seed: 3}), 1e6)
	b := take(t, open(t, Spec{Rate: 5, NumRequests: 1000, Prompt: Uniform{1, 100}, Output: Fixed(8), Seed: 3}), 10)
	if len(a) != 10 || !slices.Equal(a, b) {
		t.Errorf("the bounded stream differs from the unbounded one's start: %v, %v", a, b)
	}
}

// A zero is refused with the line a negative gets (it would read as the
// flag not given: no bound, Poisson); lengths vLLM refuses (max_tokens 0,
// an empty prompt) are refused, and a length that names no file says so.
func TestZerosAndEmptyLengths(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "5", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"--rate", "5", "--duration", "-1s"}, "--duration must be positive"},
		{[]string{"--rate", "5", "--num-requests", "0"}, "--num-requests must be 1 or more"},
		{[]string{"--rate", "5", "--num-requests", "-1"}, "--num-requests must be 1 or more"},
		{[]string{"--rate", "5", "--burstiness", "0"}, "--burstiness must be positive (1 is Poisson)"},
		{[]string{"--rate", "5", "--burstiness", "-1"}, "--burstiness must be positive (1 is Poisson)"},
		{[]string{"--rate", "5", "--output-tokens", "0"}, "--output-tokens fixed:0: vLLM refuses max_tokens below 1"},
		{[]string{"--rate", "5", "--output-tokens", "uniform:0-10"}, "--output-tokens uniform:0-10: vLLM refuses max_tokens below 1"},
		{[]string{"--rate", "5", "--prompt-tokens", "0"}, "--prompt-tokens fixed:0: vLLM refuses an empty prompt"},
		{[]string{"--rate", "5", "--prompt-tokens", "nonexist.json"}, "--prompt-tokens nonexist.json: no such file"},
		{[]string{"--rate", "5", "--output-tokens", "1O24"}, `--output-tokens: token length "1O24"`},
	} {
		_, _, err := flags(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	// A shared prefix makes a prompt of 0 tokens of its own a real one.
	if _, _, err := flags(t, "--rate", "5", "--prompt-tokens", "0", "--prefix-tokens", "100"); err != nil {
		t.Errorf("a prefix and no prompt of its own: %v", err)
	}
}

func TestHumanCount(t *testing.T) {
	for n, want := range map[float64]string{999_999: "999999", 2.5e6: "2.5 million", 1.5e9: "1.5 billion", 1e12: "1 trillion", 1e18: "1e+18"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%g) = %q, want %q", n, got, want)
		}
	}
}
