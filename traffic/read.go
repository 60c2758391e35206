package traffic

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Block sizes of the reader: lines are parsed in blocks of blockSize
// bytes cut at a newline; a line longer than maxLineBytes is skipped (and
// counted as skipped), so memory stays at (workers + 2) blocks.
const (
	blockSize    = 4 << 20
	maxLineBytes = 64 << 20
)

// ReadOptions steer Read.
type ReadOptions struct {
	// Workers is the number of goroutines parsing blocks; <= 1 parses in
	// the caller's goroutine.
	Workers int
	// Progress, when not nil, is advanced by the bytes read (or, for a
	// file read in chunks, parsed), for a progress line.
	Progress *atomic.Int64
}

// Text is r's text, buffered: r itself, or r gunzipped when it starts with
// gzip's magic bytes (1f 8b, RFC 1952), so every reader of request logs
// takes a .gz as it is. bufio's Read hands large reads straight through, so
// the parallel reader loses nothing to the buffer.
func Text(r io.Reader) (*bufio.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		return bufio.NewReaderSize(zr, 64<<10), nil
	}
	return br, nil
}

// Read streams r (plain text, or gzip recognised by its magic bytes) into
// p. It stops at ctx's end or the first read error.
func Read(ctx context.Context, r io.Reader, p *Profile, opt ReadOptions) error {
	if opt.Progress != nil {
		r = &countingReader{r: r, n: opt.Progress}
	}
	src, err := Text(r)
	if err != nil {
		return err
	}
	if opt.Workers <= 1 {
		return readSerial(ctx, src, p)
	}
	return readParallel(ctx, src, p, opt.Workers)
}

// parseBlock parses the lines of b into p.
func parseBlock(b []byte, p *Profile) {
	var c dateCache
	for len(b) > 0 {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		var rec Record
		if c.parse(line, &rec) {
			p.add(&rec)
		} else if !blank(line) {
			p.Skip()
		}
	}
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// splitter cuts a stream into blocks that end at a newline.
type splitter struct {
	src       io.Reader
	carry     []byte // the start of a line that began in the previous block
	skipping  bool   // inside a line longer than maxLineBytes
	eof       bool
	skipLines int64
	// maxLine is the longest line read; 0 means maxLineBytes.
	maxLine int
}

// next reads into buf (grown for a long line) and returns the whole lines
// read, and the buffer. At the end of the stream the last line needs no
// newline; io.EOF follows the last block.
func (s *splitter) next(buf []byte) ([]byte, []byte, error) {
	limit := s.maxLine
	if limit <= 0 {
		limit = maxLineBytes
	}
	for {
		if s.eof {
			return nil, buf, io.EOF
		}
		if need := len(s.carry) + max(cap(buf)/4, 64); need > cap(buf) {
			buf = make([]byte, max(need, 2*cap(buf)))
		}
		buf = buf[:cap(buf)]
		n := copy(buf, s.carry)
		s.carry = s.carry[:0]
		m, err := io.ReadFull(s.src, buf[n:])
		n += m
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			s.eof = true
		} else if err != nil {
			return nil, buf, err
		}
		data := buf[:n]
		if s.skipping {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				continue
			}
			s.skipping = false
			data = data[i+1:]
		}
		last := bytes.LastIndexByte(data, '\n')
		if s.eof {
			last = len(data) - 1
		}
		if last < 0 {
			if len(data) >= limit {
				s.skipping = true
				s.skipLines++
				continue
			}
			s.carry = append(s.carry, data...)
			continue
		}
		s.carry = append(s.carry, data[last+1:]...)
		return data[:last+1], buf, nil
	}
}

func readSerial(ctx context.Context, src io.Reader, p *Profile) error {
	s := splitter{src: src}
	buf := make([]byte, blockSize)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		block, b, err := s.next(buf)
		buf = b
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		parseBlock(block, p)
	}
	for range s.skipLines {
		p.Skip()
	}
	return nil
}

// readParallel reads blocks in this goroutine and parses them on workers,
// each into its own profile, merged at the end. Buffers circulate through
// a free list, so memory is workers + 2 blocks.
func readParallel(ctx context.Context, src io.Reader, p *Profile, workers int) error {
	free := make(chan []byte, workers+2)
	for range workers + 2 {
		free <- make([]byte, blockSize)
	}
	work := make(chan []byte)
	parts := make([]*Profile, workers)
	var wg sync.WaitGroup
	for i := range workers {
		parts[i] = p.clone()
		wg.Add(1)
		go func(q *Profile) {
			defer wg.Done()
			for b := range work {
				parseBlock(b, q)
				free <- b[:cap(b)]
			}
		}(parts[i])
	}
	s := splitter{src: src}
	var err error
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		buf := <-free
		block, _, e := s.next(buf)
		if errors.Is(e, io.EOF) {
			break
		}
		if e != nil {
			err = e
			break
		}
		work <- block
	}
	close(work)
	wg.Wait()
	for _, q := range parts {
		p.Merge(q)
	}
	for range s.skipLines {
		p.Skip()
	}
	return err
}
