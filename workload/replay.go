package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"headroom.dev/headroom/traffic"
)

// maxLogLine bounds one request-log line. vLLM's request lines carry the
// prompt's token ids: a 128k-token prompt writes about 1 MiB. A longer
// line is an error that names it, never skipped: it may be a request.
const maxLogLine = 16 << 20

// maxSecondGroup bounds the lines held to spread one second's requests
// over that second (logs stamp whole seconds).
const maxSecondGroup = 1 << 16

// maxDue bounds a replayed due time: 100 years, in seconds.
const maxDue = 100 * 365 * 24 * 3600.0

// line is one request of a log.
type line struct {
	id             string
	prompt, output int64
	// t is the line's time in seconds: from the log's first timed line
	// for request logs (abs), from 0 for JSON lines with "arrival_s".
	t       float64
	hasTime bool
	abs     bool
	// whole marks a request-log time without a fraction of a second.
	whole        bool
	prefixID     uint64
	prefixTokens int
	endpoint     string
}

// replay reads a request log: JSON lines {"id", "arrival_s",
// "prompt_tokens", "output_tokens", "prefix_id", "prefix_tokens",
// "endpoint"} and every
// format package traffic reads (traffic.ParseLine: key=value, OpenAI usage
// JSON lines, vLLM's request log; gzip recognised by its magic bytes), in
// any mix, with their own token sizes.
//
// Timing: each line's time, from the first line's (a JSON line's
// arrival_s from 0), divided by the speedup. Logs that stamp whole
// seconds have the k requests of one second spread evenly over it (at s,
// s+1/k, ...) instead of all at its start; once a line carries a fraction
// of a second, lines keep their own times. A line without a time, or with
// a time earlier than the line before (logs of several processes
// interleave), goes with the line before it; both are counted in
// OutOfOrder. A log whose first request has no time takes untimed's
// arrivals (the Spec's rate or closed loop), and without them is an
// error.
//
// A missing size is drawn from prompt or output. vLLM's own log shows
// max_tokens, not the tokens generated (traffic.Record.OutputIsLimit):
// replayed as max_tokens it is the most the request may generate.
type replay struct {
	speedup        float64
	prompt, output Dist
	rng            *rand.Rand
	untimed        *arrivalTimes

	// OutOfOrder counts lines sent with the line before them; Skipped
	// counts lines that are no request.
	OutOfOrder, Skipped int64
	// byEndpoint counts the requests whose line says which endpoint they
	// called (vLLM's chatcmpl- and cmpl- ids, a JSON line's "endpoint"):
	// each calls its own, the rest the Spec's endpoint.
	byEndpoint map[string]int64
	endpoint   string
	// lines counts the non-blank lines read.
	lines int64
	// name is the log's, for errors past the first request.
	name string

	br      *bufio.Reader
	lineNo  int
	started bool
	timed   bool
	t0      float64
	haveT0  bool
	// subsec is set by the first line with a fraction of a second: from
	// then on lines keep their own times instead of being spread.
	subsec  bool
	lastDue float64
	group   []line
	gsec    float64
	gi      int
	pending *line
	eof     bool
	buf     []byte
}

func newReplay(r io.Reader, speedup float64, prompt, output Dist, rng *rand.Rand) (*replay, error) {
	br, err := traffic.Text(r)
	if err != nil {
		return nil, err
	}
	if !(speedup > 0) {
		speedup = 1
	}
	return &replay{br: br, speedup: speedup, prompt: prompt, output: output, rng: rng}, nil
}

// parse reads one line; ok is false for a line that is no request.
func (p *replay) parse(b []byte) (line, bool, error) {
	if traffic.IsJSONRequest(b) {
		// headroom's own format, read by the rules every reader shares.
		j, err := traffic.ParseJSONRequest(b)
		if err != nil {
			return line{}, false, fmt.Errorf("line %d: %v", p.lineNo, err)
		}
		l := line{id: j.ID, t: j.ArrivalS, hasTime: true, prefixID: j.PrefixID, prompt: max(j.Prompt, 0), output: max(j.Output, 0), prefixTokens: int(max(j.PrefixTokens, 0))}
		if j.HasEndpoint {
			if l.endpoint, err = ParseEndpoint(j.Endpoint); err != nil {
				return line{}, false, fmt.Errorf("line %d: %v", p.lineNo, err)
			}
			p.count(l.endpoint)
		}
		return l, true, nil
	}
	rec, ok := traffic.ParseLine(b)
	if !ok {
		return line{}, false, nil
	}
	if err := traffic.CheckCounts(rec); err != nil {
		return line{}, false, fmt.Errorf("line %d: %v", p.lineNo, err)
	}
	p.count(rec.Endpoint)
	l := line{prompt: rec.Input, output: rec.Output, hasTime: rec.HasTime, abs: true, whole: rec.Nano == 0, endpoint: rec.Endpoint}
	if rec.HasTime {
		l.t = float64(rec.Unix) + float64(rec.Nano)/1e9
	}
	return l, true, nil
}

// record returns the next request line, or false at the end.
func (p *replay) record() (line, bool, error) {
	for !p.eof {
		b, err := p.readLine()
		if err == io.EOF {
			p.eof = true
		} else if err != nil {
			return line{}, false, err
		}
		p.lineNo++
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		p.lines++
		l, ok, err := p.parse(b)
		if err != nil {
			return line{}, false, err
		}
		if ok {
			if l.id == "" {
				l.id = "line-" + strconv.Itoa(p.lineNo)
			}
			return l, true, nil
		}
		p.Skipped++
	}
	return line{}, false, nil
}

// readLine returns the next line, and io.EOF with the last.
func (p *replay) readLine() ([]byte, error) {
	p.buf = p.buf[:0]
	for {
		frag, err := p.br.ReadSlice('\n')
		if len(p.buf)+len(frag) > maxLogLine {
			return nil, fmt.Errorf("line %d: longer than the %d MiB (%d bytes) a request line may have", p.lineNo+1, maxLogLine>>20, maxLogLine)
		}
		p.buf = append(p.buf, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil || errors.Is(err, io.EOF):
			return p.buf, err
		default:
			return nil, fmt.Errorf("reading the request log: %w", err)
		}
	}
}

// next returns the line read ahead, if any, else the next one.
func (p *replay) next() (line, bool, error) {
	if p.pending != nil {
		l := *p.pending
		p.pending = nil
		return l, true, nil
	}
	return p.record()
}

// endpointNote says which requests called another endpoint than the
// Spec's, as their lines say; "" when none did.
func (p *replay) endpointNote() string {
	own := p.endpoint
	if own == "" {
		own = EndpointCompletions
	}
	var other []string
	for _, e := range []string{EndpointChat, EndpointCompletions} {
		if n := p.byEndpoint[e]; n > 0 && e != own {
			other = append(other, fmt.Sprintf("%d called %s", n, endpointPath(e)))
		}
	}
	if len(other) == 0 {
		return ""
	}
	return fmt.Sprintf("request log: %s (their lines say so: vLLM's chatcmpl- and cmpl- ids, a JSON line's \"endpoint\"), each priced at its own; the lines that do not say call %s (--endpoint)", strings.Join(other, ", "), endpointPath(own))
}

// endpointPath is the URL path of an endpoint.
func endpointPath(e string) string {
	if e == EndpointChat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// count counts a line that names its endpoint.
func (p *replay) count(endpoint string) {
	if endpoint == "" {
		return
	}
	if p.byEndpoint == nil {
		p.byEndpoint = map[string]int64{}
	}
	p.byEndpoint[endpoint]++
}

func (p *replay) request(l line, at float64) Request {
	r := Request{ID: l.id, At: at, Prompt: int(l.prompt), Output: int(l.output), PrefixID: l.prefixID, PrefixTokens: l.prefixTokens, Endpoint: l.endpoint}
	if r.Prompt <= 0 && p.prompt != nil {
		r.Prompt = max(p.prompt.Sample(p.rng), 1)
	}
	if r.Output <= 0 && p.output != nil {
		r.Output = max(p.output.Sample(p.rng), 1)
	}
	r.PrefixTokens = min(r.PrefixTokens, r.Prompt)
	return r
}

// start reads up to the first request and decides how the log is timed;
// ok is false for a log without requests.
func (p *replay) start() (bool, error) {
	if p.started {
		return p.pending != nil || p.timed || p.untimed != nil, nil
	}
	p.started = true
	l, ok, err := p.record()
	if err != nil {
		return false, err
	}
	if !ok {
		// profile's rule: a log without one request is refused.
		return false, traffic.NoRecords("", p.lines, ", JSON lines with arrival_s")
	}
	p.timed = l.hasTime && p.untimed == nil
	if !l.hasTime && p.untimed == nil {
		return false, errors.New("its first request has no time: give --rate or --concurrency to replay its sizes")
	}
	p.pending = &l
	return true, nil
}

// Next returns the next request.
func (p *replay) Next() (Request, error) {
	r, err := p.next1()
	if err != nil && err != io.EOF && p.name != "" {
		err = fmt.Errorf("--requests %s: %w", p.name, err)
	}
	return r, err
}

func (p *replay) next1() (Request, error) {
	if !p.started {
		if ok, err := p.start(); err != nil {
			return Request{}, err
		} else if !ok {
			return Request{}, io.EOF
		}
	}
	if !p.timed {
		l, ok, err := p.next()
		if err != nil {
			return Request{}, err
		}
		if !ok {
			return Request{}, io.EOF
		}
		return p.request(l, p.untimed.next()), nil
	}
	if p.gi >= len(p.group) {
		if err := p.fill(); err != nil {
			return Request{}, err
		}
		if len(p.group) == 0 {
			return Request{}, io.EOF
		}
	}
	k := len(p.group)
	l := p.group[p.gi]
	off := p.gsec + float64(p.gi)/float64(k)
	if p.subsec {
		// The log has the fraction: its own time, never before the line
		// before (an out-of-order or untimed line goes with it).
		off = p.lastDue * p.speedup
		if l.hasTime {
			off = max(p.rel(l), off)
		}
	}
	// A log spanning centuries (a garbled year) stays at the bound, far
	// past any run's end.
	due := max(min(off/p.speedup, maxDue), p.lastDue)
	p.lastDue = due
	p.gi++
	return p.request(l, due), nil
}

// rel is a line's time from the log's origin.
func (p *replay) rel(l line) float64 {
	if !l.abs {
		return l.t
	}
	if !p.haveT0 {
		p.t0, p.haveT0 = l.t, true
	}
	return l.t - p.t0
}

// fill reads the next second's lines into group.
func (p *replay) fill() error {
	p.group, p.gi = p.group[:0], 0
	for len(p.group) < maxSecondGroup {
		l, ok, err := p.next()
		if err != nil || !ok {
			return err
		}
		if l.hasTime && (!l.abs || !l.whole) {
			p.subsec = true
		}
		if p.subsec {
			if l.hasTime && p.rel(l) < p.lastDue*p.speedup {
				p.OutOfOrder++
			} else if !l.hasTime {
				p.OutOfOrder++
			}
			p.group = append(p.group, l)
			return nil
		}
		sec := p.gsec
		if l.hasTime {
			sec = math.Floor(p.rel(l))
		}
		if len(p.group) == 0 {
			// The group's second: its first line's, never earlier than the
			// last group's.
			if sec > p.gsec {
				p.gsec = sec
			} else if l.hasTime && sec < p.gsec {
				p.OutOfOrder++
			}
			p.group = append(p.group, l)
			continue
		}
		switch {
		case !l.hasTime || sec == p.gsec:
		case sec < p.gsec:
			p.OutOfOrder++
		default:
			p.pending = &l
			return nil
		}
		p.group = append(p.group, l)
	}
	return nil
}
