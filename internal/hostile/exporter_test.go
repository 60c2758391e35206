package hostile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// chartExporter reads the exporter's memory limit and GOMEMLIMIT from the
// chart's values, so that the suite measures under what the chart sets.
func chartExporter(t *testing.T) (limit int64, goMemLimit string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "charts", "headroom", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Exporter struct {
			GoMemLimit string `json:"goMemLimit"`
			Resources  struct {
				Limits struct {
					Memory string `json:"memory"`
				} `json:"limits"`
			} `json:"resources"`
		} `json:"exporter"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	q, err := resource.ParseQuantity(v.Exporter.Resources.Limits.Memory)
	if err != nil || v.Exporter.GoMemLimit == "" {
		t.Fatalf("the chart's exporter: limit %q (%v), goMemLimit %q", v.Exporter.Resources.Limits.Memory, err, v.Exporter.GoMemLimit)
	}
	return q.Value(), v.Exporter.GoMemLimit
}

// hostileMetrics is a vLLM /metrics stand-in that answers as mode says:
// "million" a million lines (half of them a family the exporter reads,
// 25 MB), "endless" lines until the client leaves (at most 60 s), "bomb" a
// gzip body of 640 KiB that inflates to 256 MiB, "absurd" values of 1e308.
func hostileMetrics(t *testing.T, mode *atomic.Value) string {
	t.Helper()
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	line := []byte("vllm:num_requests_running 1\n")
	block := bytes.Repeat(line, (1<<20)/len(line))
	for range 256 {
		zw.Write(block)
	}
	zw.Close()
	t.Logf("gzip bomb: %d KiB inflating to 256 MiB", bomb.Len()>>10)
	var reads atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		switch mode.Load().(string) {
		case "million":
			var b bytes.Buffer
			for i := range 500_000 {
				fmt.Fprintf(&b, "vllm:num_requests_running{e=\"%06d\"} 1\nfoo_%06d 1\n", i, i)
				if b.Len() > 1<<20 {
					if _, err := w.Write(b.Bytes()); err != nil {
						return
					}
					b.Reset()
				}
			}
			w.Write(b.Bytes())
		case "endless":
			w.Write([]byte("vllm:num_requests_running 1\n"))
			chunk := bytes.Repeat([]byte("python_gc_objects_collected_total{generation=\"0\"} 1\n"), 4096)
			for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		case "absurd":
			// A counter that jumps to 1e308 after the first reading,
			// and a TTFT histogram with a bucket bound of 1e308 s.
			pre := "0"
			if reads.Add(1) > 1 {
				pre = "1e308"
			}
			fmt.Fprintf(w, "vllm:num_preemptions_total %s\nvllm:num_requests_running 3\n# TYPE vllm:time_to_first_token_seconds histogram\n"+
				"vllm:time_to_first_token_seconds_bucket{le=\"1e308\"} 5\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 5\n"+
				"vllm:time_to_first_token_seconds_count 5\nvllm:time_to_first_token_seconds_sum 2\n", pre)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/metrics"
}

var exporterAddr = regexp.MustCompile(`msg=serving addr=http://([^/ ]+)/metrics`)

// The exporter beside a vLLM pod whose /metrics is a million lines, an
// endless body or a gzip bomb, each scraped by three clients at once
// twice: it reached 336-554 MiB before (its chart limit is 128 MiB), 197
// MiB with GOMEMLIMIT=100MiB. Now it stays under the chart's limit under
// the chart's GOMEMLIMIT, answers every scrape, and says vLLM was not
// read (headroom_up 0) where the body was cut.
func TestExporterHostileMetrics(t *testing.T) {
	limit, goMemLimit := chartExporter(t)
	var mode atomic.Value
	mode.Store("million")
	url := hostileMetrics(t, &mode)
	p := startLimited(t, goMemLimit, exporterAddr, "exporter", "--listen", "127.0.0.1:0", "--metrics-url", url, "--no-gpu", "--scrape-timeout", "20s")
	c := &http.Client{Timeout: 60 * time.Second}
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{"million", []string{"headroom_up 1", "headroom_requests_running 500000"}},
		{"endless", []string{"headroom_up 0"}},
		{"bomb", []string{"headroom_up 0"}},
	} {
		mode.Store(tc.mode)
		begin := time.Now()
		for round := range 2 {
			as := parallel(3, 3, func(int) answer { return do(c, http.MethodGet, "http://"+p.addr+"/metrics", "", nil) })
			for i, a := range as {
				if a.err != nil || a.status != http.StatusOK {
					t.Errorf("%s, round %d, scrape %d: %d %v", tc.mode, round, i, a.status, a.err)
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(string(a.body), "\n"+w+"\n") {
						t.Errorf("%s, round %d, scrape %d: no %q in %.600s", tc.mode, round, i, w, a.body)
					}
				}
			}
		}
		t.Logf("%s: 6 scrapes in %s, peak RSS so far %d MiB", tc.mode, time.Since(begin).Round(time.Millisecond), p.peakRSS(t)>>20)
	}
	if log := p.stderr.String(); !strings.Contains(log, "cut at 32 MiB") {
		t.Errorf("the exporter's log does not name the bound that cut the endless body: %s", tail(log, 1500))
	}
	p.alive(t)
	peak := p.peakRSS(t)
	t.Logf("peak RSS %d MiB (the chart's limit %d MiB, GOMEMLIMIT %s)", peak>>20, limit>>20, goMemLimit)
	if peak > limit {
		t.Errorf("peak RSS %d MiB, over the chart's limit of %d MiB", peak>>20, limit>>20)
	}
}

// run runs bin with args to its end (at most limit), under the address
// space limit of start, and returns its exit code, stdout and stderr.
func run(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// As start does: a command that allocates gigabytes dies here.
	lim := unix.Rlimit{Cur: addressLimit, Max: addressLimit}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &lim, nil); err != nil {
		t.Logf("no address-space limit: %v", err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%v ran past %s: %s", args, limit, tail(stderr.String(), 2000))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// watch over hostile servers: values of 1e308 made every -o json reading
// fail ("json: unsupported value: +Inf") and the line print "TTFT p99
// +Infs" and a 309-digit count; an endless body was reported as "text
// format parsing error in line 639806: unexpected end of input stream",
// never naming the 32 MiB bound that cut it.
func TestWatchHostileMetrics(t *testing.T) {
	var mode atomic.Value
	mode.Store("absurd")
	url := hostileMetrics(t, &mode)
	code, out, errText := run(t, 60*time.Second, "watch", "--url", url, "--count", "3", "--interval", "100ms", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("watch -o json: exit %d, %d lines: %s %s", code, len(lines), out, errText)
	}
	for i, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("reading %d is not JSON: %v: %s", i+1, err, l)
		}
	}
	if !strings.Contains(lines[2], `"num_preemptions_total":null`) || !strings.Contains(lines[2], "is 1e+308, more than any server counts") ||
		!strings.Contains(lines[2], "bucket bound of 1e+308 s") || !strings.Contains(lines[2], `"ttft_p99_seconds":null`) {
		t.Errorf("the third reading: %s", lines[2])
	}
	code, out, errText = run(t, 60*time.Second, "watch", "--url", url, "--count", "3", "--interval", "100ms")
	if code != 0 || strings.Contains(out, "Inf") || strings.Contains(out, "e+308") && !strings.Contains(out, "left out") {
		t.Errorf("watch: exit %d: %s %s", code, out, errText)
	}
	mode.Store("endless")
	code, _, errText = run(t, 60*time.Second, "watch", "--url", url, "--count", "1")
	if code != 2 || !strings.Contains(errText, "cut at 32 MiB") || strings.Contains(errText, "parsing error") {
		t.Errorf("watch over an endless body: exit %d: %s", code, errText)
	}
}
