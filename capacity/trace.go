package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// trace is the traffic cut into windows: each window's request count, and
// a way to read it again window by window. A traffic of at most
// heldLimit requests without shared prefixes is held in memory after the
// first pass, 16 bytes a request (the day of docs/capacity.md, 1.38
// million requests, is 22 MB): a pass then costs no generation or parse,
// where the sizing's passes (the rounds of two options, the replays) had
// cost a fifteenth of its time. A longer one is read anew each pass, so
// memory is then a few windows' requests whatever the traffic's length.
type trace struct {
	spec    workload.Spec
	open    func(string) (io.ReadCloser, error)
	windowS float64
	counts  []int
	held    []heldRequest
	// end is when the traffic ends: its --duration, else its last
	// request's due time.
	end float64
}

// heldLimit is the most requests a trace holds in memory (64 MB).
const heldLimit = 4_000_000

// heldRequest is a request as a trace holds it.
type heldRequest struct {
	at             float64
	prompt, output int32
}

func readTrace(ctx context.Context, req Request) (*trace, error) {
	tr := &trace{spec: req.Traffic, open: req.Open, windowS: req.WindowS}
	st, closer, err := tr.spec.Open(tr.open)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	hold := true
	keep := func(r workload.Request) {
		tr.end = max(tr.end, r.At)
		if !hold {
			return
		}
		if len(tr.held) >= heldLimit || r.PrefixID != 0 || r.Prompt > math.MaxInt32 || r.Output > math.MaxInt32 {
			hold, tr.held = false, nil
			return
		}
		tr.held = append(tr.held, heldRequest{r.At, int32(r.Prompt), int32(r.Output)})
	}
	err = tr.pass(ctx, teeStream{st, keep}, nil, func(i, n int) { tr.counts = append(tr.counts, n) }, nil)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, c := range tr.counts {
		total += c
	}
	if total == 0 {
		return nil, ErrNoRequests
	}
	tr.end = max(tr.end, tr.spec.Duration)
	return tr, nil
}

// span is window i's length: the window's, or the last one's up to the
// traffic's end, so a short last window's rate is its requests over the
// time they came in, not over a whole window (at least a second: a
// burst's requests all due at one instant came in a second).
func (tr *trace) span(i int) float64 {
	return max(min(tr.windowS, tr.end-float64(i)*tr.windowS), min(tr.windowS, 1))
}

// teeStream hands each request it reads to keep.
type teeStream struct {
	workload.Stream
	keep func(workload.Request)
}

func (t teeStream) Next() (workload.Request, error) {
	r, err := t.Stream.Next()
	if err == nil {
		t.keep(r)
	}
	return r, err
}

// heldStream reads a held trace.
type heldStream struct {
	held []heldRequest
	i    int
}

func (h *heldStream) Next() (workload.Request, error) {
	if h.i >= len(h.held) {
		return workload.Request{}, io.EOF
	}
	r := h.held[h.i]
	h.i++
	return workload.Request{At: r.at, Prompt: int(r.prompt), Output: int(r.output)}, nil
}

// stream reads the traffic again: from memory when held.
func (tr *trace) stream() (workload.Stream, func(), error) {
	if tr.held != nil {
		return &heldStream{held: tr.held}, func() {}, nil
	}
	st, closer, err := tr.spec.Open(tr.open)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { closer.Close() }, nil
}

// source is the whole traffic as a simulator source.
func (tr *trace) source() (sim.Source, func(), error) {
	st, closer, err := tr.stream()
	if err != nil {
		return nil, nil, err
	}
	return sim.FromWorkload(st), closer, nil
}

// each reads the traffic once and calls count, when not nil, with every
// window's request count, and fn, for the windows want asks for, with the
// last warmUpS of the window before (warm) and the window's own requests.
// Only those windows and the ones before them keep their requests, and
// the slices are reused after fn returns. The context is checked at every
// window and every 4,096 requests, so a signal ends a long pass at once.
func (tr *trace) each(ctx context.Context, want func(i int) bool, count func(i, n int), fn func(i int, warm, reqs []workload.Request) error) error {
	st, closer, err := tr.stream()
	if err != nil {
		return err
	}
	defer closer()
	return tr.pass(ctx, st, want, count, fn)
}

// pass is each over a stream.
func (tr *trace) pass(ctx context.Context, st workload.Stream, want func(i int) bool, count func(i, n int), fn func(i int, warm, reqs []workload.Request) error) error {
	var prev, cur, warm []workload.Request
	n, i := 0, 0
	keep := func(i int) bool { return fn != nil && want(i) }
	flush := func() error {
		if i >= MaxWindows {
			return fmt.Errorf("the traffic spans more than %d windows of %gs: give a longer --window", MaxWindows, tr.windowS)
		}
		if count != nil {
			count(i, n)
		}
		if keep(i) {
			warm = warm[:0]
			from := float64(i)*tr.windowS - warmUpS
			for _, r := range prev {
				if r.At >= from {
					warm = append(warm, r)
				}
			}
			if err := fn(i, warm, cur); err != nil {
				return err
			}
		}
		prev, cur = cur, prev[:0]
		n = 0
		i++
		return ctx.Err()
	}
	for k := 0; ; k++ {
		if k%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		r, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for r.At >= float64(i+1)*tr.windowS {
			if err := flush(); err != nil {
				return err
			}
		}
		n++
		if n > maxWindowRequests {
			return fmt.Errorf("more than %d requests in one window of %gs: give a shorter --window", maxWindowRequests, tr.windowS)
		}
		// Only a window wanted, or the one before one wanted (its warm
		// up), keeps its requests.
		if keep(i) || keep(i+1) {
			cur = append(cur, r)
		}
	}
	if n > 0 {
		return flush()
	}
	return nil
}

// sliceSource replays requests shifted by -origin.
type sliceSource struct {
	reqs   [][]workload.Request
	origin float64
	i, j   int
}

func (s *sliceSource) Next() (sim.Request, error) {
	for s.i < len(s.reqs) && s.j >= len(s.reqs[s.i]) {
		s.i, s.j = s.i+1, 0
	}
	if s.i >= len(s.reqs) {
		return sim.Request{}, io.EOF
	}
	r := s.reqs[s.i][s.j]
	s.j++
	return sim.Request{ID: r.ID, Arrival: r.At - s.origin, PromptTokens: r.Prompt, OutputTokens: r.Output, PrefixID: r.PrefixID, PrefixTokens: r.PrefixTokens}, nil
}
