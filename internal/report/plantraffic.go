package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// maxProfile bounds the part of a --profile file read as a profile report.
const maxProfile = 256 << 20

// PlanTrafficRequests bounds the requests plan --profile (and profile's
// pools) simulates per
// max-num-seqs candidate: enough for a p99 of a few hundred requests above
// it, few enough that plan answers in about a second (README.md, plan).
const PlanTrafficRequests = 20000

// PlanTrafficSeed is the seed of the Poisson replay of a profile, fixed so
// that the same profile gives the same plan.
const PlanTrafficSeed = 1

// PlanTraffic opens plan's --profile FILE: a `headroom profile -o json`
// output (recognised by its buckets and token summaries) is replayed as
// Poisson arrivals at its busiest window's rate (or --rate) with its token
// distributions; anything else is read as a request log in any format
// simulate --requests reads, replayed at its own arrivals. Either is cut
// at PlanTrafficRequests requests.
func PlanTraffic(files Files, name string, rate float64) (Traffic, error) {
	if !(rate >= 0) || math.IsInf(rate, 0) {
		return Traffic{}, errors.New("--rate must be a positive number of requests per second")
	}
	p, isProfile, err := sniffProfile(files, name)
	if err != nil {
		return Traffic{}, err
	}
	if !isProfile {
		if rate > 0 {
			return Traffic{}, fmt.Errorf("--rate applies to a 'headroom profile -o json' file; %s is a request log, replayed at its own arrivals", name)
		}
		spec := workload.Spec{Log: name, Speedup: 1, NumRequests: PlanTrafficRequests,
			Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: PlanTrafficSeed}
		// Read the first request now, so a file that is no traffic at all is
		// one clear line here, not an error in the middle of the search.
		st, closer, err := spec.Open(files.open)
		if err == nil {
			_, err = st.Next()
			closer.Close()
		}
		if err != nil {
			return Traffic{}, fmt.Errorf("--profile %s: neither a 'headroom profile -o json' output nor a request log: %v", name, err)
		}
		return Traffic{Spec: spec, Files: files,
			Describe: fmt.Sprintf("up to the first %s requests of %s at their logged arrivals", vllm.Thousands(PlanTrafficRequests), name)}, nil
	}
	prompt, err := workload.QuantileOf(p.Input, name+" input_tokens")
	if err != nil {
		return Traffic{}, fmt.Errorf("%v", err)
	}
	out, err := workload.QuantileOf(p.Output, name+" output_tokens")
	if err != nil {
		return Traffic{}, fmt.Errorf("%v", err)
	}
	what := "--rate"
	if rate == 0 {
		var busiest int64
		for _, w := range p.Windows {
			busiest = max(busiest, w.Requests)
		}
		if busiest == 0 || p.WindowSeconds <= 0 {
			return Traffic{}, fmt.Errorf("%s has no time windows (its log lines carry no times), so its rate is unknown: give --rate R (requests per second)", name)
		}
		rate = float64(busiest) / float64(p.WindowSeconds)
		what = fmt.Sprintf("its busiest %ds window", p.WindowSeconds)
	}
	spec := workload.Spec{Rate: rate, NumRequests: PlanTrafficRequests, Prompt: prompt, Output: out, Seed: PlanTrafficSeed}
	return Traffic{Spec: spec, Files: files,
		Describe: fmt.Sprintf("Poisson %.3g req/s (%s) from %s, %s requests, prompts %s, outputs %s, seed %d",
			rate, what, name, vllm.Thousands(PlanTrafficRequests), prompt, out, PlanTrafficSeed)}, nil
}

// sniffProfile decodes the first JSON value of name as a profile report;
// it is one when it has buckets and counted input tokens. A request log
// (JSON lines included, whose first line has no buckets) is not.
func sniffProfile(files Files, name string) (ProfileReport, bool, error) {
	p, err := ReadProfile(files, name)
	var notProfile *notProfileError
	if errors.As(err, &notProfile) {
		return p, false, nil
	}
	return p, err == nil && len(p.Buckets) > 0 && p.Input.Count > 0, err
}

type notProfileError struct{ name string }

func (e *notProfileError) Error() string {
	return e.name + ": not a 'headroom profile -o json' output"
}

// ReadProfile reads a `headroom profile -o json` output (its first JSON
// value; a file that is none is an error saying so).
func ReadProfile(files Files, name string) (ProfileReport, error) {
	var p ProfileReport
	fh, err := files.open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return p, fmt.Errorf("--profile %s: %v", name, err)
	}
	defer fh.Close()
	if err := json.NewDecoder(bufio.NewReader(io.LimitReader(fh, maxProfile))).Decode(&p); err != nil {
		return p, &notProfileError{name}
	}
	return p, nil
}
