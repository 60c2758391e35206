package audit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// ProxyMetrics asks the API server's pod proxy for the pod's port; a
// stand-in API server checks the path and serves a real exposition.
func TestProxyMetrics(t *testing.T) {
	body, err := os.ReadFile("../telemetry/testdata/vllm/vllm-0.11.0-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/api/v1/namespaces/llm/pods/hot:8001/proxy/metrics":
			w.Write(body)
		default:
			http.Error(w, `{"kind":"Status","message":"pods \"x\" not found"}`, http.StatusNotFound)
		}
	}))
	defer srv.Close()
	m := ProxyMetrics{Host: srv.URL + "/", Client: srv.Client()}
	rc, err := m.PodMetrics(context.Background(), "llm", "hot", 8001)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(got) != len(body) {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	if _, err := m.PodMetrics(context.Background(), "llm", "gone", 8000); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing pod: %v", err)
	}
}
