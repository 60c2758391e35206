package monitoring

import (
	"bytes"
	"context"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// scrape is one Prometheus target: the families it serves and the labels
// the scrape (and the ServiceMonitor's relabeling) adds to them.
type scrape struct {
	fams   map[string]*dto.MetricFamily
	labels map[string]string
}

// fsample is one float sample, as the engine reads it.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }

// store is what Prometheus would hold after scraping the targets once a
// minute for 20 minutes: a gauge at its value, a counter (and a
// histogram's parts) growing by it every minute.
type store []storage.Series

func (st *store) add(name string, lbls map[string]string, v float64, counter bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	b := labels.NewScratchBuilder(len(lbls) + 1)
	b.Add(model.MetricNameLabel, name)
	for k, val := range lbls {
		b.Add(k, val)
	}
	b.Sort()
	samples := make([]chunks.Sample, 21)
	for i := range samples {
		f := v
		if counter {
			f = v * float64(i)
		}
		samples[i] = fsample{t: int64(i) * time.Minute.Milliseconds(), f: f}
	}
	*st = append(*st, storage.NewListSeries(b.Labels(), samples))
}

func loadScrapes(targets []scrape) *store {
	st := &store{}
	for _, tg := range targets {
		for name, f := range tg.fams {
			for _, m := range f.GetMetric() {
				lbls := map[string]string{}
				for _, l := range m.GetLabel() {
					lbls[l.GetName()] = l.GetValue()
				}
				for k, v := range tg.labels {
					lbls[k] = v
				}
				with := func(k, v string) map[string]string {
					out := maps.Clone(lbls)
					out[k] = v
					return out
				}
				switch f.GetType() {
				case dto.MetricType_GAUGE:
					st.add(name, lbls, m.GetGauge().GetValue(), false)
				case dto.MetricType_UNTYPED:
					st.add(name, lbls, m.GetUntyped().GetValue(), false)
				case dto.MetricType_COUNTER:
					st.add(name, lbls, m.GetCounter().GetValue(), true)
				case dto.MetricType_HISTOGRAM:
					h := m.GetHistogram()
					for _, bk := range h.GetBucket() {
						st.add(name+"_bucket", with("le", strconv.FormatFloat(bk.GetUpperBound(), 'g', -1, 64)), float64(bk.GetCumulativeCount()), true)
					}
					if bs := h.GetBucket(); len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
						st.add(name+"_bucket", with("le", "+Inf"), float64(h.GetSampleCount()), true)
					}
					st.add(name+"_sum", lbls, h.GetSampleSum(), true)
					st.add(name+"_count", lbls, float64(h.GetSampleCount()), true)
				}
			}
		}
	}
	sort.Slice(*st, func(i, j int) bool { return labels.Compare((*st)[i].Labels(), (*st)[j].Labels()) < 0 })
	return st
}

// Querier selects the series every matcher matches, in label order.
func (st *store) Querier(int64, int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var out seriesSet
		for _, s := range *st {
			ok := true
			for _, m := range ms {
				ok = ok && m.Matches(s.Labels().Get(m.Name))
			}
			if ok {
				out.all = append(out.all, s)
			}
		}
		return &out
	}}, nil
}

type seriesSet struct {
	all []storage.Series
	at  int
}

func (s *seriesSet) Next() bool                        { s.at++; return s.at <= len(s.all) }
func (s *seriesSet) At() storage.Series                { return s.all[s.at-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// podInfo is kube-state-metrics' kube_pod_info of a pod on a node.
func podInfo(namespace, pod, node string) scrape {
	one := 1.0
	name, gauge := ksmPodInfo, dto.MetricType_GAUGE
	return scrape{
		fams: map[string]*dto.MetricFamily{ksmPodInfo: {Name: &name, Type: &gauge, Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: &one}}}}},
		labels: map[string]string{"namespace": namespace, "pod": pod, "node": node,
			"job": "kube-state-metrics"},
	}
}

// grafanaRegex is how Grafana writes a multi-value variable's values into
// a regex matcher: escaped, one value bare, several as an alternation.
func grafanaRegex(values []string) string {
	for i, v := range values {
		values[i] = regexp.QuoteMeta(v)
	}
	if len(values) == 1 {
		return values[0]
	}
	return "(" + strings.Join(values, "|") + ")"
}

// evalAt runs expr on the loaded series at 15 minutes.
func evalAt(t *testing.T, eng *promql.Engine, st storage.Queryable, expr string) promql.Vector {
	t.Helper()
	q, err := eng.NewInstantQuery(context.Background(), st, nil, expr, time.Unix(0, 0).Add(15*time.Minute))
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%q: %v", expr, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	return v
}

// The dashboard finds headroom's exporter where the chart puts it, a
// DaemonSet on each GPU node, once a vLLM pod is chosen, and also where a
// user runs it beside vLLM; it shows nothing of the other pod and node.
// Every panel query and the node variable are run by Prometheus's own
// engine on what a scrape of a real exporter and of a recorded vLLM page
// would store.
func TestDashboardFindsTheExporter(t *testing.T) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	vllmFams, err := p.TextToMetricFamilies(bytes.NewReader(recordedVLLMPage(t)))
	if err != nil {
		t.Fatal(err)
	}
	exporter := exporterFamilies(t)
	for name := range exporter {
		if vllmFams[name] != nil {
			delete(exporter, name) // the exporter's own series only
		}
	}
	vllmPod := func(pod string) scrape {
		return scrape{vllmFams, map[string]string{"namespace": "llm", "pod": pod, "job": "vllm", "instance": pod + ":8000"}}
	}
	queries := dashboardQueries(t)
	nodeSelector := queries["variable "+nodeVar]
	if nodeSelector == "" {
		t.Fatal("the dashboard has no node variable")
	}

	for _, tc := range []struct {
		name    string
		targets []scrape
		// node is the variable's value Grafana would compute; wrong are
		// label values no series of the chosen pod may carry.
		node  string
		wrong []string
	}{
		{
			name: "DaemonSet",
			targets: []scrape{
				vllmPod("vllm-0"), vllmPod("vllm-1"),
				{exporter, map[string]string{"namespace": "headroom-system", "pod": "headroom-exporter-a", "node": "gpu-1", "job": "headroom-exporter", "instance": "10.0.0.1:9400"}},
				{exporter, map[string]string{"namespace": "headroom-system", "pod": "headroom-exporter-b", "node": "gpu-2", "job": "headroom-exporter", "instance": "10.0.0.2:9400"}},
				podInfo("llm", "vllm-0", "gpu-1"), podInfo("llm", "vllm-1", "gpu-2"),
				podInfo("headroom-system", "headroom-exporter-a", "gpu-1"), podInfo("headroom-system", "headroom-exporter-b", "gpu-2"),
			},
			node:  "gpu-1",
			wrong: []string{"gpu-2", "vllm-1", "headroom-exporter-b"},
		},
		{
			// Beside vLLM, scraped as the vLLM pod, and no kube-state-metrics.
			name: "sidecar",
			targets: []scrape{
				vllmPod("vllm-0"), vllmPod("vllm-1"),
				{exporter, map[string]string{"namespace": "llm", "pod": "vllm-0", "job": "headroom-exporter", "instance": "vllm-0:9400"}},
				{exporter, map[string]string{"namespace": "llm", "pod": "vllm-1", "job": "headroom-exporter", "instance": "vllm-1:9400"}},
			},
			wrong: []string{"vllm-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := loadScrapes(tc.targets)
			eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second})
			defer eng.Close()
			chosen := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "llm", "$pod", "vllm-0", "$model", ".*")

			var nodes []string
			for _, s := range evalAt(t, eng, st, chosen.Replace(nodeSelector)) {
				if n := s.Metric.Get("node"); n != "" {
					nodes = append(nodes, n)
				}
			}
			if got := strings.Join(nodes, ","); got != tc.node {
				t.Fatalf("node variable = %q, want %q", got, tc.node)
			}
			vars := strings.NewReplacer("$node", grafanaRegex(nodes))

			empty, panels := 0, 0
			for what, q := range queries {
				if strings.HasPrefix(what, "variable ") {
					continue
				}
				panels++
				v := evalAt(t, eng, st, vars.Replace(chosen.Replace(q)))
				if len(v) == 0 {
					empty++
					t.Errorf("%s: no data for llm/vllm-0: %s", what, q)
				}
				for _, s := range v {
					s.Metric.Range(func(l labels.Label) {
						if slices.Contains(tc.wrong, l.Value) {
							t.Errorf("%s: a series of %s=%s, not of llm/vllm-0: %s", what, l.Name, l.Value, s.Metric)
						}
					})
				}
			}
			t.Logf("%d panel queries, %d without data", panels, empty)
		})
	}
}
