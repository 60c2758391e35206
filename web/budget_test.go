package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/web"
)

const simulate = `{"plan":{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB"%s},"rate":%s,"duration_s":3600,"prompt_tokens":1000,"output_tokens":100}`

func errorOf(t *testing.T, b []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an error answer: %.200s", b)
	}
	return e.Error
}

// The 200-byte POST: a KV pool of 400,000,000 blocks was
// allocated at its nominal size (8 GB) and took the server down; it is a
// 422 naming the bound, before any pool exists.
func TestSimulateBlocksBound(t *testing.T) {
	srv := newServer(t)
	code, b := post(t, srv.URL+"/api/simulate", strings.Replace(strings.Replace(simulate, "%s", `,"flags":{"num-gpu-blocks-override":"400000000"}`, 1), "%s", "1", 1))
	if code != http.StatusUnprocessableEntity || errorOf(t, b) != "too many KV blocks: the KV pool has 400000000 blocks, at most 1000000 here (lower num-gpu-blocks-override, or run `headroom simulate`)" {
		t.Errorf("%d %s", code, b)
	}
}

// A simulation stops at its time limit inside the run, not when its
// client hangs up: an hour at 30 req/s of 500/1000-token requests (about
// 108,000 requests, within the documented 200,000; 240,000 steps) takes
// seconds to simulate; at a 300 ms limit the answer is a 422 naming it,
// well within a second of the limit (the run checks its context every 1024
// steps). A traffic that fills the in-flight bound sooner (50 req/s of
// 1000/100) stops on its own, fell behind, in about a third of a second,
// and would race the limit.
func TestSimulateDeadline(t *testing.T) {
	srv := httptest.NewServer(web.Handler(web.Options{Env: report.Env{Getenv: getenv}, Offline: true, SimulationTime: 300 * time.Millisecond}))
	defer srv.Close()
	start := time.Now()
	code, b := post(t, srv.URL+"/api/simulate", `{"plan":{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB"},"rate":30,"duration_s":3600,"prompt_tokens":500,"output_tokens":1000}`)
	took := time.Since(start)
	if code != http.StatusUnprocessableEntity || !strings.Contains(errorOf(t, b), "past this server's limit of 300ms a request") {
		t.Errorf("%d %s", code, b)
	}
	if took > 1500*time.Millisecond {
		t.Errorf("answered after %s for a 300 ms limit", took)
	}
}

// Past the running simulations and their queue a request is refused at
// once with 429 and Retry-After, naming the numbers: one slot, four
// waiting, the sixth refused.
func TestSimulateQueueBound(t *testing.T) {
	srv := httptest.NewServer(web.Handler(web.Options{Env: report.Env{Getenv: getenv}, Offline: true, Simulations: 1, SimulationTime: 2 * time.Second}))
	defer srv.Close()
	body := strings.Replace(strings.Replace(simulate, "%s", "", 1), "%s", "50", 1)
	codes := make([]int, 8)
	msgs := make([]string, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL+"/api/simulate", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var e struct {
				Error string `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			codes[i], msgs[i] = resp.StatusCode, e.Error
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}()
	}
	wg.Wait()
	busy := 0
	for i, c := range codes {
		if c == http.StatusTooManyRequests {
			busy++
			if msgs[i] != "busy: 1 simulations running and 4 waiting, the most this server takes; retry later" {
				t.Errorf("429: %q", msgs[i])
			}
		}
	}
	// Eight at once: one runs, four wait, three are refused.
	if busy != 3 {
		t.Errorf("%d refused of 8 (codes %v), want 3", busy, codes)
	}
}
