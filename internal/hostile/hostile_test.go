// Package hostile runs headroom's long-running servers, `headroom serve`
// and `headroom webhook`, as real processes and hits them with the
// hostile and heavy clients of the issue "The servers survive their
// clients", in parallel: a KV pool of 400 million blocks, simulations
// past their time, 50 doctor reports of 3.7 MB at once, a Deployment of
// 10,000 containers, 16 reviews of 1 MB at once. Each test asserts that
// the process is alive afterwards, that its peak resident memory (VmHWM
// in /proc/PID/status) stayed under the server's documented budget, and
// that every answer was well-formed. Tests only: it has no package code.
//
// The binary is built once in TestMain; HEADROOM_HOSTILE_BIN runs the
// suite against another one (an older build, to see the cases fail).
package hostile

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"headroom.dev/headroom/internal/testkit"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"headroom.dev/headroom/admission"
)

var bin string

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		fmt.Println("hostile: /proc/PID/status is Linux's; skipped")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "headroom-hostile")
	if err != nil {
		panic(err)
	}
	bin = os.Getenv("HEADROOM_HOSTILE_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "headroom")
		out, err := exec.Command("go", "build", "-o", bin, "headroom.dev/headroom/cmd/headroom").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building headroom: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Budgets, as docs/servers.md and the admission package document them: the
// chart's memory limit of each server's container.
const (
	serveBudget   = 256 << 20
	webhookBudget = 256 << 20
	// addressLimit bounds the child's address space (RLIMIT_AS): far
	// above the budget, for the Go runtime's reservations, but a server
	// that allocates gigabytes dies here instead of taking the machine.
	addressLimit = 6 << 30
)

// proc is a server under test.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	stderr *testkit.SyncBuffer
}

// start runs bin with args under GOMEMLIMIT=200MiB (as the chart sets it) and
// waits for the line in which it names its address (addrRe's group 1).
func start(t *testing.T, addrRe *regexp.Regexp, args ...string) *proc {
	t.Helper()
	return startLimited(t, "200MiB", addrRe, args...)
}

// startLimited is start under another GOMEMLIMIT.
func startLimited(t *testing.T, goMemLimit string, addrRe *regexp.Regexp, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+goMemLimit, "HF_HUB_OFFLINE=1")
	pr, pw := io.Pipe()
	buf := &testkit.SyncBuffer{}
	cmd.Stderr = io.MultiWriter(pw, buf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lim := unix.Rlimit{Cur: addressLimit, Max: addressLimit}
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &lim, nil); err != nil {
		t.Logf("no address-space limit: %v", err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), stderr: buf}
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case p.addr = <-found:
	case <-p.exited:
		t.Fatalf("%v exited: %s", args, buf.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%v named no address in 30 s: %s", args, buf.String())
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// peakRSS is the process's VmHWM.
func (p *proc) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("the process is gone: %v; its log: %.2000s", err, p.stderr.String())
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// alive fails the test when the process has exited.
func (p *proc) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("the server died: %v; its log ends: %s", p.cmd.ProcessState, tail(p.stderr.String(), 2000))
	default:
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// answer is one request's outcome.
type answer struct {
	status int
	body   []byte
	header http.Header
	err    error
}

func do(c *http.Client, method, url, ctype string, body []byte) answer {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b, header: resp.Header, err: err}
}

// parallel runs n calls of f, at most width at once, and returns their
// answers in order.
func parallel(n, width int, f func(i int) answer) []answer {
	out := make([]answer, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = f(i)
		}()
	}
	wg.Wait()
	return out
}

var serveAddr = regexp.MustCompile(`msg=serving url=http://([^/ ]+)/`)

// apiWellFormed checks an /api/ answer: a status the API documents, JSON,
// and an error answer's one line.
func apiWellFormed(t *testing.T, what string, a answer, ok ...int) {
	t.Helper()
	if a.err != nil {
		t.Errorf("%s: no answer: %v", what, a.err)
		return
	}
	if !containsInt(ok, a.status) {
		t.Errorf("%s: status %d: %.300s", what, a.status, a.body)
		return
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	if a.status == http.StatusOK {
		if !json.Valid(a.body) {
			t.Errorf("%s: 200 with a body that is not JSON: %.200s", what, a.body)
		}
		return
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error == "" || strings.Contains(e.Error, "\n") {
		t.Errorf("%s: status %d without a one-line error: %.300s", what, a.status, a.body)
	}
	if (a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable) && a.header.Get("Retry-After") == "" {
		t.Errorf("%s: %d without Retry-After", what, a.status)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

const simBody = `{"plan":{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB"%s},"rate":%g,"duration_s":%g,"prompt_tokens":%d,"output_tokens":%d}`

// The cases against `headroom serve`, all at once: the 200-byte
// POST of a 400-million-block pool (it took the server down); 100
// simulations within the limits, 50 at a time (it died at 2.1 GB); 50
// doctor posts of 3.7 MB at once (under the 4 MiB cap); 200 mixed
// requests; a simulation that would run far past its time (it ran 196 s
// past the write timeout). The simulation time is 500 ms here
// (--max-simulation-time; 30 s by default) so that the suite stays short
// and every simulation of 180,000 requests (about 2 s) runs into it.
func TestServeHostile(t *testing.T) {
	p := start(t, serveAddr, "serve", "--listen", "127.0.0.1:0", "--offline", "--max-simulation-time", "500ms")
	base := "http://" + p.addr
	c := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 256}}
	post := func(path, body string) answer {
		return do(c, http.MethodPost, base+path, "application/json", []byte(body))
	}

	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	// 1. The pool of 400M blocks: a 422 naming the bound, at once.
	run(func() {
		a := post("/api/simulate", fmt.Sprintf(simBody, `,"flags":{"num-gpu-blocks-override":"400000000"}`, 1.0, 10.0, 100, 10))
		apiWellFormed(t, "400M blocks", a, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable)
		if a.status == http.StatusUnprocessableEntity && !strings.Contains(string(a.body), "at most 1000000 here") {
			t.Errorf("400M blocks: %s", a.body)
		}
	})
	// 2. 100 simulations of 180,000 requests each (rate 50 for an hour,
	// within the documented 200,000), 50 at a time.
	run(func() {
		start := time.Now()
		as := parallel(100, 50, func(int) answer { return post("/api/simulate", fmt.Sprintf(simBody, "", 50.0, 3600.0, 1000, 100)) })
		codes := map[int]int{}
		for i, a := range as {
			apiWellFormed(t, fmt.Sprintf("simulation %d", i), a, http.StatusOK, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable)
			codes[a.status]++
		}
		t.Logf("100 simulations in %s: %v", time.Since(start).Round(time.Millisecond), codes)
		if codes[http.StatusTooManyRequests] == 0 {
			t.Errorf("no simulation was refused past the queue: %v", codes)
		}
	})
	// 3. 50 doctor posts of 3.7 MB at once.
	run(func() {
		text := strings.Repeat("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 2.00 GiB is free.\n", 3_700_000/140)
		body, _ := json.Marshal(map[string]string{"text": text, "gpu": "H100-80GB", "model": "meta-llama/Llama-3.1-8B-Instruct"})
		// As curl sends a body over 1 MiB: the server refuses (429, 503)
		// before the 3.7 MB leave, where a client writing them regardless
		// gets a broken pipe instead of the refusal (before the gate
		// shared slots by client, too).
		expecting := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, ExpectContinueTimeout: 10 * time.Second}}
		as := parallel(50, 50, func(int) answer {
			req, err := http.NewRequest(http.MethodPost, base+"/api/doctor", strings.NewReader(string(body)))
			if err != nil {
				return answer{err: err}
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Expect", "100-continue")
			resp, err := expecting.Do(req)
			if err != nil {
				return answer{err: err}
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return answer{status: resp.StatusCode, body: b, header: resp.Header, err: err}
		})
		codes := map[int]int{}
		for i, a := range as {
			apiWellFormed(t, fmt.Sprintf("doctor %d", i), a, http.StatusOK, http.StatusBadRequest, http.StatusTooManyRequests, http.StatusServiceUnavailable)
			codes[a.status]++
		}
		t.Logf("50 doctor reports of %d bytes: %v", len(body), codes)
	})
	// 4. 200 mixed requests, garbage among them.
	run(func() {
		kinds := []func() answer{
			func() answer {
				return post("/api/plan", `{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB"}`)
			},
			func() answer { return do(c, http.MethodGet, base+"/api/gpus", "", nil) },
			func() answer { return post("/api/plan", "\x00\xff{{{") },
			func() answer { return post("/api/simulate", fmt.Sprintf(simBody, "", 1.0, 60.0, 500, 50)) },
			func() answer { return post("/api/doctor", `{"text":"nothing here"}`) },
			func() answer { return post("/api/nope", `{}`) },
			func() answer { return post("/api/plan", `{"model":"`+strings.Repeat("x", 2<<20)+`"}`) },
		}
		as := parallel(200, 40, func(i int) answer { return kinds[i%len(kinds)]() })
		for i, a := range as {
			apiWellFormed(t, fmt.Sprintf("mixed %d", i), a, http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge,
				http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable)
		}
	})
	wg.Wait()

	// 5. Alone: a simulation past its time stops there, with a 422 that
	// names the bound, instead of running on while its client waits. An
	// hour at 30 req/s of 500/1000-token requests: about 108,000 requests
	// (under the page's 200,000) and 240,000 steps, 2 s of CPU for the
	// CLI; a traffic that fills the in-flight bound sooner (50 req/s of
	// 1000/100) stops on its own, fell behind, in a third of a second.
	begin := time.Now()
	a := post("/api/simulate", fmt.Sprintf(simBody, "", 30.0, 3600.0, 500, 1000))
	took := time.Since(begin)
	apiWellFormed(t, "long simulation", a, http.StatusUnprocessableEntity)
	t.Logf("long simulation answered after %s", took.Round(time.Millisecond))
	if !strings.Contains(string(a.body), "limit of 500ms a request") || took > 5*time.Second {
		t.Errorf("long simulation: %s after %s", a.body, took)
	}

	p.alive(t)
	if a := do(c, http.MethodGet, base+"/api/gpus", "", nil); a.status != http.StatusOK {
		t.Errorf("after the load, /api/gpus: %d %v", a.status, a.err)
	}
	peak := p.peakRSS(t)
	t.Logf("peak RSS %d MiB (budget %d MiB)", peak>>20, serveBudget>>20)
	if peak > serveBudget {
		t.Errorf("peak RSS %d MiB, over the budget of %d MiB", peak>>20, serveBudget>>20)
	}
}

var webhookAddr = regexp.MustCompile(`msg="serving admission webhook" addr=(\S+)`)

// review is an AdmissionReview of a Deployment of n vLLM containers
// asking for gpus each, on H100-80GB.
func review(uid string, n int, gpus string) []byte { return testkit.Review(uid, "H100-80GB", n, gpus) }

// The cases against the webhook, at once: a Deployment of 10,000
// containers (2 MB; it took the webhook to 277 MiB), 8 concurrent
// /mutate calls of it (572 MiB with GOMEMLIMIT=230MiB), 16 concurrent
// reviews of 1.1 MB (484 MiB); and a GPU count of 1000000000, which was
// called "not a whole number of GPUs".
func TestWebhookHostile(t *testing.T) {
	dir := t.TempDir()
	if _, err := admission.WriteSelfSignedCert(dir, 1); err != nil {
		t.Fatal(err)
	}
	p := start(t, webhookAddr, "webhook", "--listen", "127.0.0.1:0", "--no-cluster", "--log-format", "text",
		"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-private-key-file", filepath.Join(dir, "tls.key"))
	base := "https://" + p.addr
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 64}}

	huge := review("huge", 10_000, "1")
	large := review("large", 5_000, "1")
	t.Logf("reviews of %d and %d bytes", len(huge), len(large))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []answer
	keep := func(as []answer) {
		mu.Lock()
		all = append(all, as...)
		mu.Unlock()
	}
	for _, tc := range []struct {
		path  string
		body  []byte
		n     int
		width int
	}{{"/mutate", huge, 8, 8}, {"/validate", huge, 2, 2}, {"/validate", large, 16, 16}, {"/mutate", large, 16, 16}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep(parallel(tc.n, tc.width, func(int) answer { return do(c, http.MethodPost, base+tc.path, "application/json", tc.body) }))
		}()
	}
	wg.Wait()
	codes := map[int]int{}
	for i, a := range all {
		codes[a.status]++
		if a.err != nil {
			t.Errorf("review %d: no answer: %v", i, a.err)
			continue
		}
		switch a.status {
		case http.StatusOK:
			var out struct {
				Response *struct {
					UID      string   `json:"uid"`
					Allowed  bool     `json:"allowed"`
					Warnings []string `json:"warnings"`
				} `json:"response"`
			}
			if err := json.Unmarshal(a.body, &out); err != nil || out.Response == nil || !out.Response.Allowed {
				t.Errorf("review %d: not an allowing AdmissionReview: %.300s", i, a.body)
			} else if len(out.Response.Warnings) > 40 {
				t.Errorf("review %d: %d warnings", i, len(out.Response.Warnings))
			}
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "reviews") {
				t.Errorf("review %d: %d %q", i, a.status, a.body)
			}
		default:
			t.Errorf("review %d: status %d: %.300s", i, a.status, a.body)
		}
	}
	t.Logf("answers: %v", codes)

	// The absurd GPU count is named for what it is.
	a := do(c, http.MethodPost, base+"/validate", "application/json", review("gpus", 1, "1000000000"))
	if a.status != http.StatusOK || !strings.Contains(string(a.body), "1G GPUs is more than any node holds (at most 4096)") {
		t.Errorf("gpu count 1000000000: %d %.500s", a.status, a.body)
	}

	p.alive(t)
	if a := do(c, http.MethodGet, base+"/healthz", "", nil); a.status != http.StatusOK {
		t.Errorf("after the load, /healthz: %d %v", a.status, a.err)
	}
	peak := p.peakRSS(t)
	t.Logf("peak RSS %d MiB (budget %d MiB)", peak>>20, webhookBudget>>20)
	if peak > webhookBudget {
		t.Errorf("peak RSS %d MiB, over the chart's limit of %d MiB", peak>>20, webhookBudget>>20)
	}
}
