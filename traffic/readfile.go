package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// chunkSize is the share of a file one worker parses at a time.
const chunkSize = 4 << 20

// ReadFile reads the named file into p. A plain regular file is parsed in
// chunks by opt.Workers goroutines, each reading its chunk with ReadAt into
// a small buffer of its own (parseSections); gzip files and special files
// go through Read.
//
// Reading beats mapping the file here: on a 119 MB log of short lines,
// parsing mapped pages took about twice the CPU time (the first touch of
// every 4 KiB page, and the page faults, cost more than the kernel's copy
// into a buffer that is still in the core's cache when it is parsed).
func ReadFile(ctx context.Context, name string, p *Profile, opt ReadOptions) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory: give the log files", name)
	}
	if st.Mode().IsRegular() && st.Size() > 0 {
		head := make([]byte, min(st.Size(), SniffBytes))
		n, _ := f.ReadAt(head, 0)
		head = head[:n]
		if n < 2 || head[0] != 0x1f || head[1] != 0x8b {
			if i := bytes.IndexByte(head, 0); i >= 0 {
				return binaryError(i)
			}
			if err := parseSections(ctx, f, st.Size(), chunkSize, p, opt.Workers, opt.Progress); err != nil {
				return err
			}
			return p.err
		}
	}
	return Read(ctx, f, p, opt)
}

// countingReader adds what it reads to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// sectionBuffer is what a worker reads a chunk through: small enough that
// the lines the kernel copies in are still in the core's cache when they
// are parsed.
const sectionBuffer = 256 << 10

// parseSections parses a file in chunks of chunk bytes, cut at newlines, claimed by workers that each read their chunk with ReadAt
// (pread) into a buffer of their own: one profile per worker, merged at
// the end.
func parseSections(ctx context.Context, f io.ReaderAt, size, chunk int64, p *Profile, workers int, progress *atomic.Int64) error {
	workers = max(workers, 1)
	var next atomic.Int64 // the next chunk to claim, in chunk units
	parts := make([]*Profile, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		parts[w] = p.clone()
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, sectionBuffer)
			for {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				start := (next.Add(1) - 1) * chunk
				if start >= size {
					return
				}
				end := min(start+chunk, size)
				// A chunk is the lines that start inside [start, end): from
				// the first line start at or after start to the first at
				// or after end, so every line is parsed once.
				b, err := lineStart(f, start, size, buf)
				if err == nil && b < end {
					var e int64
					if e, err = lineStart(f, end, size, buf); err == nil {
						buf, err = parseSection(f, b, e, buf, parts[w])
					}
				}
				if err != nil {
					errs[w] = err
					return
				}
				if progress != nil {
					progress.Add(end - start)
				}
			}
		}(w)
	}
	wg.Wait()
	for _, q := range parts {
		p.Merge(q)
	}
	return errors.Join(errs...)
}

// lineStart is the offset of the first line that starts at or after off:
// off itself at the start of the file, else just past the first newline
// at or after off − 1; size when none follows.
func lineStart(f io.ReaderAt, off, size int64, buf []byte) (int64, error) {
	if off <= 0 || off >= size {
		return min(max(off, 0), size), nil
	}
	// Lines are short: a first small read usually finds the newline.
	for pos, n := off-1, int64(512); pos < size; n = int64(len(buf)) {
		m, err := f.ReadAt(buf[:min(n, size-pos)], pos)
		if i := bytes.IndexByte(buf[:m], '\n'); i >= 0 {
			return pos + int64(i) + 1, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if m == 0 {
			break // the file shrank
		}
		pos += int64(m)
	}
	return size, nil
}

// parseSection parses the lines of f in [b, e), read through buf (grown
// for a longer line, which it returns).
func parseSection(f io.ReaderAt, b, e int64, buf []byte, p *Profile) ([]byte, error) {
	s := splitter{src: io.NewSectionReader(f, b, e-b)}
	for {
		block, nb, err := s.next(buf)
		buf = nb
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return buf, err
		}
		parseBlock(block, p)
	}
	for range s.skipLines {
		p.Skip()
	}
	if cap(buf) > sectionBuffer {
		buf = make([]byte, sectionBuffer) // a long line's buffer goes
	}
	return buf, nil
}
