package web_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/web"
)

func TestAuditEndpoint(t *testing.T) {
	// Without --cluster: a 404 that says how to get one.
	srv := newServer(t)
	code, _, body := call(t, "GET", srv.URL+"/api/audit", "")
	if code != 404 || !strings.Contains(string(body), "serve --cluster") {
		t.Errorf("no cluster: %d %s", code, body)
	}

	// An audit answers for AuditEvery; requests in between share it.
	var runs atomic.Int32
	var now atomic.Int64
	fail := atomic.Bool{}
	h := web.Handler(web.Options{Offline: true, AuditEvery: 10 * time.Second,
		Now: func() time.Time { return time.Unix(0, now.Load()) },
		Audit: func(context.Context) (audit.Report, error) {
			if fail.Load() {
				return audit.Report{}, errors.New("cannot list pods: connection refused\nsecond line")
			}
			n := runs.Add(1)
			return audit.Report{Scope: "all namespaces", Workloads: []audit.Workload{{Kind: "Deployment", Namespace: "llm", Name: strings.Repeat("x", int(n)), Status: audit.StatusOK, Findings: []audit.Finding{}}}}, nil
		}})
	cs := httptest.NewServer(h)
	defer cs.Close()
	get := func() (int, string) {
		code, hdr, body := call(t, "GET", cs.URL+"/api/audit", "")
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("CSP %q", csp)
		}
		return code, string(body)
	}
	if code, body := get(); code != 200 || !strings.Contains(body, `"name": "x"`) {
		t.Fatalf("first: %d %s", code, body)
	}
	now.Store(int64(9 * time.Second))
	if _, body := get(); !strings.Contains(body, `"name": "x"`) || runs.Load() != 1 {
		t.Errorf("within 10 s the audit ran again (%d runs): %s", runs.Load(), body)
	}
	now.Store(int64(10 * time.Second))
	if _, body := get(); !strings.Contains(body, `"name": "xx"`) || runs.Load() != 2 {
		t.Errorf("after 10 s: %d runs: %s", runs.Load(), body)
	}
	// A failed audit is a 502 with one line; it is not remembered.
	now.Store(int64(30 * time.Second))
	fail.Store(true)
	if code, body := get(); code != 502 || !strings.Contains(body, "connection refused") || strings.Contains(body, "second line") {
		t.Errorf("failing audit: %d %s", code, body)
	}
	fail.Store(false)
	if code, body := get(); code != 200 || !strings.Contains(body, `"name": "xxx"`) {
		t.Errorf("after the failure: %d %s", code, body)
	}
	// Read-only: GET and HEAD only.
	if code, _, _ := call(t, "POST", cs.URL+"/api/audit", "{}"); code != 405 {
		t.Errorf("POST: %d", code)
	}
}
