package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"headroom.dev/headroom/internal/testkit"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// bigReview is an AdmissionReview of a Deployment with n vLLM containers
// (each as deployment-fits.json's, named c0, c1, ...): 10,000 of them are
// 2.2 MB, the size the hostile review had.
func bigReview(n int, gpus string) []byte { return testkit.Review("u1", "", n, gpus) }

// peakHeap runs f while sampling the heap every millisecond and returns
// the largest HeapAlloc seen above the heap before f.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			default:
			}
			runtime.Gosched()
		}
	}()
	f()
	close(stop)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// review posts body to the endpoint and decodes the answer.
func review(t *testing.T, hd http.Handler, path string, body []byte) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	rec := httptest.NewRecorder()
	hd.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("%s: not an AdmissionReview answer (%v): %.200s", path, err, rec.Body.String())
	}
	return rec.Code, out.Response
}

// A Deployment of 10,000 vLLM containers (2 MB) is reviewed within a
// bounded heap: the first maxContainers are checked, the rest counted in
// one warning, and the answer holds at most maxWarnings warnings. Before
// the bound the review took 101-111 MiB of heap and answered 10,000
// warnings (2.4 MB) or a 1.9 MB patch; with GOGC=400 the process passed
// the chart's 256 MiB.
func TestBigReviewMemory(t *testing.T) {
	body := bigReview(10000, "1")
	h := NewHandler(Deps{})
	for _, tc := range []struct {
		path string
		hd   http.Handler
	}{{"/mutate", h.MutateHandler()}, {"/validate", h.ValidateHandler()}} {
		var code int
		var resp *admissionv1.AdmissionResponse
		peak := peakHeap(func() { code, resp = review(t, tc.hd, tc.path, body) })
		if code != http.StatusOK || !resp.Allowed {
			t.Fatalf("%s: status %d, %+v", tc.path, code, resp)
		}
		// 64 checked containers and the decoded object: about 30 MiB.
		if peak > 64<<20 {
			t.Errorf("%s: peak heap %d MiB, want under 64 MiB", tc.path, peak>>20)
		}
		if len(resp.Warnings) > maxWarnings+1 || len(resp.Patch) > 64<<10 {
			t.Errorf("%s: %d warnings and a %d-byte patch: the answer grows with the containers", tc.path, len(resp.Warnings), len(resp.Patch))
		}
		if tc.path == "/validate" && !strings.Contains(strings.Join(resp.Warnings, "\n"), "more warnings not shown (at most 32)") {
			t.Errorf("no bound named in the warnings: %q", resp.Warnings[len(resp.Warnings)-1])
		}
	}
	// The count of the unchecked ones is a finding of its own.
	d, err := h.decide(context.Background(), mustReview(t, body).Request, false)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d more vLLM containers not checked: the webhook examines at most %d of a pod", 10000-maxContainers, maxContainers)
	if !slices.ContainsFunc(d.Warnings, func(f Finding) bool { return f.Message == want }) {
		t.Errorf("no warning %q", want)
	}
}

func mustReview(t *testing.T, body []byte) *admissionv1.AdmissionReview {
	t.Helper()
	r, err := decodeReview(body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A GPU count no node holds is named as such: 1000000000 is a whole
// number, and the warning said it was not.
func TestAbsurdGPUCount(t *testing.T) {
	h := NewHandler(Deps{})
	for _, tc := range []struct{ q, want string }{
		{"1000000000", `resource nvidia.com/gpu: 1G GPUs is more than any node holds (at most 4096)`},
		{"4097", `resource nvidia.com/gpu: 4097 GPUs is more than any node holds (at most 4096)`},
		{"1500m", `resource nvidia.com/gpu: 1500m is not a whole number of GPUs`},
		{"-1", `resource nvidia.com/gpu: -1 is a negative number of GPUs`},
	} {
		_, resp := review(t, h.ValidateHandler(), "/validate", bigReview(1, tc.q))
		all := strings.Join(resp.Warnings, "\n")
		if !strings.Contains(all, tc.want) {
			t.Errorf("%s: want %q in the warnings, got %q", tc.q, tc.want, all)
		}
	}
}

// Reviews past the gate's budget and queue are refused with 429 before
// their bodies are read, naming the bound.
func TestReviewGate(t *testing.T) {
	h := NewHandler(Deps{ReviewBytes: ReviewFloorBytes})
	release, err := h.gate.Enter(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The one floor's worth of budget taken: ReviewQueue may wait; the
	// next is refused at once.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	body := bigReview(1, "1")
	for range ReviewQueue {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ValidateHandler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/validate", bytes.NewReader(body)))
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.gate.Waiting() < ReviewQueue && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	rec := httptest.NewRecorder()
	h.ValidateHandler().ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/validate", bytes.NewReader(body)))
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), fmt.Sprintf("reviews fill the %d-byte budget and %d wait", ReviewFloorBytes, ReviewQueue)) {
		t.Errorf("review past the queue: %d %q", rec.Code, rec.Body.String())
	}
	cancel()
	release()
	wg.Wait()
}
