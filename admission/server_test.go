package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admission/v1"
)

// writeCert writes a self-signed serving certificate for 127.0.0.1 with the
// given serial number to dir/tls.crt and dir/tls.key, stamping the files
// with mtime, and returns the certificate.
func writeCert(t *testing.T, dir string, serial int64, mtime time.Time) *x509.Certificate {
	t.Helper()
	c, err := WriteSelfSignedCert(dir, serial)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Chtimes(filepath.Join(dir, f), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// testServer starts a Server on a loopback port with the certificate in
// dir and returns its URL. It is stopped when the test ends; stopping must
// return nil.
func testServer(t *testing.T, dir string, h *Handler, m *Metrics) string {
	t.Helper()
	return startTestServer(t, ServerConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), Handler: h, Metrics: m})
}

func startTestServer(t *testing.T, cfg ServerConfig) string {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v on shutdown", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("server did not stop")
		}
	})
	return "https://" + ln.Addr().String()
}

// newClient returns a client that trusts the given certificates and opens a
// new connection, so a new TLS handshake, for every request.
func newClient(trust ...*x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	for _, c := range trust {
		pool.AddCert(c)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}}
}

func servedSerial(t *testing.T, client *http.Client, url string) int64 {
	t.Helper()
	resp, err := client.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}

func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	a := writeCert(t, dir, 1, t0)
	url := testServer(t, dir, NewHandler(Deps{}), nil)
	if got := servedSerial(t, newClient(a), url); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}

	// Rotate: new files with a later mtime; the next handshake serves them.
	b := writeCert(t, dir, 2, t0.Add(time.Second))
	if got := servedSerial(t, newClient(a, b), url); got != 2 {
		t.Fatalf("after rotation serial %d, want 2", got)
	}

	// A broken pair (a certificate file caught mid-write) keeps the loaded
	// certificate in service.
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, newClient(a, b), url); got != 2 {
		t.Fatalf("with broken files serial %d, want 2 (the last good one)", got)
	}

	// And a pair that does not load at start is an error, not a server
	// without a certificate.
	if _, err := NewServer(ServerConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), Handler: NewHandler(Deps{})}); err == nil {
		t.Error("NewServer accepted a broken certificate")
	}
}

func post(t *testing.T, client *http.Client, url string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// TestServerEndpoints drives the real server over TLS: reviews, malformed
// bodies, the health endpoints, and the metrics they leave behind, read
// back with Prometheus' own exposition parser.
func TestServerEndpoints(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir, 7, time.Now())
	m := NewMetrics()
	c := fakeCluster(t)
	url := testServer(t, dir, NewHandler(Deps{ConfigMaps: c, HPAs: c, PodTemplates: c, Metrics: m}), m)
	client := newClient(cert)

	for _, name := range []string{"deployment-kv", "deployment-fits", "deployment-fits"} {
		body, err := os.ReadFile(filepath.Join("testdata", "reviews", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		resp, out := post(t, client, url+"/validate", body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %s %s", name, resp.Status, out)
		}
		var r admissionv1.AdmissionReview
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		if r.APIVersion != "admission.k8s.io/v1" || r.Kind != "AdmissionReview" || r.Response == nil || r.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
			t.Fatalf("%s: response %s", name, out)
		}
		if want := name != "deployment-kv"; r.Response.Allowed != want {
			t.Errorf("%s: allowed %v", name, r.Response.Allowed)
		}
	}
	body, _ := os.ReadFile(filepath.Join("testdata", "reviews", "mutate-autofix.json"))
	if resp, out := post(t, client, url+"/mutate", body); resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"patchType":"JSONPatch"`) {
		t.Fatalf("/mutate: %s %s", resp.Status, out)
	}

	bad := []struct {
		method, path string
		body         []byte
		status       int
	}{
		{"GET", "/validate", nil, http.StatusMethodNotAllowed},
		{"POST", "/validate", []byte("{not json"), http.StatusBadRequest},
		{"POST", "/mutate", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), http.StatusBadRequest},
		{"POST", "/validate", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"POST", "/validate", bytes.Repeat([]byte(" "), maxBodyBytes+1), http.StatusRequestEntityTooLarge},
	}
	for _, b := range bad {
		req, err := http.NewRequest(b.method, url+b.path, bytes.NewReader(b.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != b.status {
			t.Errorf("%s %s (%d bytes): %s %s, want %d", b.method, b.path, len(b.body), resp.Status, msg, b.status)
		}
		if strings.Contains(strings.TrimSpace(string(msg)), "\n") {
			t.Errorf("error body is not one line: %q", msg)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}

	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, m := range families["headroom_admission_reviews_total"].GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			key += l.GetName() + "=" + l.GetValue() + " "
		}
		counts[strings.TrimSpace(key)] = m.GetCounter().GetValue()
	}
	want := map[string]float64{
		"endpoint=validate kind=Deployment verdict=denied":  1,
		"endpoint=validate kind=Deployment verdict=allowed": 2,
		"endpoint=mutate kind=Deployment verdict=patched":   1,
		// A body that is no review has no kind: it counts as "other".
		"endpoint=validate kind=other verdict=invalid": 4,
		"endpoint=mutate kind=other verdict=invalid":   1,
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("reviews_total{%s} = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	var observed uint64
	for _, m := range families["headroom_admission_duration_seconds"].GetMetric() {
		observed += m.GetHistogram().GetSampleCount()
	}
	// 3 validations + 1 mutation + 5 rejected requests.
	if observed != 9 {
		t.Errorf("duration histogram holds %d samples, want 9", observed)
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// TestReadBody: a body is read whole whatever its Content-Length says
// (right, missing, too small, zero), and one over maxBodyBytes is refused.
// With the right length the buffer is sized from it: one allocation for
// the body and one for the MaxBytesReader (the race detector adds one),
// where growing a buffer from 512 bytes to 40000 takes a dozen.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 40000)
	for _, tc := range []struct {
		name   string
		length int64
		body   string
	}{
		{"exact", int64(len(body)), body},
		{"unknown", -1, body},
		{"announced short", 10, body},
		{"empty", 0, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(tc.body))
		r.ContentLength = tc.length
		got, err := readBody(httptest.NewRecorder(), r)
		if err != nil || string(got) != tc.body {
			t.Errorf("%s: read %d bytes, %v; want %d", tc.name, len(got), err, len(tc.body))
		}
	}
	src := strings.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/validate", src)
	w := httptest.NewRecorder()
	allocs := testing.AllocsPerRun(20, func() {
		src.Reset(body)
		if _, err := readBody(w, r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Errorf("reading %d bytes of announced length took %v allocations, want at most 3", len(body), allocs)
	}

	r = httptest.NewRequest(http.MethodPost, "/validate", io.LimitReader(zeros{}, maxBodyBytes+1))
	r.ContentLength = maxBodyBytes
	var tooBig *http.MaxBytesError
	if _, err := readBody(httptest.NewRecorder(), r); !errors.As(err, &tooBig) {
		t.Errorf("a body over %d bytes: %v, want http.MaxBytesError", maxBodyBytes, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestServerHTTP2OptIn: a client that offers HTTP/2 gets HTTP/1.1 from the
// default server, and HTTP/2 when the server enables it.
func TestServerHTTP2OptIn(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir, 1, time.Now())
	for _, enable := range []bool{false, true} {
		url := startTestServer(t, ServerConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
			Handler: NewHandler(Deps{}), EnableHTTP2: enable})
		client := newClient(cert)
		client.Transport.(*http.Transport).ForceAttemptHTTP2 = true
		resp, err := client.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[bool]int{false: 1, true: 2}[enable]
		if resp.ProtoMajor != want {
			t.Errorf("EnableHTTP2 %v: answered over %s, want HTTP/%d", enable, resp.Proto, want)
		}
	}
}
