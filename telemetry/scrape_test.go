package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vllmServer serves a recorded exposition as vLLM's prometheus_client does.
func vllmServer(t *testing.T, file string) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "vllm", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestScrape(t *testing.T) {
	for _, tt := range []struct {
		file string
		kv   float64
	}{{"vllm-0.6.3-v0.txt", 0.9473684210526315}, {"vllm-0.11.0-v1.txt", 0.9412}} {
		srv := vllmServer(t, tt.file)
		u, err := NormalizeMetricsURL(srv.URL) // no path: /metrics is added
		if err != nil {
			t.Fatal(err)
		}
		s, err := (&Scraper{URL: u}).Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.KVCacheUsage != tt.kv {
			t.Errorf("%s: KV %v, want %v", tt.file, s.KVCacheUsage, tt.kv)
		}
	}
}

func TestScrapeErrors(t *testing.T) {
	srv := vllmServer(t, "vllm-0.11.0-v1.txt")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>{not metrics}</html>\n"))
	}))
	defer html.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name, url string
		want      string
	}{
		{"404", srv.URL + "/nope", "404 Not Found"},
		{"timeout", slow.URL + "/metrics", "no answer within 200ms"},
		{"not metrics", html.URL + "/metrics", "reading Prometheus metrics"},
		{"refused", closed.URL + "/metrics", "cannot scrape"},
	}
	for _, tt := range tests {
		_, err := (&Scraper{URL: tt.url, Timeout: 200 * time.Millisecond}).Scrape(context.Background())
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line with %q", tt.name, err, tt.want)
		}
	}
}

func TestNormalizeMetricsURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"localhost:8000", "http://localhost:8000/metrics"},
		{"http://vllm.llm.svc:8000", "http://vllm.llm.svc:8000/metrics"},
		{"https://h/", "https://h/metrics"},
		{"http://h:9/custom/metrics", "http://h:9/custom/metrics"},
		{"", ""},
		{"ftp://h/metrics", ""},
		{"http://", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeMetricsURL(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%q accepted as %q", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
