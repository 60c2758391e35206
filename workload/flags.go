package workload

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flags are the workload's flags, the same in every command that takes
// traffic. Register adds them to a flag set; Spec reads them.
type Flags struct {
	rate, burstiness, speedup, rangeRatio float64
	peakRate                              float64
	period                                time.Duration
	arrival                               string
	concurrency, numRequests, prefix      int
	duration                              time.Duration
	requests                              string
	prompt, output                        string
	bursts                                []string
	seed                                  uint64
	bench                                 string
	// deprecated spellings, hidden: they print a notice and set the new flag.
	inputTokens string
}

// Defaults of the flags: vllm bench serve's random dataset (1024 prompt,
// 128 output tokens, 1000 requests, Poisson arrivals).
const (
	DefaultPrompt = "1024"
	DefaultOutput = "128"
)

// Register adds the workload's flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.Float64Var(&f.rate, "rate", 0, "requests per second (inf: all at once, vllm bench serve's --request-rate)")
	fs.Float64Var(&f.peakRate, "peak-rate", 0, "a Poisson rate over the day: --rate at the start, rising as a cosine to this at half --period and back (e.g. --rate 2 --peak-rate 40)")
	fs.DurationVar(&f.period, "period", 24*time.Hour, "with --peak-rate, the period of the rate's cycle")
	fs.StringVar(&f.arrival, "arrival", Poisson, "how a --rate spaces requests: poisson or constant")
	fs.Float64Var(&f.burstiness, "burstiness", 1, "with poisson arrivals, the shape of the gaps' gamma distribution: 1 Poisson, below 1 burstier (vllm bench serve's --burstiness)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "closed loop: at most N requests in flight, the next sent when one finishes (vllm bench serve's --max-concurrency)")
	fs.IntVar(&f.numRequests, "num-requests", 0, fmt.Sprintf("send this many requests (default %d when neither this nor --duration is given; vllm bench serve's --num-prompts)", DefaultNumRequests))
	fs.DurationVar(&f.duration, "duration", 0, "send requests due within this time")
	fs.StringVar(&f.requests, "requests", "", "replay a request log (its times and sizes; with --rate or --concurrency only its sizes): JSON lines {arrival_s, prompt_tokens, output_tokens} or any log 'headroom profile' reads, gzip too")
	fs.Float64Var(&f.speedup, "speedup", 1, "replay the --requests log this many times faster")
	fs.StringVar(&f.prompt, "prompt-tokens", DefaultPrompt, "prompt lengths: N, fixed:N, uniform:A-B, or a 'profile -o json' file")
	fs.StringVar(&f.output, "output-tokens", DefaultOutput, "output lengths (max_tokens, generated in full): N, fixed:N, uniform:A-B, or a 'profile -o json' file")
	fs.Float64Var(&f.rangeRatio, "range-ratio", 0, "draw fixed lengths N uniformly from N×(1-r) to N×(1+r) (vllm bench serve's --random-range-ratio)")
	fs.IntVar(&f.prefix, "prefix-tokens", 0, "a prefix of this many tokens shared by every prompt, put in front of it (vllm bench serve's --random-prefix-len)")
	fs.StringSliceVar(&f.bursts, "burst", nil, "add COUNT prompts of TOKENS at TIME, e.g. 50x30000@60s (repeatable, or comma-separated)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the arrival times and lengths")
	fs.StringVar(&f.bench, "bench", "", "the traffic of a 'vllm bench serve ...' command (random dataset), quoted")
	fs.StringVar(&f.inputTokens, "input-tokens", "", "old spelling of --prompt-tokens")
	_ = fs.MarkHidden("input-tokens")
	// vllm bench serve's own names of the same flags are read as ours, so
	// a bench command's flags can be pasted as they are.
	norm := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if ours, ok := benchNames[name]; ok {
			name = ours
		}
		return norm(fs, name)
	})
}

// benchNames maps vllm bench serve's flag names to the workload's.
var benchNames = map[string]string{
	"num-prompts": "num-requests", "max-concurrency": "concurrency", "request-rate": "rate",
	"random-input-len": "prompt-tokens", "random-output-len": "output-tokens",
	"random-range-ratio": "range-ratio", "random-prefix-len": "prefix-tokens",
}

// Read is what Spec returns beside the Spec.
type Read struct {
	// Bench is the pasted vllm bench serve command, when --bench was given.
	Bench *Bench
	// Notices are one-line messages for the user (an old flag spelling).
	Notices []string
}

// Spec reads the flags of fs (registered by Register) into a Spec. open
// reads a profile file named as a length.
func (f *Flags) Spec(fs *pflag.FlagSet, open func(string) (io.ReadCloser, error)) (Spec, Read, error) {
	var rd Read
	changed := fs.Changed
	if changed("input-tokens") {
		if changed("prompt-tokens") {
			return Spec{}, rd, fmt.Errorf("give --prompt-tokens only (--input-tokens is its old spelling)")
		}
		f.prompt = f.inputTokens
		rd.Notices = append(rd.Notices, "--input-tokens is now --prompt-tokens; the old spelling goes in the next release")
	}
	s := Spec{Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness, Concurrency: f.concurrency, NumRequests: f.numRequests,
		Duration: f.duration.Seconds(), Log: f.requests, Speedup: f.speedup, PrefixTokens: f.prefix, Seed: f.seed,
		PeakRate: f.peakRate}
	if changed("period") {
		if f.period <= 0 {
			return Spec{}, rd, fmt.Errorf("--period must be positive, e.g. 24h")
		}
		s.Period = f.period.Seconds()
	}
	if f.bench != "" {
		for _, name := range []string{"rate", "peak-rate", "arrival", "burstiness", "concurrency", "num-requests", "prompt-tokens", "output-tokens", "range-ratio", "prefix-tokens", "requests", "burst"} {
			if changed(name) {
				return Spec{}, rd, fmt.Errorf("--%s and --bench both describe the traffic: give one (the bench command's own flags set it)", name)
			}
		}
		b, err := ParseBench(f.bench)
		if err != nil {
			return Spec{}, rd, err
		}
		b.Spec.Duration, b.Spec.Seed = s.Duration, s.Seed
		if changed("seed") || b.Seed == nil {
			b.Spec.Seed = f.seed
		}
		rd.Bench = &b
		return b.Spec, rd, b.Spec.Validate()
	}
	if s.Concurrency == 0 && changed("concurrency") {
		return Spec{}, rd, fmt.Errorf("--concurrency must be 1 or more")
	}
	var err error
	if s.Prompt, s.Output, err = lengths(f.prompt, f.output, open); err != nil {
		return Spec{}, rd, err
	}
	if f.rangeRatio != 0 {
		if f.rangeRatio < 0 || f.rangeRatio >= 1 {
			return Spec{}, rd, fmt.Errorf("--range-ratio %g: want 0 <= r < 1", f.rangeRatio)
		}
		p, okP := s.Prompt.(Fixed)
		o, okO := s.Output.(Fixed)
		if !okP || !okO {
			return Spec{}, rd, fmt.Errorf("--range-ratio draws around fixed lengths: give --prompt-tokens N and --output-tokens N")
		}
		s.Prompt, s.Output = RangeOf(int(p), f.rangeRatio), RangeOf(int(o), f.rangeRatio)
	}
	for _, b := range f.bursts {
		if strings.TrimSpace(b) == "" {
			continue
		}
		burst, err := ParseBurst(b)
		if err != nil {
			return Spec{}, rd, fmt.Errorf("--%v", err)
		}
		s.Bursts = append(s.Bursts, burst)
	}
	if len(s.Bursts) > 0 && s.Concurrency > 0 {
		return Spec{}, rd, fmt.Errorf("--burst needs an open loop (--rate): a closed loop sends when a request ends")
	}
	return s, rd, s.Validate()
}

// lengths reads the two length flags: a distribution each, or a profile
// file for either.
func lengths(prompt, output string, open func(string) (io.ReadCloser, error)) (Dist, Dist, error) {
	var out [2]Dist
	for i, spec := range []string{prompt, output} {
		d, err := ParseDist(spec)
		if err == nil {
			out[i] = d
			continue
		}
		if open == nil {
			return nil, nil, err
		}
		f, ferr := open(spec)
		if ferr != nil {
			if os.IsNotExist(ferr) {
				return nil, nil, err
			}
			return nil, nil, ferr
		}
		p, o, perr := ProfileDists(f, spec)
		f.Close()
		if perr != nil {
			return nil, nil, perr
		}
		out[i] = p
		if i == 1 {
			out[i] = o
		}
	}
	return out[0], out[1], nil
}
