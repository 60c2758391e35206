package graceful

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
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
//
// Clients (EnterFrom) share the gate fairly without being capped while
// alone: a freed slot goes to the waiting client that holds the least of
// the gate (the earliest of them), and a client that finds the queue full
// takes the place of the newest waiter of the client that waits the most,
// when that client waits more than it would. So ten requests of one client
// whose bodies drip hold the slots only as long as a body may take, and
// never keep another client out of the queue; behind a proxy, where every
// request is one client, the gate is what it was without clients.
type Gate struct {
	name    string
	run     int
	queue   int
	maxWait time.Duration

	mu       sync.Mutex
	working  map[string]int // slots worked, by client
	waiting  map[string]int // places in the queue, by client
	nWorking int
	waiters  []*waiter // in the order they came
}

// waiter is a request in the queue; ready is closed with err nil when it
// is given a slot, or err set when it is pushed out.
type waiter struct {
	client string
	ready  chan struct{}
	err    error
}

// ErrBusy is a request refused because Run are working and Queue wait.
var ErrBusy = errors.New("busy")

// ErrQueueTimeout is a request that waited MaxWait without a slot.
var ErrQueueTimeout = errors.New("queue timeout")

// NewGate returns a gate for work called name ("simulations") that lets
// run work at once, queue wait, each at most maxWait.
func NewGate(name string, run, queue int, maxWait time.Duration) *Gate {
	run, queue = max(run, 1), max(queue, 0)
	return &Gate{name: name, run: run, queue: queue, maxWait: maxWait, working: map[string]int{}, waiting: map[string]int{}}
}

// Limits says the gate's bounds in words, for documentation and logs.
func (g *Gate) Limits() string {
	return fmt.Sprintf("%d %s at once, %d waiting at most %s", g.run, g.name, g.queue, g.maxWait)
}

// Enter is EnterFrom for requests that are all one client.
func (g *Gate) Enter(ctx context.Context) (release func(), err error) { return g.EnterFrom(ctx, "") }

// EnterFrom waits for a slot for a request of client (its address). On
// success the caller must call the returned release once. The error is
// ErrBusy, ErrQueueTimeout or ctx's, wrapped with a sentence naming the
// bound.
func (g *Gate) EnterFrom(ctx context.Context, client string) (release func(), err error) {
	g.mu.Lock()
	if g.nWorking < g.run && len(g.waiters) == 0 {
		g.take(client)
		g.mu.Unlock()
		return g.releaser(client), nil
	}
	if len(g.waiters) >= g.queue && !g.pushOut(client) {
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: %d %s running and %d waiting, the most this server takes; retry later", ErrBusy, g.run, g.name, g.queue)
	}
	w := &waiter{client: client, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.waiting[client]++
	g.mu.Unlock()

	t := time.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
		err = fmt.Errorf("%w: waited %s for one of %d %s slots; retry later", ErrQueueTimeout, g.maxWait, g.run, g.name)
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready:
		// Given a slot or pushed out, whatever else happened meanwhile.
		if w.err != nil {
			return nil, w.err
		}
		if err != nil {
			g.free(client)
			return nil, err
		}
		return g.releaser(client), nil
	default:
		g.leave(w)
		return nil, err
	}
}

// take gives client a slot. Called with mu held.
func (g *Gate) take(client string) {
	g.nWorking++
	g.working[client]++
}

// free gives back client's slot and hands it on. Called with mu held.
func (g *Gate) free(client string) {
	g.nWorking--
	if g.working[client]--; g.working[client] == 0 {
		delete(g.working, client)
	}
	// The next is the waiter whose client holds the least of the gate
	// (slots and places), the earliest of them.
	held := func(c string) int { return g.working[c] + g.waiting[c] }
	best := -1
	for i, w := range g.waiters {
		if best < 0 || held(w.client) < held(g.waiters[best].client) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	w := g.waiters[best]
	g.leave(w)
	g.take(w.client)
	close(w.ready)
}

// leave takes w out of the queue. Called with mu held.
func (g *Gate) leave(w *waiter) {
	for i, o := range g.waiters {
		if o == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
	if g.waiting[w.client]--; g.waiting[w.client] == 0 {
		delete(g.waiting, w.client)
	}
}

// pushOut makes room in a full queue for a request of client: the newest
// waiter of the client that waits the most leaves (ErrBusy), when that
// client would still wait more than client then does. Called with mu
// held.
func (g *Gate) pushOut(client string) bool {
	heavy, most := "", 0
	for c, n := range g.waiting {
		if n > most {
			heavy, most = c, n
		}
	}
	if heavy == client || most <= g.waiting[client]+1 {
		return false
	}
	for i := len(g.waiters) - 1; i >= 0; i-- {
		if w := g.waiters[i]; w.client == heavy {
			g.leave(w)
			w.err = fmt.Errorf("%w: %d %s running and %d waiting, and this client waits the most of them; retry later", ErrBusy, g.run, g.name, g.queue)
			close(w.ready)
			return true
		}
	}
	return false
}

func (g *Gate) releaser(client string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.free(client)
			g.mu.Unlock()
		})
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
func (g *Gate) Admitted() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nWorking + len(g.waiters)
}

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

// ClientOf names the client of r for EnterFrom: the address it connects
// from, without its port. Behind a proxy every request is the proxy's.
func ClientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// A request admitted to a slot holds it while its body arrives, so a
// body must keep coming: BodyGrace for its first bytes, then at least
// MinBodyRate on average, or the read fails (HTTP 408). A server's read
// timeout (30 s, a minute) bounds the whole request; this bounds a slot
// held by a body that drips (ten bodies sent a byte a second held every
// slot of serve for its 30 s). The bound follows the bytes read, not a
// clock alone, so a large body on a slow but honest link, or read slowly
// by a busy server, is not cut: 4 MiB at 16 KiB/s is 256 s, past any read
// timeout.
const (
	BodyGrace   = 5 * time.Second
	MinBodyRate = 16 << 10 // bytes a second
)

// bodyGrace is BodyGrace, shortened by tests.
var bodyGrace = BodyGrace

// ErrSlowBody is a body that came slower than MinBodyRate (HTTP 408).
var ErrSlowBody = fmt.Errorf("the request body came slower than %d KiB/s after %s: send it at once", MinBodyRate>>10, BodyGrace)

// TimedBody keeps the reading of body (r's, or a reader over it) to
// BodyGrace plus MinBodyRate from now, by moving the connection's read
// deadline as bytes come; past it the read fails, and the returned reader
// says so with ErrSlowBody. The net/http server lifts the deadline once
// the body is read, before it watches the connection for the client
// leaving.
func TimedBody(w http.ResponseWriter, body io.Reader) io.Reader {
	b := &slowBody{r: body, rc: http.NewResponseController(w), start: time.Now()}
	b.extend()
	return b
}

type slowBody struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	read  int64
}

// extend sets the deadline the bytes read so far have earned.
func (b *slowBody) extend() {
	earned := bodyGrace + time.Duration(float64(b.read)/MinBodyRate*float64(time.Second))
	_ = b.rc.SetReadDeadline(b.start.Add(earned))
}

func (b *slowBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	// Only while more is to come: the read that reaches the body's end
	// returns its last bytes with io.EOF, after net/http has lifted the
	// deadline to watch the connection for the client leaving. Set again
	// then, it would end that watch BodyGrace later and cancel the
	// request's context under a handler still working (a capacity answer
	// came back "context canceled" after 5 s).
	if n > 0 && err == nil {
		b.extend()
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, ErrSlowBody
	}
	return n, err
}
