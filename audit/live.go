package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/telemetry"
)

// defaultPort is the port `vllm serve` listens on without --port (vLLM's
// CLI default, vllm/entrypoints/openai/cli_args.py).
const defaultPort = 8000

// MetricsGetter reads a pod's /metrics. The caller closes the body.
type MetricsGetter interface {
	PodMetrics(ctx context.Context, namespace, pod string, port int) (io.ReadCloser, error)
}

// ProxyMetrics reads /metrics through the API server's pod proxy
// (GET /api/v1/namespaces/NS/pods/NAME:PORT/proxy/metrics), with an HTTP
// client that authenticates to the API server (client-go's
// rest.HTTPClientFor). It needs the pods/proxy get permission.
type ProxyMetrics struct {
	// Host is the API server's URL (rest.Config.Host).
	Host   string
	Client *http.Client
}

// PodMetrics implements MetricsGetter: the body is handed on as a stream
// (telemetry.ParseVLLMMetrics bounds what it reads).
func (m ProxyMetrics) PodMetrics(ctx context.Context, namespace, pod string, port int) (io.ReadCloser, error) {
	u := strings.TrimSuffix(m.Host, "/") + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod+":"+strconv.Itoa(port)) + "/proxy/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := m.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, firstLine(head))
	}
	return resp.Body, nil
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	if len(line) > 200 {
		line = line[:200]
	}
	return string(line)
}

// podState reads a pod's restarts and last termination from its status;
// what they show at risk becomes a finding of w.
func (a *auditor) podState(w *Workload, p *corev1.Pod, engines []admission.Engine) PodState {
	st := PodState{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}
	for _, cs := range p.Status.ContainerStatuses {
		if !servesVLLM(cs.Name, engines) {
			continue
		}
		st.Restarts += cs.RestartCount
		if t := cs.LastTerminationState.Terminated; t != nil {
			st.LastTermination = t.Reason
		}
	}
	switch {
	case st.LastTermination == "OOMKilled":
		w.add(LevelRisk, CodeOOMKilled, fmt.Sprintf("pod %s: the vLLM container was OOMKilled (host memory: its resources.limits.memory) and restarted %d times", p.Name, st.Restarts))
	case st.Restarts > 0:
		w.add(LevelRisk, CodeRestarts, fmt.Sprintf("pod %s: the vLLM container restarted %d times (last: %s)", p.Name, st.Restarts, orUnknown(st.LastTermination)))
	}
	return st
}

// Bounds of audit --live's reads of pods' /metrics: each pod is read
// within a time (a hung pod is named, not waited on for the API server's
// timeout), and so many at once. 20 pods that never answer took 100 s at
// --timeout 5s when they were read one after the other.
const (
	// DefaultMetricsTimeout bounds one pod's /metrics read when
	// Options.MetricsTimeout is 0: vLLM answers in milliseconds.
	DefaultMetricsTimeout = 10 * time.Second
	// LiveReads is how many pods' /metrics are read at once: each read
	// holds a connection and at most one chunk of the stream parser.
	LiveReads = 16
)

// liveRead is one pod's /metrics, to be read.
type liveRead struct {
	pod     int // its index in the workload's Pods
	p       *corev1.Pod
	engines []admission.Engine
	sample  telemetry.VLLMSample
	err     error
}

// heldWorkload is a workload evaluated whose pods' /metrics are to be
// read before it is finished.
type heldWorkload struct {
	w     Workload
	reads []*liveRead
}

// readLive reads every held pod's /metrics, LiveReads at once, then
// turns each into its workload's findings in the order of its pods, and
// finishes the workloads.
func (a *auditor) readLive(ctx context.Context) {
	var all []*liveRead
	for _, h := range a.held {
		all = append(all, h.reads...)
	}
	timeout := a.opt.MetricsTimeout
	if timeout <= 0 {
		timeout = DefaultMetricsTimeout
	}
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, LiveReads)
	var wg sync.WaitGroup
	for _, r := range all {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.sample, r.err = a.readMetrics(ctx, r.p, port(r.engines), timeout)
			mu.Lock()
			done++
			if a.opt.MetricsProgress != nil {
				a.opt.MetricsProgress(done, len(all))
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, h := range a.held {
		for _, r := range h.reads {
			a.applyLive(&h.w, &h.w.Pods[r.pod], r)
		}
		h.w.finish()
		a.report.Workloads = append(a.report.Workloads, h.w)
	}
	a.held = nil
}

// readMetrics reads one pod's /metrics within timeout, as a stream.
func (a *auditor) readMetrics(ctx context.Context, p *corev1.Pod, port int, timeout time.Duration) (telemetry.VLLMSample, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := a.opt.Metrics.PodMetrics(rctx, p.Namespace, p.Name, port)
	timedOut := func(err error) bool {
		return ctx.Err() == nil && (errors.Is(rctx.Err(), context.DeadlineExceeded) || isTimeout(err))
	}
	if err != nil {
		if timedOut(err) {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		return telemetry.VLLMSample{}, err
	}
	defer body.Close()
	s, err := telemetry.ParseVLLMMetrics(body)
	if errors.Is(err, errResponseTooLarge) {
		// The client's bound on every answer (LimitResponses) cut it
		// before the parser's own: the same bound, said as /metrics'.
		err = telemetry.ErrExpositionTooLarge
	}
	if err != nil && !errors.Is(err, telemetry.ErrExpositionTooLarge) && timedOut(err) {
		err = fmt.Errorf("the answer did not end within %s", timeout)
	}
	return s, err
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// applyLive turns what a pod's /metrics said into findings of w: a read
// that failed (metrics_unread), values left out (metrics_left_out), and
// what the numbers show at risk.
func (a *auditor) applyLive(w *Workload, st *PodState, r *liveRead) {
	p := r.p
	if r.err != nil {
		st.MetricsError = oneLine(r.err)
		w.add(LevelInfo, CodeMetricsUnread, fmt.Sprintf("pod %s: metrics not read: %s", p.Name, st.MetricsError))
		return
	}
	s := r.sample
	st.Metrics = &s
	m := st.Metrics
	if len(m.Dropped) > 0 {
		w.add(LevelInfo, CodeMetricsLeftOut, fmt.Sprintf("pod %s: /metrics held values no server exports, left out: %s", p.Name, strings.Join(m.Dropped, "; ")))
	}
	st.Simulated = m.CacheConfig.Simulated
	a.compareKV(w, p, st, r.engines)
	if m.KVCacheUsage >= telemetry.RiskKVStart {
		w.add(LevelRisk, CodeKVFull, fmt.Sprintf("pod %s: the KV cache is %.0f%% used (pressure starts at %.0f%%: new long requests preempt running ones)", p.Name, 100*m.KVCacheUsage, 100*telemetry.RiskKVStart))
	}
	if m.RequestsWaiting > 0 {
		w.add(LevelRisk, CodeWaiting, fmt.Sprintf("pod %s: %s requests wait for KV cache (%s running)", p.Name, telemetry.FormatCount(m.RequestsWaiting), telemetry.FormatCount(m.RequestsRunning)))
	}
	if m.PreemptionsTotal > 0 {
		w.add(LevelRisk, CodePreemptions, fmt.Sprintf("pod %s: %s preemptions since the server started: the KV cache ran out under load", p.Name, telemetry.FormatCount(m.PreemptionsTotal)))
	}
}

// compareKV sets the KV blocks the server reports against its plan (the
// first planned engine: the one whose port /metrics was read from); far
// below the plan is a finding with its cause and fix.
func (a *auditor) compareKV(w *Workload, p *corev1.Pod, st *PodState, engines []admission.Engine) {
	c := st.Metrics.CacheConfig
	for _, e := range engines {
		if e.Budget == nil {
			continue
		}
		b := *e.Budget
		g, ok := memory.CompareKV(e.Input, b, memory.EngineCache{NumGPUBlocks: c.NumGPUBlocks, BlockSize: c.BlockSize, GPUMemoryUtilization: c.GPUMemoryUtilization})
		if !ok {
			return
		}
		st.KV = &g
		k := PodKV{Namespace: w.Namespace, Workload: w.Kind + "/" + w.Name, Pod: p.Name, Model: b.Model.ID, GPU: b.Device.Name,
			Version: b.Settings.Version.String(), Simulated: st.Simulated, Gap: g, Learnable: !st.Simulated,
			Record: liveRecord(p.Name, b, g, c.GPUMemoryUtilization, a.now())}
		a.mu.Lock()
		a.report.KVVsPlan = append(a.report.KVVsPlan, k)
		a.mu.Unlock()
		if g.Far {
			sim := ""
			if st.Simulated {
				sim = " (a simulated stand-in)"
			}
			w.add(LevelRisk, CodeKVBelowPlan, fmt.Sprintf("pod %s%s: gets %.0f%% of the KV cache this GPU could give it (%d of %d blocks planned for %s on %s, vLLM %s); cause: %s; fix: %s",
				p.Name, sim, 100*g.Share, g.ActualBlocks, g.PredictedBlocks, b.Model.ID, b.Device.Name, b.Settings.Version, g.Cause, g.Fix))
		}
		return
	}
}

// liveRecord is the calibration record of a running server's KV cache:
// the plan's key (model, GPU, release, parallelism, batch, dtype) with
// the blocks the server reports, at its utilization.
func liveRecord(pod string, b memory.Budget, g memory.KVGap, util float64, now time.Time) probe.Record {
	k := probe.KeyFor(b.Model, b.Device, b.Settings)
	if util <= 0 {
		util = b.Settings.GPUMemoryUtilization
	}
	blockBytes := b.KVBytesPerToken * int64(max(b.Settings.BlockSize, 1))
	if g.ActualBlocks > 0 && g.ActualTokens > 0 {
		blockBytes = b.KVBytesPerToken * (g.ActualTokens / g.ActualBlocks)
	}
	return probe.Record{Time: now, Model: k.Model, GPU: k.GPU, GPUTotalBytes: b.Device.TotalBytes, VLLMVersion: k.Version,
		TensorParallelSize: k.TensorParallelSize, PipelineParallelSize: k.PipelineParallelSize,
		MaxNumBatchedTokens: k.MaxNumBatchedTokens, MaxNumSeqs: k.MaxNumSeqs, Dtype: k.Dtype, KVCacheDtype: b.Settings.KVCacheDtype,
		Quantization: k.Quantization, GPUMemoryUtilization: util, MaxModelLen: b.MaxModelLen,
		AvailableKVBytes: g.ActualBlocks * blockBytes, KVTokens: g.ActualTokens, NumGPUBlocks: g.ActualBlocks,
		Source: "live server " + pod}
}

// Codes of live findings.
const (
	CodeKVBelowPlan   = "kv_below_plan"
	CodeOOMKilled     = "oom_killed"
	CodeRestarts      = "restarts"
	CodeKVFull        = "kv_cache_full"
	CodeWaiting       = "requests_waiting"
	CodePreemptions   = "preemptions"
	CodeMetricsUnread = "metrics_unread"
	// CodeMetricsLeftOut: the pod's /metrics was read, but values past
	// what any server exports were left out (telemetry.VLLMSample.Dropped).
	CodeMetricsLeftOut = "metrics_left_out"
)

// Unread reports whether a finding says that what a pod serves was not
// read, or not all of it: every output shows it, whatever its level, so
// that a workload is never "ok" for want of a reading.
func (f Finding) Unread() bool { return f.Code == CodeMetricsUnread || f.Code == CodeMetricsLeftOut }

func orUnknown(s string) string {
	if s == "" {
		return "reason unknown"
	}
	return s
}

// servesVLLM reports whether a container is one of the planned servers;
// a Workspace's pods have one server in whatever container.
func servesVLLM(container string, engines []admission.Engine) bool {
	for _, e := range engines {
		if e.Container == "" || e.Container == container {
			return true
		}
	}
	return false
}

// port is the first planned server's --port, or vLLM's default.
func port(engines []admission.Engine) int {
	for _, e := range engines {
		args := e.Input.Settings.Extra
		for i, a := range args {
			v, ok := strings.CutPrefix(a, "--port=")
			if a == "--port" && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if n, err := strconv.Atoi(v); ok && err == nil && n > 0 && n < 65536 {
				return n
			}
		}
	}
	return defaultPort
}
