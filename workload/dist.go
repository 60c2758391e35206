package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Dist is a distribution of token counts.
type Dist interface {
	Sample(r *rand.Rand) int
	String() string
	// Mean is the distribution's mean.
	Mean() float64
}

// Fixed is always N.
type Fixed int

// Sample returns N.
func (d Fixed) Sample(*rand.Rand) int { return int(d) }
func (d Fixed) String() string        { return fmt.Sprintf("fixed:%d", int(d)) }

// Mean is N.
func (d Fixed) Mean() float64 { return float64(d) }

// Uniform is uniform over the integers [Lo, Hi].
type Uniform struct{ Lo, Hi int }

// Sample draws from [Lo, Hi].
func (d Uniform) Sample(r *rand.Rand) int { return d.Lo + r.IntN(d.Hi-d.Lo+1) }
func (d Uniform) String() string          { return fmt.Sprintf("uniform:%d-%d", d.Lo, d.Hi) }

// Mean is the midpoint.
func (d Uniform) Mean() float64 { return float64(d.Lo+d.Hi) / 2 }

// RangeOf is vllm bench serve's random length: uniform over the integers
// from floor(n × (1 − ratio)) to floor(n × (1 + ratio)), what its random
// dataset draws with --random-range-ratio (vllm/benchmarks/datasets.py,
// RandomDataset: np.random.randint(int(len × (1 − r)), int(len × (1 + r))
// + 1)). A ratio of 0 is n itself.
func RangeOf(n int, ratio float64) Dist {
	if ratio <= 0 {
		return Fixed(n)
	}
	return Uniform{Lo: int(float64(n) * (1 - ratio)), Hi: int(float64(n) * (1 + ratio))}
}

// Quantile interpolates linearly between known quantiles (as a profile's
// p50/p90/p99/max give them): Points are (q, value) pairs with q rising
// from 0 to 1.
type Quantile struct {
	Points []QuantilePoint
	Name   string
}

// QuantilePoint is one known quantile.
type QuantilePoint struct {
	Q     float64
	Value int
}

// Sample inverts the piecewise-linear distribution function.
func (d Quantile) Sample(r *rand.Rand) int {
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

func (d Quantile) String() string { return d.Name }

// Mean is the mean of the piecewise-linear distribution: each segment's
// width times the mean of its ends.
func (d Quantile) Mean() float64 {
	var m float64
	for i := 1; i < len(d.Points); i++ {
		a, b := d.Points[i-1], d.Points[i]
		m += (b.Q - a.Q) * float64(a.Value+b.Value) / 2
	}
	return m
}

// Least is the smallest length d draws (what a length of 0 must be
// checked on); a distribution of another kind answers its mean.
func Least(d Dist) int {
	switch d := d.(type) {
	case Fixed:
		return int(d)
	case Uniform:
		return d.Lo
	case Quantile:
		if len(d.Points) > 0 {
			return d.Points[0].Value
		}
	}
	return int(math.Ceil(d.Mean()))
}

// maxTokens bounds one length, as every reader of request logs bounds one
// (traffic.MaxTokens).
const maxTokens = traffic.MaxTokens

var errDist = errors.New("want N, fixed:N, uniform:A-B or a 'headroom profile -o json' file")

// ParseTokens reads a token count as vLLM reads --max-model-len
// (vllm.HumanInt: 2k = 2000, 2K = 2048), from 0 to the workload's bound.
func ParseTokens(s string) (int, bool) {
	n, ok := vllm.HumanInt(s)
	if !ok || n < 0 || n > maxTokens {
		return 0, false
	}
	return int(n), true
}

// ParseDist reads N, fixed:N or uniform:A-B, each count as ParseTokens
// reads it ("2k").
func ParseDist(s string) (Dist, error) {
	kind, arg, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		kind, arg = "fixed", kind
	}
	switch kind {
	case "fixed":
		n, ok := ParseTokens(arg)
		if !ok {
			return nil, fmt.Errorf("token length %q: %w (N from 0 to %d; %s)", s, errDist, maxTokens, vllm.HumanIntHelp)
		}
		return Fixed(n), nil
	case "uniform":
		a, b, ok := strings.Cut(arg, "-")
		lo, ok1 := ParseTokens(a)
		hi, ok2 := ParseTokens(b)
		if !ok || !ok1 || !ok2 || hi < lo {
			return nil, fmt.Errorf("token length %q: want uniform:A-B with 0 <= A <= B <= %d", s, maxTokens)
		}
		return Uniform{lo, hi}, nil
	}
	return nil, fmt.Errorf("token length %q: %w", s, errDist)
}

// profileLengths is what a `headroom profile -o json` output says of
// lengths: the summaries of its prompt and output tokens.
type profileLengths struct {
	Input  *traffic.Summary `json:"input_tokens"`
	Output *traffic.Summary `json:"output_tokens"`
}

// maxProfile bounds a profile file read for its lengths.
const maxProfile = 64 << 20

// ProfileDists reads a `headroom profile -o json` output and returns its
// prompt and output lengths as distributions (QuantileOf).
func ProfileDists(r io.Reader, name string) (prompt, output Dist, err error) {
	data, err := io.ReadAll(io.LimitReader(r, maxProfile+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(data) > maxProfile {
		return nil, nil, fmt.Errorf("%s: over %d MiB, not a profile", name, maxProfile>>20)
	}
	var p profileLengths
	if err := json.Unmarshal(data, &p); err != nil || p.Input == nil || p.Output == nil {
		return nil, nil, fmt.Errorf("%s: not a 'headroom profile -o json' output (it needs input_tokens and output_tokens)", name)
	}
	if prompt, err = QuantileOf(*p.Input, name+" input_tokens"); err != nil {
		return nil, nil, err
	}
	if output, err = QuantileOf(*p.Output, name+" output_tokens"); err != nil {
		return nil, nil, err
	}
	return prompt, output, nil
}

// QuantileOf turns a profile's summary into a distribution: linear between
// p50, p90, p99 and max, and from a lowest value chosen so the
// distribution's mean is the profile's mean (clamped to 1..p50): the
// profile keeps no minimum.
func QuantileOf(s traffic.Summary, name string) (Dist, error) {
	if s.Count == 0 || s.Max <= 0 {
		return nil, fmt.Errorf("%s: the profile has no requests", name)
	}
	if s.P50 > s.P90 || s.P90 > s.P99 || s.P99 > s.Max || s.P50 < 0 || s.Max > maxTokens {
		return nil, fmt.Errorf("%s: quantiles out of order", name)
	}
	p50, p90, p99, mx := float64(s.P50), float64(s.P90), float64(s.P99), float64(s.Max)
	// Mean of the upper segments: each contributes its width × the mean
	// of its ends.
	upper := 0.4*(p50+p90)/2 + 0.09*(p90+p99)/2 + 0.01*(p99+mx)/2
	// The first segment (0..0.5) contributes 0.5 × (v0 + p50) / 2.
	v0 := (s.Mean - upper - 0.25*p50) / 0.25
	v0 = min(max(v0, 1), p50)
	return Quantile{Name: name, Points: []QuantilePoint{
		{Q: 0, Value: int(math.Round(v0))}, {Q: 0.5, Value: int(s.P50)}, {Q: 0.9, Value: int(s.P90)},
		{Q: 0.99, Value: int(s.P99)}, {Q: 1, Value: int(s.Max)}}}, nil
}
