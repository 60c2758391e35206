package traffic

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gz is data gzipped.
func gz(t *testing.T, data []byte, copies, level int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, level)
	for range copies {
		zw.Write(data)
	}
	zw.Close()
	return b.Bytes()
}

// 32 MiB of empty lines gzip to about 32 KiB (a thousandfold): past the
// first 16 MiB of text the reading stops, with the bound named. A log of
// 20 MiB of random ids and counts, which compresses a few-fold like a real
// one, reads whole.
func TestGzipBound(t *testing.T) {
	bomb := gz(t, bytes.Repeat([]byte{'\n'}, 1<<20), 32, gzip.BestCompression)
	p, _ := NewProfile(Options{Bounds: DefaultBounds})
	err := Read(context.Background(), bytes.NewReader(bomb), p, ReadOptions{})
	if !errors.Is(err, ErrGzipBomb) || !strings.Contains(err.Error(), "more than 100-fold past the first 16 MiB") {
		t.Fatalf("bomb: %v", err)
	}
	// Lines with a random request id and counts, as a gateway writes
	// them: the text compresses a few-fold.
	rng := rand.New(rand.NewPCG(1, 2))
	var text bytes.Buffer
	for text.Len() < 20<<20 {
		fmt.Fprintf(&text, "request_id=%016x input_tokens=%d output_tokens=%d\n", rng.Uint64(), rng.IntN(8000), rng.IntN(500))
	}
	zipped := gz(t, text.Bytes(), 1, gzip.BestSpeed)
	if ratio := text.Len() / len(zipped); ratio >= MaxGzipRatio {
		t.Fatalf("the test log compresses %d-fold", ratio)
	}
	p, _ = NewProfile(Options{Bounds: DefaultBounds})
	if err := Read(context.Background(), bytes.NewReader(zipped), p, ReadOptions{}); err != nil || p.Requests() == 0 {
		t.Fatalf("log: %v, %d requests", err, p.Requests())
	}
}

// Binary data is refused by every path: a plain file, gzip, a stream.
func TestBinaryRefused(t *testing.T) {
	data := append([]byte("input_tokens=5 output_tokens=3\n"), 0, 1, 2, 0xff)
	name := filepath.Join(t.TempDir(), "x.bin")
	os.WriteFile(name, data, 0o644)
	p, _ := NewProfile(Options{Bounds: DefaultBounds})
	for what, err := range map[string]error{
		"file":   ReadFile(context.Background(), name, p, ReadOptions{Workers: 2}),
		"stream": Read(context.Background(), bytes.NewReader(data), p, ReadOptions{}),
		"gzip":   Read(context.Background(), bytes.NewReader(gz(t, data, 1, gzip.DefaultCompression)), p, ReadOptions{}),
	} {
		if err == nil || err.Error() != "binary data, not a text log (a NUL byte at byte 32): give request logs as text or gzip" {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// endlessLines never ends.
type endlessLines struct{}

func (endlessLines) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = '\n'
	}
	return len(b), nil
}

// ContextReader ends an endless read when its context ends.
func TestContextReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := ContextReader(ctx, endlessLines{})
	if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, context.Canceled) {
		t.Errorf("%v", err)
	}
}

func TestNoRecords(t *testing.T) {
	for _, c := range []struct {
		lines int64
		want  string
	}{
		{0, "x.log: no request records: it is empty (no line but blank ones)"},
		{1, "x.log: no request records in 1 line: lines need input_tokens="},
		{7, "x.log: no request records in 7 lines: lines need input_tokens="},
	} {
		err := NoRecords("x.log", c.lines, "")
		if !errors.Is(err, ErrNoRecords) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%d lines: %v", c.lines, err)
		}
	}
}
