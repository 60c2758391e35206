package graceful

import (
	"context"
	"errors"
	"fmt"
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

// One client's requests fill a gate of one slot and four places; another
// client still gets a place (the first client's newest waiter makes
// room, refused with ErrBusy) and is the next to work, ahead of the
// first client's older waiters. Alone, the first client had every slot
// and every place.
func TestGateShares(t *testing.T) {
	g := NewGate("jobs", 1, 4, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release, err := g.EnterFrom(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		who string
		err error
	}
	order := make(chan result, 8)
	enter := func(who, client string) {
		rel, err := g.EnterFrom(ctx, client)
		order <- result{who, err}
		if err == nil {
			rel()
		}
	}
	for i := range 4 {
		go enter(fmt.Sprintf("a%d", i+1), "a")
		for g.Admitted() < i+2 {
			time.Sleep(time.Millisecond)
		}
	}
	go enter("b", "b")
	first := <-order
	if first.who != "a4" || !errors.Is(first.err, ErrBusy) || !strings.Contains(first.err.Error(), "this client waits the most") {
		t.Fatalf("first out: %+v, want a4 pushed out", first)
	}
	for g.Admitted() < 5 {
		time.Sleep(time.Millisecond)
	}
	release()
	if next := <-order; next.who != "b" || next.err != nil {
		t.Errorf("next to work: %+v, want b", next)
	}
	for range 3 {
		if r := <-order; r.err != nil {
			t.Errorf("%s: %v", r.who, r.err)
		}
	}
	if g.Admitted() != 0 {
		t.Errorf("%d admitted after all left", g.Admitted())
	}
}

// A handler that has read its whole body keeps its request's context
// for as long as it works: the deadline TimedBody sets is not armed
// again on the read that reaches the end (it was, and a capacity answer
// came back "context canceled" BodyGrace after its body was read).
func TestTimedBodyLeavesTheRequestAlive(t *testing.T) {
	defer func(g time.Duration) { bodyGrace = g }(bodyGrace)
	bodyGrace = 100 * time.Millisecond
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		body := TimedBody(w, r.Body)
		for {
			if _, err := body.Read(b); err != nil {
				break
			}
		}
		select {
		case <-r.Context().Done():
			got <- context.Cause(r.Context())
		case <-time.After(5 * bodyGrace):
			got <- nil
		}
		fmt.Fprintln(w, "done")
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(strings.Repeat(`{"a": 1}`, 100)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-got; err != nil {
		t.Fatalf("the request's context ended while its handler worked: %v", err)
	}
}
