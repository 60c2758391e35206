package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"headroom.dev/headroom/vllm"
)

// lines is an exposition generated as it is read: n lines of line(i),
// after head; n < 0 never ends.
type lines struct {
	head string
	n, i int
	line func(i int) string
	buf  []byte
}

func (l *lines) Read(p []byte) (int, error) {
	for len(l.buf) < len(p) {
		switch {
		case l.head != "":
			l.buf = append(l.buf, l.head...)
			l.head = ""
		case l.n >= 0 && l.i >= l.n:
			if len(l.buf) == 0 {
				return 0, io.EOF
			}
			n := copy(p, l.buf)
			l.buf = l.buf[n:]
			return n, nil
		default:
			l.buf = append(l.buf, l.line(l.i)...)
			l.i++
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

// peakHeap runs f on r and returns the most live heap above the start
// that a GC every 8 reads of r found.
func peakHeap(t *testing.T, r io.Reader, f func(io.Reader)) uint64 {
	t.Helper()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	reads := 0
	probe := readerFunc(func(p []byte) (int, error) {
		reads++
		if reads%8 == 0 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base.HeapAlloc {
				peak = max(peak, m.HeapAlloc-base.HeapAlloc)
			}
		}
		return r.Read(p)
	})
	f(probe)
	return peak
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Two hundred thousand series of a family read, among as many of a family
// not read: the sum is right and the live heap stays under a few MiB
// (the whole exposition is 11 MB; parsed at once it took 300+ MiB at a
// million lines).
func TestParseStreamsManySeries(t *testing.T) {
	const n = 100_000
	body := &lines{head: "# TYPE vllm:num_requests_running gauge\n", n: 2 * n, line: func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("vllm:num_requests_running{engine=\"%d\",model_name=\"m\"} 1\n", i/2)
		}
		return fmt.Sprintf("python_gc_objects_collected_total{generation=\"%d\"} 7\n", i)
	}}
	var s VLLMSample
	var err error
	peak := peakHeap(t, body, func(r io.Reader) { s, err = ParseVLLMMetrics(r) })
	if err != nil {
		t.Fatal(err)
	}
	if s.RequestsRunning != n || strings.Join(s.Models, ",") != "m" {
		t.Errorf("running %v models %v, want %d and [m]", s.RequestsRunning, s.Models, n)
	}
	t.Logf("live heap at most %d KiB", peak>>10)
	if peak > 16<<20 {
		t.Errorf("the live heap reached %d MiB reading %d lines", peak>>20, 2*n)
	}
}

// An endless body stops at the byte bound, with an error that names it
// (watch said "text format parsing error in line 639806: unexpected end
// of input stream").
func TestParseEndlessStopsAtTheBound(t *testing.T) {
	line := "vllm:num_requests_running 1\n" + strings.Repeat("python_info{implementation=\"CPython\"} 1\n", 100)
	body := &lines{n: -1, line: func(int) string { return line }}
	_, err := ParseVLLMMetrics(body)
	if !errors.Is(err, ErrExpositionTooLarge) || !strings.Contains(err.Error(), "cut at 32 MiB") {
		t.Fatalf("err = %v, want the 32 MiB bound named", err)
	}
	if read := body.i * len(line); read > MaxExpositionBytes+1<<20 {
		t.Errorf("read %d MiB before stopping", read>>20)
	}
}

// One line of 64 MiB: skipped when its family is not read, an error
// naming the line when it is.
func TestParseLongLines(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	s, err := ParseVLLMMetrics(strings.NewReader("other_metric{a=\"" + long + "\"} 1\nvllm:num_requests_waiting 3\n"))
	if err != nil || s.RequestsWaiting != 3 {
		t.Errorf("a long line of another family: %v, %+v", err, s)
	}
	_, err = ParseVLLMMetrics(strings.NewReader("vllm:num_requests_waiting 3\nvllm:num_requests_running{a=\"" + long + "\"} 1\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2 (vllm:num_requests_running) is longer than 64 KiB") {
		t.Errorf("a long line of a family read: %v", err)
	}
}

// A broken line of a family read is named by its line in the body, not
// in the chunk parsed; a broken line elsewhere does not hide the rest.
func TestParseErrorLines(t *testing.T) {
	in := "# HELP x y\n# TYPE vllm:num_requests_waiting gauge\nother 1\nvllm:num_requests_waiting 3\nvllm:num_requests_waiting{a=\"\xff\"} 1\n"
	_, err := ParseVLLMMetrics(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "line 5:") {
		t.Errorf("err = %v, want line 5 named", err)
	}
	s, err := ParseVLLMMetrics(strings.NewReader("other{a=\"\xff\"} 1\nvllm:num_requests_waiting 3\n"))
	if err != nil || s.RequestsWaiting != 3 {
		t.Errorf("a broken line of another family: %v, %+v", err, s)
	}
}

// Values no server exports (1e308 preemptions, a bucket bound of 1e308 s,
// a block count of 2^62) are left out with a note, and the sample's JSON
// encodes: 1e308 preemptions made watch's rate +Inf and its -o json fail.
func TestParseAbsurdValues(t *testing.T) {
	in := `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="1"} 5
vllm:time_to_first_token_seconds_bucket{le="1e308"} 9
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 9
vllm:time_to_first_token_seconds_count 9
vllm:time_to_first_token_seconds_sum 3
vllm:num_preemptions_total 1e308
vllm:num_requests_running 4
vllm:cache_config_info{block_size="16",num_gpu_blocks="4611686018427387904"} 1
`
	s, err := ParseVLLMMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.Has(vllm.MetricPreemptions) || s.Has(vllm.MetricTTFT) || s.PreemptionsTotal != 0 || s.TTFTP99Seconds != 0 {
		t.Errorf("absurd values kept: %+v", s)
	}
	if !s.Has(vllm.MetricRequestsRunning) || s.RequestsRunning != 4 || s.CacheConfig.BlockSize != 16 || s.CacheConfig.NumGPUBlocks != 0 {
		t.Errorf("plausible values lost: %+v", s)
	}
	notes := strings.Join(s.Dropped, "\n")
	for _, want := range []string{"vllm:num_preemptions_total is 1e+308, more than any server counts (at most 1e+15): left out",
		"vllm:time_to_first_token_seconds has a bucket bound of 1e+308 s (at most 1e+06 s): left out",
		"num_gpu_blocks=4611686018427387904 is more than any server's"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", s.Dropped, want)
		}
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("the sample does not encode: %v", err)
	}
	// Many series each plausible but summing past the bound.
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"%d\"} 1e14\n", i)
	}
	s, err = ParseVLLMMetrics(strings.NewReader(b.String()))
	if err != nil || s.Has(vllm.MetricRequestsWaiting) || len(s.Dropped) != 1 || !strings.Contains(s.Dropped[0], "sums to 2e+15") {
		t.Errorf("a sum past the bound: %v, %+v", err, s)
	}
}

// watch over a server whose preemption counter reads 1e308 after 0: the
// rate was +Inf and every -o json reading failed ("json: unsupported
// value: +Inf"). The counter is now left out with a note, and each record
// encodes.
func TestWatchRecordsOfAbsurdValues(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pre := "0"
		if n.Add(1) > 1 {
			pre = "1e308"
		}
		fmt.Fprintf(w, "vllm:num_preemptions_total %s\nvllm:num_requests_running 2\n", pre)
	}))
	defer srv.Close()
	clock := time.Unix(0, 0)
	w := Watcher{Scraper: &Scraper{URL: srv.URL + "/metrics"}, Monitor: NewMonitor(AlertRules{}, time.Minute),
		Interval: time.Millisecond, Count: 3, Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	var lines []string
	err := w.Run(context.Background(), nil, func(r Reading, alerts []Alert, readErr error) error {
		b, err := json.Marshal(r.Record(alerts, readErr))
		lines = append(lines, string(b))
		return err
	})
	if err != nil || len(lines) != 3 {
		t.Fatalf("%v after %d readings", err, len(lines))
	}
	if !strings.Contains(lines[2], `"num_preemptions_total":null`) || !strings.Contains(lines[2], `"dropped":["vllm:num_preemptions_total is 1e+308`) ||
		!strings.Contains(lines[2], `"num_requests_running":2`) {
		t.Errorf("the third reading: %s", lines[2])
	}
}

// NaN, infinite and negative counts are no reading, and said so: audit
// --live called such a pod "ok" with no finding.
func TestParseNotCounts(t *testing.T) {
	s, err := ParseVLLMMetrics(strings.NewReader("vllm:num_requests_running NaN\nvllm:num_requests_waiting -3\nvllm:num_preemptions_total +Inf\nvllm:kv_cache_usage_perc 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Has(vllm.MetricRequestsRunning) || s.Has(vllm.MetricRequestsWaiting) || s.Has(vllm.MetricPreemptions) || s.KVCacheUsage != 0.5 {
		t.Errorf("%+v", s)
	}
	want := []string{"vllm:num_requests_running is NaN, not a count: left out", "vllm:num_requests_waiting is -3, not a count: left out",
		"vllm:num_preemptions_total is +Inf, more than any server counts (at most 1e+15): left out"}
	if strings.Join(s.Dropped, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes %q, want %q", s.Dropped, want)
	}
}

// A block count and size each plausible whose product no server holds is
// left out: its bytes, compared with a plan, passed int64.
func TestParseKVTokensBound(t *testing.T) {
	s, err := ParseVLLMMetrics(strings.NewReader("vllm:cache_config_info{block_size=\"4096\",num_gpu_blocks=\"2147483648\"} 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.CacheConfig.NumGPUBlocks != 0 || s.CacheConfig.BlockSize != 4096 || len(s.Dropped) != 1 ||
		!strings.Contains(s.Dropped[0], "num_gpu_blocks=2147483648 of 4096 tokens is more KV cache than any server's") {
		t.Errorf("%+v", s)
	}
}

// The exporter reads vLLM one scrape at a time whatever scrapes it (each
// holds a read of up to 32 MiB), and past maxExporterScrapes in flight
// answers 503.
func TestExporterScrapesOneAtATime(t *testing.T) {
	var now, most atomic.Int32
	vllmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		fmt.Fprint(w, "vllm:num_requests_running 1\n")
	}))
	defer vllmSrv.Close()
	h := httptest.NewServer(NewExporter(ExporterOptions{Scraper: &Scraper{URL: vllmSrv.URL + "/metrics", Timeout: 5 * time.Second}}).Handler())
	defer h.Close()
	codes := make(chan int, 12)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			resp, err := http.Get(h.URL + "/metrics")
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if most.Load() != 1 || got[http.StatusOK] < 1 || got[http.StatusOK] > maxExporterScrapes || got[http.StatusOK]+got[http.StatusServiceUnavailable] != 12 {
		t.Errorf("vLLM read %d at once; the exporter answered %v", most.Load(), got)
	}
}
