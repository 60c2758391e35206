package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// chunkSize is the share of a mapped file one worker parses at a time.
const chunkSize = 4 << 20

// ReadFile reads the named file into p. A plain regular file is mapped
// into memory where the platform allows it (mapFile), so its bytes are
// parsed where the page cache holds them, by opt.Workers goroutines,
// without a copy through read buffers; gzip files, special files and
// platforms without mapping go through Read.
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
		if data, unmap, err := mapFile(f, st.Size()); err == nil {
			defer unmap()
			if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
				return Read(ctx, bytes.NewReader(data), p, opt)
			}
			return parseMapped(ctx, data, p, opt.Workers, opt.Progress)
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

// errShrank is the error of a mapped file cut short while it is read
// (log rotation by truncation): touching the lost pages faults.
var errShrank = errors.New("the file was truncated while it was read; read a copy, or the rotated file")

// parseMapped parses mapped bytes in chunks cut at newlines, one profile
// per worker, merged at the end.
func parseMapped(ctx context.Context, data []byte, p *Profile, workers int, progress *atomic.Int64) error {
	workers = max(workers, 1)
	var next atomic.Int64 // start of the next chunk to claim, in chunkSize units
	parts := make([]*Profile, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		parts[w] = p.clone()
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs[w] = parseChunks(ctx, data, parts[w], &next, progress)
		}(w)
	}
	wg.Wait()
	for _, q := range parts {
		p.Merge(q)
	}
	return errors.Join(errs...)
}

// parseChunks claims chunks until none is left. A chunk is the lines that
// start inside [k×chunkSize, (k+1)×chunkSize): it begins after the first
// newline before its start and runs past its end to the end of its last
// line, so every line is parsed once.
func parseChunks(ctx context.Context, data []byte, p *Profile, next *atomic.Int64, progress *atomic.Int64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = errShrank
		}
	}()
	n := int64(len(data))
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := next.Add(1) - 1
		start := k * chunkSize
		if start >= n {
			return nil
		}
		end := min(start+chunkSize, n)
		if start > 0 {
			// Lines that began before start belong to the previous chunk.
			i := bytes.IndexByte(data[start-1:end], '\n')
			if i < 0 {
				continue
			}
			start += int64(i)
		}
		if end < n {
			if i := bytes.IndexByte(data[end-1:], '\n'); i >= 0 {
				end += int64(i)
			} else {
				end = n
			}
		}
		if start < end {
			parseBlock(data[start:end], p)
		}
		if progress != nil {
			progress.Add(end - start)
		}
	}
}
