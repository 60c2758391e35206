package workload

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"headroom.dev/headroom/vllm"
)

// Flags are the workload's flags, the same in every command that takes
// traffic. Register adds them to a flag set; Spec reads them.
type Flags struct {
	rate, burstiness, speedup, rangeRatio float64
	peakRate                              float64
	period                                time.Duration
	arrival                               string
	concurrency, numRequests              int
	duration                              time.Duration
	requests                              string
	prompt, output, prefix                string
	bursts                                []string
	seed                                  uint64
	bench                                 string
	endpoint                              string
	// a dataset file, as vllm bench serve samples it
	datasetName, datasetPath       string
	shareGPTOutput, customOutput   string
	disableShuffle, noOversample   bool
	goodput                        []string
	percentileMetrics, percentiles string
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
	fs.StringVar(&f.prefix, "prefix-tokens", "0", "a prefix of this many tokens shared by every prompt, put in front of it (vllm bench serve's --random-prefix-len)")
	fs.StringVar(&f.datasetName, "dataset-name", DatasetRandom, "the requests' sizes: random (the length flags), or sampled from --dataset-path as vllm bench serve samples it: sharegpt (a ShareGPT JSON file) or custom (JSON lines {prompt, output_tokens}); lengths estimated at 4 bytes of text per token")
	fs.StringVar(&f.datasetPath, "dataset-path", "", "the dataset file of --dataset-name sharegpt or custom (gzip too; read as a stream, at most 4 GiB of text and 10 million entries)")
	fs.StringVar(&f.shareGPTOutput, "sharegpt-output-len", "", "--dataset-name sharegpt: every request's output tokens, instead of its reply's")
	fs.StringVar(&f.customOutput, "custom-output-len", "", "--dataset-name custom: output tokens of a line without output_tokens (default 256)")
	fs.BoolVar(&f.disableShuffle, "disable-shuffle", false, "take a dataset's entries in file order (vllm bench serve's --disable-shuffle)")
	fs.BoolVar(&f.noOversample, "no-oversample", false, "send only the dataset's entries that pass, even if fewer than --num-requests")
	fs.StringSliceVar(&f.goodput, "goodput", nil, "vllm bench serve's goodput targets in ms, e.g. 'ttft:2000 tpot:50 e2el:10000': requests/s meeting every one")
	fs.StringVar(&f.percentileMetrics, "percentile-metrics", "ttft,tpot,itl", "-o bench: the latencies printed, of ttft, tpot, itl and e2el")
	fs.StringVar(&f.percentiles, "metric-percentiles", "99", "-o bench: the percentiles printed of each, e.g. 50,90,99")
	fs.StringSliceVar(&f.bursts, "burst", nil, "add COUNT prompts of TOKENS at TIME on top of the traffic, e.g. 50x30000@60s (repeatable, or comma-separated; within --duration)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the arrival times and lengths (a dataset's shuffle takes vllm bench serve's default, 0, unless given)")
	fs.StringVar(&f.endpoint, "endpoint", EndpointCompletions, "the API the requests call: completions (/v1/completions, vllm bench serve's default) or chat (/v1/chat/completions: the server renders the model's chat template, which costs its API server CPU a request); with --bench, the command's own unless given")
	fs.StringVar(&f.bench, "bench", "", "the traffic of a 'vllm bench serve ...' command (random, sharegpt or custom dataset), quoted")
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
	// Output is what a result in bench's layout prints: the bench
	// command's --goodput and percentile flags, or the flags' own.
	Output BenchOutput
	// Notices are one-line messages for the user (an old flag spelling).
	// A bench command's own (flags read and ignored) are in Bench.Notices,
	// for the report's notes.
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
	var err error
	if rd.Output, err = f.benchOutput(); err != nil {
		return Spec{}, rd, err
	}
	s := Spec{Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness, Concurrency: f.concurrency, NumRequests: f.numRequests,
		Duration: f.duration.Seconds(), Log: f.requests, Speedup: f.speedup, Seed: f.seed, PeakRate: f.peakRate}
	// A zero given is refused as a negative is: 0 would otherwise read
	// as the flag's absence (no bound, Poisson), and vllm bench serve
	// refuses --num-prompts 0 and --burstiness 0 as well.
	switch {
	case changed("num-requests") && f.numRequests <= 0:
		return Spec{}, rd, errors.New(errNumRequests)
	case changed("duration") && f.duration <= 0:
		return Spec{}, rd, errors.New(errDuration)
	case changed("burstiness") && !(f.burstiness > 0):
		return Spec{}, rd, errors.New(errBurstiness)
	}
	if changed("period") {
		if f.period <= 0 {
			return Spec{}, rd, fmt.Errorf("--period must be positive, e.g. 24h")
		}
		s.Period = f.period.Seconds()
	}
	if s.Endpoint, err = ParseEndpoint(f.endpoint); err != nil {
		return Spec{}, rd, fmt.Errorf("--%v", err)
	}
	var ok bool
	if s.PrefixTokens, ok = ParseTokens(f.prefix); !ok {
		return Spec{}, rd, fmt.Errorf("--prefix-tokens %q: want a number of tokens (%s)", f.prefix, vllm.HumanIntHelp)
	}
	if f.bench != "" {
		for _, name := range []string{"rate", "peak-rate", "period", "arrival", "burstiness", "concurrency", "num-requests", "prompt-tokens", "output-tokens", "range-ratio", "prefix-tokens", "requests", "burst",
			"dataset-name", "dataset-path", "sharegpt-output-len", "custom-output-len", "disable-shuffle", "no-oversample"} {
			if changed(name) {
				return Spec{}, rd, fmt.Errorf("--%s and --bench both describe the traffic: give one (the bench command's own flags set it)", name)
			}
		}
		b, err := ParseBench(f.bench)
		if err != nil {
			return Spec{}, rd, err
		}
		b.Spec.Duration, b.Spec.Seed = s.Duration, s.Seed
		if changed("endpoint") {
			b.Spec.Endpoint = s.Endpoint
		}
		if changed("seed") || b.Seed == nil {
			b.Spec.Seed = f.seed
		}
		if changed("seed") {
			b.Spec.Dataset.Seed = f.seed
		}
		// The output flags given beside --bench win over the command's.
		for _, name := range []string{"goodput", "percentile-metrics", "metric-percentiles"} {
			if changed(name) {
				switch name {
				case "goodput":
					b.Output.Goodput = rd.Output.Goodput
				case "percentile-metrics":
					b.Output.Metrics = rd.Output.Metrics
				default:
					b.Output.Percentiles = rd.Output.Percentiles
				}
			}
		}
		rd.Output = b.Output
		rd.Bench = &b
		return b.Spec, rd, b.Spec.Validate()
	}
	if s.Concurrency == 0 && changed("concurrency") {
		return Spec{}, rd, fmt.Errorf("--concurrency must be 1 or more")
	}
	if f.datasetName != "" && f.datasetName != DatasetRandom {
		return f.dataset(fs, s, rd)
	}
	for _, name := range []string{"dataset-path", "sharegpt-output-len", "custom-output-len", "disable-shuffle", "no-oversample"} {
		if changed(name) {
			return Spec{}, rd, fmt.Errorf("--%s reads a dataset: give --dataset-name sharegpt or custom", name)
		}
	}
	if s.Prompt, s.Output, err = lengths(f.prompt, f.output, open); err != nil {
		return Spec{}, rd, err
	}
	if f.rangeRatio != 0 {
		if !(f.rangeRatio >= 0 && f.rangeRatio < 1) {
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

// dataset is the Spec of --dataset-name sharegpt or custom: the sizes
// come from the file, the arrivals and count from the other flags.
func (f *Flags) dataset(fs *pflag.FlagSet, s Spec, rd Read) (Spec, Read, error) {
	for _, name := range []string{"prompt-tokens", "output-tokens", "range-ratio", "prefix-tokens", "burst", "requests"} {
		if fs.Changed(name) {
			return Spec{}, rd, fmt.Errorf("--%s and --dataset-name %s both give the requests' sizes: give one (--sharegpt-output-len or --custom-output-len fixes the outputs)", name, f.datasetName)
		}
	}
	d := Dataset{Name: f.datasetName, Path: f.datasetPath, NoShuffle: f.disableShuffle, NoOversample: f.noOversample}
	if fs.Changed("seed") {
		d.Seed = f.seed
	}
	out, flag := f.shareGPTOutput, "sharegpt-output-len"
	if d.Name == DatasetCustom {
		out, flag = f.customOutput, "custom-output-len"
	}
	if out != "" {
		n, ok := ParseTokens(out)
		if !ok || n < 1 {
			return Spec{}, rd, fmt.Errorf("--%s %q: want a number of tokens from 1 (%s)", flag, out, vllm.HumanIntHelp)
		}
		d.OutputLen = n
	}
	s.Dataset = d
	return s, rd, s.Validate()
}

// benchOutput reads the bench output flags.
func (f *Flags) benchOutput() (BenchOutput, error) {
	o := DefaultBenchOutput()
	var err error
	if o.Goodput, err = ParseGoodput(f.goodput); err != nil {
		return o, err
	}
	if o.Metrics, err = ParsePercentileMetrics(f.percentileMetrics); err != nil {
		return o, err
	}
	if o.Percentiles, err = ParseMetricPercentiles(f.percentiles); err != nil {
		return o, err
	}
	return o, nil
}

// lengths reads the two length flags: a distribution each, or a profile
// file for either.
func lengths(prompt, output string, open func(string) (io.ReadCloser, error)) (Dist, Dist, error) {
	var out [2]Dist
	for i, spec := range []string{prompt, output} {
		flag := [...]string{"--prompt-tokens", "--output-tokens"}[i]
		d, err := ParseDist(spec)
		if err == nil {
			out[i] = d
			continue
		}
		if open == nil {
			return nil, nil, fmt.Errorf("%s: %v", flag, err)
		}
		f, ferr := open(spec)
		if ferr != nil {
			if !os.IsNotExist(ferr) {
				return nil, nil, fmt.Errorf("%s %s: %v", flag, spec, unwrapPath(ferr))
			}
			// A misspelt length ("1O24", "fixd:8") is a length; anything
			// else was meant as a file.
			if looksLikeLength(spec) {
				return nil, nil, fmt.Errorf("%s: %v", flag, err)
			}
			return nil, nil, fmt.Errorf("%s %s: no such file (a length is N, fixed:N or uniform:A-B; a file, a 'headroom profile -o json' output)", flag, spec)
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

// looksLikeLength reports whether s was meant as a length, not a file
// name: it starts with a digit or names a distribution.
func looksLikeLength(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '+' {
		return true
	}
	kind, _, ok := strings.Cut(s, ":")
	return ok && !strings.ContainsAny(kind, "./\\")
}

// unwrapPath drops the operation of a path error: "x.json: permission
// denied" reads "permission denied" after the name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
