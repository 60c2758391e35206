package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/internal/report"
)

// A day of traffic fits the capacity API (it took at most 50,000
// requests, a quarter of an hour at the README's peak): the README's day,
// 2 rising to 40 req/s over 24 h (3.5 million by its peak rate), and
// Qwen3-14B's, 2 to 30; a peak of 100 req/s all day does not.
func TestCapacityDayFits(t *testing.T) {
	body := func(peak string) string {
		return `{"plan": {"model": "Qwen/Qwen3-14B", "vllm_version": "0.19.0"}, "gpus": ["H100-80GB", "L40S"], "rate": 2, "peak_rate": ` + peak +
			`, "duration_s": 86400, "prompt_tokens": 1500, "output_tokens": 300, "slo": "ttft_p99=2s,tpot_p99=80ms"}`
	}
	for _, peak := range []string{"40", "30"} {
		req, err := decodeCapacity(strings.NewReader(body(peak)))
		if err != nil || req.Workload.Duration != 86400 || len(req.GPUs) != 2 {
			t.Errorf("a day peaking at %s req/s: %v", peak, err)
		}
	}
	if _, err := decodeCapacity(strings.NewReader(body("100"))); err == nil || !strings.Contains(err.Error(), "at most 4000000") {
		t.Errorf("a day peaking at 100 req/s: %v", err)
	}
}

// A capacity request is timed by CapacityTime, not by a simulation's
// limit: with simulations held to a millisecond, a small sizing still
// answers, and one held to a millisecond itself is 422.
func TestCapacityTimedApart(t *testing.T) {
	body := `{"plan": {"model": "meta-llama/Llama-3.1-8B-Instruct"}, "gpus": ["H100-80GB"], "rate": 2, "duration_s": 600,
		"prompt_tokens": 512, "output_tokens": 64, "slo": "ttft_p99=2s"}`
	env := report.Env{Getenv: func(string) string { return "" }}
	for _, c := range []struct {
		capacity time.Duration
		code     int
	}{{0, http.StatusOK}, {time.Millisecond, http.StatusUnprocessableEntity}} {
		srv := httptest.NewServer(Handler(Options{Env: env, Offline: true, SimulationTime: time.Millisecond, CapacityTime: c.capacity}))
		resp, err := http.Post(srv.URL+"/api/capacity", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.code {
			t.Errorf("CapacityTime %s: %d %.300s, want %d", c.capacity, resp.StatusCode, b, c.code)
		}
	}
}
