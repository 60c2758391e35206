package traffic

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHistogramExactBelow256 checks that small values come back exactly.
func TestHistogramExactBelow256(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100; v++ {
		h.Add(v)
	}
	// Nearest rank of 1..100: p50 is the 50th value, p90 the 90th, p99 the 99th.
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	// (1 + 100) / 2 = 50.5
	if h.Mean() != 50.5 || h.Max() != 100 || h.Count() != 100 {
		t.Errorf("mean %v max %d count %d", h.Mean(), h.Max(), h.Count())
	}
}

// TestHistogramRelativeError checks the documented bound (1/256 of the
// value) against exact order statistics of log-uniform samples.
func TestHistogramRelativeError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []int64
	for range 50000 {
		v := int64(math.Exp(r.Float64() * math.Log(2e6)))
		vals = append(vals, v)
		h.Add(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999} {
		rank := int(math.Ceil(q*float64(len(vals)))) - 1
		exact := vals[rank]
		got := h.Quantile(q)
		if err := math.Abs(float64(got-exact)) / float64(exact); err > 1.0/256 {
			t.Errorf("q=%v: %d vs exact %d: relative error %.4f > 1/256", q, got, exact, err)
		}
	}
}

func TestBucketLayout(t *testing.T) {
	// Every value falls in the bucket whose range holds it, and buckets
	// are contiguous.
	prevHi := int64(-1)
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d: [%d, %d] after %d", i, lo, hi, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d: bucketOf(%d)=%d bucketOf(%d)=%d", i, lo, bucketOf(lo), hi, bucketOf(hi))
		}
		prevHi = hi
	}
	if prevHi != 1<<40-1 {
		t.Errorf("last bucket ends at %d, want 2^40-1", prevHi)
	}
}

func kv(ts string, in, out int) string {
	return fmt.Sprintf("%s input_tokens=%d output_tokens=%d\n", ts, in, out)
}

func TestBucketsAndWindows(t *testing.T) {
	var b strings.Builder
	// Four windows of 5 minutes with 20 requests each. Windows 0, 1 and 3:
	// 2 long (L) requests of 20 (10%); window 2: 12 long (60%).
	// Totals: short ones 100+28 = 128 (S), long ones 3000+200 = 3200 (L).
	base := time.Date(2025, 6, 20, 12, 0, 0, 0, time.UTC)
	for w := range 4 {
		for i := range 20 {
			ts := base.Add(time.Duration(w)*5*time.Minute + time.Duration(i)*10*time.Second).Format(time.RFC3339)
			long := i < 2 || (w == 2 && i < 12)
			if long {
				b.WriteString(kv(ts, 3000, 200))
			} else {
				b.WriteString(kv(ts, 100, 28))
			}
		}
	}
	b.WriteString("not a request line\n\n")
	p, err := NewProfile(Options{Window: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := Read(context.Background(), strings.NewReader(b.String()), p, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Requests() != 80 || p.Skipped() != 1 {
		t.Fatalf("requests %d skipped %d, want 80 and 1", p.Requests(), p.Skipped())
	}
	bk := p.Buckets()
	// Long: 3 windows × 2 + 12 = 18; short: 80 − 18 = 62.
	wantCounts := []int64{62, 0, 18, 0}
	for i, c := range wantCounts {
		if bk[i].Count != c {
			t.Errorf("bucket %s: %d, want %d", bk[i].Name, bk[i].Count, c)
		}
	}
	if bk[0].Name != "S" || bk[3].Name != "XL" || bk[3].MaxTokens != nil || *bk[1].MaxTokens != 2048 || bk[2].MinTokens != 2049 {
		t.Errorf("bucket layout %+v", bk)
	}
	if !bk[2].Long || bk[1].Long {
		t.Errorf("long buckets: %+v", bk)
	}
	w := p.Windows()
	if len(w.Windows) != 4 {
		t.Fatalf("%d windows, want 4", len(w.Windows))
	}
	// Shares 0.1, 0.1, 0.6, 0.1: the median is 0.1; 0.6 > 2 × 0.1 and
	// 0.6 − 0.1 > 0.10, so window 2 alone surges.
	if w.Baseline != 0.1 {
		t.Errorf("baseline %v, want 0.1", w.Baseline)
	}
	for i, win := range w.Windows {
		if win.Surge != (i == 2) || win.Requests != 20 {
			t.Errorf("window %d: %+v", i, win)
		}
	}
	if !w.Windows[2].Start.Equal(base.Add(10 * time.Minute)) {
		t.Errorf("window 2 starts %v", w.Windows[2].Start)
	}
	// p90 of 62 × 128 and 18 × 3200: rank ceil(0.9 × 80) = 72 > 62, so 3200.
	if got := p.Total().Quantile(0.9); got != 3200 {
		t.Errorf("total p90 %d, want 3200", got)
	}
}

// TestSurgeNeedsRequests: a window of three requests, all long, is noise.
func TestSurgeNeedsRequests(t *testing.T) {
	var b strings.Builder
	base := time.Date(2025, 6, 20, 12, 0, 0, 0, time.UTC)
	for i := range 20 {
		b.WriteString(kv(base.Add(time.Duration(i)*time.Second).Format(time.RFC3339), 100, 10))
	}
	for i := range 3 {
		b.WriteString(kv(base.Add(time.Hour+time.Duration(i)*time.Second).Format(time.RFC3339), 9000, 10))
	}
	p, _ := NewProfile(Options{Window: 5 * time.Minute})
	if err := Read(context.Background(), strings.NewReader(b.String()), p, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Windows().Windows {
		if w.Surge {
			t.Errorf("window %v flagged with %d requests", w.Start, w.Requests)
		}
	}
}

func TestCustomBounds(t *testing.T) {
	b, err := ParseBounds("1k, 4k,16384")
	if err != nil || !slices.Equal(b, []int64{1024, 4096, 16384}) {
		t.Fatalf("ParseBounds: %v %v", b, err)
	}
	for _, bad := range []string{"", "0", "512,256", "x", "-1", "1,2,3,4,5,6,7,8,9"} {
		if _, err := ParseBounds(bad); err == nil {
			t.Errorf("ParseBounds(%q) accepted", bad)
		}
	}
	p, _ := NewProfile(Options{Bounds: []int64{100}})
	for _, tot := range []int64{100, 101} {
		p.Add(Record{Input: tot})
	}
	bk := p.Buckets()
	if len(bk) != 2 || bk[0].Count != 1 || bk[1].Count != 1 || !bk[1].Long || bk[0].Long {
		t.Errorf("two buckets: %+v", bk)
	}
}

// TestReadGzipParallel reads the same log plain, gzipped, serially and on
// two workers, with CRLF line ends and blocks cut mid-line; all agree.
func TestReadGzipParallel(t *testing.T) {
	var b bytes.Buffer
	for i := range 150000 {
		fmt.Fprintf(&b, "2025-06-20T12:%02d:%02dZ input_tokens=%d output_tokens=%d\r\n", i/60%60, i%60, 1+i%9000, 1+i%700)
	}
	plain := b.Bytes()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(plain)
	zw.Close()
	var results []string
	for _, in := range [][]byte{plain, z.Bytes()} {
		for _, w := range []int{1, 2, 3} {
			p, _ := NewProfile(Options{Window: time.Minute})
			if err := Read(context.Background(), bytes.NewReader(in), p, ReadOptions{Workers: w}); err != nil {
				t.Fatal(err)
			}
			results = append(results, fmt.Sprint(p.Requests(), p.Skipped(), p.Input().Summary(), p.Output().Summary(), p.Total().Summary(), len(p.Windows().Windows)))
		}
	}
	for _, r := range results[1:] {
		if r != results[0] {
			t.Errorf("results differ:\n%s\n%s", results[0], r)
		}
	}
	if !strings.HasPrefix(results[0], "150000 0 ") {
		t.Errorf("got %s", results[0])
	}
}

// TestLongLineSkipped: a line longer than the limit is skipped, the
// lines around it are read.
func TestLongLineSkipped(t *testing.T) {
	p, _ := NewProfile(Options{})
	s := splitter{src: strings.NewReader("input_tokens=1\n" + strings.Repeat("x", 5000) + "\ninput_tokens=2\n"), maxLine: 1000}
	buf := make([]byte, 256)
	for {
		block, b, err := s.next(buf)
		buf = b
		if err != nil {
			break
		}
		parseBlock(block, p)
	}
	if p.Requests() != 2 || s.skipLines != 1 {
		t.Errorf("requests %d, long lines %d; want 2 and 1", p.Requests(), s.skipLines)
	}
}

// TestReadFileSections: a file, cut into chunks at newlines and parsed on
// several workers, gives what the streaming reader gives.
func TestReadFileSections(t *testing.T) {
	var b bytes.Buffer
	for i := range 200000 {
		fmt.Fprintf(&b, "2025-06-20T12:%02d:%02dZ request_id=r%d input_tokens=%d output_tokens=%d\n", i/60%60, i%60, i, 1+i%9000, 1+i%700)
	}
	b.WriteString("last line without newline input_tokens=5")
	name := t.TempDir() + "/requests.log"
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, w := range []int{1, 2, 3} {
		p, _ := NewProfile(Options{Window: time.Minute})
		var done atomic.Int64
		if err := ReadFile(context.Background(), name, p, ReadOptions{Workers: w, Progress: &done}); err != nil {
			t.Fatal(err)
		}
		if done.Load() != int64(b.Len()) {
			t.Errorf("progress %d of %d bytes", done.Load(), b.Len())
		}
		results = append(results, fmt.Sprint(p.Requests(), p.Skipped(), p.Input().Summary(), p.Total().Summary(), len(p.Windows().Windows)))
	}
	p, _ := NewProfile(Options{Window: time.Minute})
	if err := Read(context.Background(), bytes.NewReader(b.Bytes()), p, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(p.Requests(), p.Skipped(), p.Input().Summary(), p.Total().Summary(), len(p.Windows().Windows))
	for _, r := range results {
		if r != want {
			t.Errorf("chunks %s\nstream %s", r, want)
		}
	}
	if !strings.HasPrefix(want, "200001 0 ") {
		t.Errorf("got %s", want)
	}
	if err := ReadFile(context.Background(), t.TempDir(), p, ReadOptions{}); err == nil {
		t.Error("a directory was read")
	}
}

// TestReadFileLongLine: a line longer than two chunks leaves a chunk with
// no line starting in it; its counts are read once, by the chunk where it
// starts.
func TestReadFileLongLine(t *testing.T) {
	data := "input_tokens=1\n" + strings.Repeat("x", 2*chunkSize+100) + " input_tokens=7 output_tokens=3\ninput_tokens=2\n"
	name := t.TempDir() + "/requests.log"
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{1, 2, 3} {
		p, _ := NewProfile(Options{})
		if err := ReadFile(context.Background(), name, p, ReadOptions{Workers: w}); err != nil {
			t.Fatal(err)
		}
		// 1 + 7 + 2 input tokens over three requests.
		if s := p.Input().Summary(); p.Requests() != 3 || s.Max != 7 || p.Input().Count() != 3 || p.Output().Summary().Max != 3 {
			t.Errorf("%d workers: %d requests, input %+v", w, p.Requests(), s)
		}
	}
}
