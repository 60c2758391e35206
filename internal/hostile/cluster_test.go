package hostile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// apiServer is a Kubernetes API server stand-in for audit and serve
// --cluster: the lists the audit reads (nodes, pods, Deployments, ...)
// and each pod's /metrics through the pod proxy, answered as the test
// sets them. Every answer that waits or streams stops after 60 s or when
// its client leaves.
type apiServer struct {
	url string
	// pods are the pods of namespace llm, each a vLLM server.
	pods []string
	// podList is how the pod list answers: "" the pods, "endless-body"
	// one answer that never ends, "endless-pages" pages of 250 pods with
	// a continue token that never ends.
	podList atomic.Value
	// metrics answers a pod's /metrics by its name.
	metrics func(w http.ResponseWriter, r *http.Request, pod string)
}

const llmPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"llm","labels":{"app":%q}},` +
	`"spec":{"nodeName":"h100-1","containers":[{"name":"vllm","image":"vllm/vllm-openai:v0.19.0",` +
	`"args":["meta-llama/Llama-3.1-8B-Instruct","--max-model-len","8192"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]},` +
	`"status":{"phase":"Running","containerStatuses":[{"name":"vllm","image":"vllm/vllm-openai:v0.19.0","imageID":"","ready":true,"restartCount":0}]}}`

// otherPod is a pod that runs no vLLM (the bulk of an endless list).
const otherPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-%d","namespace":"llm"},"spec":{"containers":[{"name":"web","image":"nginx"}]},"status":{"phase":"Running"}}`

func newAPIServer(t *testing.T, pods []string, metrics func(w http.ResponseWriter, r *http.Request, pod string)) *apiServer {
	t.Helper()
	a := &apiServer{pods: pods, metrics: metrics}
	a.podList.Store("")
	proxy := regexp.MustCompile(`^/api/v1/namespaces/llm/pods/([^/:]+):8000/proxy/metrics$`)
	list := func(w http.ResponseWriter, kind, items string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":%q,"apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[%s]}`, kind, items)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/api/v1/nodes":
			list(w, "NodeList", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"h100-1","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","nvidia.com/gpu.count":"8"}}}`)
		case p == "/api/v1/pods" || p == "/api/v1/namespaces/llm/pods":
			a.answerPods(w, r, list)
		case proxy.MatchString(p):
			a.metrics(w, r, proxy.FindStringSubmatch(p)[1])
		case strings.HasSuffix(p, "/deployments") || strings.HasSuffix(p, "/statefulsets") ||
			strings.HasSuffix(p, "/configmaps") || strings.HasSuffix(p, "/horizontalpodautoscalers"):
			list(w, "List", "")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, p)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	a.url = "http://" + ln.Addr().String()
	return a
}

// answerPods answers the pod list as podList says.
func (a *apiServer) answerPods(w http.ResponseWriter, r *http.Request, list func(http.ResponseWriter, string, string)) {
	switch a.podList.Load().(string) {
	case "endless-body":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`)
		for i, end := 0, time.Now().Add(60*time.Second); time.Now().Before(end); i++ {
			if _, err := fmt.Fprintf(w, otherPod+",", i); err != nil {
				return
			}
		}
	case "endless-pages":
		var items []string
		for i := range 250 {
			items = append(items, fmt.Sprintf(otherPod, i))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"more-%d"},"items":[%s]}`, time.Now().UnixNano(), strings.Join(items, ","))
	default:
		var items []string
		for _, name := range a.pods {
			items = append(items, fmt.Sprintf(llmPod, name, name))
		}
		list(w, "PodList", strings.Join(items, ","))
	}
}

// kubeconfig writes a kubeconfig of the stand-in and returns its path.
func (a *apiServer) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: llm}}]
current-context: c
`, a.url)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hang waits until the client leaves (at most 60 s): a pod that never
// answers.
func hang(_ http.ResponseWriter, r *http.Request, _ string) {
	select {
	case <-r.Context().Done():
	case <-time.After(60 * time.Second):
	}
}

// auditJSON is what the tests read of audit -o json.
type auditJSON struct {
	Workloads []struct {
		Name     string `json:"name"`
		Status   string `json:"status"`
		Findings []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"findings"`
	} `json:"workloads"`
	Cluster []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"cluster"`
}

// finding is the message of the first finding of pod's workload with
// code; "" when none.
func (r auditJSON) finding(pod, code string) string {
	for _, w := range r.Workloads {
		for _, f := range w.Findings {
			if w.Name == pod && f.Code == code {
				return f.Message
			}
		}
	}
	return ""
}

// audit --live over 20 pods whose /metrics never answer: read one after
// the other they took 100 s at --timeout 5s (10 minutes at the default),
// with nothing on stderr until the end. Now they are read 16 at a time,
// the run ends within 30 s, stderr says the reads go on, and every pod
// is named.
func TestAuditHungPods(t *testing.T) {
	var pods []string
	for i := range 20 {
		pods = append(pods, fmt.Sprintf("hung-%02d", i))
	}
	a := newAPIServer(t, pods, hang)
	begin := time.Now()
	_, out, errText := run(t, 90*time.Second, "audit", "--kubeconfig", a.kubeconfig(t), "--live", "--timeout", "5s", "-o", "json")
	took := time.Since(begin)
	t.Logf("audit --live over 20 hung pods: %s", took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("took %s, more than 30 s", took)
	}
	var r auditJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v: %.500s %s", err, out, errText)
	}
	for _, p := range pods {
		if msg := r.finding(p, "metrics_unread"); !strings.Contains(msg, "pod "+p+": metrics not read: no answer within 5s") {
			t.Errorf("%s: %q", p, msg)
		}
	}
	if !strings.Contains(errText, "reading /metrics of 20 pods, 16 at a time") {
		t.Errorf("stderr: %s", errText)
	}

	// The cluster page over the same pods: it dropped every /api/audit
	// request after 300 s with 10 hung pods; its reads take 10 s each.
	p := start(t, serveAddr, "serve", "--listen", "127.0.0.1:0", "--offline", "--cluster", "--kubeconfig", a.kubeconfig(t))
	begin = time.Now()
	ans := do(&http.Client{Timeout: 90 * time.Second}, http.MethodGet, "http://"+p.addr+"/api/audit", "", nil)
	t.Logf("serve --cluster: /api/audit over 20 hung pods in %s", time.Since(begin).Round(time.Millisecond))
	apiWellFormed(t, "/api/audit over hung pods", ans, http.StatusOK)
	if n := strings.Count(string(ans.body), "metrics not read: no answer within 10s"); n != 20 {
		t.Errorf("/api/audit names %d of 20 hung pods: %.1000s", n, ans.body)
	}
}

// Pods whose /metrics is endless, 60 MB, a redirect loop, a gzip bomb,
// invalid UTF-8, NaN counts or 1e308: the table said "ok" with no
// finding (only -o json said metrics_unread), and 1e308 made -o json
// fail ("json: unsupported value: +Inf"). Each is now a finding in the
// table, the markdown and the JSON.
func TestAuditHostilePods(t *testing.T) {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write([]byte("vllm:num_requests_running 1\n"))
	zw.Write(bytes.Repeat([]byte("python_info 1\n"), 5_000_000))
	zw.Close()
	bodies := map[string]func(w http.ResponseWriter, r *http.Request){
		"endless": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("vllm:num_requests_running 1\n"))
			chunk := bytes.Repeat([]byte("python_gc_objects_collected_total{generation=\"0\"} 1\n"), 4096)
			for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		},
		"sixty-mb": func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte("python_info 1\n"), 60<<20/14))
		},
		"redirects": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		},
		"bomb": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		},
		"utf8": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("vllm:num_requests_running{model_name=\"\xff\xfe\"} 1\n"))
		},
		"nan": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("vllm:num_requests_running NaN\nvllm:num_requests_waiting NaN\n"))
		},
		"huge": func(w http.ResponseWriter, r *http.Request) {
			// 1e308 preemptions, and a TTFT histogram whose p99 overflows.
			w.Write([]byte("vllm:num_preemptions_total 1e308\nvllm:num_requests_running 1\n# TYPE vllm:time_to_first_token_seconds histogram\n" +
				"vllm:time_to_first_token_seconds_bucket{le=\"1e308\"} 1e308\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 1e308\n" +
				"vllm:time_to_first_token_seconds_count 1e308\nvllm:time_to_first_token_seconds_sum 1\n"))
		},
		"healthy": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.2\n"))
		},
	}
	var pods []string
	for name := range bodies {
		pods = append(pods, name)
	}
	a := newAPIServer(t, pods, func(w http.ResponseWriter, r *http.Request, pod string) { bodies[pod](w, r) })
	kc := a.kubeconfig(t)
	// Each pod's read has 10 s (the most audit gives one), time enough
	// to read 32 MiB on a busy machine: the bound cuts, not the clock.
	_, out, errText := run(t, 120*time.Second, "audit", "--kubeconfig", kc, "--live", "--timeout", "20s", "-o", "json")
	var r auditJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v: %.500s %s", err, out, errText)
	}
	for pod, want := range map[string]string{
		"endless":   "metrics not read: cut at 32 MiB",
		"sixty-mb":  "metrics not read: cut at 32 MiB",
		"redirects": "metrics not read: ",
		"bomb":      "metrics not read: cut at 32 MiB",
		"utf8":      "metrics not read: reading Prometheus metrics: line 1:",
		"nan":       "left out: vllm:num_requests_running is NaN, not a count",
		"huge":      "left out: vllm:num_preemptions_total is 1e+308",
	} {
		code := "metrics_unread"
		if strings.Contains(want, "left out") {
			code = "metrics_left_out"
		}
		if msg := r.finding(pod, code); !strings.Contains(msg, want) {
			t.Errorf("%s: %s %q, want %q", pod, code, msg, want)
		}
	}
	if r.finding("healthy", "metrics_unread")+r.finding("healthy", "metrics_left_out") != "" {
		t.Errorf("healthy: %+v", r)
	}
	p := start(t, serveAddr, "serve", "--listen", "127.0.0.1:0", "--offline", "--cluster", "--kubeconfig", kc)
	ans := do(&http.Client{Timeout: 90 * time.Second}, http.MethodGet, "http://"+p.addr+"/api/audit", "", nil)
	apiWellFormed(t, "/api/audit over hostile pods", ans, http.StatusOK)
	if !strings.Contains(string(ans.body), "vllm:num_preemptions_total is 1e+308") {
		t.Errorf("/api/audit: %.1000s", ans.body)
	}
	for _, format := range []string{"table", "markdown"} {
		_, out, errText := run(t, 120*time.Second, "audit", "--kubeconfig", kc, "--live", "--timeout", "20s", "-o", format)
		for _, pod := range pods {
			if pod == "healthy" {
				continue
			}
			if !strings.Contains(out, "pod "+pod+": metrics not read") && !strings.Contains(out, "pod "+pod+": /metrics held values no server exports") {
				t.Errorf("-o %s does not say pod %s was not read: %s %s", format, pod, out, errText)
			}
		}
	}
}

// An API server whose pod list never ends, in one answer or in pages:
// audit reached 1.6 GiB in 5 s and "fatal error: out of memory", and
// serve --cluster died the same way. Now the list is cut at its bound, a
// cluster finding names it, and serve --cluster answers /api/audit under
// its budget.
func TestAuditEndlessPodList(t *testing.T) {
	a := newAPIServer(t, nil, hang)
	kc := a.kubeconfig(t)
	for _, tc := range []struct{ mode, want string }{
		{"endless-body", "the API server's answer was cut at 32 MiB"},
		{"endless-pages", "was cut at 20000 items"},
	} {
		a.podList.Store(tc.mode)
		begin := time.Now()
		_, out, errText := run(t, 120*time.Second, "audit", "--kubeconfig", kc, "-o", "json")
		var r auditJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: not JSON: %v: %.500s %s", tc.mode, err, out, tail(errText, 2000))
		}
		if len(r.Cluster) == 0 || !strings.Contains(r.Cluster[0].Message, tc.want) {
			t.Errorf("%s: cluster findings %+v, want one saying %q", tc.mode, r.Cluster, tc.want)
		}
		t.Logf("%s: audit ended in %s", tc.mode, time.Since(begin).Round(time.Millisecond))
	}

	c := &http.Client{Timeout: 90 * time.Second}
	for _, mode := range []string{"endless-body", "endless-pages"} {
		a.podList.Store(mode)
		p := start(t, serveAddr, "serve", "--listen", "127.0.0.1:0", "--offline", "--cluster", "--kubeconfig", kc)
		ans := do(c, http.MethodGet, "http://"+p.addr+"/api/audit", "", nil)
		apiWellFormed(t, "/api/audit over "+mode, ans, http.StatusOK)
		p.alive(t)
		peak := p.peakRSS(t)
		t.Logf("serve --cluster over %s: peak RSS %d MiB (budget %d MiB)", mode, peak>>20, serveBudget>>20)
		if peak > serveBudget {
			t.Errorf("serve --cluster over %s: peak RSS %d MiB, over its budget of %d MiB", mode, peak>>20, serveBudget>>20)
		}
	}
}
