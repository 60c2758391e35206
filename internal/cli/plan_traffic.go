package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/workload"
)

// planTrafficRequests bounds the requests plan --profile simulates per
// max-num-seqs candidate: enough for a p99 of a few hundred requests above
// it, few enough that plan answers in about a second (README.md, plan).
const planTrafficRequests = 20000

// planTrafficSeed is the seed of the Poisson replay of a profile, fixed so
// that the same profile gives the same plan.
const planTrafficSeed = 1

// planTraffic opens plan's --profile FILE: a `headroom profile -o json`
// output (recognised by its buckets and token summaries) is replayed as
// Poisson arrivals at its busiest window's rate (or --rate) with its token
// distributions; anything else is read as a request log in any format
// simulate --requests reads, replayed at its own arrivals. Either is cut
// at planTrafficRequests requests.
func planTraffic(name string, rate float64) (report.Traffic, error) {
	if !(rate >= 0) || math.IsInf(rate, 0) {
		return report.Traffic{}, badInput("--rate must be a positive number of requests per second")
	}
	p, isProfile, err := sniffProfile(name)
	if err != nil {
		return report.Traffic{}, err
	}
	if !isProfile {
		if rate > 0 {
			return report.Traffic{}, badInput("--rate applies to a 'headroom profile -o json' file; %s is a request log, replayed at its own arrivals", name)
		}
		spec := workload.Spec{Log: name, Speedup: 1, NumRequests: planTrafficRequests,
			Prompt: workload.Fixed(1024), Output: workload.Fixed(128), Seed: planTrafficSeed}
		// Read the first request now, so a file that is no traffic at all is
		// one clear line here, not an error in the middle of the search.
		st, closer, err := spec.Open(func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err == nil {
			_, err = st.Next()
			closer.Close()
		}
		if err != nil {
			return report.Traffic{}, badInput("--profile %s: neither a 'headroom profile -o json' output nor a request log: %v", name, err)
		}
		return report.Traffic{Spec: spec,
			Describe: fmt.Sprintf("up to the first %s requests of %s at their logged arrivals", humanInt(planTrafficRequests), name)}, nil
	}
	prompt, err := workload.QuantileOf(p.Input, name+" input_tokens")
	if err != nil {
		return report.Traffic{}, badInput("%v", err)
	}
	out, err := workload.QuantileOf(p.Output, name+" output_tokens")
	if err != nil {
		return report.Traffic{}, badInput("%v", err)
	}
	what := "--rate"
	if rate == 0 {
		var busiest int64
		for _, w := range p.Windows {
			busiest = max(busiest, w.Requests)
		}
		if busiest == 0 || p.WindowSeconds <= 0 {
			return report.Traffic{}, badInput("%s has no time windows (its log lines carry no times), so its rate is unknown: give --rate R (requests per second)", name)
		}
		rate = float64(busiest) / float64(p.WindowSeconds)
		what = fmt.Sprintf("its busiest %ds window", p.WindowSeconds)
	}
	spec := workload.Spec{Rate: rate, NumRequests: planTrafficRequests, Prompt: prompt, Output: out, Seed: planTrafficSeed}
	return report.Traffic{Spec: spec,
		Describe: fmt.Sprintf("Poisson %.3g req/s (%s) from %s, %s requests, prompts %s, outputs %s, seed %d",
			rate, what, name, humanInt(planTrafficRequests), prompt, out, planTrafficSeed)}, nil
}

// sniffProfile decodes the first JSON value of name as a profile report;
// it is one when it has buckets and counted input tokens. A request log
// (JSON lines included, whose first line has no buckets) is not.
func sniffProfile(name string) (ProfileReport, bool, error) {
	var p ProfileReport
	fh, err := os.Open(name)
	if err != nil {
		return p, false, badInput("--profile %s: %v", name, unwrapPathError(err))
	}
	defer fh.Close()
	if err := json.NewDecoder(bufio.NewReader(fh)).Decode(&p); err != nil {
		return p, false, nil
	}
	return p, len(p.Buckets) > 0 && p.Input.Count > 0, nil
}
