package loadtest

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"headroom.dev/headroom/traffic"
)

// maxLogLine bounds one request-log line. vLLM's request lines carry the
// prompt's token ids: a 128k-token prompt writes about 1 MiB; longer
// lines are skipped and counted.
const maxLogLine = 16 << 20

// maxSecondGroup bounds the lines held to spread one second's requests
// over that second (logs stamp whole seconds).
const maxSecondGroup = 1 << 16

// maxDue bounds a replayed due time: 100 years.
const maxDue = 100 * 365 * 24 * time.Hour

// Replay reads a request log in any format package traffic reads
// (traffic.ParseLine: key=value, OpenAI usage JSON lines, vLLM's request
// log; gzip recognised by its magic bytes) and yields its requests with
// their own token sizes.
//
// Timing: each line's time, from the first line's, divided by Speedup.
// Logs that stamp whole seconds have the k requests of one second spread
// evenly over it (at s, s+1/k, ...) instead of all going at its start;
// once a line carries a fraction of a second (traffic.Record.Nano), lines
// keep their own times. A
// line without a time, or with a time earlier than the line before (logs
// of several processes interleave), goes with the line before it; those
// are counted in OutOfOrder. A log whose first request has no time is
// replayed untimed: its items are due from Untimed (a Synthetic giving the
// arrival times), or all at once for a closed loop.
//
// A missing count takes DefaultPrompt or DefaultOutput. vLLM's own log
// shows max_tokens, not the tokens generated (traffic.Record.OutputIsLimit):
// replayed as max_tokens it is the most the request may generate.
type Replay struct {
	Speedup                      float64
	DefaultPrompt, DefaultOutput int64
	// Untimed gives due times to a log without timestamps; nil sends
	// them all at once.
	Untimed *Synthetic

	// OutOfOrder counts lines sent with the line before them; Skipped
	// counts lines without a token count (or too long).
	OutOfOrder, Skipped int64

	br      *bufio.Reader
	started bool
	timed   bool
	t0      int64
	t0Nano  int32
	// subsec is set by the first line with a fraction of a second: from
	// then on lines keep their own times instead of being spread.
	subsec  bool
	lastDue time.Duration
	group   []traffic.Record
	gsec    int64
	gi      int
	pending *traffic.Record
	eof     bool
}

// NewReplay reads r (plain or gzip).
func NewReplay(r io.Reader, speedup float64) (*Replay, error) {
	br, err := traffic.Text(r)
	if err != nil {
		return nil, err
	}
	if speedup <= 0 {
		speedup = 1
	}
	return &Replay{br: br, Speedup: speedup}, nil
}

// record returns the next line's record, or false at the end.
func (p *Replay) record() (traffic.Record, bool, error) {
	for !p.eof {
		line, err := p.readLine()
		if err == io.EOF {
			p.eof = true
		} else if err != nil {
			return traffic.Record{}, false, err
		}
		if line == nil {
			continue
		}
		if r, ok := traffic.ParseLine(line); ok {
			return r, true, nil
		}
		if len(line) > 0 {
			p.Skipped++
		}
	}
	return traffic.Record{}, false, nil
}

// readLine returns the next line, nil for a skipped one, and io.EOF
// with the last line.
func (p *Replay) readLine() ([]byte, error) {
	line, err := readLine(p.br, maxLogLine)
	if err == errLineTooLong {
		p.Skipped++
		return nil, p.skipLine()
	}
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading the request log: %v", err)
	}
	return line, err
}

func (p *Replay) skipLine() error {
	for {
		_, err := p.br.ReadSlice('\n')
		switch err {
		case bufio.ErrBufferFull:
			continue
		case nil:
			return nil
		case io.EOF:
			p.eof = true
			return nil
		default:
			return fmt.Errorf("reading the request log: %v", err)
		}
	}
}

// next returns the record read ahead, if any, else the next one.
func (p *Replay) next() (traffic.Record, bool, error) {
	if p.pending != nil {
		r := *p.pending
		p.pending = nil
		return r, true, nil
	}
	return p.record()
}

func (p *Replay) item(r traffic.Record, due time.Duration) Item {
	it := Item{Due: due, Prompt: r.Input, Output: r.Output}
	if it.Prompt <= 0 {
		it.Prompt = p.DefaultPrompt
	}
	if it.Output <= 0 {
		it.Output = p.DefaultOutput
	}
	return it
}

// Timed reads up to the first request and reports whether it has a time
// (the log is replayed on its own timing) and whether there is one.
func (p *Replay) Timed() (timed, any bool, err error) {
	if !p.started {
		p.started = true
		r, ok, err := p.record()
		if err != nil || !ok {
			return false, false, err
		}
		p.timed = r.HasTime
		p.t0, p.t0Nano = r.Unix, r.Nano
		p.pending = &r
	}
	return p.timed, p.timed || p.pending != nil, nil
}

// Next implements Schedule.
func (p *Replay) Next() (Item, bool, error) {
	if !p.started {
		if _, ok, err := p.Timed(); err != nil || !ok {
			return Item{}, false, err
		}
	}
	if !p.timed {
		r, ok, err := p.next()
		if err != nil || !ok {
			return Item{}, false, err
		}
		due := time.Duration(0)
		if p.Untimed != nil {
			u, _, _ := p.Untimed.Next()
			due = u.Due
		}
		return p.item(r, due), true, nil
	}
	if p.gi >= len(p.group) {
		if err := p.fill(); err != nil {
			return Item{}, false, err
		}
		if len(p.group) == 0 {
			return Item{}, false, nil
		}
	}
	k := len(p.group)
	r := p.group[p.gi]
	frac := float64(p.gi) / float64(k)
	if p.subsec {
		// The log has the fraction: its own time, never before the
		// line before (an out-of-order or untimed line goes with it).
		frac = 0
		if r.HasTime && r.Unix == p.gsec {
			frac = float64(r.Nano) / 1e9
		}
	}
	off := float64(p.gsec-p.t0) + frac - float64(p.t0Nano)/1e9
	// A log spanning centuries (a garbled year) would overflow Duration;
	// such items stay at the bound, far past any run's end.
	due := max(time.Duration(min(off/p.Speedup*float64(time.Second), float64(maxDue))), p.lastDue)
	p.lastDue = due
	it := p.item(r, due)
	p.gi++
	return it, true, nil
}

// fill reads the next second's lines into group.
func (p *Replay) fill() error {
	p.group, p.gi = p.group[:0], 0
	for len(p.group) < maxSecondGroup {
		r, ok, err := p.next()
		if err != nil || !ok {
			return err
		}
		p.markSubsec(r)
		if len(p.group) == 0 {
			// The group's second: its first line's, never earlier than
			// the last group's.
			if r.HasTime && r.Unix > p.gsec {
				p.gsec = r.Unix
			} else if r.HasTime && r.Unix < p.gsec {
				p.OutOfOrder++
			}
			p.group = append(p.group, r)
			continue
		}
		switch {
		case !r.HasTime || r.Unix == p.gsec:
		case r.Unix < p.gsec:
			p.OutOfOrder++
		default:
			p.pending = &r
			return nil
		}
		p.group = append(p.group, r)
	}
	return nil
}

// markSubsec notes a line that carries a fraction of a second.
func (p *Replay) markSubsec(r traffic.Record) {
	if r.HasTime && r.Nano != 0 {
		p.subsec = true
	}
}
