package admission

import (
	"context"
	"testing"
)

// BenchmarkReview measures one review without HTTP or TLS (the load
// benchmark with both is bench/webhook).
func BenchmarkReview(b *testing.B) {
	h := NewHandler(Deps{Metrics: NewMetrics()})
	for _, tc := range []struct {
		fixture string
		mutate  bool
	}{
		{"deployment-fits", false},
		{"deployment-kv", false},
		{"mutate-autofix", true},
		{"pod-unknown-model", false},
	} {
		req := fixture(b, tc.fixture).Request
		b.Run(tc.fixture, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.respond(context.Background(), req, tc.mutate)
			}
		})
	}
}
