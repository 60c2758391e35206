package workload

import (
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"headroom.dev/headroom/vllm"
)

// Bench is a pasted `vllm bench serve` command: the traffic it sends as a
// Spec, and what it says of the server and of its output.
type Bench struct {
	Spec Spec
	// Model is --model (the served model, and by default the tokenizer);
	// Backend and Endpoint say what API it calls.
	Model, Backend, Endpoint string
	// Seed is --seed when given.
	Seed *uint64
	// IgnoreEOS is --ignore-eos: every reply runs to its max_tokens.
	// Without it a server ends a reply at its end-of-sequence token, which
	// may come first.
	IgnoreEOS bool
	// Output is what its result prints: --goodput, --percentile-metrics,
	// --metric-percentiles.
	Output BenchOutput
	// Notices name flags read and ignored that a result may depend on.
	Notices []string
}

// vllm bench serve's flags (`vllm bench serve --help`, vllm/benchmarks/
// serve.py and datasets.py, 0.10–0.2x), by what they do to the traffic.
// Values are read as the command gives them; defaults are its own (random
// dataset: 1024 prompt and 128 output tokens, range ratio 0, prefix 0;
// 1000 prompts; request rate inf; burstiness 1; seed 0).
var (
	// benchTraffic flags set the Spec or the output (handled below).
	benchTraffic = map[string]bool{
		"dataset-name": true, "dataset-path": true, "num-prompts": true, "request-rate": true, "burstiness": true, "max-concurrency": true,
		"seed": true, "random-input-len": true, "random-output-len": true, "random-range-ratio": true, "random-prefix-len": true,
		"sharegpt-output-len": true, "custom-output-len": true, "input-len": true, "output-len": true,
		"disable-shuffle": true, "no-oversample": true, "ignore-eos": true,
		"model": true, "backend": true, "endpoint": true,
		"goodput": true, "percentile-metrics": true, "metric-percentiles": true,
	}
	// benchIgnored flags do not change the traffic the simulator sees:
	// where it goes, the tokenizer, sampling, what is printed or saved,
	// and the options of datasets other than the one named (bench ignores
	// those too).
	benchIgnored = map[string]bool{
		"base-url": true, "host": true, "port": true, "tokenizer": true, "tokenizer-mode": true, "served-model-name": true,
		"trust-remote-code": true, "disable-tqdm": true, "save-result": true, "save-detailed": true,
		"result-dir": true, "result-filename": true, "metadata": true, "label": true, "append-result": true,
		"temperature": true, "top-p": true, "top-k": true, "min-p": true, "frequency-penalty": true, "presence-penalty": true, "repetition-penalty": true,
		"request-id-prefix": true, "ready-check-timeout-sec": true, "num-warmups": true, "header": true, "insecure": true,
		"plot-timeline": true, "timeline-itl-thresholds": true, "plot-dataset-stats": true, "extra-body": true, "logprobs": true,
		"skip-chat-template": true, "custom-skip-chat-template": true, "skip-tokenizer-init": true, "profile": true,
		"lora-modules": true, "no-stream": true,
		"sonnet-input-len": true, "sonnet-output-len": true, "sonnet-prefix-len": true,
		"hf-name": true, "hf-subset": true, "hf-split": true, "hf-output-len": true,
		"spec-bench-output-len": true, "spec-bench-category": true, "blazedit-min-distance": true, "blazedit-max-distance": true,
		"prefix-repetition-prefix-len": true, "prefix-repetition-suffix-len": true, "prefix-repetition-num-prefixes": true, "prefix-repetition-output-len": true,
		"random-mm-base-items-per-request": true, "random-mm-num-mm-items-range-ratio": true, "random-mm-limit-mm-per-prompt": true, "random-mm-bucket-config": true,
	}
	// benchNotices are ignored flags a result may depend on: what the
	// reader is told.
	benchNotices = map[string]string{
		"lora-modules": "--lora-modules: the requests are simulated on the base model (LoRA adapters are not)",
		"no-stream":    "--no-stream: latencies are those of a streamed reply",
		"logprobs":     "--logprobs: the cost of returning log-probabilities is not simulated",
		"profile":      "--profile: the server's torch profiler is not simulated",
	}
	// benchRefused change the traffic in a way headroom does not send.
	benchRefused = map[string]string{
		"ramp-up-strategy":  "a request rate that ramps up",
		"ramp-up-start-rps": "a request rate that ramps up",
		"ramp-up-end-rps":   "a request rate that ramps up",
		"use-beam-search":   "beam search",
		"random-batch-size": "batched embedding requests",
	}
	// benchBools take no value.
	benchBools = map[string]bool{
		"trust-remote-code": true, "ignore-eos": true, "disable-tqdm": true, "save-result": true, "save-detailed": true,
		"append-result": true, "insecure": true, "disable-shuffle": true, "plot-timeline": true, "no-oversample": true,
		"no-stream": true, "skip-chat-template": true, "custom-skip-chat-template": true, "use-beam-search": true,
		"profile": true, "plot-dataset-stats": true, "skip-tokenizer-init": true,
	}
	// benchMulti take one value or more (argparse nargs="+" or "*").
	benchMulti = map[string]bool{"goodput": true, "metadata": true, "lora-modules": true, "header": true, "timeline-itl-thresholds": true}
)

// ParseBench reads a `vllm bench serve ...` command (with or without the
// leading `vllm bench serve`). The random, sharegpt and custom datasets
// are traffic the simulator can generate or replay: another dataset, an
// unknown flag or a bad value is an error naming it.
func ParseBench(cmd string) (Bench, error) {
	words, err := vllm.SplitCommandLine(cmd)
	if err != nil {
		return Bench{}, fmt.Errorf("--bench: %v", err)
	}
	if len(words) > 0 && path.Base(words[0]) == "vllm" {
		words = words[1:]
		if len(words) < 2 || words[0] != "bench" || words[1] != "serve" {
			return Bench{}, errors.New("--bench: want a 'vllm bench serve ...' command")
		}
		words = words[2:]
	}
	vals := map[string]string{}
	var unknown, refused []string
	var b Bench
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") {
			return Bench{}, fmt.Errorf("--bench: unexpected argument %q (vllm bench serve takes only --flags)", w)
		}
		name, val, hasVal := strings.Cut(w[2:], "=")
		name = strings.ReplaceAll(name, "_", "-")
		switch {
		case benchRefused[name] != "":
			refused = append(refused, fmt.Sprintf("--%s (%s)", name, benchRefused[name]))
			for i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
				i++
			}
			continue
		case benchBools[name]:
			val = "true"
		case !benchTraffic[name] && !benchIgnored[name]:
			unknown = append(unknown, "--"+name)
			if !hasVal && i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
				i++
			}
			continue
		case !hasVal:
			if i+1 >= len(words) || (benchMulti[name] && strings.HasPrefix(words[i+1], "--")) {
				return Bench{}, fmt.Errorf("--bench: --%s needs a value", name)
			}
			i++
			val = words[i]
		}
		if benchMulti[name] {
			for i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
				i++
				val += " " + words[i]
			}
		}
		if n := benchNotices[name]; n != "" {
			b.Notices = append(b.Notices, n)
		}
		vals[name] = val
	}
	if len(refused) > 0 {
		return Bench{}, fmt.Errorf("--bench: %s: traffic headroom does not send", strings.Join(refused, ", "))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Bench{}, fmt.Errorf("--bench: %s not known to headroom's vllm bench serve reader (it reads the random, sharegpt and custom datasets' traffic flags)", strings.Join(unknown, ", "))
	}
	dataset := DatasetRandom
	if ds, ok := vals["dataset-name"]; ok {
		dataset = ds
	}
	if dataset != DatasetRandom && dataset != DatasetShareGPT && dataset != DatasetCustom {
		return Bench{}, fmt.Errorf("--bench: --dataset-name %s: headroom replays the %s datasets (give --requests FILE for a log of your own)", dataset, DatasetNames)
	}
	b.Model, b.Backend, b.Endpoint = vals["model"], vals["backend"], vals["endpoint"]
	_, b.IgnoreEOS = vals["ignore-eos"]
	// bench's default backend (vllm, openai) calls /v1/completions;
	// openai-chat calls the chat endpoint, which --endpoint names too.
	endpoint := EndpointCompletions
	if strings.HasSuffix(b.Backend, "-chat") {
		endpoint = EndpointChat
	}
	if b.Endpoint != "" {
		if endpoint, err = ParseEndpoint(b.Endpoint); err != nil {
			return Bench{}, fmt.Errorf("--bench: --%v", err)
		}
	}
	num := func(name string, def float64) (float64, error) {
		v, ok := vals[name]
		if !ok {
			return def, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) {
			return 0, fmt.Errorf("--bench: --%s %q is not a number", name, v)
		}
		return f, nil
	}
	// count reads a whole number; token counts also take vLLM's suffixes
	// (2k), as every token count of headroom does.
	count := func(name string, def, min, most int) (int, error) {
		v, given := vals[name]
		if !given {
			return def, nil
		}
		n, ok := ParseTokens(v)
		if !ok || n < min || n > most {
			return 0, fmt.Errorf("--bench: --%s %s: want a whole number from %d to %d", name, v, min, most)
		}
		return n, nil
	}
	s := Spec{Arrival: Poisson, Speedup: 1}
	var in, out, prefix int
	if s.NumRequests, err = count("num-prompts", DefaultNumRequests, 1, MaxRequests); err != nil {
		return Bench{}, err
	}
	// --input-len and --output-len are the general spellings of each
	// dataset's own length flags.
	inName, outName := "random-input-len", "random-output-len"
	if _, ok := vals[inName]; !ok {
		if _, ok := vals["input-len"]; ok {
			inName = "input-len"
		}
	}
	if _, ok := vals[outName]; !ok {
		if _, ok := vals["output-len"]; ok {
			outName = "output-len"
		}
	}
	if in, err = count(inName, 1024, 1, maxTokens); err != nil {
		return Bench{}, err
	}
	if out, err = count(outName, 128, 1, maxTokens); err != nil {
		return Bench{}, err
	}
	if prefix, err = count("random-prefix-len", 0, 0, maxTokens); err != nil {
		return Bench{}, err
	}
	if s.Concurrency, err = count("max-concurrency", 0, 1, MaxRequests); err != nil {
		return Bench{}, err
	}
	if s.Rate, err = num("request-rate", math.Inf(1)); err != nil {
		return Bench{}, err
	}
	if !(s.Rate > 0) {
		return Bench{}, fmt.Errorf("--bench: --request-rate %s: want a positive rate or inf", vals["request-rate"])
	}
	if s.Burstiness, err = num("burstiness", 1); err != nil {
		return Bench{}, err
	}
	if !(s.Burstiness > 0) {
		return Bench{}, fmt.Errorf("--bench: --burstiness %s: want a positive number (1 is Poisson)", vals["burstiness"])
	}
	ratio, err := num("random-range-ratio", 0)
	if err != nil {
		return Bench{}, err
	}
	if ratio < 0 || ratio >= 1 {
		return Bench{}, fmt.Errorf("--bench: --random-range-ratio %s: want 0 <= r < 1", vals["random-range-ratio"])
	}
	if v, ok := vals["seed"]; ok {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Bench{}, fmt.Errorf("--bench: --seed %q: want a whole number", v)
		}
		b.Seed = &seed
		s.Seed = seed
	}
	if dataset == DatasetRandom {
		s.Prompt, s.Output, s.PrefixTokens = RangeOf(in, ratio), RangeOf(out, ratio), prefix
	} else {
		d := Dataset{Name: dataset, Path: vals["dataset-path"], Seed: s.Seed}
		_, d.NoShuffle = vals["disable-shuffle"]
		_, d.NoOversample = vals["no-oversample"]
		own := dataset + "-output-len"
		if _, ok := vals[own]; !ok {
			if _, ok := vals["output-len"]; ok {
				own = "output-len"
			}
		}
		if d.OutputLen, err = count(own, 0, 1, maxTokens); err != nil {
			return Bench{}, err
		}
		if err := d.Validate(); err != nil {
			return Bench{}, fmt.Errorf("--bench: %v", err)
		}
		s.Dataset = d
	}
	b.Output = DefaultBenchOutput()
	if v, ok := vals["goodput"]; ok {
		if b.Output.Goodput, err = ParseGoodput([]string{v}); err != nil {
			return Bench{}, fmt.Errorf("--bench: %v", err)
		}
	}
	if v, ok := vals["percentile-metrics"]; ok {
		if b.Output.Metrics, err = ParsePercentileMetrics(v); err != nil {
			return Bench{}, fmt.Errorf("--bench: %v", err)
		}
	}
	if v, ok := vals["metric-percentiles"]; ok {
		if b.Output.Percentiles, err = ParseMetricPercentiles(v); err != nil {
			return Bench{}, fmt.Errorf("--bench: %v", err)
		}
	}
	s.Endpoint = endpoint
	b.Spec = s
	return b, nil
}
