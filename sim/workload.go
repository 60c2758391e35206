package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dist is a distribution of token counts.
type Dist interface {
	Sample(r *rand.Rand) int
	String() string
}

// FixedDist is always N.
type FixedDist int

// Sample returns N.
func (d FixedDist) Sample(*rand.Rand) int { return int(d) }
func (d FixedDist) String() string        { return fmt.Sprintf("fixed:%d", int(d)) }

// UniformDist is uniform over [Lo, Hi].
type UniformDist struct{ Lo, Hi int }

// Sample draws from [Lo, Hi].
func (d UniformDist) Sample(r *rand.Rand) int { return d.Lo + r.IntN(d.Hi-d.Lo+1) }
func (d UniformDist) String() string          { return fmt.Sprintf("uniform:%d-%d", d.Lo, d.Hi) }

// QuantileDist interpolates linearly between known quantiles (as a
// profile's p50/p90/p99/max give them): Points are (q, value) pairs with
// q rising from 0 to 1.
type QuantileDist struct {
	Points []QuantilePoint
	Name   string
}

// QuantilePoint is one known quantile.
type QuantilePoint struct {
	Q     float64
	Value int
}

// Sample inverts the piecewise-linear distribution function.
func (d QuantileDist) Sample(r *rand.Rand) int {
	u := r.Float64()
	p := d.Points
	i := sort.Search(len(p), func(i int) bool { return p[i].Q >= u })
	if i == 0 {
		return p[0].Value
	}
	if i >= len(p) {
		return p[len(p)-1].Value
	}
	a, b := p[i-1], p[i]
	f := (u - a.Q) / (b.Q - a.Q)
	return int(math.Round(float64(a.Value) + f*float64(b.Value-a.Value)))
}

func (d QuantileDist) String() string { return d.Name }

// ParseDist reads fixed:N, uniform:A-B or a plain N.
func ParseDist(s string) (Dist, error) {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		kind, arg = "fixed", s
	}
	switch kind {
	case "fixed":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("token distribution %q: want fixed:N, uniform:A-B or a profile -o json file", s)
		}
		return FixedDist(n), nil
	case "uniform":
		a, b, ok := strings.Cut(arg, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || lo < 0 || hi < lo {
			return nil, fmt.Errorf("token distribution %q: want uniform:A-B with 0 <= A <= B", s)
		}
		return UniformDist{lo, hi}, nil
	}
	return nil, fmt.Errorf("token distribution %q: want fixed:N, uniform:A-B or a profile -o json file", s)
}

// Burst is Count requests of Tokens prompt tokens arriving together At.
type Burst struct {
	Count, Tokens int
	At            float64
}

// ParseBurst reads COUNTxTOKENS@TIME, e.g. 50x30000@60s.
func ParseBurst(s string) (Burst, error) {
	bad := fmt.Errorf("--burst %q: want COUNTxTOKENS@TIME, e.g. 50x30000@60s", s)
	what, at, ok := strings.Cut(s, "@")
	if !ok {
		return Burst{}, bad
	}
	c, t, ok := strings.Cut(what, "x")
	if !ok {
		return Burst{}, bad
	}
	count, err1 := strconv.Atoi(c)
	tokens, err2 := strconv.Atoi(t)
	d, err3 := time.ParseDuration(at)
	if err1 != nil || err2 != nil || err3 != nil || count <= 0 || tokens <= 0 || d < 0 {
		return Burst{}, bad
	}
	// Far beyond any real burst, and a typo away from a run that never ends.
	if count > 1_000_000 || tokens > 10_000_000 {
		return Burst{}, fmt.Errorf("--burst %q: at most 1000000 requests of at most 10000000 tokens", s)
	}
	return Burst{Count: count, Tokens: tokens, At: d.Seconds()}, nil
}

// Synthetic is a Poisson stream of Rate requests per second over
// Duration seconds, prompt and output lengths drawn from Prompt and
// Output, with Bursts added at their times (their outputs drawn from
// Output). The same Seed gives the same stream.
type Synthetic struct {
	Rate, Duration float64
	Prompt, Output Dist
	Bursts         []Burst
	Seed           uint64

	rng    *rand.Rand
	next   float64
	n      int
	bursts []Burst
	left   int // requests left in bursts[0]
	buf    []byte
}

// Next returns the next request.
func (s *Synthetic) Next() (Request, error) {
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, s.Seed^0x5851f42d4c957f2d))
		s.bursts = append([]Burst(nil), s.Bursts...)
		sort.SliceStable(s.bursts, func(i, j int) bool { return s.bursts[i].At < s.bursts[j].At })
		if len(s.bursts) > 0 {
			s.left = s.bursts[0].Count
		}
		s.next = s.gap()
	}
	poisson := s.Rate > 0 && s.next < s.Duration
	if len(s.bursts) > 0 && (!poisson || s.bursts[0].At <= s.next) {
		b := s.bursts[0]
		s.left--
		if s.left == 0 {
			s.bursts = s.bursts[1:]
			if len(s.bursts) > 0 {
				s.left = s.bursts[0].Count
			}
		}
		return s.request(b.At, b.Tokens), nil
	}
	if !poisson {
		return Request{}, io.EOF
	}
	at := s.next
	s.next += s.gap()
	return s.request(at, max(s.Prompt.Sample(s.rng), 1)), nil
}

func (s *Synthetic) gap() float64 {
	if s.Rate <= 0 {
		return math.Inf(1)
	}
	return s.rng.ExpFloat64() / s.Rate
}

func (s *Synthetic) request(at float64, prompt int) Request {
	s.n++
	s.buf = strconv.AppendInt(append(s.buf[:0], 'r'), int64(s.n), 10)
	return Request{ID: string(s.buf), Arrival: at, PromptTokens: prompt, OutputTokens: max(s.Output.Sample(s.rng), 1)}
}

// ErrNoTime marks a request line without an arrival time.
var ErrNoTime = errors.New("no arrival time")
