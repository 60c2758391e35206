package audit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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

// maxMetricsBytes bounds one /metrics body read through the proxy; a vLLM
// exposition is 20–200 KiB.
const maxMetricsBytes = 8 << 20

// MetricsGetter reads a pod's /metrics.
type MetricsGetter interface {
	PodMetrics(ctx context.Context, namespace, pod string, port int) ([]byte, error)
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

// PodMetrics implements MetricsGetter.
func (m ProxyMetrics) PodMetrics(ctx context.Context, namespace, pod string, port int) ([]byte, error) {
	u := strings.TrimSuffix(m.Host, "/") + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod+":"+strconv.Itoa(port)) + "/proxy/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, firstLine(body))
	}
	return body, nil
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	if len(line) > 200 {
		line = line[:200]
	}
	return string(line)
}

// podState reads a pod's restarts and last termination from its status,
// and with Options.Live its /metrics; what they show at risk becomes a
// finding of w.
func (a *auditor) podState(ctx context.Context, w *Workload, p *corev1.Pod, engines []admission.Engine) PodState {
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
	if !a.opt.Live || a.opt.Metrics == nil || p.Status.Phase != corev1.PodRunning {
		return st
	}
	body, err := a.opt.Metrics.PodMetrics(ctx, p.Namespace, p.Name, port(engines))
	if err == nil {
		var s telemetry.VLLMSample
		if s, err = telemetry.ParseVLLMMetrics(bytes.NewReader(body)); err == nil {
			st.Metrics = &s
		}
	}
	if err != nil {
		st.MetricsError = oneLine(err)
		w.add(LevelInfo, CodeMetricsUnread, fmt.Sprintf("pod %s: /metrics not read: %s", p.Name, st.MetricsError))
		return st
	}
	m := st.Metrics
	st.Simulated = m.CacheConfig.Simulated
	a.compareKV(w, p, &st, engines)
	if m.KVCacheUsage >= telemetry.RiskKVStart {
		w.add(LevelRisk, CodeKVFull, fmt.Sprintf("pod %s: the KV cache is %.0f%% used (pressure starts at %.0f%%: new long requests preempt running ones)", p.Name, 100*m.KVCacheUsage, 100*telemetry.RiskKVStart))
	}
	if m.RequestsWaiting > 0 {
		w.add(LevelRisk, CodeWaiting, fmt.Sprintf("pod %s: %.0f requests wait for KV cache (%.0f running)", p.Name, m.RequestsWaiting, m.RequestsRunning))
	}
	if m.PreemptionsTotal > 0 {
		w.add(LevelRisk, CodePreemptions, fmt.Sprintf("pod %s: %.0f preemptions since the server started: the KV cache ran out under load", p.Name, m.PreemptionsTotal))
	}
	return st
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
)

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
