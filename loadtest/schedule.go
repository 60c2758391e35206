package loadtest

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"headroom.dev/headroom/sim"
)

// Item is one request to send.
type Item struct {
	// Due is when to send it, from the start of the run. A closed loop
	// ignores it.
	Due time.Duration
	// Prompt is the prompt's length in tokens as asked for; Output the
	// max_tokens of the request.
	Prompt, Output int64
}

// Schedule yields the items to send, in order of Due. Next returns false
// at the end; an error is bad input found while reading (a replayed file).
type Schedule interface {
	Next() (Item, bool, error)
}

// Arrival processes of an open loop.
const (
	ArrivalPoisson  = "poisson"
	ArrivalConstant = "constant"
)

// Burst is a group of requests sent at once: "50x30000@60s" is 50 prompts
// of 30000 tokens at 60 s, the syntax of `headroom simulate`.
type Burst struct {
	Count  int
	Prompt int64
	At     time.Duration
}

// ParseBursts reads a comma-separated list of bursts, each read by
// simulate's own parser so the two commands take the same text.
func ParseBursts(s string) ([]Burst, error) {
	var out []Burst
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		b, err := sim.ParseBurst(part)
		if err != nil {
			return nil, err
		}
		out = append(out, Burst{Count: b.Count, Prompt: int64(b.Tokens), At: time.Duration(math.Round(b.At * float64(time.Second)))})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, nil
}

// Synthetic is generated traffic: requests of fixed sizes at Rate per
// second (Poisson or constant inter-arrival times), plus bursts. With
// Rate 0 every item is due at once (a closed loop's supply); the caller
// bounds the count or the duration.
type Synthetic struct {
	Rate    float64
	Arrival string
	Prompt  int64
	Output  int64
	Bursts  []Burst
	// Seed fixes the arrival times: the same seed gives the same run.
	Seed uint64

	rng   *rand.Rand
	next  time.Duration
	burst int // index into Bursts
	left  int // requests left in Bursts[burst]
}

// Next implements Schedule.
func (s *Synthetic) Next() (Item, bool, error) {
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, 0x10ad7e57))
		if s.Rate > 0 {
			s.next = s.gap()
		}
		if len(s.Bursts) > 0 {
			s.left = s.Bursts[0].Count
		}
	}
	// A burst due at or before the next arrival goes first.
	if s.burst < len(s.Bursts) && (s.Rate <= 0 || s.Bursts[s.burst].At <= s.next) {
		b := s.Bursts[s.burst]
		if s.left--; s.left <= 0 {
			s.burst++
			if s.burst < len(s.Bursts) {
				s.left = s.Bursts[s.burst].Count
			}
		}
		return Item{Due: b.At, Prompt: b.Prompt, Output: s.Output}, true, nil
	}
	it := Item{Due: s.next, Prompt: s.Prompt, Output: s.Output}
	if s.Rate > 0 {
		s.next += s.gap()
	}
	return it, true, nil
}

// gap is the time to the next arrival: exponential with mean 1/Rate for
// Poisson arrivals (vllm bench serve's default, burstiness 1), else 1/Rate.
func (s *Synthetic) gap() time.Duration {
	mean := float64(time.Second) / s.Rate
	if s.Arrival == ArrivalConstant {
		return time.Duration(math.Round(mean))
	}
	return time.Duration(math.Round(s.rng.ExpFloat64() * mean))
}
