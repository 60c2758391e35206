package vllm

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// LogScanner reads vLLM's output as it streams and keeps a StartupReport.
// Write (one stream) and ReadFrom (any number of streams, one goroutine
// each) may be used at the same time; a line split across writes or reads
// is put back together, and "\r" (progress bars) ends a line as "\n" does.
// The zero value is ready to use.
type LogScanner struct {
	// OnEvent, when set, is called with each recognised line, in order,
	// one call at a time (under the scanner's lock: it must not call back
	// into the scanner).
	OnEvent func(LogEvent)
	// OnLine, when set, is called with every line, recognised or not
	// (under the same lock).
	OnLine func(string)

	mu      sync.Mutex
	report  StartupReport
	partial []byte // Write's unfinished line
}

// Line feeds one complete line.
func (s *LogScanner) Line(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line(line)
}

func (s *LogScanner) line(line string) {
	s.report.Lines++
	if s.OnLine != nil {
		s.OnLine(line)
	}
	ev, ok := ParseLogLine(line)
	if !ok {
		return
	}
	s.report.Add(ev)
	if s.OnEvent != nil {
		s.OnEvent(ev)
	}
}

// Write feeds raw output of one stream; it never fails.
func (s *LogScanner) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := indexEOL(p)
		if i < 0 {
			room := MaxLineLen - len(s.partial)
			s.partial = append(s.partial, p[:max(0, min(room, len(p)))]...)
			break
		}
		if len(s.partial) > 0 {
			room := MaxLineLen - len(s.partial)
			s.partial = append(s.partial, p[:max(0, min(room, i))]...)
			s.line(string(s.partial))
			s.partial = s.partial[:0]
		} else {
			s.line(string(p[:min(i, MaxLineLen)]))
		}
		p = p[i+1:]
	}
	return n, nil
}

// Flush ends Write's stream: an unfinished last line is read as a line.
func (s *LogScanner) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
}

// ReadFrom reads r to its end, line by line, and returns the bytes read.
// Each call keeps its own unfinished line, so several streams (stdout and
// stderr) can be read at once. Reaching the end is not an error; a read
// error is returned after the last line is fed.
func (s *LogScanner) ReadFrom(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	var total int64
	var cur []byte
	for {
		chunk, err := br.ReadSlice('\n')
		total += int64(len(chunk))
		for len(chunk) > 0 {
			i := indexEOL(chunk)
			if i < 0 {
				cur = appendCapped(cur, chunk)
				break
			}
			cur = appendCapped(cur, chunk[:i])
			s.Line(string(cur))
			cur = cur[:0]
			chunk = chunk[i+1:]
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			err = nil
		}
		if len(cur) > 0 {
			s.Line(string(cur))
		}
		return total, err
	}
}

func appendCapped(dst, p []byte) []byte {
	room := MaxLineLen - len(dst)
	if room <= 0 {
		return dst
	}
	return append(dst, p[:min(room, len(p))]...)
}

func indexEOL(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

// Report returns what has been read so far.
func (s *LogScanner) Report() StartupReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Errors = append([]LogEvent(nil), r.Errors...)
	if r.AutoFit != nil {
		a := *r.AutoFit
		r.AutoFit = &a
	}
	return r
}
