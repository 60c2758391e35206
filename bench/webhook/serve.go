package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

	"headroom.dev/headroom/admission"
)

// serveEnv, set to 1 in the environment, makes the benchmark's binary the
// server child rather than the load generator. An environment variable
// rather than a flag, so the test binary, whose flags belong to the testing
// package, can be the child as well.
const serveEnv = "HEADROOM_BENCH_SERVE"

// Bounds on the child's life, so a stuck child fails the run instead of
// hanging it.
const (
	childStartTimeout = 10 * time.Second
	childReplyTimeout = 5 * time.Second
	childStopTimeout  = 15 * time.Second
)

// hello is the child's first line on stdout.
type hello struct {
	Addr string `json:"addr"`
	// Cert is the PEM of the server's self-signed certificate, which the
	// generator trusts.
	Cert string `json:"cert"`
}

// server is a running admission server, in this process or a child.
type server struct {
	addr string
	cert *x509.Certificate
	// pid is the child's process id; 0 when the server runs in this
	// process.
	pid int
	// stats reads the server process's runtime counters.
	stats func() (runtimeStats, error)
	// stop stops the server, and the child with it.
	stop func() error
}

// startServer builds the webhook server (admission.NewServer and
// NewHandler, no API server, a fresh self-signed certificate) and serves it
// on a loopback port, the way `headroom webhook --no-cluster` would; with
// noop the same server serves the no-op handler instead. With inProcess it
// runs in this process; otherwise in a child process of this same binary.
// The CPU profile is the webhook's.
func startServer(ctx context.Context, c config, noop bool) (*server, error) {
	profile := c.cpuProfile
	if noop {
		profile = ""
	}
	if c.inProcess {
		return startInProcess(ctx, profile, c.http2, noop)
	}
	return startChild(profile, c.http2, noop)
}

// listen starts the server on 127.0.0.1:0. It returns the address, the
// certificate and a function that stops the server and removes its files.
func listen(ctx context.Context, http2, noOp bool) (addr string, cert *x509.Certificate, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "headroom-bench-")
	if err != nil {
		return "", nil, nil, err
	}
	fail := func(err error) (string, *x509.Certificate, func() error, error) {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	cert, err = admission.WriteSelfSignedCert(dir, 1)
	if err != nil {
		return fail(err)
	}
	var h admission.Reviewer = admission.NewHandler(admission.Deps{Metrics: admission.NewMetrics()})
	if noOp {
		h = noop{}
	}
	srv, err := admission.NewServer(admission.ServerConfig{
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		Handler: h, EnableHTTP2: http2,
	})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	return ln.Addr().String(), cert, func() error {
		cancel()
		err := <-served
		return errors.Join(err, os.RemoveAll(dir))
	}, nil
}

func startInProcess(ctx context.Context, cpuProfile string, http2, noop bool) (*server, error) {
	addr, cert, stop, err := listen(ctx, http2, noop)
	if err != nil {
		return nil, err
	}
	stopProfile, err := profile(cpuProfile)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	return &server{addr: addr, cert: cert, stats: func() (runtimeStats, error) { return readStats(), nil },
		stop: func() error { stopProfile(); return stop() }}, nil
}

// profile starts a CPU profile into path; "" profiles nothing.
func profile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// startChild runs this binary again as the server (serveMain) and reads
// its address and certificate. The child serves until its stdin closes:
// stop closes it, and if this process dies the kernel closes it too, so
// the child never outlives the generator.
func startChild(cpuProfile string, http2, noop bool) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this program to start the server: %v", err)
	}
	var args []string
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	if http2 {
		args = append(args, "-http2")
	}
	if noop {
		args = append(args, "-noop")
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe: Wait would close that one
	// under a reader that may still be reading.
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start the server: %v", err)
	}
	lines := make(chan []byte, 4)
	go func() {
		defer out.Close()
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		in.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("server process: %v", err)
			}
			return nil
		case <-time.After(childStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("server process did not stop within %v; killed", childStopTimeout)
		}
	}
	read := func(v any, timeout time.Duration) error {
		select {
		case line, ok := <-lines:
			if !ok {
				return errors.New("the server process closed its output")
			}
			return json.Unmarshal(line, v)
		case <-time.After(timeout):
			return fmt.Errorf("no answer from the server process within %v", timeout)
		}
	}
	var h hello
	if err := read(&h, childStartTimeout); err != nil {
		return nil, errors.Join(fmt.Errorf("start the server: %v", err), stop())
	}
	block, _ := pem.Decode([]byte(h.Cert))
	if block == nil {
		return nil, errors.Join(errors.New("the server process sent no certificate"), stop())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	return &server{addr: h.Addr, cert: cert, pid: cmd.Process.Pid, stop: stop, stats: func() (runtimeStats, error) {
		if _, err := io.WriteString(in, "stats\n"); err != nil {
			return runtimeStats{}, err
		}
		var s runtimeStats
		return s, read(&s, childReplyTimeout)
	}}, nil
}

// serveMain is the child: it serves, prints a hello line, answers each
// "stats" line on stdin with a runtimeStats line, and stops when stdin
// closes or on SIGTERM. It ignores SIGINT: Ctrl-C reaches the whole process
// group, and the generator, which stops sending and then reads the
// server's counters, closes stdin when it is done.
func serveMain(args []string, stdin io.Reader, stdout io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server to this file")
	http2 := fs.Bool("http2", false, "offer HTTP/2 as well as HTTP/1.1")
	noop := fs.Bool("noop", false, "serve the no-op handler rather than the webhook's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	signal.Ignore(os.Interrupt)
	admission.TuneGC(os.Getenv("GOGC"))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	addr, cert, stop, err := listen(ctx, *http2, *noop)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench server: %v\n", err)
		return 1
	}
	stopProfile, err := profile(*cpuProfile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench server: %v\n", err)
		_ = stop()
		return 1
	}
	enc := json.NewEncoder(stdout)
	err = enc.Encode(hello{Addr: addr, Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))})
	go func() {
		defer cancel()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if sc.Text() == "stats" {
				if enc.Encode(readStats()) != nil {
					return
				}
			}
		}
	}()
	if err == nil {
		<-ctx.Done()
	}
	stopProfile()
	if err := errors.Join(err, stop()); err != nil {
		fmt.Fprintf(os.Stderr, "bench server: %v\n", err)
		return 1
	}
	return 0
}

// runtimeStats are a process's counters: the runtime's (runtime/metrics)
// and its CPU time.
type runtimeStats struct {
	GCs        uint64        `json:"gcs"`
	AllocBytes uint64        `json:"alloc_bytes"`
	CPU        time.Duration `json:"cpu_ns"`
	GOGC       uint64        `json:"gogc"`
	LiveHeap   uint64        `json:"live_heap_bytes"`
}

var statNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/gogc:percent",
	"/gc/heap/live:bytes",
}

func readStats() runtimeStats {
	samples := make([]metrics.Sample, len(statNames))
	for i, n := range statNames {
		samples[i].Name = n
	}
	metrics.Read(samples)
	u := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	return runtimeStats{GCs: u(0), AllocBytes: u(1), CPU: processCPU(), GOGC: u(2), LiveHeap: u(3)}
}

// add sums the counters of two stretches of load; the GC target and the
// live heap are the later one's.
func (s runtimeStats) add(later runtimeStats) runtimeStats {
	later.GCs += s.GCs
	later.AllocBytes += s.AllocBytes
	later.CPU += s.CPU
	return later
}

// since is the counters' change from an earlier reading; the GC target and
// the live heap are the later reading's.
func (s runtimeStats) since(before runtimeStats) runtimeStats {
	s.GCs -= before.GCs
	s.AllocBytes -= before.AllocBytes
	s.CPU -= before.CPU
	return s
}
