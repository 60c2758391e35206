package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
)

// SeqsSearch is a search for the --max-num-seqs a traffic favours: every
// candidate's engine runs the same traffic, and the best run wins.
type SeqsSearch struct {
	// Candidates are the max-num-seqs values to try (SeqsCandidates gives
	// the usual set); duplicates and values below 1 are dropped.
	Candidates []int
	// Config returns the engine of a candidate. Its pool may differ from
	// candidate to candidate (vLLM's profile run, and with it the KV
	// cache, grows with max-num-seqs); ok false leaves the candidate out
	// (its plan does not fit).
	Config func(maxNumSeqs int) (cfg Config, ok bool, err error)
	// Open returns a fresh source of the traffic and its closer; it is
	// called once per candidate run, so every run sees the same requests.
	Open func() (Source, func(), error)
	// Run steers each run.
	Run RunOptions
	// DataParallel, above 1, runs each candidate as a server of that many
	// engines (RunDataParallel): max-num-seqs is each engine's.
	DataParallel int
	// Done holds runs already made, by max-num-seqs, which are reused
	// instead of run again (simulate's run of the given settings).
	Done map[int]*Report
	// Reference, when one of the candidates, is the value the reason
	// compares the choice with (the rule the search replaces).
	Reference int
	// Parallel runs up to this many candidates at once (each run is
	// independent, so the outcome is the same); 0 or 1 runs them in turn.
	// Config and Open are always called from the calling goroutine.
	Parallel int
}

// SeqsTrial is one candidate's run.
type SeqsTrial struct {
	MaxNumSeqs   int     `json:"max_num_seqs"`
	NumGPUBlocks int     `json:"num_gpu_blocks"`
	Requests     int64   `json:"requests"`
	Rejected     int64   `json:"rejected"`
	Preemptions  int64   `json:"preemptions"`
	E2EP99MS     float64 `json:"e2e_p99_ms"`
	TTFTP99MS    float64 `json:"ttft_p99_ms"`
	MaxKVUsage   float64 `json:"max_kv_usage"`

	// Report is the whole run.
	Report *Report `json:"-"`
	// Config is the candidate's engine.
	Config Config `json:"-"`
}

// SeqsChoice is the outcome of ChooseMaxNumSeqs.
type SeqsChoice struct {
	MaxNumSeqs int `json:"max_num_seqs"`
	// Trials are the runs in the order the candidates were given.
	Trials []SeqsTrial `json:"candidates"`
	// Reason says in words why the choice won.
	Reason string `json:"reason"`
}

// Best returns the chosen trial.
func (c SeqsChoice) Best() SeqsTrial {
	for _, t := range c.Trials {
		if t.MaxNumSeqs == c.MaxNumSeqs {
			return t
		}
	}
	return SeqsTrial{}
}

// ErrNoCandidate is returned when no candidate's engine fits.
var ErrNoCandidate = errors.New("no max-num-seqs candidate fits")

// SeqsCandidates is the usual set: top (the largest value allowed,
// vLLM's default or the user's), every power of two from 8 below it, and
// the extra values (the planner's rule) where they lie below top.
func SeqsCandidates(top int, extra ...int) []int {
	out := []int{top}
	for n := 8; n < top; n *= 2 {
		out = append(out, n)
	}
	for _, n := range extra {
		if n > 0 && n < top && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// BetterTrial orders the candidates: fewer rejected requests, then the
// lower E2E p99 (what users wait), then fewer preemptions, then the
// larger max-num-seqs (room for traffic the sample did not show).
func BetterTrial(a, b SeqsTrial) bool {
	// (E2E p99s within sameTailShare of each other are the same run.)
	switch {
	case a.Rejected != b.Rejected:
		return a.Rejected < b.Rejected
	case !sameTail(a.E2EP99MS, b.E2EP99MS):
		return a.E2EP99MS < b.E2EP99MS
	case a.Preemptions != b.Preemptions:
		return a.Preemptions < b.Preemptions
	}
	return a.MaxNumSeqs > b.MaxNumSeqs
}

// sameTailShare is how close two E2E p99s must be to count as the same
// run: a cap that shaves 1% off a simulated tail by holding requests back
// in a burst is no better than one that never binds, and the larger cap
// leaves room for a burstier day. 2% is above the histograms' 0.4% and
// the step model's noise between two runs, and far below what a binding
// cap costs (a queue: many times the tail).
const sameTailShare = 0.02

func sameTail(a, b float64) bool {
	return math.Abs(a-b) <= sameTailShare*max(a, b)
}

// ChooseMaxNumSeqs runs the traffic through every candidate's engine and
// returns the best by BetterTrial, every run, and the reason. It does no
// I/O of its own: the traffic comes from s.Open.
func ChooseMaxNumSeqs(ctx context.Context, s SeqsSearch) (SeqsChoice, error) {
	var out SeqsChoice
	seen := map[int]bool{}
	type job struct {
		src   Source
		close func()
	}
	var jobs []job
	defer func() {
		for _, j := range jobs {
			if j.close != nil {
				j.close()
			}
		}
	}()
	for _, n := range s.Candidates {
		if n < 1 || seen[n] {
			continue
		}
		seen[n] = true
		cfg, ok, err := s.Config(n)
		if err != nil {
			return out, err
		}
		if !ok {
			continue
		}
		t := SeqsTrial{MaxNumSeqs: n, NumGPUBlocks: cfg.NumGPUBlocks, Config: cfg, Report: s.Done[n]}
		var j job
		if t.Report == nil {
			if j.src, j.close, err = s.Open(); err != nil {
				return out, err
			}
		}
		out.Trials = append(out.Trials, t)
		jobs = append(jobs, j)
	}
	if len(out.Trials) == 0 {
		return out, ErrNoCandidate
	}
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, max(s.Parallel, 1))
	var wg sync.WaitGroup
	for i := range jobs {
		if jobs[i].src == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if s.DataParallel > 1 {
				out.Trials[i].Report, errs[i] = RunDataParallel(ctx, out.Trials[i].Config, jobs[i].src, s.Run, s.DataParallel)
				return
			}
			e, err := New(out.Trials[i].Config)
			if err == nil {
				out.Trials[i].Report, err = Run(ctx, e, jobs[i].src, s.Run)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	best := -1
	for i := range out.Trials {
		if errs[i] != nil {
			return out, errs[i]
		}
		t := &out.Trials[i]
		rep := t.Report
		t.Requests, t.Rejected, t.Preemptions = rep.Requests, rep.Rejected, rep.Preemptions
		t.E2EP99MS, t.TTFTP99MS, t.MaxKVUsage = rep.E2E.P99, rep.TTFT.P99, rep.MaxKVUsage
		if best < 0 || BetterTrial(*t, out.Trials[best]) {
			best = i
		}
	}
	b := out.Trials[best]
	out.MaxNumSeqs = b.MaxNumSeqs
	out.Reason = reason(b, out.Trials, s.Reference)
	return out, nil
}

// reason says why b won: against the reference when it lost to b, else
// as the best of the runs.
func reason(b SeqsTrial, trials []SeqsTrial, ref int) string {
	msg := fmt.Sprintf("max-num-seqs %d: chosen by simulating the traffic (%d values tried): E2E p99 %s, %d preemptions",
		b.MaxNumSeqs, len(trials), msString(b.E2EP99MS), b.Preemptions)
	if b.Rejected > 0 {
		msg += fmt.Sprintf(", %d rejected", b.Rejected)
	}
	for _, r := range trials {
		if r.MaxNumSeqs != ref || ref == b.MaxNumSeqs {
			continue
		}
		switch {
		case r.Rejected != b.Rejected:
			msg += fmt.Sprintf("; %d would reject %d requests", r.MaxNumSeqs, r.Rejected)
		case r.E2EP99MS != b.E2EP99MS:
			msg += fmt.Sprintf("; %d would give E2E p99 %s, %d preemptions", r.MaxNumSeqs, msString(r.E2EP99MS), r.Preemptions)
		case r.Preemptions != b.Preemptions:
			msg += fmt.Sprintf("; %d gives the same E2E p99 with %d preemptions", r.MaxNumSeqs, r.Preemptions)
		default:
			msg += fmt.Sprintf("; %d gives the same run, and the larger value leaves room for more", r.MaxNumSeqs)
		}
	}
	return msg
}

// msString renders milliseconds for a reason: "850 ms", "12.3 s".
func msString(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// Limit passes at most n requests of src: a bounded sample of a long
// traffic, so a search stays fast.
type Limit struct {
	Src Source
	N   int
}

// Next returns the next request, or io.EOF after N.
func (l *Limit) Next() (Request, error) {
	if l.N <= 0 {
		return Request{}, io.EOF
	}
	l.N--
	return l.Src.Next()
}
