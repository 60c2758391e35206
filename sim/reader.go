package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"headroom.dev/headroom/traffic"
)

// maxLine bounds one request line; a longer line is an error, not a
// reason to grow without limit.
const maxLine = 16 << 20

// LineSource reads requests from text, one a line, in any mix of:
//
//   - JSON lines {"id": "a", "arrival_s": 0.25, "prompt_tokens": 812,
//     "output_tokens": 64} (id optional; "prefix_id" and
//     "prefix_tokens" name a shared prompt prefix);
//   - every request-log format `headroom profile` reads (traffic.ParseLine:
//     key=value, OpenAI usage JSON, vLLM request logs), whose timestamps
//     give the arrival: seconds after the first line's time.
//
// Arrivals are divided by Speedup (when > 0). Blank lines are skipped;
// any other line that is not a request, or a request without a time, is
// an error naming its line. Gzip input is recognised by its magic bytes.
type LineSource struct {
	Speedup float64

	r      *bufio.Reader
	line   int
	origin float64
	haveT0 bool
	last   float64
	buf    []byte
}

// NewLineSource reads from r.
func NewLineSource(r io.Reader, speedup float64) (*LineSource, error) {
	br, err := traffic.Text(r)
	if err != nil {
		return nil, err
	}
	return &LineSource{r: br, Speedup: speedup}, nil
}

// jsonRequest is the simulator's own line format; pointers tell a
// missing field from a zero one.
type jsonRequest struct {
	ID           *string  `json:"id"`
	Arrival      *float64 `json:"arrival_s"`
	Prompt       *int     `json:"prompt_tokens"`
	Output       *int     `json:"output_tokens"`
	PrefixID     uint64   `json:"prefix_id"`
	PrefixTokens int      `json:"prefix_tokens"`
}

var arrivalKey = []byte(`"arrival_s"`)

// recordTime is a request-log record's time in seconds; the one place a
// record's clock is read.
func recordTime(r traffic.Record) (float64, bool) {
	return float64(r.Unix) + float64(r.Nano)/1e9, r.HasTime
}

// Next returns the next request.
func (s *LineSource) Next() (Request, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return Request{}, err
		}
		s.line++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		req, err := s.parse(line)
		if err != nil {
			return Request{}, fmt.Errorf("line %d: %w", s.line, err)
		}
		if s.Speedup > 0 {
			req.Arrival /= s.Speedup
		}
		if req.Arrival < s.last {
			return Request{}, fmt.Errorf("line %d: %w: arrival %.3fs is before the previous line's %.3fs (sort the file by time)", s.line, ErrUnsorted, req.Arrival, s.last)
		}
		s.last = req.Arrival
		return req, nil
	}
}

func (s *LineSource) readLine() ([]byte, error) {
	s.buf = s.buf[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.buf = append(s.buf, chunk...)
		if len(s.buf) > maxLine {
			return nil, fmt.Errorf("line %d: longer than %d MiB", s.line+1, maxLine>>20)
		}
		switch {
		case err == nil:
			return s.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(s.buf) > 0:
			return s.buf, nil
		default:
			return nil, err
		}
	}
}

func (s *LineSource) parse(line []byte) (Request, error) {
	if line[0] == '{' && bytes.Contains(line, arrivalKey) {
		var j jsonRequest
		if err := json.Unmarshal(line, &j); err != nil {
			return Request{}, fmt.Errorf("not a JSON request: %v", err)
		}
		if j.Arrival == nil || j.Prompt == nil || j.Output == nil {
			return Request{}, errors.New(`a JSON request needs "arrival_s", "prompt_tokens" and "output_tokens"`)
		}
		if *j.Arrival < 0 || *j.Prompt < 0 || *j.Output < 0 || *j.Arrival != *j.Arrival {
			return Request{}, errors.New("arrival_s and token counts must not be negative")
		}
		r := Request{Arrival: *j.Arrival, PromptTokens: *j.Prompt, OutputTokens: *j.Output, PrefixID: j.PrefixID, PrefixTokens: j.PrefixTokens}
		if j.ID != nil {
			r.ID = *j.ID
		} else {
			r.ID = strconv.Itoa(s.line)
		}
		return r, nil
	}
	rec, ok := traffic.ParseLine(line)
	if !ok {
		return Request{}, errors.New(`not a request: want a JSON line {"arrival_s", "prompt_tokens", "output_tokens"} or a request-log line with token counts and a time`)
	}
	t, ok := recordTime(rec)
	if !ok {
		return Request{}, fmt.Errorf("%w: a request-log line needs a timestamp to replay (or use --rate for synthetic arrivals)", ErrNoTime)
	}
	if !s.haveT0 {
		s.origin, s.haveT0 = t, true
	}
	return Request{ID: "line-" + strconv.Itoa(s.line), Arrival: t - s.origin, PromptTokens: int(rec.Input), OutputTokens: int(rec.Output)}, nil
}
