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
// Spec, and what it says of the server.
type Bench struct {
	Spec Spec
	// Model is --model (the served model, and by default the tokenizer);
	// Backend and Endpoint say what API it calls.
	Model, Backend, Endpoint string
	// Seed is --seed when given.
	Seed *uint64
}

// vllm bench serve's flags (vllm/benchmarks/serve.py and datasets.py,
// 0.10–0.2x), by what they do to the traffic. Values are read as the
// command gives them; defaults are its own (random dataset: 1024 prompt
// and 128 output tokens, range ratio 0, prefix 0; 1000 prompts; request
// rate inf; burstiness 1).
var (
	// benchTraffic flags set the Spec (handled below).
	benchTraffic = map[string]bool{
		"dataset-name": true, "num-prompts": true, "request-rate": true, "burstiness": true, "max-concurrency": true,
		"seed": true, "random-input-len": true, "random-output-len": true, "random-range-ratio": true, "random-prefix-len": true,
		"model": true, "backend": true, "endpoint": true,
	}
	// benchIgnored flags do not change the traffic the simulator sees:
	// where it goes, the tokenizer, sampling, what is printed or saved.
	benchIgnored = map[string]bool{
		"base-url": true, "host": true, "port": true, "tokenizer": true, "tokenizer-mode": true, "served-model-name": true,
		"trust-remote-code": true, "ignore-eos": true, "disable-tqdm": true, "save-result": true, "save-detailed": true,
		"result-dir": true, "result-filename": true, "metadata": true, "percentile-metrics": true, "metric-percentiles": true,
		"goodput": true, "label": true, "append-result": true, "temperature": true, "top-p": true, "top-k": true, "min-p": true,
		"request-id-prefix": true, "ready-check-timeout-sec": true, "num-warmups": true, "header": true, "insecure": true,
		"disable-shuffle": true, "plot-timeline": true, "extra-body": true, "logprobs": true,
	}
	// benchBools take no value.
	benchBools = map[string]bool{
		"trust-remote-code": true, "ignore-eos": true, "disable-tqdm": true, "save-result": true, "save-detailed": true,
		"append-result": true, "insecure": true, "disable-shuffle": true, "plot-timeline": true,
	}
)

// ParseBench reads a `vllm bench serve ...` command (with or without the
// leading `vllm bench serve`). Only the random dataset is a traffic the
// simulator can generate: another dataset, an unknown flag or a bad value
// is an error naming it.
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
	var unknown []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "--") {
			return Bench{}, fmt.Errorf("--bench: unexpected argument %q (vllm bench serve takes only --flags)", w)
		}
		name, val, hasVal := strings.Cut(w[2:], "=")
		name = strings.ReplaceAll(name, "_", "-")
		switch {
		case benchBools[name]:
		case !benchTraffic[name] && !benchIgnored[name]:
			unknown = append(unknown, "--"+name)
			if !hasVal && i+1 < len(words) && !strings.HasPrefix(words[i+1], "--") {
				i++
			}
			continue
		case !hasVal:
			if i+1 >= len(words) {
				return Bench{}, fmt.Errorf("--bench: --%s needs a value", name)
			}
			i++
			val = words[i]
		}
		vals[name] = val
	}
	if ds, ok := vals["dataset-name"]; ok && ds != "random" {
		return Bench{}, fmt.Errorf("--bench: --dataset-name %s: only the random dataset can be simulated (its lengths are given; give --requests FILE for a log of your own)", ds)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Bench{}, fmt.Errorf("--bench: %s not known to headroom's vllm bench serve reader (it reads the random dataset's traffic flags)", strings.Join(unknown, ", "))
	}
	b := Bench{Model: vals["model"], Backend: vals["backend"], Endpoint: vals["endpoint"]}
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
	count := func(name string, def, min, most int) (int, error) {
		f, err := num(name, float64(def))
		if err != nil {
			return 0, err
		}
		if _, given := vals[name]; !given {
			return def, nil
		}
		if f != math.Trunc(f) || f < float64(min) || f > float64(most) {
			return 0, fmt.Errorf("--bench: --%s %s: want a whole number from %d to %d", name, vals[name], min, most)
		}
		return int(f), nil
	}
	s := Spec{Arrival: Poisson, Speedup: 1}
	var in, out, prefix int
	if s.NumRequests, err = count("num-prompts", DefaultNumRequests, 1, MaxRequests); err != nil {
		return Bench{}, err
	}
	if in, err = count("random-input-len", 1024, 1, maxTokens); err != nil {
		return Bench{}, err
	}
	if out, err = count("random-output-len", 128, 1, maxTokens); err != nil {
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
	s.Prompt, s.Output, s.PrefixTokens = RangeOf(in, ratio), RangeOf(out, ratio), prefix
	b.Spec = s
	return b, nil
}
