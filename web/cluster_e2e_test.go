package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/internal/cli"
	"headroom.dev/headroom/internal/kubetest"
	"headroom.dev/headroom/web"
)

// shownWorkload is one workload as the cluster page shows it.
type shownWorkload struct {
	Kind, Namespace, Name, Status string
	Segs                          []string
	Fix                           string
	Pods                          []shownPod
}

type shownPod struct {
	Name  string
	KV    string
	Width float64
}

const readCluster = `Array.from(document.querySelectorAll('article.workload')).map(a => ({
	Kind: a.dataset.kind, Namespace: a.dataset.namespace, Name: a.dataset.name, Status: a.dataset.status,
	Segs: Array.from(a.querySelectorAll('.bar .seg')).map(s => s.dataset.part + '=' + s.dataset.gib),
	Fix: (a.querySelector('.fix') || {textContent: ''}).textContent,
	Pods: Array.from(a.querySelectorAll('li.pod')).map(p => {
		const m = p.querySelector('.kv-live');
		return {Name: p.dataset.pod, KV: m ? m.dataset.kv : '',
			Width: m ? m.firstChild.getBoundingClientRect().width / m.clientWidth : 0};
	})}))`

// lineWriter hands each line written to it to a channel (the server's log).
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case w.lines <- line:
		default:
		}
	}
}

// serveCluster runs `headroom serve --cluster` on a free loopback port
// until the test ends and returns its URL.
func serveCluster(t *testing.T, kubeconfig string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logw := &lineWriter{lines: make(chan string, 64)}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--offline", "--cluster", "--kubeconfig", kubeconfig},
			cli.Env{Stdout: &bytes.Buffer{}, Stderr: logw, Getenv: getenv})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve --cluster did not stop")
		}
	})
	url := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+)/cluster\.html`)
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line := <-logw.lines:
			if m := url.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		case code := <-done:
			t.Fatalf("serve --cluster exited %d", code)
		case <-timeout:
			t.Fatal("serve --cluster logged no cluster page URL")
		}
	}
}

// recordedMetrics serves every pod the recorded /metrics of a vLLM 0.11
// server (KV 94.12%, 48 running, 17 waiting): the pod proxy of the test's
// API server cannot reach a server (its pods have no address).
type recordedMetrics []byte

func (m recordedMetrics) PodMetrics(context.Context, string, string, int) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(m)), nil
}

// TestClusterPageInBrowser creates workloads of every kind the audit reads
// (audit/testdata/cluster.yaml: Deployments, a StatefulSet, Pods, KAITO
// Workspaces) in a real kube-apiserver and etcd, runs `headroom audit -A
// --live -o json` and `headroom serve --cluster` against it, and opens the
// cluster page in headless Chromium: the page lists the audit's workloads
// in its order, each with its verdict, its plan's card and the fix; the
// API answers with the audit's bytes. A second server whose audit reads
// recorded metrics shows each pod's live KV usage.
func TestClusterPageInBrowser(t *testing.T) {
	exe := browser(t)
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{kubetest.WorkspaceCRD()}}
	cfg := kubetest.Start(t, env, "./web/")
	kubetest.Create(t, cfg, kubetest.ReadObjects(t, filepath.Join("..", "audit", "testdata", "cluster.yaml")))
	kubeconfig := kubetest.AdminKubeconfig(t, env)

	code, want := runCLI(t, "audit", "-A", "--live", "-o", "json", "--kubeconfig", kubeconfig)
	var rep audit.Report
	if err := json.Unmarshal(want, &rep); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, want)
	}
	if code != 1 || !rep.AtRisk() {
		t.Fatalf("audit exit %d: the fixture has workloads at risk", code)
	}
	kinds := map[string]bool{}
	for _, w := range rep.Workloads {
		kinds[w.Kind] = true
	}
	for _, k := range []string{"Deployment", "StatefulSet", "Pod", "Workspace"} {
		if !kinds[k] {
			t.Fatalf("the audit found no %s: %v", k, kinds)
		}
	}

	base := serveCluster(t, kubeconfig)
	status, _, body := call(t, "GET", base+"/api/audit", "")
	if status != 200 {
		t.Fatalf("/api/audit: %d %s", status, body)
	}
	if !bytes.Equal(body, want) {
		t.Errorf("/api/audit differs from audit -o json:\n%s\nwant\n%s", body, want)
	}

	ctx, errs := openBrowser(t, exe)

	shown := openCluster(t, ctx, base)
	checkShown(t, shown, rep)
	if t.Failed() {
		t.FailNow()
	}

	// Live KV usage: the same cluster, each pod's /metrics the recorded page.
	page, err := os.ReadFile(filepath.Join("..", "telemetry", "testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	live := httptest.NewServer(web.Handler(web.Options{Offline: true, Audit: func(ctx context.Context) (audit.Report, error) {
		return audit.Run(ctx, dyn, audit.Options{AllNamespaces: true, Live: true, Metrics: recordedMetrics(page)})
	}}))
	defer live.Close()
	status, _, body = call(t, "GET", live.URL+"/api/audit", "")
	if status != 200 {
		t.Fatalf("/api/audit: %d %s", status, body)
	}
	var liveRep audit.Report
	if err := json.Unmarshal(body, &liveRep); err != nil {
		t.Fatal(err)
	}
	shown = openCluster(t, ctx, live.URL)
	checkShown(t, shown, liveRep)
	pods, running := 0, 0
	for i, w := range liveRep.Workloads {
		for j, p := range w.Pods {
			got := shown[i].Pods[j]
			if p.Phase == "Running" {
				running++
			}
			if p.Metrics == nil {
				if got.KV != "" {
					t.Errorf("%s: KV %s shown without metrics", p.Name, got.KV)
				}
				continue
			}
			pods++
			if got.KV != fmt.Sprint(p.Metrics.KVCacheUsage) || math.Abs(got.Width-p.Metrics.KVCacheUsage) > 0.02 {
				t.Errorf("pod %s: the page shows KV %s (a %.3f bar), the audit %v", p.Name, got.KV, got.Width, p.Metrics.KVCacheUsage)
			}
		}
	}
	// Every running pod's metrics were read (the recorded page says KV
	// 0.9412), and the fixture runs several.
	if pods != running || pods < 3 {
		t.Errorf("%d pods with live KV usage of %d running", pods, running)
	}
	errs.check(t)
	if os.Getenv("HEADROOM_SCREENSHOTS") == "1" {
		png := run(t, ctx, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join("..", "docs", "screenshots", "cluster.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// openCluster loads the cluster page and reads what it shows.
func openCluster(t *testing.T, ctx context.Context, base string) []shownWorkload {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/cluster.html"), chromedp.WaitReady(chromedp.CSS(`body[data-loaded="true"]`))); err != nil {
		t.Fatal(err)
	}
	return run(t, ctx, chromedp.Evaluate[[]shownWorkload](readCluster))
}

// checkShown compares the page with the audit: the same workloads in the
// same order, each with its status, its engines' cards and its fix.
func checkShown(t *testing.T, shown []shownWorkload, rep audit.Report) {
	t.Helper()
	if len(shown) != len(rep.Workloads) {
		t.Fatalf("the page shows %d workloads, the audit has %d", len(shown), len(rep.Workloads))
	}
	for i, w := range rep.Workloads {
		s := shown[i]
		id := w.Kind + " " + w.Namespace + "/" + w.Name
		if s.Kind != w.Kind || s.Namespace != w.Namespace || s.Name != w.Name || s.Status != w.Status {
			t.Errorf("row %d: the page shows %s %s/%s %s, the audit %s %s", i, s.Kind, s.Namespace, s.Name, s.Status, id, w.Status)
			continue
		}
		var segs []string
		for _, e := range w.Engines {
			p := e.PerGPU
			for _, part := range []struct {
				name  string
				bytes int64
			}{{"weights", p.Weights}, {"activation", p.Activation}, {"nontorch", p.NonTorch}, {"context", p.Context},
				{"graphs", p.CUDAGraph}, {"kv", p.KVCache}, {"unused", max(e.UnusedBytes, 0)}} {
				if part.bytes > 0 {
					segs = append(segs, fmt.Sprintf("%s=%.2f", part.name, float64(part.bytes)/(1<<30)))
				}
			}
		}
		if strings.Join(s.Segs, " ") != strings.Join(segs, " ") {
			t.Errorf("%s: the cards show %v, the audit's plans %v", id, s.Segs, segs)
		}
		fix := ""
		for _, f := range w.Findings {
			if f.Level != audit.LevelInfo {
				fix = "Fix: " + f.Message
				break
			}
		}
		if s.Fix != fix {
			t.Errorf("%s: the page's fix %q, the audit's worst finding %q", id, s.Fix, fix)
		}
		var pods []string
		for _, p := range w.Pods {
			pods = append(pods, p.Name)
		}
		var shownPods []string
		for _, p := range s.Pods {
			shownPods = append(shownPods, p.Name)
		}
		sort.Strings(pods)
		sort.Strings(shownPods)
		if strings.Join(pods, ",") != strings.Join(shownPods, ",") {
			t.Errorf("%s: pods %v shown, the audit's %v", id, shownPods, pods)
		}
	}
}
