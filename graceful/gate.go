package graceful

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Gate admits work within a server's memory budget: at most Run requests
// of a kind work at once, at most Queue more wait for a slot, and a
// request past both is refused at once (ErrBusy: HTTP 429), before its
// body is read, so a waiting or refused request holds a connection and a
// goroutine, never its body. A request that waits longer than MaxWait is
// refused too (ErrQueueTimeout: HTTP 503). The numbers a refusal names
// are the gate's, so a client learns the bound it hit.
type Gate struct {
	name    string
	run     int
	queue   int
	maxWait time.Duration
	tickets chan struct{} // run + queue: everything admitted
	slots   chan struct{} // run: what is working
}

// ErrBusy is a request refused because Run are working and Queue wait.
var ErrBusy = errors.New("busy")

// ErrQueueTimeout is a request that waited MaxWait without a slot.
var ErrQueueTimeout = errors.New("queue timeout")

// NewGate returns a gate for work called name ("simulations") that lets
// run work at once, queue wait, each at most maxWait.
func NewGate(name string, run, queue int, maxWait time.Duration) *Gate {
	run, queue = max(run, 1), max(queue, 0)
	return &Gate{name: name, run: run, queue: queue, maxWait: maxWait,
		tickets: make(chan struct{}, run+queue), slots: make(chan struct{}, run)}
}

// Limits says the gate's bounds in words, for documentation and logs.
func (g *Gate) Limits() string {
	return fmt.Sprintf("%d %s at once, %d waiting at most %s", g.run, g.name, g.queue, g.maxWait)
}

// Enter waits for a slot. On success the caller must call the returned
// release once. The error is ErrBusy, ErrQueueTimeout or ctx's, wrapped
// with a sentence naming the bound.
func (g *Gate) Enter(ctx context.Context) (release func(), err error) {
	select {
	case g.tickets <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d %s running and %d waiting, the most this server takes; retry later", ErrBusy, g.run, g.name, g.queue)
	}
	t := time.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots; <-g.tickets }, nil
	case <-t.C:
		<-g.tickets
		return nil, fmt.Errorf("%w: waited %s for one of %d %s slots; retry later", ErrQueueTimeout, g.maxWait, g.run, g.name)
	case <-ctx.Done():
		<-g.tickets
		return nil, ctx.Err()
	}
}

// Status is the HTTP status of an Enter error: 429 when busy, 503 when
// the wait ran out (or the client left, who then reads nothing).
func Status(err error) int {
	if errors.Is(err, ErrBusy) {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// Recover answers a panic in one request with writeError's 500 and logs
// it with its stack: one request's crash never takes the process down, and
// its client gets an answer (net/http alone would drop the connection
// without one). A panic in a goroutine the handler started is out of its
// reach: handlers do their work on the request's goroutine. log may be nil.
func Recover(h http.Handler, log *slog.Logger, writeError func(w http.ResponseWriter, code int, msg string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			if log != nil {
				log.Error("request panicked", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			}
			// If the handler had begun its answer this adds to it; the
			// client then sees a broken body, which is the truth.
			writeError(w, http.StatusInternalServerError, "internal error: the request failed and was logged; the server goes on")
		}()
		h.ServeHTTP(w, r)
	})
}

// Admitted is how many requests work or wait now.
func (g *Gate) Admitted() int { return len(g.tickets) }

// ByteGate admits work by the bytes it will hold rather than by count:
// requests whose memory grows with their body (an AdmissionReview) work
// together while their bodies sum to at most the budget, so a thousand
// small reviews run at once where four of the largest would fill it, and
// a review that waits on something slow (an API server that hangs) keeps
// only its own bytes from the others. At most queue requests wait, each
// at most maxWait; a request past the queue is refused at once (ErrBusy),
// one that waits too long gets ErrQueueTimeout. Admission is FIFO, so a
// large request is not starved by small ones.
type ByteGate struct {
	name    string
	budget  int64
	floor   int64
	queue   int64
	maxWait time.Duration
	sem     *semaphore.Weighted
	waiting atomic.Int64
}

// NewByteGate returns a gate for work called name whose admitted requests
// hold at most budget bytes together; each counts at least floor bytes
// (its decoding and checks cost something even for a tiny body).
func NewByteGate(name string, budget, floor int64, queue int, maxWait time.Duration) *ByteGate {
	budget, floor = max(budget, 1), min(max(floor, 1), max(budget, 1))
	return &ByteGate{name: name, budget: budget, floor: floor, queue: int64(max(queue, 0)), maxWait: maxWait, sem: semaphore.NewWeighted(budget)}
}

// Limits says the gate's bounds in words, for documentation and logs.
func (g *ByteGate) Limits() string {
	return fmt.Sprintf("%s holding at most %d bytes at once (each counted as at least %d), %d waiting at most %s", g.name, g.budget, g.floor, g.queue, g.maxWait)
}

// Enter waits until n more bytes fit in the budget (n below the floor
// counts as the floor, above the budget as the budget; a request of
// unknown size passes its largest). On success the caller must call the
// returned release once.
func (g *ByteGate) Enter(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, g.floor), g.budget)
	if g.sem.TryAcquire(n) {
		return func() { g.sem.Release(n) }, nil
	}
	if g.waiting.Add(1) > g.queue {
		g.waiting.Add(-1)
		return nil, fmt.Errorf("%w: %s fill the %d-byte budget and %d wait, the most this server takes; retry later", ErrBusy, g.name, g.budget, g.queue)
	}
	defer g.waiting.Add(-1)
	wctx, cancel := context.WithTimeout(ctx, g.maxWait)
	defer cancel()
	if err := g.sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: waited %s for %d bytes of the %d-byte %s budget; retry later", ErrQueueTimeout, g.maxWait, n, g.budget, g.name)
	}
	return func() { g.sem.Release(n) }, nil
}

// Waiting is how many requests wait for the budget now.
func (g *ByteGate) Waiting() int { return int(g.waiting.Load()) }
