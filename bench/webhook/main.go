// Command webhook is the load benchmark of headroom's admission webhook: the
// real HTTPS server (admission.NewServer and NewHandler, a fresh self-signed
// certificate, no API server, as `headroom webhook --no-cluster`) on a
// loopback port, AdmissionReviews at a fixed rate, and the latency
// percentiles, errors and the server's CPU and garbage per review. The same
// server with a no-op handler (decode the review, allow it) is the
// baseline: the two take the load in alternating rounds of one run, and the
// report divides the webhook's p99 latency and CPU per review by the
// no-op's. A shared machine's absolute p99 measures the machine; the
// ratio measures what the webhook adds.
//
//	go run ./bench/webhook                      # 500 req/s, 10 s each in 20 rounds
//	go run ./bench/webhook -rate 1000 -duration 5s
//	go run ./bench/webhook -inprocess           # servers and generator in one process
//
// Why it measures this way (the measurements behind each choice are in the
// README's webhook section):
//   - Each server runs in a process of its own, as the webhook does behind
//     the API server: in one process the generator's goroutines and garbage
//     would count as the webhook's latency, and each process's CPU time is
//     its handler's. All run with the server's GOGC.
//   - The load is open-loop, each request due at start + i/rate, so a
//     stalled server shows as latency, not as a slower sender (no
//     coordinated omission). The sender sleeps to absolute deadlines
//     (clock_nanosleep on Linux), hands each request to a sender goroutine
//     started before the load, and uses HTTP/1.1 over the warm pool of 25
//     connections client-go keeps per webhook host.
//   - The admission latency runs from handing the request to the HTTP
//     client to reading the answer, as the API server's
//     apiserver_admission_webhook_admission_duration_seconds does; the
//     latency from due time adds the sender's lateness, and the timer floor
//     (the pacer alone before the load) is the machine's share of it.
//   - Four real cases cycle (fits, denied, autofixed, unknown model) and
//     every answer is checked.
//
// The verdict (report.verdict): FAIL on any failed request, when the
// webhook's p99 (admission, and from due time) is over 1.5 times the
// no-op's (the median over pairs of rounds, see report.ratios), or its CPU
// per review over twice the no-op's. Exit 1 on FAIL, 2
// when the benchmark cannot run.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"headroom.dev/headroom/admission"
)

// Bounds that keep a run small: it is a benchmark on a shared machine,
// not a stress test.
const (
	maxRate     = 5000
	maxDuration = time.Minute
	maxRounds   = 100
	maxInFlight = 256
	// maxFloor bounds the timer floor's measurement.
	maxFloor = time.Second
)

type config struct {
	rate int
	// duration is how long each handler gets load, over all its rounds.
	duration time.Duration
	rounds   int
	// maxP99Ratio and maxCPURatio are the targets: webhook ÷ no-op.
	maxP99Ratio, maxCPURatio float64
	http2                    bool
	inProcess                bool
	cpuProfile               string
}

func main() {
	if os.Getenv(serveEnv) == "1" {
		os.Exit(serveMain(os.Args[1:], os.Stdin, os.Stdout))
	}
	var c config
	flag.IntVar(&c.rate, "rate", 500, "requests per second (at most 5000)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long each handler gets load, over all rounds (at most 1m)")
	flag.IntVar(&c.rounds, "rounds", 20, "stretches of load per handler; the webhook and the no-op alternate, in the order ABBA...")
	flag.Float64Var(&c.maxP99Ratio, "max-p99-ratio", 1.5, "target for the webhook's p99 latency ÷ the no-op's")
	flag.Float64Var(&c.maxCPURatio, "max-cpu-ratio", 2, "target for the webhook server's CPU per review ÷ the no-op's")
	flag.BoolVar(&c.http2, "http2", false, "serve and send over HTTP/2, as `headroom webhook --enable-http2` (default HTTP/1.1, what the webhook serves by default)")
	flag.BoolVar(&c.inProcess, "inprocess", false, "run the servers in this process rather than in child processes")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the webhook's server process to this file (with -inprocess: of the whole process)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	rep.print(os.Stdout, c)
	if ok, _ := rep.verdict(c); !ok {
		os.Exit(1)
	}
}

// side is what the load on one handler measured, over all its rounds. The
// latencies are sorted.
type side struct {
	sent, errors int
	firstErr     string
	// admission runs from handing the request to the client to reading
	// the response body; fromDue from the request's due time.
	admission []time.Duration
	fromDue   []time.Duration
	// late is how late each request left: from its due time to the moment
	// it was handed to the client.
	late    []time.Duration
	elapsed time.Duration
	// server is its server process's counters over its rounds; with the
	// servers in this process, the whole process's.
	server runtimeStats
	// pid is its server's process; 0 in this process.
	pid int
	// rounds are the p99s of each round, in order.
	rounds []roundP99
}

// roundP99 is one round's p99 admission latency and p99 from due time.
type roundP99 struct{ admission, fromDue time.Duration }

// merge adds a round's measurements.
func (s *side) merge(r side) {
	s.sent += r.sent
	s.errors += r.errors
	if s.firstErr == "" {
		s.firstErr = r.firstErr
	}
	s.admission = append(s.admission, r.admission...)
	s.fromDue = append(s.fromDue, r.fromDue...)
	s.late = append(s.late, r.late...)
	s.elapsed += r.elapsed
	s.server = s.server.add(r.server)
	s.rounds = append(s.rounds, r.rounds...)
}

func (s *side) sort() {
	slices.Sort(s.admission)
	slices.Sort(s.fromDue)
	slices.Sort(s.late)
}

// cpuPerReview is the server's CPU time per answered review; 0 where the
// platform does not say.
func (s side) cpuPerReview() time.Duration {
	if len(s.admission) == 0 {
		return 0
	}
	return time.Duration(float64(s.server.CPU) / float64(len(s.admission)))
}

// report is what a run measured.
type report struct {
	// webhook is the real handler's side, noop the baseline's: the same
	// server, TLS and HTTP stack with a handler that only decodes the
	// review and allows it.
	webhook, noop side
	// floor is how late the pacer wakes without load, sorted.
	floor []time.Duration
	proto string
	// generator is this process's counters over the whole load.
	generator runtimeStats
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ratio is a ÷ b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// ratios are the webhook's p99 admission latency, p99 from due time and
// CPU per review, each divided by the no-op's. The p99 ratios are the
// median over the pairs of rounds, each pair the webhook and the no-op
// back to back: a stall of a shared machine lands in one round and moves
// one pair's ratio, where it would set the p99 of the whole run. CPU time
// adds up, so its ratio is the whole run's.
func (r report) ratios() (p99, p99Due, cpu float64) {
	var a, d []float64
	for i := range min(len(r.webhook.rounds), len(r.noop.rounds)) {
		w, n := r.webhook.rounds[i], r.noop.rounds[i]
		a = append(a, ratio(w.admission, n.admission))
		d = append(d, ratio(w.fromDue, n.fromDue))
	}
	return median(a), median(d), ratio(r.webhook.cpuPerReview(), r.noop.cpuPerReview())
}

// median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// verdict: FAIL on any failed request or a side without answers, when the
// webhook's p99 admission latency or p99 from due time is over
// -max-p99-ratio times the no-op's (report.ratios), or its CPU per review over
// -max-cpu-ratio times the no-op's (where the platform reports CPU time).
// The latency from due time keeps coordinated omission out: a server that
// stalls delays the requests due during the stall, even where each one's
// admission latency looks short. why lists each rule that failed.
func (r report) verdict(c config) (ok bool, why []string) {
	for _, s := range []struct {
		name string
		side
	}{{"webhook", r.webhook}, {"no-op", r.noop}} {
		if s.errors > 0 {
			why = append(why, fmt.Sprintf("%d errors on the %s", s.errors, s.name))
		}
		if len(s.admission) == 0 {
			why = append(why, "no answers from the "+s.name)
		}
	}
	p99, p99Due, cpu := r.ratios()
	if p99 > c.maxP99Ratio {
		why = append(why, fmt.Sprintf("p99 admission latency %.2f × the no-op's, over %.2f", p99, c.maxP99Ratio))
	}
	if p99Due > c.maxP99Ratio {
		why = append(why, fmt.Sprintf("p99 from due time %.2f × the no-op's, over %.2f", p99Due, c.maxP99Ratio))
	}
	if cpu > c.maxCPURatio {
		why = append(why, fmt.Sprintf("CPU per review %.2f × the no-op's, over %.2f", cpu, c.maxCPURatio))
	}
	return len(why) == 0, why
}

func (r report) print(w io.Writer, c config) {
	where := "in this process"
	if r.webhook.pid != 0 {
		where = fmt.Sprintf("each in its own process (webhook pid %d, no-op pid %d)", r.webhook.pid, r.noop.pid)
	}
	fmt.Fprintf(w, "%d reviews to the webhook and %d to a no-op handler (%.0f/s, target %d/s), alternating in %d rounds each, over %s + TLS on loopback, servers %s; GOMAXPROCS %d\n",
		r.webhook.sent, r.noop.sent, float64(r.webhook.sent+r.noop.sent)/(r.webhook.elapsed+r.noop.elapsed).Seconds(), c.rate, c.rounds, r.proto, where, runtime.GOMAXPROCS(0))
	row := func(name string, d []time.Duration, note string) {
		fmt.Fprintf(w, "  %-18s p50 %-10v p90 %-10v p99 %-10v max %-10v %s\n", name+":",
			round(quantile(d, 0.50)), round(quantile(d, 0.90)), round(quantile(d, 0.99)), round(quantile(d, 1)), note)
	}
	for _, s := range []struct {
		name string
		side
	}{{"webhook", r.webhook}, {"no-op", r.noop}} {
		fmt.Fprintf(w, "%s:\n", s.name)
		row("admission latency", s.admission, "(request handed to the client → response read)")
		row("from due time", s.fromDue, "(admission latency + sender lateness)")
		row("sender lateness", s.late, "(due time → request handed to the client)")
		who := "server process"
		if s.pid == 0 {
			who = "process"
		}
		counters(w, "  "+who, s.server, len(s.admission), s.elapsed)
		fmt.Fprintf(w, "  errors %d", s.errors)
		if s.firstErr != "" {
			fmt.Fprintf(w, " (first: %s)", s.firstErr)
		}
		fmt.Fprintln(w)
	}
	row("timer floor", r.floor, "(the pacer alone, before the load: "+pacerKind+")")
	if r.webhook.pid != 0 {
		counters(w, "generator process", r.generator, len(r.webhook.admission)+len(r.noop.admission), r.webhook.elapsed+r.noop.elapsed)
	}
	p99, p99Due, cpu := r.ratios()
	fmt.Fprintf(w, "webhook ÷ no-op:   p99 admission latency %.2f (target ≤ %.2f), p99 from due time %.2f (medians over %d pairs of rounds; whole run %.2f and %.2f)",
		p99, c.maxP99Ratio, p99Due, min(len(r.webhook.rounds), len(r.noop.rounds)),
		ratio(quantile(r.webhook.admission, 0.99), quantile(r.noop.admission, 0.99)), ratio(quantile(r.webhook.fromDue, 0.99), quantile(r.noop.fromDue, 0.99)))
	if cpu > 0 {
		fmt.Fprintf(w, ", CPU per review %.2f (%v ÷ %v, target ≤ %.2f)", cpu, round(r.webhook.cpuPerReview()), round(r.noop.cpuPerReview()), c.maxCPURatio)
	}
	fmt.Fprintln(w)
	if ok, why := r.verdict(c); !ok {
		fmt.Fprintf(w, "FAIL: %s\n", strings.Join(why, "; "))
		return
	}
	fmt.Fprintf(w, "PASS: webhook ÷ no-op p99 %.2f and p99 from due time %.2f within %.2f", p99, p99Due, c.maxP99Ratio)
	if cpu > 0 {
		fmt.Fprintf(w, ", CPU per review %.2f within %.2f", cpu, c.maxCPURatio)
	}
	fmt.Fprintln(w, "; 0 errors")
}

// counters prints a process's counters over n reviews in elapsed.
func counters(w io.Writer, who string, s runtimeStats, n int, elapsed time.Duration) {
	if n == 0 {
		return
	}
	heap := ""
	if s.LiveHeap > 0 {
		// The runtime learns the live heap at a collection; none yet, no
		// number.
		heap = fmt.Sprintf(", live heap %.1f MiB", float64(s.LiveHeap)/(1<<20))
	}
	fmt.Fprintf(w, "%-20s %d GCs (GOGC %d%s), %.1f KiB allocated per review",
		who+":", s.GCs, s.GOGC, heap, float64(s.AllocBytes)/float64(n)/1024)
	if s.CPU > 0 {
		fmt.Fprintf(w, ", %v CPU per review (%.0f%% of one CPU)", round(time.Duration(float64(s.CPU)/float64(n))), 100*s.CPU.Seconds()/elapsed.Seconds())
	}
	fmt.Fprintln(w)
}

// round keeps latencies readable: microseconds.
func round(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// target is one server under test and the client that talks to it.
type target struct {
	srv    *server
	client *http.Client
	cases  []review
}

// open warms a server up: a client trusting its certificate, the first
// handshake and the first plan of each model, each case's answer checked
// and kept for verify, and the connection pool.
func open(srv *server, c config, cases []review, allowAll bool) (*target, error) {
	pool := x509.NewCertPool()
	pool.AddCert(srv.cert)
	t := &target{srv: srv, client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   c.http2,
		MaxIdleConnsPerHost: maxInFlight,
	}}}
	t.cases = slices.Clone(cases)
	for i := range t.cases {
		k := &t.cases[i]
		k.url = "https://" + srv.addr + k.path
		if allowAll {
			// The no-op allows everything and patches nothing.
			k.allowed, k.patched = true, false
		}
		status, body, err := post(t.client, *k)
		if err == nil {
			err = check(*k, status, body)
		}
		if err != nil {
			return nil, fmt.Errorf("warm-up: %v", err)
		}
		k.answer = body
	}
	if err := warmPool(t.client, t.cases); err != nil {
		return nil, fmt.Errorf("warm-up: %v", err)
	}
	return t, nil
}

// round loads one target for n requests and reads its server's counters
// around the load; the load ends when every answer is in, so no request of
// one round runs into the next.
func (t *target) round(ctx context.Context, c config, n int) (side, error) {
	before, err := t.srv.stats()
	if err != nil {
		return side{}, err
	}
	s := load(ctx, c, t.client, t.cases, n)
	after, err := t.srv.stats()
	if err != nil {
		return side{}, err
	}
	s.server = after.since(before)
	s.sort()
	s.rounds = []roundP99{{quantile(s.admission, 0.99), quantile(s.fromDue, 0.99)}}
	return s, nil
}

// run starts the two servers, sends the load in alternating rounds and
// stops the servers.
func run(ctx context.Context, c config) (rep report, err error) {
	if c.rate < 1 || c.rate > maxRate {
		return report{}, fmt.Errorf("-rate %d: give 1 to %d requests per second", c.rate, maxRate)
	}
	if c.duration <= 0 || c.duration > maxDuration {
		return report{}, fmt.Errorf("-duration %v: give more than 0 and at most %v", c.duration, maxDuration)
	}
	if c.rounds < 1 || c.rounds > maxRounds {
		return report{}, fmt.Errorf("-rounds %d: give 1 to %d", c.rounds, maxRounds)
	}
	perRound := int(float64(c.rate) * c.duration.Seconds() / float64(c.rounds))
	if perRound < 1 {
		return report{}, fmt.Errorf("-rate %d for %v in %d rounds sends no request a round: send longer or in fewer rounds", c.rate, c.duration, c.rounds)
	}
	// The server command's garbage collector target, for the generator as
	// well: its own collections would hold up reading the answers.
	admission.TuneGC(os.Getenv("GOGC"))
	cases, err := reviews()
	if err != nil {
		return report{}, err
	}
	var targets [2]*target // the webhook, the no-op
	for i, noop := range []bool{false, true} {
		srv, err := startServer(ctx, c, noop)
		if err != nil {
			return report{}, err
		}
		defer func() {
			if serr := srv.stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		t, err := open(srv, c, cases, noop)
		if err != nil {
			return report{}, err
		}
		defer t.client.CloseIdleConnections()
		targets[i] = t
	}
	rep.floor = timerFloor(c)
	genBefore := readStats()
	sides := [2]*side{&rep.webhook, &rep.noop}
	for r := 0; r < c.rounds && ctx.Err() == nil; r++ {
		// ABBA: each handler goes first as often as second, so a drift
		// of the machine over the run weighs on both alike.
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			s, err := targets[i].round(ctx, c, perRound)
			if err != nil {
				return report{}, err
			}
			sides[i].merge(s)
		}
	}
	rep.generator = readStats().since(genBefore)
	for i, s := range sides {
		s.sort()
		s.pid = targets[i].srv.pid
	}
	rep.proto = "HTTP/1.1"
	if c.http2 {
		rep.proto = "HTTP/2"
	}
	return rep, nil
}

// poolConns is the number of connections warmPool opens: client-go's
// transport, which the API server's webhook client uses, keeps up to 25
// idle connections per host (k8s.io/client-go/transport, idleConnsPerHost).
const poolConns = 25

// warmPool sends poolConns reviews at once, twice, so that over HTTP/1.1
// the client holds the pool of connections a running API server holds to
// its webhook; otherwise the first bursts of the load would pay TLS
// handshakes that a warm API server does not. Over HTTP/2 all go on one
// connection.
func warmPool(client *http.Client, cases []review) error {
	for range 2 {
		errs := make(chan error, poolConns)
		var start sync.WaitGroup
		start.Add(1)
		for i := range poolConns {
			go func(k review) {
				start.Wait()
				status, body, err := post(client, k)
				if err == nil {
					err = check(k, status, body)
				}
				errs <- err
			}(cases[i%len(cases)])
		}
		start.Done()
		for range poolConns {
			if err := <-errs; err != nil {
				return err
			}
		}
	}
	return nil
}

// offset is when request i is due, from the start of the schedule.
func offset(i, rate int) time.Duration {
	return time.Duration(int64(i) * int64(time.Second) / int64(rate))
}

// load sends n reviews on schedule, at c.rate, and waits for the answers.
func load(ctx context.Context, c config, client *http.Client, cases []review, n int) side {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		rep = side{admission: make([]time.Duration, 0, n), fromDue: make([]time.Duration, 0, n), late: make([]time.Duration, 0, n)}
	)
	slots := make(chan struct{}, maxInFlight)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		rep.errors++
		if rep.firstErr == "" {
			rep.firstErr = err.Error()
		}
	}
	type job struct {
		k   review
		due time.Time
	}
	// send posts one review; the admission latency's clock starts here,
	// before the HTTP client has the request.
	send := func(k review, due time.Time) {
		defer wg.Done()
		defer func() { <-slots }()
		sent := time.Now()
		status, body, err := post(client, k)
		done := time.Now()
		if err == nil {
			err = verify(k, status, body)
		}
		if err != nil {
			fail(err)
			return
		}
		mu.Lock()
		rep.admission = append(rep.admission, done.Sub(sent))
		rep.fromDue = append(rep.fromDue, done.Sub(due))
		rep.late = append(rep.late, sent.Sub(due))
		mu.Unlock()
	}
	// The senders are started before the load: a goroutine started per
	// request costs the generator CPU the webhook's answers wait on.
	// jobs never fills: a job is queued only with a slot, and there are
	// as many slots as senders.
	jobs := make(chan job, maxInFlight)
	for range maxInFlight {
		go func() {
			for j := range jobs {
				send(j.k, j.due)
			}
		}()
	}
	defer close(jobs)
	p, release := newPacer()
	defer release()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		at := offset(i, c.rate)
		p.sleepUntil(at)
		due := p.start.Add(at)
		rep.sent++
		select {
		case slots <- struct{}{}:
		default:
			fail(fmt.Errorf("more than %d requests in flight: the server is not keeping up", maxInFlight))
			continue
		}
		wg.Add(1)
		jobs <- job{cases[i%len(cases)], due}
		// Let the sender that took the job run now, on this P, rather than
		// leave the job on a P whose thread goes back to sleep until
		// another is woken to take it.
		runtime.Gosched()
	}
	wg.Wait()
	rep.elapsed = time.Since(p.start)
	return rep
}

// timerFloor measures how late the pacer wakes at the benchmark's rate with
// nothing else running, for as long as the load but at most a second.
func timerFloor(c config) []time.Duration {
	n := min(int(float64(c.rate)*c.duration.Seconds()), int(float64(c.rate)*maxFloor.Seconds()))
	late := make([]time.Duration, 0, n)
	p, release := newPacer()
	defer release()
	for i := 1; i <= n; i++ {
		at := offset(i, c.rate)
		p.sleepUntil(at)
		late = append(late, time.Since(p.start.Add(at)))
	}
	slices.Sort(late)
	return late
}

// review is one request body and the answer it must get.
type review struct {
	path    string
	url     string
	uid     types.UID
	body    []byte
	allowed bool
	patched bool
	// answer is the checked answer to this case in the warm-up.
	answer []byte
}

// post sends one review and reads the whole answer; the latency stops
// here, before the answer is decoded.
func post(client *http.Client, k review) (status int, body []byte, err error) {
	resp, err := client.Post(k.url, "application/json", bytes.NewReader(k.body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// check decodes an answer and compares it with what the case expects.
func check(k review, status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", k.path, status, bytes.TrimSpace(body))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("%s: %v", k.path, err)
	}
	r := out.Response
	switch {
	case r == nil || r.UID != k.uid:
		return fmt.Errorf("%s: response for another request", k.path)
	case r.Allowed != k.allowed:
		return fmt.Errorf("%s %s: allowed %v, want %v", k.path, k.uid, r.Allowed, k.allowed)
	case (len(r.Patch) > 0) != k.patched:
		return fmt.Errorf("%s %s: patch %q", k.path, k.uid, r.Patch)
	}
	return nil
}

// verify checks an answer during the load: the bytes of the checked
// warm-up answer pass at once, anything else is decoded and checked. The
// webhook answers a case the same way every time, so the generator does not
// decode thousands of answers while other requests are in flight, and an
// answer that differs but is right still passes.
func verify(k review, status int, body []byte) error {
	if status == http.StatusOK && bytes.Equal(body, k.answer) {
		return nil
	}
	return check(k, status, body)
}

// reviews builds the four cases.
func reviews() ([]review, error) {
	l4 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-L4"}
	h100 := map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	specs := []struct {
		uid            types.UID
		path           string
		args           []string
		nodeSelector   map[string]string
		annotations    map[string]string
		allowed, patch bool
	}{
		{"fits", "/validate", []string{"--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"}, h100, nil, true, false},
		{"denied", "/validate", []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072"}, l4, nil, false, false},
		{"autofix", "/mutate", []string{"--model", "meta-llama/Llama-3.1-8B-Instruct"}, l4, map[string]string{admission.AnnotationAutofix: "true"}, true, true},
		{"unknown-model", "/validate", []string{"--model", "/models/acme-chat"}, l4, nil, true, false},
	}
	var out []review
	for _, s := range specs {
		d := appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "vllm-" + string(s.uid), Namespace: "llm", Annotations: s.annotations},
		}
		d.Spec.Template.Spec.NodeSelector = s.nodeSelector
		d.Spec.Template.Spec.Containers = []corev1.Container{{
			Name: "vllm", Image: "vllm/vllm-openai:v0.19.0", Args: s.args,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{admission.ResourceGPU: resource.MustParse("1")}},
		}}
		raw, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: s.uid, Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
				Name:     d.Name, Namespace: d.Namespace, Operation: admissionv1.Create,
				Object: k8sruntime.RawExtension{Raw: raw},
			},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, review{path: s.path, uid: s.uid, body: body, allowed: s.allowed, patched: s.patch})
	}
	return out, nil
}
