package traffic

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultBounds are the seed's bucket boundaries in total tokens (prompt +
// output): S <= 512, M <= 2048, L <= 8192, XL above.
var DefaultBounds = []int64{512, 2048, 8192}

// DefaultWindow is the length of a time window.
const DefaultWindow = 5 * time.Minute

// maxWindows bounds the windows kept; a log spanning more windows than
// this (a year of 5-minute windows is 105,120) stops counting new windows
// and says so, instead of growing without bound.
const maxWindows = 200_000

// Surge rule: a window surges when its long share exceeds twice the
// baseline (the median long share of all windows with at least
// surgeMinRequests requests) and the baseline by more than surgePoints,
// and it has at least surgeMinRequests requests itself (a window of three
// requests, one long, is noise, not a surge).
const (
	surgeFactor      = 2
	surgePoints      = 0.10
	surgeMinRequests = 10
)

// Options configure a Profile.
type Options struct {
	// Bounds are the buckets' upper bounds in total tokens, ascending;
	// nil means DefaultBounds. n bounds make n+1 buckets.
	Bounds []int64
	// Window is the time-window length; 0 turns windows off.
	Window time.Duration
}

// ParseBounds reads "512,2048,8192" (also 2k, 8K).
func ParseBounds(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		if n := len(f); n > 0 && (f[n-1] == 'k' || f[n-1] == 'K') {
			f, mult = f[:n-1], 1024
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v <= 0 || v > 1<<40/mult {
			return nil, fmt.Errorf("bucket bound %q is not a positive token count (e.g. --buckets 512,2048,8192)", f)
		}
		out = append(out, v*mult)
	}
	return out, validBounds(out)
}

func validBounds(b []int64) error {
	if len(b) == 0 {
		return fmt.Errorf("no bucket bounds (e.g. --buckets 512,2048,8192)")
	}
	if len(b) > 8 {
		return fmt.Errorf("%d bucket bounds: at most 8", len(b))
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			return fmt.Errorf("bucket bounds must ascend: %d after %d", b[i], b[i-1])
		}
	}
	if b[0] <= 0 {
		return fmt.Errorf("bucket bound %d is not positive", b[0])
	}
	return nil
}

// bucketNames name buckets from the shortest; with the default three
// bounds they are the seed's S, M, L, XL.
var bucketNames = []string{"S", "M", "L", "XL", "XXL", "3XL", "4XL", "5XL", "6XL"}

// Profile accumulates request records in bounded memory: histograms and
// counters, never rows. It is not safe for concurrent use; parallel
// readers keep one each and Merge them.
type Profile struct {
	bounds []int64
	window int64 // seconds; 0 = off

	requests    int64
	skipped     int64
	outputLimit int64
	timed       int64
	noYear      bool

	input, output Histogram
	// buckets hold the total tokens per size class; the distribution of
	// all totals is their merge (Total), which saves one histogram update
	// per request.
	buckets []Histogram

	windows       map[int64][]int64 // window index → requests per bucket
	windowsCapped bool
	// err is the first request line that breaks the rules every reader of
	// request logs shares (traffic.MaxTokens, a JSON request's fields):
	// the reading fails with it, as simulate's does.
	err        error
	lastW      int64 // window index of lastCounts
	lastStart  int64 // its first second; Unix times in [lastStart, lastStart+window) need no division
	lastCounts []int64
}

// NewProfile returns an empty profile.
func NewProfile(opt Options) (*Profile, error) {
	b := opt.Bounds
	if b == nil {
		b = DefaultBounds
	}
	if err := validBounds(b); err != nil {
		return nil, err
	}
	w := int64(opt.Window / time.Second)
	if opt.Window < 0 || (opt.Window > 0 && w == 0) {
		return nil, fmt.Errorf("window %s: give a window of at least 1s (e.g. --window 5m), or 0 for none", opt.Window)
	}
	p := &Profile{
		bounds:  slices.Clone(b),
		window:  w,
		buckets: make([]Histogram, len(b)+1),
		windows: map[int64][]int64{},
	}
	// Allocated up front, so the hot path (Histogram.add) needs no check.
	p.input.counts = make([]uint64, numBuckets)
	p.output.counts = make([]uint64, numBuckets)
	for i := range p.buckets {
		p.buckets[i].counts = make([]uint64, numBuckets)
	}
	return p, nil
}

// clone returns an empty profile with p's options.
func (p *Profile) clone() *Profile {
	q, _ := NewProfile(Options{Bounds: p.bounds, Window: time.Duration(p.window) * time.Second})
	return q
}

func (p *Profile) bucket(total int64) int {
	// Counted without an early exit: a branch on random totals is
	// mispredicted half the time.
	b := 0
	for _, x := range p.bounds {
		b += int(uint64(x-total) >> 63) // 1 when total > x; both < 2^40
	}
	return b
}

// Add counts one request.
func (p *Profile) Add(r Record) { p.add(&r) }

// countLimit bounds counts for the fast path: both below 2^39, their sum
// below 2^40, the histograms' range. ParseLine never yields more.
const countLimit = 1 << 39

func (p *Profile) add(r *Record) {
	p.requests++
	total := r.Input + r.Output
	var b int
	if uint64(r.Input) < countLimit && uint64(r.Output) < countLimit {
		p.input.add(r.Input)
		p.output.add(r.Output)
		b = p.bucket(total)
		p.buckets[b].add(total)
	} else {
		p.input.Add(r.Input)
		p.output.Add(r.Output)
		b = p.bucket(min(max(total, 0), 1<<40-1))
		p.buckets[b].Add(total)
	}
	if r.OutputIsLimit {
		p.outputLimit++
	}
	if !r.HasTime {
		return
	}
	p.timed++
	p.noYear = p.noYear || r.NoYear
	if p.window == 0 {
		return
	}
	if p.lastCounts != nil && r.Unix >= p.lastStart && r.Unix-p.lastStart < p.window {
		p.lastCounts[b]++
		return
	}
	w := floorDiv(r.Unix, p.window)
	if p.lastCounts == nil || w != p.lastW {
		c, ok := p.windows[w]
		if !ok {
			if len(p.windows) >= maxWindows {
				p.windowsCapped = true
				return
			}
			c = make([]int64, len(p.bounds)+1)
			p.windows[w] = c
		}
		p.lastW, p.lastStart, p.lastCounts = w, w*p.window, c
	}
	p.lastCounts[b]++
}

// Skip counts a non-blank line that held no token counts.
func (p *Profile) Skip() { p.skipped++ }

// fail keeps the first line that breaks the shared rules, with why.
func (p *Profile) fail(line []byte, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%v (the line %s)", err, clip(bytes.TrimSpace(line)))
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Merge adds o (with the same options) to p.
func (p *Profile) Merge(o *Profile) {
	if p.err == nil {
		p.err = o.err
	}
	p.requests += o.requests
	p.skipped += o.skipped
	p.outputLimit += o.outputLimit
	p.timed += o.timed
	p.noYear = p.noYear || o.noYear
	p.input.Merge(&o.input)
	p.output.Merge(&o.output)
	for i := range p.buckets {
		p.buckets[i].Merge(&o.buckets[i])
	}
	p.windowsCapped = p.windowsCapped || o.windowsCapped
	for w, c := range o.windows {
		mine, ok := p.windows[w]
		if !ok {
			if len(p.windows) >= maxWindows {
				p.windowsCapped = true
				continue
			}
			mine = make([]int64, len(c))
			p.windows[w] = mine
		}
		for i, n := range c {
			mine[i] += n
		}
	}
	p.lastCounts = nil
}

// Requests is the number of requests counted.
func (p *Profile) Requests() int64 { return p.requests }

// Skipped is the number of non-blank lines without token counts.
func (p *Profile) Skipped() int64 { return p.skipped }

// OutputIsLimit is the number of requests whose output is their
// max_tokens (vLLM request logs).
func (p *Profile) OutputIsLimit() int64 { return p.outputLimit }

// Timed is the number of requests that carried a time.
func (p *Profile) Timed() int64 { return p.timed }

// Input is the distribution of prompt tokens.
func (p *Profile) Input() *Histogram { return &p.input }

// Output is the distribution of output tokens.
func (p *Profile) Output() *Histogram { return &p.output }

// Total is the distribution of total tokens (a fresh merge of the
// buckets' histograms; callers needing it often should keep it).
func (p *Profile) Total() *Histogram {
	var h Histogram
	for i := range p.buckets {
		h.Merge(&p.buckets[i])
	}
	return &h
}

// Bounds are the bucket bounds.
func (p *Profile) Bounds() []int64 { return slices.Clone(p.bounds) }

// Bucket is one size class of requests by total tokens.
type Bucket struct {
	Name string `json:"name"`
	// MinTokens and MaxTokens bound the bucket's total tokens; MaxTokens
	// is nil for the last, open bucket.
	MinTokens int64  `json:"min_tokens"`
	MaxTokens *int64 `json:"max_tokens"`
	Count     int64  `json:"count"`
	// Share is Count / requests, 0..1.
	Share float64 `json:"share"`
	// Total is the distribution of total tokens inside the bucket.
	Total Summary `json:"total_tokens"`
	// Long marks the buckets counted as long traffic (the upper half:
	// L and XL by default).
	Long bool `json:"long"`
	hist *Histogram
}

// Buckets returns the size classes, shortest first.
func (p *Profile) Buckets() []Bucket {
	out := make([]Bucket, len(p.buckets))
	first := p.firstLong()
	for i := range p.buckets {
		b := Bucket{Name: bucketNames[i], Count: p.buckets[i].Count(), Total: p.buckets[i].Summary(), Long: i >= first, hist: &p.buckets[i]}
		if i > 0 {
			b.MinTokens = p.bounds[i-1] + 1
		}
		if i < len(p.bounds) {
			m := p.bounds[i]
			b.MaxTokens = &m
		}
		if p.requests > 0 {
			b.Share = round4(float64(b.Count) / float64(p.requests))
		}
		out[i] = b
	}
	return out
}

// firstLong is the index of the first long bucket: the upper half of the
// buckets (L and XL of S, M, L, XL).
func (p *Profile) firstLong() int {
	n := len(p.bounds) + 1
	return (n + 1) / 2
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Window is one time window's traffic.
type Window struct {
	Start time.Time `json:"start"`
	// Requests is the number of requests that started in the window.
	Requests int64 `json:"requests"`
	// Counts is the number of requests per bucket, shortest first.
	Counts []int64 `json:"counts"`
	// LongShare is the share (0..1) of long requests (L and XL).
	LongShare float64 `json:"long_share"`
	// Surge is set when LongShare surges above the baseline (see the
	// surge rule at surgeFactor).
	Surge bool `json:"surge"`
}

// WindowReport is the time windows with their baseline.
type WindowReport struct {
	Seconds int64 `json:"window_seconds"`
	// Baseline is the median long share of the windows with at least 10
	// requests.
	Baseline float64  `json:"baseline_long_share"`
	Windows  []Window `json:"windows"`
	// NoYear is set when the times came without a year (vLLM's log
	// format): Start then carries the year 2000 and only its month, day
	// and clock mean anything.
	NoYear bool `json:"no_year,omitempty"`
	// Capped is set when the log spans more windows than are kept.
	Capped bool `json:"capped,omitempty"`
}

// Windows returns the time windows in order, with the surge flags; empty
// when windows are off or no request carried a time.
func (p *Profile) Windows() WindowReport {
	rep := WindowReport{Seconds: p.window, NoYear: p.noYear, Capped: p.windowsCapped, Windows: []Window{}}
	if p.window == 0 || len(p.windows) == 0 {
		return rep
	}
	keys := make([]int64, 0, len(p.windows))
	for w := range p.windows {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	first := p.firstLong()
	var shares []float64
	for _, w := range keys {
		c := p.windows[w]
		win := Window{Start: time.Unix(w*p.window, 0).UTC(), Counts: slices.Clone(c)}
		var long int64
		for i, n := range c {
			win.Requests += n
			if i >= first {
				long += n
			}
		}
		if win.Requests > 0 {
			win.LongShare = round4(float64(long) / float64(win.Requests))
		}
		if win.Requests >= surgeMinRequests {
			shares = append(shares, win.LongShare)
		}
		rep.Windows = append(rep.Windows, win)
	}
	if len(shares) == 0 {
		return rep
	}
	rep.Baseline = median(shares)
	for i := range rep.Windows {
		w := &rep.Windows[i]
		w.Surge = w.Requests >= surgeMinRequests && w.LongShare > surgeFactor*rep.Baseline && w.LongShare-rep.Baseline > surgePoints
	}
	return rep
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return round4((s[n/2-1] + s[n/2]) / 2)
}
