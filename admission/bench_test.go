package admission

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// benchCases are the reviews the benchmarks cycle through: one that fits,
// one denied with alternatives, one mutated by autofix, one whose model is
// unknown.
var benchCases = []struct {
	fixture string
	mutate  bool
}{
	{"deployment-fits", false},
	{"deployment-kv", false},
	{"mutate-autofix", true},
	{"pod-unknown-model", false},
}

// BenchmarkReview measures one review without HTTP or TLS (the load
// benchmark with both is bench/webhook): first, an input the handler has
// not planned before (its model's catalog entry already parsed); repeat,
// one it has, as the validating webhook has when the mutating webhook has
// just reviewed the object.
func BenchmarkReview(b *testing.B) {
	for _, seen := range []string{"first", "repeat"} {
		h := NewHandler(Deps{Metrics: NewMetrics()})
		h.plans.off = seen == "first"
		for _, tc := range benchCases {
			req := fixture(b, tc.fixture).Request
			b.Run(seen+"/"+tc.fixture, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					h.respond(context.Background(), req, tc.mutate)
				}
			})
		}
	}
}

// BenchmarkEndpoint measures what the server does per review besides TLS
// and HTTP framing: read the body, decode it, review, encode the answer,
// count and log it; first and repeat as in BenchmarkReview.
func BenchmarkEndpoint(b *testing.B) {
	for _, seen := range []string{"first", "repeat"} {
		h := NewHandler(Deps{Metrics: NewMetrics()})
		h.plans.off = seen == "first"
		for _, tc := range benchCases {
			body, err := os.ReadFile(filepath.Join("testdata", "reviews", tc.fixture+".json"))
			if err != nil {
				b.Fatal(err)
			}
			ep, path := h.ValidateHandler(), "/validate"
			if tc.mutate {
				ep, path = h.MutateHandler(), "/mutate"
			}
			b.Run(seen+"/"+tc.fixture, func(b *testing.B) {
				b.ReportAllocs()
				w := httptest.NewRecorder()
				for b.Loop() {
					w.Body.Reset()
					ep.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
				}
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
			})
		}
	}
}
