package monitoring

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// oneGPU stands in for NVML (no GPU here): one 80 GB card.
type oneGPU struct{}

func (oneGPU) GPUs(context.Context) ([]telemetry.GPU, error) {
	return []telemetry.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", TotalBytes: 81559 << 20, UsedBytes: 74621 << 20, FreeBytes: 6399 << 20}}, nil
}
func (oneGPU) Source() string { return "test" }
func (oneGPU) Close() error   { return nil }

// recordedVLLMPage is a real vLLM 0.11 server's /metrics page.
func recordedVLLMPage(t *testing.T) []byte {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "telemetry", "testdata", "vllm", "vllm-0.11.0-v1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// exporterNames are the metric names a real exporter serves with
// everything on (exporterFamilies).
func exporterNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for n := range exporterFamilies(t) {
		names[n] = true
	}
	return names
}

// exporterFamilies is what a real exporter serves with everything on: a
// vLLM server answering (the recorded vLLM 0.11 page), a GPU, a required
// margin and a plan.
func exporterFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	page := recordedVLLMPage(t)
	vllmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) }))
	defer vllmSrv.Close()
	plan := &memory.Budget{PerGPU: memory.Parts{Total: 80 << 30}, NumBlocks: 1, Settings: vllm.Settings{GPUMemoryUtilization: 0.9}}
	e := telemetry.NewExporter(telemetry.ExporterOptions{Scraper: &telemetry.Scraper{URL: vllmSrv.URL, Timeout: 2 * time.Second},
		GPUs: oneGPU{}, RequiredFreeBytes: 1 << 30, Plan: plan})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// vllmNames are every name vLLM has exported for the quantities headroom
// knows, with a histogram's series.
func vllmNames() map[string]bool {
	names := map[string]bool{}
	for _, n := range vllm.MetricNames() {
		names[n.Name] = true
		if n.Type == vllm.TypeHistogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[n.Name+s] = true
			}
		}
	}
	return names
}

// grafanaVars are what Grafana puts in place of the dashboard's variables
// before it sends a query.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$namespace", ".*", "$pod", ".*", "$model", ".*", "$node", ".*")

// selectors parses expr with Prometheus's PromQL parser and returns the
// metric names it selects.
func selectors(t *testing.T, what, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", what, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", what, expr)
	}
	return names
}

// dashboardQueries walks the dashboard's JSON (as committed) for every
// panel target's expr.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	body, err := DashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	// A variable's label_values(SELECTOR, LABEL): the selector is PromQL.
	for _, v := range d.Templating.List {
		if inner, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			sel := inner[:strings.LastIndex(inner, ",")]
			out["variable "+v.Name] = sel
		}
	}
	return out
}

// Every dashboard query parses, and names only metrics headroom's exporter
// serves or vLLM exports.
func TestDashboardQueries(t *testing.T) {
	known := exporterNames(t)
	for n := range vllmNames() {
		known[n] = true
	}
	queries := dashboardQueries(t)
	if len(queries) < 15 {
		t.Fatalf("only %d queries in the dashboard", len(queries))
	}
	unknown := 0
	for what, q := range queries {
		if strings.TrimSpace(q) == "" {
			t.Errorf("%s: empty query", what)
			continue
		}
		for _, name := range selectors(t, what, grafanaVars.Replace(q)) {
			if !known[name] && (what != "variable "+nodeVar || name != ksmPodInfo) {
				unknown++
				t.Errorf("%s: %s is neither headroom's nor vLLM's", what, name)
			}
		}
	}
	t.Logf("%d queries parsed, %d unknown metric names", len(queries), unknown)
}

// runbookCommand is a command in backquotes that runs headroom.
var runbookCommand = regexp.MustCompile("`[^`]*\\bheadroom (audit|plan|doctor|simulate|watch|snapshot)\\b[^`]*`")

// Every rule parses; it names headroom's and vLLM's metrics, and
// kube-state-metrics' for the OOMKilled rule alone.
func TestRuleQueries(t *testing.T) {
	known := exporterNames(t)
	for n := range vllmNames() {
		known[n] = true
	}
	for _, g := range Rules().Groups {
		for _, r := range g.Rules {
			for _, name := range selectors(t, r.Alert, r.Expr) {
				if known[name] || (r.Alert == "HeadroomVLLMOOMKilled" && (name == ksmLastTerminatedReason || name == ksmRestarts)) {
					continue
				}
				t.Errorf("%s: %s is not a metric headroom or vLLM exports", r.Alert, name)
			}
			for _, k := range []string{"summary", "description", "runbook"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s: no %s", r.Alert, k)
				}
			}
			if !runbookCommand.MatchString(r.Annotations["runbook"]) {
				t.Errorf("%s: the runbook names no headroom command: %s", r.Alert, r.Annotations["runbook"])
			}
		}
	}
}

// A rule or panel that reads a quantity vLLM renamed reads every name it
// has had: on a 0.6 server and on a 0.13 one alike.
func TestEveryNameOfARenamedMetric(t *testing.T) {
	var all []string
	for _, g := range Rules().Groups {
		for _, r := range g.Rules {
			all = append(all, r.Expr)
		}
	}
	for _, q := range dashboardQueries(t) {
		all = append(all, q)
	}
	for _, n := range vllm.MetricNames() {
		for _, e := range all {
			if !strings.Contains(e, n.Name) {
				continue
			}
			for _, other := range vllm.MetricWireNames(n.Metric) {
				if !strings.Contains(e, other) {
					t.Errorf("%q reads %s but not %s, its name in other releases", e, n.Name, other)
				}
			}
		}
	}
	// The renamed quantities the issue names are read at all.
	for _, m := range []vllm.Metric{vllm.MetricKVCacheUsage, vllm.MetricInterTokenLatency} {
		names := vllm.MetricWireNames(m)
		sort.Strings(names)
		found := false
		for _, e := range all {
			found = found || strings.Contains(e, names[0])
		}
		if !found {
			t.Errorf("nothing reads %s", m)
		}
	}
}
