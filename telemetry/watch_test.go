package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: the first call at once, then one a tick, until count; an
// error of take ends it; an ended context ends it without error, even
// when take failed because of it.
func TestEvery(t *testing.T) {
	var calls []int
	err := Every(context.Background(), time.Millisecond, 3, func(n int) error { calls = append(calls, n); return nil })
	if err != nil || fmt.Sprint(calls) != "[1 2 3]" {
		t.Errorf("count 3: %v %v", calls, err)
	}
	boom := errors.New("boom")
	if err := Every(context.Background(), time.Millisecond, 0, func(n int) error {
		if n == 2 {
			return boom
		}
		return nil
	}); err != boom {
		t.Errorf("take's error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Every(ctx, time.Millisecond, 0, func(n int) error {
		if n == 3 {
			cancel()
			return ctx.Err()
		}
		return nil
	}); err != nil {
		t.Errorf("interrupted: %v", err)
	}
}

// gpuReader stands in for the GPUs: each reading its list, or its error.
type gpuReader struct {
	readings [][]GPU
	fail     map[int]error
	n        atomic.Int32
}

func (r *gpuReader) Source() string { return SourceNvidiaSMI }
func (r *gpuReader) Close() error   { return nil }
func (r *gpuReader) GPUs(context.Context) ([]GPU, error) {
	n := int(r.n.Add(1))
	if err := r.fail[n]; err != nil {
		return nil, err
	}
	return r.readings[min(n, len(r.readings))-1], nil
}

// TestWatcher: the first scrape must answer; a later failure of the
// server or of the GPUs comes with its reading, whose part that failed is
// missing; the GPUs read before Run are the first reading's.
func TestWatcher(t *testing.T) {
	srv := vllmServer(t, "vllm-0.11.0-v1.txt")
	var down atomic.Bool
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, srv.URL+"/metrics", http.StatusFound)
	}))
	defer flaky.Close()
	first := []GPU{{Index: 0, TotalBytes: 80 << 30, UsedBytes: 70 << 30, FreeBytes: 10 << 30}}
	later := []GPU{{Index: 0, TotalBytes: 80 << 30, UsedBytes: 75 << 30, FreeBytes: 5 << 30}}
	gpus := &gpuReader{readings: [][]GPU{later}, fail: map[int]error{1: errors.New("nvidia-smi: timed out")}}
	w := Watcher{Scraper: &Scraper{URL: flaky.URL + "/metrics"}, GPUs: gpus, Monitor: NewMonitor(AlertRules{}, time.Minute),
		Interval: time.Millisecond, Count: 4, Now: func() time.Time { return time.Unix(0, 0) }}
	var got []string
	err := w.Run(context.Background(), first, func(r Reading, _ []Alert, err error) error {
		got = append(got, fmt.Sprintf("vllm=%t gpus=%d used=%d err=%v", r.VLLM != nil, len(r.GPUs), usedOf(r.GPUs), err))
		if len(got) == 2 {
			down.Store(true)
		}
		return nil
	})
	want := []string{
		"vllm=true gpus=1 used=70 err=<nil>",
		"vllm=true gpus=0 used=0 err=nvidia-smi: timed out",
		"vllm=false gpus=1 used=75 err=",
		"vllm=false gpus=1 used=75 err=",
	}
	if err != nil || len(got) != 4 {
		t.Fatalf("%v %q", err, got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("reading %d: %s, want %s...", i+1, got[i], want[i])
		}
	}
	// The server does not answer at first: one error, no reading.
	calls := 0
	err = Watcher{Scraper: &Scraper{URL: flaky.URL + "/metrics"}, Monitor: NewMonitor(AlertRules{}, time.Minute), Interval: time.Millisecond}.
		Run(context.Background(), nil, func(Reading, []Alert, error) error { calls++; return nil })
	if err == nil || calls != 0 {
		t.Errorf("first scrape failing: %v after %d readings", err, calls)
	}
}

func usedOf(gpus []GPU) int64 {
	var used int64
	for _, g := range gpus {
		used += g.UsedBytes >> 30
	}
	return used
}

// TestOpenAndRead: the reader comes with its first reading; a GPU that
// cannot be read is an error at once (nvidia-smi's "No devices were
// found" is ErrNoGPU), with no reader left open.
func TestOpenAndRead(t *testing.T) {
	path, _ := fakeSMI(t, "query-gpu-535-units.csv", "compute-apps-535.csv", 0)
	r, gpus, err := OpenAndRead(context.Background(), OpenOptions{SMIPath: path})
	if err != nil || r == nil || len(gpus) != 2 || gpus[0].TotalBytes != 81920<<20 {
		t.Fatalf("%v %+v %v", r, gpus, err)
	}
	r.Close()
	path, _ = fakeSMI(t, "no-devices.txt", "no-devices.txt", 6)
	if r, gpus, err := OpenAndRead(context.Background(), OpenOptions{SMIPath: path}); !errors.Is(err, ErrNoGPU) || r != nil || gpus != nil {
		t.Errorf("no devices: %v %v %v", r, gpus, err)
	}
}

// TestRecording: the reading taken before is the first; each is written
// as lines (a CSV row per GPU and process, or one JSON object) before read
// hears of it; a reading that fails ends the run with its error.
func TestRecording(t *testing.T) {
	first := []GPU{{Index: 0, UUID: "GPU-1", TotalBytes: 80 << 30, UsedBytes: 70 << 30, FreeBytes: 10 << 30,
		Processes: []Process{{PID: 7, Name: "python3", UsedBytes: 69 << 30}}}}
	later := []GPU{{Index: 0, UUID: "GPU-1", TotalBytes: 80 << 30, UsedBytes: 75 << 30, FreeBytes: 5 << 30}}
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	var out []string
	write := func(b []byte) error { out = append(out, strings.TrimSuffix(string(b), "\n")); return nil }
	var told []string
	read := func(n int, gpus []GPU) { told = append(told, fmt.Sprintf("%d:%d", n, len(out))) }
	rec := Recording{Reader: &gpuReader{readings: [][]GPU{later}}, Interval: time.Millisecond, Count: 2, Now: func() time.Time { return at }}
	if err := rec.Run(context.Background(), first, write, read); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2025-06-01T10:00:00.000Z,nvidia-smi,gpu,0,GPU-1,,,85899345920,75161927680,10737418240",
		"2025-06-01T10:00:00.000Z,nvidia-smi,process,0,GPU-1,python3,7,,74088185856,",
		"2025-06-01T10:00:00.000Z,nvidia-smi,gpu,0,GPU-1,,,85899345920,80530636800,5368709120",
	}
	if strings.Join(out, "\n") != strings.Join(want, "\n") || fmt.Sprint(told) != "[1:2 2:3]" {
		t.Errorf("lines\n%s\ntold %v", strings.Join(out, "\n"), told)
	}
	out = nil
	rec = Recording{Reader: &gpuReader{readings: [][]GPU{later}, fail: map[int]error{1: errors.New("nvidia-smi: timed out")}},
		JSON: true, Interval: time.Millisecond, Now: func() time.Time { return at }}
	err := rec.Run(context.Background(), first, write, nil)
	if err == nil || err.Error() != "nvidia-smi: timed out" || len(out) != 1 || !strings.HasPrefix(out[0], `{"time":"2025-06-01T10:00:00.000Z","source":"nvidia-smi","gpus":[`) {
		t.Errorf("%v %q", err, out)
	}
}
