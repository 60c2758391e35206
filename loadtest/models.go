package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/workload"
)

// Served is what a server's /v1/models says of its first model.
type Served struct {
	Model string
	// StandIn is set when the server is headroom's simulated engine
	// (sim.StandInField), not a real one.
	StandIn bool
}

// ServedModel asks t's /v1/models for its first model.
func ServedModel(ctx context.Context, hc *http.Client, t Target) (Served, error) {
	u := t.BaseURL
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/models", nil)
	if err != nil {
		return Served{}, err
	}
	t.authorize(req)
	resp, err := hc.Do(req)
	if err != nil {
		return Served{}, fmt.Errorf("cannot ask %s/models for the model: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Served{}, fmt.Errorf("%s/models answered %s", u, resp.Status)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil || len(list.Data) == 0 {
		return Served{}, fmt.Errorf("%s/models lists no model", u)
	}
	id, _ := list.Data[0]["id"].(string)
	if id == "" {
		return Served{}, fmt.Errorf("%s/models lists no model", u)
	}
	standIn, _ := list.Data[0][sim.StandInField].(bool)
	return Served{Model: id, StandIn: standIn}, nil
}

// Loopback reports whether the server is on this machine, so its GPUs are
// the ones NVML sees here.
func Loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// MetricsURL is where a server at base serves its metrics: /metrics on
// the same host (vLLM's API server serves both).
func MetricsURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base + "/metrics"
	}
	return u.Scheme + "://" + u.Host + "/metrics"
}

// NewHTTPClient is the client a run uses: no overall timeout (a stream
// lasts as long as the run's own bounds allow), a 10 s dial, and enough
// idle connections per host for every request in flight.
func NewHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 1024, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}
}

// Describe fills the run's load description from its workload: the mode,
// the rate asked for (an open loop at a finite rate) or the log's speedup.
func (r *Result) Describe(spec workload.Spec) {
	r.Load.Source, r.Load.Arrival, r.Load.Rate = spec.Describe(), "", 0
	if spec.Concurrency > 0 {
		return
	}
	switch {
	case spec.Rate > 0 && !math.IsInf(spec.Rate, 1):
		r.Load.Rate, r.Load.Arrival = spec.Rate, spec.Arrival
		r.SendRate.Requested = spec.Rate
	case spec.Log != "":
		r.Load.Speedup = spec.Speedup
	}
}
