// Command webhook is the load benchmark of headroom's admission webhook: it
// starts the real HTTPS server (admission.NewServer, a fresh self-signed
// certificate) on a loopback port, fires AdmissionReviews at it at a fixed
// rate for a fixed time, and prints latency percentiles and errors.
//
//	go run ./bench/webhook                      # 500 req/s for 10 s, p99 target 5 ms
//	go run ./bench/webhook -rate 1000 -duration 5s
//
// The load is open-loop: request i is due at start + i/rate whatever the
// earlier ones did, and its latency counts from that due time, so a stalled
// server shows as latency rather than as a slower send rate (no coordinated
// omission). The reviews cycle through four real cases: a Deployment that
// fits, one denied with the planner's numbers, one mutated by autofix, and
// one whose model is unknown. No API server is involved: the lookups of
// ConfigMaps and HPAs are off, as with `headroom webhook --no-cluster`.
//
// It exits 1 when any request fails or the p99 is over the target.
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
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
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
	maxInFlight = 256
)

type config struct {
	rate       int
	duration   time.Duration
	p99        time.Duration
	http1      bool
	cpuProfile string
}

func main() {
	var c config
	flag.IntVar(&c.rate, "rate", 500, "requests per second (at most 5000)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send (at most 1m)")
	flag.DurationVar(&c.p99, "p99", 5*time.Millisecond, "target for the 99th percentile latency")
	flag.BoolVar(&c.http1, "http1", false, "use HTTP/1.1 (default HTTP/2, as the API server's webhook client)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (client and server) to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	rep.print(os.Stdout, c)
	if rep.errors > 0 || rep.p(0.99) > c.p99 {
		os.Exit(1)
	}
}

// report is what a run measured.
type report struct {
	sent, errors int
	firstErr     string
	latencies    []time.Duration // from each request's due time, sorted
	service      []time.Duration // from the moment it was sent, sorted
	late         []time.Duration // how late the sender was, sorted
	baseline     []time.Duration // how late a bare sleep wakes, without load, sorted
	elapsed      time.Duration
	proto        string
}

// p returns the q-quantile of the latencies (nearest rank).
func (r report) p(q float64) time.Duration { return quantile(r.latencies, q) }

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (r report) print(w io.Writer, c config) {
	fmt.Fprintf(w, "sent %d reviews in %v (%.0f/s, target %d/s) over %s to the TLS server on loopback (GOMAXPROCS %d)\n",
		r.sent, r.elapsed.Round(time.Millisecond), float64(r.sent)/r.elapsed.Seconds(), c.rate, r.proto, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "latency from due time: p50 %v  p90 %v  p99 %v  max %v\n",
		r.p(0.50), r.p(0.90), r.p(0.99), quantile(r.latencies, 1))
	fmt.Fprintf(w, "service time:          p50 %v  p90 %v  p99 %v  max %v\n",
		quantile(r.service, 0.50), quantile(r.service, 0.90), quantile(r.service, 0.99), quantile(r.service, 1))
	fmt.Fprintf(w, "sender lateness:       p50 %v  p99 %v (part of the latency from due time)\n",
		quantile(r.late, 0.50), quantile(r.late, 0.99))
	fmt.Fprintf(w, "machine timer jitter:  p50 %v  p99 %v (a bare sleep at the same rate before the run; the floor under any p99 here)\n",
		quantile(r.baseline, 0.50), quantile(r.baseline, 0.99))
	verdict := "PASS"
	if r.errors > 0 || r.p(0.99) > c.p99 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "errors %d", r.errors)
	if r.firstErr != "" {
		fmt.Fprintf(w, " (first: %s)", r.firstErr)
	}
	fmt.Fprintf(w, "\n%s: p99 %v against a target of %v, %d errors\n", verdict, r.p(0.99), c.p99, r.errors)
}

// run starts the server, sends the load and stops the server.
func run(ctx context.Context, c config) (report, error) {
	if c.rate < 1 || c.rate > maxRate {
		return report{}, fmt.Errorf("-rate %d: give 1 to %d requests per second", c.rate, maxRate)
	}
	if c.duration <= 0 || c.duration > maxDuration {
		return report{}, fmt.Errorf("-duration %v: give more than 0 and at most %v", c.duration, maxDuration)
	}
	dir, err := os.MkdirTemp("", "headroom-bench-")
	if err != nil {
		return report{}, err
	}
	defer os.RemoveAll(dir)
	cert, err := admission.WriteSelfSignedCert(dir, 1)
	if err != nil {
		return report{}, err
	}
	srv, err := admission.NewServer(admission.ServerConfig{
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		Handler: admission.NewHandler(admission.Deps{Metrics: admission.NewMetrics()}),
	})
	if err != nil {
		return report{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-served
	}()

	cases, err := reviews()
	if err != nil {
		return report{}, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   !c.http1,
		MaxIdleConnsPerHost: maxInFlight,
	}}
	base := "https://" + ln.Addr().String()

	// Warm up: the first handshake and the first plan of each model.
	for _, k := range cases {
		if err := send(client, base, k); err != nil {
			return report{}, fmt.Errorf("warm-up: %v", err)
		}
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return report{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return report{}, err
		}
		defer pprof.StopCPUProfile()
	}
	baseline := jitter(c)
	rep := load(ctx, c, client, base, cases)
	rep.baseline = baseline
	rep.proto = "HTTP/2"
	if c.http1 {
		rep.proto = "HTTP/1.1"
	}
	return rep, nil
}

// load sends rate × duration reviews on schedule.
func load(ctx context.Context, c config, client *http.Client, base string, cases []review) report {
	n := int(float64(c.rate) * c.duration.Seconds())
	interval := time.Second / time.Duration(c.rate)
	var (
		mu  sync.Mutex
		rep report
		wg  sync.WaitGroup
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
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		rep.sent++
		select {
		case slots <- struct{}{}:
		default:
			fail(fmt.Errorf("more than %d requests in flight: the server is not keeping up", maxInFlight))
			continue
		}
		wg.Add(1)
		go func(k review) {
			defer wg.Done()
			defer func() { <-slots }()
			sentAt := time.Now()
			err := send(client, base, k)
			done := time.Now()
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			rep.latencies = append(rep.latencies, done.Sub(due))
			rep.service = append(rep.service, done.Sub(sentAt))
			rep.late = append(rep.late, sentAt.Sub(due))
			mu.Unlock()
		}(cases[i%len(cases)])
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	slices.Sort(rep.latencies)
	slices.Sort(rep.service)
	slices.Sort(rep.late)
	return rep
}

// jitter measures, for one second, how late time.Sleep wakes at the
// benchmark's interval with nothing else running: on a shared or
// oversubscribed machine this alone can exceed the latency target.
func jitter(c config) []time.Duration {
	interval := time.Second / time.Duration(c.rate)
	var late []time.Duration
	start := time.Now()
	for i := 1; i <= c.rate; i++ {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		late = append(late, time.Since(due))
	}
	slices.Sort(late)
	return late
}

// review is one request body and the answer it must get.
type review struct {
	path    string
	uid     types.UID
	body    []byte
	allowed bool
	patched bool
}

// send posts one review and checks the answer.
func send(client *http.Client, base string, k review) error {
	resp, err := client.Post(base+k.path, "application/json", bytes.NewReader(k.body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %s: %s", k.path, resp.Status, bytes.TrimSpace(body))
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
