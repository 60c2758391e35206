package admission

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Verdicts counted in headroom_admission_reviews_total.
const (
	VerdictAllowed  = "allowed"  // no finding
	VerdictWarned   = "warned"   // allowed with warnings
	VerdictDenied   = "denied"   // refused with the planner's numbers
	VerdictBypassed = "bypassed" // would be denied; the bypass annotation allowed it
	VerdictPatched  = "patched"  // the mutating webhook returned a patch
	VerdictInvalid  = "invalid"  // the body was not an AdmissionReview (HTTP 4xx)
	VerdictError    = "error"    // the object could not be read, or the review failed; allowed
)

// metricKinds are the kind label's values; anything else counts as
// "other", so a caller cannot grow the label set.
var metricKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "Pod": true, "Workspace": true, "HorizontalPodAutoscaler": true}

// Metrics are the webhook's Prometheus metrics, in a registry of their own
// (no global registry).
type Metrics struct {
	reg     *prometheus.Registry
	reviews *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewMetrics creates the metrics and their registry, with the Go runtime
// and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_admission_reviews_total",
			Help: "AdmissionReviews answered, by endpoint (validate, mutate), object kind and verdict.",
		}, []string{"endpoint", "kind", "verdict"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "headroom_admission_duration_seconds",
			Help: "Time from reading an AdmissionReview to writing the answer, by endpoint and object kind.",
			// The target is a p99 under 5 ms; the upper buckets show
			// slow API lookups (the call's timeout is 10 s).
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
		}, []string{"endpoint", "kind"}),
	}
	m.reg.MustRegister(m.reviews, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the metrics live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *Metrics) observe(endpoint, kind, verdict string, d time.Duration) {
	if m == nil {
		return
	}
	if !metricKinds[kind] {
		kind = "other"
	}
	m.reviews.WithLabelValues(endpoint, kind, verdict).Inc()
	m.latency.WithLabelValues(endpoint, kind).Observe(d.Seconds())
}
