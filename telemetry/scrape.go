package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultScrapeTimeout bounds one /metrics request. vLLM answers in
// milliseconds; a server stuck in a long CUDA-graph capture or a GIL-bound
// API process can take seconds, and a dead one never answers.
const DefaultScrapeTimeout = 5 * time.Second

// NormalizeMetricsURL accepts what people type for a vLLM server's metrics
// and returns a full URL: "host:8000" and "http://host:8000" both become
// "http://host:8000/metrics".
func NormalizeMetricsURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("no metrics URL: give the vLLM server's, e.g. http://localhost:8000/metrics")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("metrics URL %q is not a URL like http://localhost:8000/metrics", RedactURL(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("metrics URL %q: the scheme must be http or https", RedactURL(s))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// RedactURL is a URL as it may be printed: without the user and password
// it may carry (they are sent, as basic authentication, never shown).
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// redactErr is an HTTP client's error without the user its URL carried
// (net/http masks the password, not the user, which may be a token).
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		c := *ue
		c.URL = RedactURL(c.URL)
		return &c
	}
	return err
}

// Scraper reads a vLLM server's /metrics.
type Scraper struct {
	// URL is the full metrics URL (see NormalizeMetricsURL).
	URL string
	// Client makes the requests; nil uses one with no timeout of its own
	// (Timeout bounds each request).
	Client *http.Client
	// Timeout bounds one scrape; 0 is DefaultScrapeTimeout.
	Timeout time.Duration
}

// Scrape fetches and parses the metrics once.
func (s *Scraper) Scrape(ctx context.Context) (VLLMSample, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultScrapeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	shown := RedactURL(s.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return VLLMSample{}, fmt.Errorf("metrics URL %q: %v", shown, err)
	}
	// The classic text format: vLLM's prometheus_client would otherwise
	// answer OpenMetrics to a client that asks for it.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return VLLMSample{}, fmt.Errorf("cannot scrape %s: no answer within %s", shown, timeout)
	}
	if err != nil {
		return VLLMSample{}, fmt.Errorf("cannot scrape %s: %v", shown, redactErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return VLLMSample{}, fmt.Errorf("%s answered %s (is it vLLM's /metrics?)", shown, resp.Status)
	}
	sample, err := ParseVLLMMetrics(resp.Body)
	if err != nil && !errors.Is(err, ErrExpositionTooLarge) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return VLLMSample{}, fmt.Errorf("%s: the answer did not end within %s", shown, timeout)
	}
	if err != nil {
		return VLLMSample{}, fmt.Errorf("%s: %w", shown, err)
	}
	return sample, nil
}
