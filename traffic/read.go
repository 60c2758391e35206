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

// Limits every reader of request logs shares (simulate and loadtest's
// --requests, profile, doctor):
//
//   - gzip may expand at most MaxGzipRatio-fold past its first
//     GzipFreeBytes of text: a log compresses 5 to 30-fold, a decompression
//     bomb a thousandfold (3 MB of gzip to 3 GB of empty lines), and is
//     refused after GzipFreeBytes of text (a second or so of reading)
//     instead of after minutes;
//   - text with a NUL byte in its first SniffBytes is binary, not a log.
const (
	GzipFreeBytes = 16 << 20
	MaxGzipRatio  = 100
	SniffBytes    = 64 << 10
)

// Text is r's text, buffered: r itself, or r gunzipped when it starts with
// gzip's magic bytes (1f 8b, RFC 1952), so every reader of request logs
// takes a .gz as it is. Binary data is refused (LooksBinary), gzip within
// its bound (Gunzip). bufio's Read hands large reads straight through, so
// the parallel reader loses nothing to the buffer.
func Text(r io.Reader) (*bufio.Reader, error) {
	in := &countingReader{r: r, n: new(atomic.Int64)}
	br := bufio.NewReaderSize(in, SniffBytes)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gunzip(br, in.n)
		if err != nil {
			return nil, err
		}
		br = bufio.NewReaderSize(zr, SniffBytes)
	}
	head, _ := br.Peek(SniffBytes)
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return nil, binaryError(i)
	}
	return br, nil
}

// LooksBinary reports a NUL byte in head: text evidence has none.
func LooksBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

func binaryError(at int) error {
	return fmt.Errorf("binary data, not a text log (a NUL byte at byte %d): give request logs as text or gzip", at+1)
}

// Gunzip opens gzip data within the bound every reader shares: past
// GzipFreeBytes of text, more than MaxGzipRatio bytes of text per byte of
// gzip read is an error.
func Gunzip(r io.Reader) (io.Reader, error) {
	in := &countingReader{r: r, n: new(atomic.Int64)}
	return gunzip(bufio.NewReaderSize(in, SniffBytes), in.n)
}

func gunzip(br *bufio.Reader, compressed *atomic.Int64) (io.Reader, error) {
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("not a readable gzip file: %v", err)
	}
	return &boundedGzip{zr: zr, in: compressed}, nil
}

// ErrGzipTruncated is gzip data that ends before its stream does (a file
// cut short in a copy): refused, not read as far as it goes.
var ErrGzipTruncated = errors.New("the gzip data is cut short (a truncated file): its stream ends before its last block")

// ErrGzipBomb is gzip that expands past the shared bound.
var ErrGzipBomb = errors.New("gzip expands past the bound")

type boundedGzip struct {
	zr  io.Reader
	in  *atomic.Int64
	out int64
}

func (g *boundedGzip) Read(b []byte) (int, error) {
	n, err := g.zr.Read(b)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// gzip's own word for a stream cut short; io.ReadFull uses the
		// same error for a short last read, which a reader of blocks
		// takes as the end, and would read a truncated file as whole.
		err = ErrGzipTruncated
	}
	g.out += int64(n)
	if g.out > GzipFreeBytes && g.out > MaxGzipRatio*g.in.Load() {
		return n, fmt.Errorf("%w: %d MiB of text from %d KiB of gzip, more than %d-fold past the first %d MiB (a decompression bomb, or gunzip it first)",
			ErrGzipBomb, g.out>>20, g.in.Load()>>10, MaxGzipRatio, GzipFreeBytes>>20)
	}
	return n, err
}

// ContextReader reads r until ctx ends, then fails with ctx's error: a
// reader of a long or endless input honours an interrupt between reads.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// ErrNoRecords is a source without a single request record.
var ErrNoRecords = errors.New("no request records")

// NoRecords is the error of a source of lines (non-blank ones) none of
// which is a request: every reader of request logs refuses it alike.
// extra names formats beyond package traffic's own.
func NoRecords(name string, lines int64, extra string) error {
	var err error
	if lines == 0 {
		err = fmt.Errorf("%w: it is empty (no line but blank ones)", ErrNoRecords)
	} else {
		unit := "lines"
		if lines == 1 {
			unit = "line"
		}
		err = fmt.Errorf("%w in %d %s: lines need input_tokens=/output_tokens= (or prompt_tokens/completion_tokens), an OpenAI usage object%s, or vLLM's \"Received request\" lines",
			ErrNoRecords, lines, unit, extra)
	}
	if name != "" {
		err = fmt.Errorf("%s: %w", name, err)
	}
	return err
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
		err = readSerial(ctx, src, p)
	} else {
		err = readParallel(ctx, src, p, opt.Workers)
	}
	if err == nil {
		err = p.err
	}
	return err
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
		switch {
		case IsJSONRequest(line):
			// headroom's own format (a --trace, a --requests file), read
			// as simulate reads it: strictly, with its time.
			j, err := ParseJSONRequest(line)
			switch {
			case err != nil:
				p.fail(line, err)
			case j.Prompt < 0 && j.Output < 0:
				p.Skip()
			default:
				rec = j.record()
				p.add(&rec)
			}
		case c.parse(line, &rec):
			if err := CheckCounts(rec); err != nil {
				p.fail(line, err)
				continue
			}
			p.add(&rec)
		case !blank(line):
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
