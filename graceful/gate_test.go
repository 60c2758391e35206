package graceful

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// One slot and one place in the queue: the third request is refused at
// once with ErrBusy (429), the waiting one gives up at MaxWait with
// ErrQueueTimeout (503), each naming the numbers.
func TestGate(t *testing.T) {
	g := NewGate("jobs", 1, 1, 50*time.Millisecond)
	release, err := g.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := g.Enter(context.Background())
		waited <- err
	}()
	for g.Admitted() < 2 {
		time.Sleep(time.Millisecond)
	}
	_, err = g.Enter(context.Background())
	if !errors.Is(err, ErrBusy) || Status(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "1 jobs running and 1 waiting") {
		t.Errorf("third: %v", err)
	}
	err = <-waited
	if !errors.Is(err, ErrQueueTimeout) || Status(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "waited 50ms") {
		t.Errorf("waiting: %v", err)
	}
	release()
	if g.Admitted() != 0 {
		t.Errorf("%d admitted after all left", g.Admitted())
	}
}

// A panic in a handler is answered with a 500 through writeError; the
// server goes on.
func TestRecover(t *testing.T) {
	h := Recover(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), nil,
		func(w http.ResponseWriter, code int, msg string) { http.Error(w, msg, code) })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "the server goes on") {
		t.Errorf("%d %q", rec.Code, rec.Body.String())
	}
}
