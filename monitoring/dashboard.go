package monitoring

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// DashboardUID is the dashboard's stable uid: links to it survive a
// regeneration.
const DashboardUID = "headroom-vllm"

// The dashboard's template variables, as the queries write them.
const (
	dsVar    = "datasource"
	nsVar    = "namespace"
	podVar   = "pod"
	modelVar = "model"
	nodeVar  = "node"
)

// vllmMatchers select a vLLM server's series by the dashboard's
// variables; headroom's exporter has no model_name label.
//
// headroom's exporter is scraped in one of two places: beside its vLLM
// server (a sidecar, or a single box), where its series carry the vLLM
// pod's namespace and pod, or as the chart's DaemonSet, one per GPU node,
// where they carry the exporter's own and the node's name (the
// ServiceMonitor's relabeling). The dashboard takes either: the series of
// the selected pods, or of the nodes those pods run on, which the hidden
// node variable reads from kube-state-metrics' kube_pod_info. Without
// kube-state-metrics only the first kind is found once a pod is chosen.
var (
	vllmMatchers     = `namespace=~"$namespace", pod=~"$pod", model_name=~"$model"`
	headroomMatchers = `namespace=~"$namespace", pod=~"$pod"`
	nodeMatchers     = `node=~"$node", node!=""`
	byPod            = "namespace, pod, model_name"
	// byExporter keeps the node apart: the DaemonSet's series name the
	// exporter's pod, and the node says whose GPU it is.
	byExporter = "namespace, pod, node"
	exporterAt = "{{namespace}}/{{pod}} {{node}}"
)

// ksmPodInfo is kube-state-metrics' pod-to-node gauge.
const ksmPodInfo = "kube_pod_info"

// headroomSeries applies f to the selector of headroom's metric name for
// each place its exporter is scraped (headroomMatchers, nodeMatchers) and
// joins the two with `or`: one series found both ways is kept once.
func headroomSeries(name string, f func(sel string) string) string {
	return "(" + f(name+"{"+headroomMatchers+"}") + " or " + f(name+"{"+nodeMatchers+"}") + ")"
}

// panel is one time-series panel's description.
type panel struct {
	title, description, unit string
	min, max                 *float64
	stacked                  bool
	targets                  []target
}

type target struct{ expr, legend string }

func f64(v float64) *float64 { return &v }

// Dashboard builds the Grafana dashboard: per model and pod, the memory
// picture as headroom planned it against what the GPU reports, KV usage,
// running and waiting requests, preemptions, TTFT and inter-token latency
// percentiles, the OOM risk and vLLM's restarts.
//
// It is the classic dashboard JSON (schema v1), which the SDK marks
// deprecated in favour of dashboardv2: Grafana's dashboard sidecar and file
// provisioning load v1 on every Grafana release, v2 only on Grafana 12 with
// its new dashboard API switched on.
//
//lint:ignore SA1019 v1 is what the sidecar loads everywhere (above)
func Dashboard() (dashboard.Dashboard, error) {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + dsVar + "}")}
	kv := anyName(vllm.MetricKVCacheUsage, withMatchers("", vllmMatchers))
	hm := func(name string) string { return headroomSeries(name, plain) }

	quantiles := func(m vllm.Metric, what string) []target {
		var out []target
		for _, q := range []float64{0.5, 0.9, 0.99} {
			rate := anyName(m, func(n string) string {
				return fmt.Sprintf("rate(%s_bucket{%s}[$__rate_interval])", n, vllmMatchers)
			})
			out = append(out, target{
				expr:   fmt.Sprintf("histogram_quantile(%g, sum by (le, %s) (%s))", q, byPod, rate),
				legend: fmt.Sprintf("p%g %s {{namespace}}/{{pod}}", q*100, what),
			})
		}
		return out
	}

	rows := []struct {
		title  string
		panels []panel
	}{
		{"Risk", []panel{
			{title: "OOM risk", unit: "percentunit", min: f64(0), max: f64(1),
				description: fmt.Sprintf("headroom's OOM risk (telemetry/README.md): KV usage, the share of requests waiting, preemptions and the GPU margin, 0..1. The alert fires at %s.", fmtFloat(OOMRiskHigh)),
				targets:     []target{{fmt.Sprintf("max by (%s) (%s)", byExporter, hm(telemetry.MetricOOMRisk)), exporterAt}}},
			{title: "vLLM restarts (exporter's view)", unit: "short", min: f64(0),
				description: "Times the exporter saw vLLM start anew in the window: a crash (a CUDA out-of-memory error kills the engine) or a restart. Run `headroom doctor` on the previous log.",
				targets: []target{{headroomSeries(telemetry.MetricVLLMRestarts, func(sel string) string {
					return "increase(" + sel + "[$__rate_interval])"
				}), exporterAt}}},
		}},
		{"GPU memory: planned against reported", []panel{
			{title: "Planned per GPU (headroom plan)", unit: "bytes", min: f64(0), stacked: true,
				description: "One GPU's share of the plan, part by part, as `headroom plan` draws the card, and what the plan leaves free. Served by an exporter given the model (-- vllm serve ...).",
				targets: []target{
					{fmt.Sprintf("max by (%s, part) (%s)", byExporter, hm(telemetry.MetricPlanMemory)), "{{part}} " + exporterAt},
					{fmt.Sprintf("max by (%s) (%s - %s)", byExporter, hm(telemetry.MetricPlanTotal), hm(telemetry.MetricPlanFootprint)), "free (planned) " + exporterAt},
				}},
			{title: "GPU memory as the driver reports it", unit: "bytes", min: f64(0),
				description: "Used and free memory of each GPU (NVML or nvidia-smi), with the plan's footprint beside them: used above the footprint is memory the plan did not foresee.",
				targets: []target{
					{hm(telemetry.MetricGPUUsed), "used GPU {{gpu}} " + exporterAt},
					{fmt.Sprintf("%s - %s", hm(telemetry.MetricGPUTotal), hm(telemetry.MetricGPUUsed)), "free GPU {{gpu}} " + exporterAt},
					{fmt.Sprintf("max by (%s) (%s)", byExporter, hm(telemetry.MetricPlanFootprint)), "planned footprint " + exporterAt},
				}},
			{title: "KV-cache blocks: vLLM against the plan", unit: "short", min: f64(0),
				description: fmt.Sprintf("vLLM's own num_gpu_blocks (vllm:cache_config_info) and the plan's; more than %.0f%% apart raises HeadroomSettingsDrift.", 100*DriftTolerance),
				targets: []target{
					{hm(telemetry.MetricVLLMNumGPUBlocks), "vLLM " + exporterAt},
					{hm(telemetry.MetricPlanNumGPUBlocks), "plan " + exporterAt},
				}},
			{title: "KV cache against the plan", unit: "percentunit", min: f64(0),
				description: fmt.Sprintf("vLLM's own num_gpu_blocks over the plan's: the share of the planned KV cache the server got. Under %.0f%% for 15 minutes raises HeadroomKVCacheBelowPlan; headroom audit --live names the cause.", 100*KVBelowPlanShare),
				targets: []target{
					{fmt.Sprintf("%s / %s", hm(telemetry.MetricVLLMNumGPUBlocks), hm(telemetry.MetricPlanNumGPUBlocks)), "share " + exporterAt},
				}},
		}},
		{"KV cache and queue", []panel{
			{title: "KV-cache usage", unit: "percentunit", min: f64(0), max: f64(1),
				description: "Share of vLLM's KV-cache blocks in use, under the name of each release (vllm:kv_cache_usage_perc, before 0.9.2 vllm:gpu_cache_usage_perc).",
				targets:     []target{{fmt.Sprintf("max by (%s) (%s)", byPod, kv), "{{namespace}}/{{pod}} {{model_name}}"}}},
			{title: "Requests running and waiting", unit: "short", min: f64(0),
				targets: []target{
					{fmt.Sprintf("sum by (%s) (%s)", byPod, anyName(vllm.MetricRequestsRunning, withMatchers("", vllmMatchers))), "running {{namespace}}/{{pod}}"},
					{fmt.Sprintf("sum by (%s) (%s)", byPod, anyName(vllm.MetricRequestsWaiting, withMatchers("", vllmMatchers))), "waiting {{namespace}}/{{pod}}"},
				}},
			{title: "Preemptions per minute", unit: "short", min: f64(0),
				description: "Requests vLLM evicted from the running batch for lack of KV cache; each is recomputed.",
				targets: []target{{fmt.Sprintf("sum by (%s) (%s) * 60", byPod, anyName(vllm.MetricPreemptions, func(n string) string {
					return fmt.Sprintf("rate(%s{%s}[$__rate_interval])", n, vllmMatchers)
				})), "{{namespace}}/{{pod}}"}}},
		}},
		{"Latency", []panel{
			{title: "Time to first token", unit: "s", min: f64(0), targets: quantiles(vllm.MetricTTFT, "TTFT")},
			{title: "Inter-token latency", unit: "s", min: f64(0),
				description: "vllm:inter_token_latency_seconds, or vllm:time_per_output_token_seconds on releases before 0.10.2 (removed in 0.13).",
				targets:     quantiles(vllm.MetricInterTokenLatency, "ITL")},
		}},
	}

	//lint:ignore SA1019 see Dashboard's comment: the v1 schema on purpose
	b := dashboard.NewDashboardBuilder("headroom: vLLM GPU memory").
		Uid(DashboardUID).
		Description("vLLM servers as headroom sees them: the plan's memory against the GPU's, KV cache, queue, preemptions, latency and OOM risk. Generated by headroom's package monitoring.").
		Tags([]string{"headroom", "vllm", "gpu"}).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(dsVar).Label("Prometheus").Type("prometheus")).
		WithVariable(labelVariable(ds, nsVar, "Namespace", "namespace", "")).
		WithVariable(labelVariable(ds, podVar, "Pod", "pod", `namespace=~"$namespace"`)).
		WithVariable(labelVariable(ds, modelVar, "Model", "model_name", `namespace=~"$namespace", pod=~"$pod"`)).
		WithVariable(nodeVariable(ds))

	for _, r := range rows {
		b = b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			b = b.WithPanel(timeseriesPanel(ds, p))
		}
	}
	b = b.WithRow(dashboard.NewRowBuilder("Now"))
	b = b.WithPanel(stat.NewPanelBuilder().Title("Worst OOM risk").Datasource(ds).Unit("percentunit").Min(0).Max(1).Span(8).Height(4).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf("max(%s)", hm(telemetry.MetricOOMRisk))).LegendFormat("worst")))
	b = b.WithPanel(stat.NewPanelBuilder().Title("Requests waiting").Datasource(ds).Unit("short").Span(8).Height(4).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf("sum(%s)", anyName(vllm.MetricRequestsWaiting, withMatchers("", vllmMatchers)))).LegendFormat("waiting")))
	b = b.WithPanel(stat.NewPanelBuilder().Title("Fullest KV cache").Datasource(ds).Unit("percentunit").Min(0).Max(1).Span(8).Height(4).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf("max(%s)", kv)).LegendFormat("fullest")))
	return b.Build()
}

// labelVariable is a template variable over a label's values on vLLM's
// running-requests gauge (every release exports it under one name).
func labelVariable(ds common.DataSourceRef, name, label, of, matchers string) *dashboard.QueryVariableBuilder {
	gauge, _ := vllm.MetricNameAt(vllm.MetricRequestsRunning, vllm.Version{})
	sel := gauge
	if matchers != "" {
		sel += "{" + matchers + "}"
	}
	return queryVariable(ds, name, label, sel, of).AllValue(".*")
}

// nodeVariable is the hidden variable of the nodes the selected pods run
// on. It has no custom "All" value, so Grafana writes every node it found
// (none without kube-state-metrics, and then nodeMatchers select nothing).
func nodeVariable(ds common.DataSourceRef) *dashboard.QueryVariableBuilder {
	return queryVariable(ds, nodeVar, "Node", ksmPodInfo+`{namespace=~"$namespace", pod=~"$pod"}`, "node").
		Hide(dashboard.VariableHideHideVariable)
}

// queryVariable is a multi-value variable over label of selector's series,
// "All" at first.
func queryVariable(ds common.DataSourceRef, name, label, selector, of string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", selector, of)
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1}}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		IncludeAll(true).Multi(true).
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}})
}

func timeseriesPanel(ds common.DataSourceRef, p panel) *timeseries.PanelBuilder {
	tp := timeseries.NewPanelBuilder().Title(p.title).Datasource(ds).Unit(p.unit).Span(8).Height(8).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true)).
		FillOpacity(10).LineWidth(1)
	if p.description != "" {
		tp = tp.Description(p.description)
	}
	if p.min != nil {
		tp = tp.Min(*p.min)
	}
	if p.max != nil {
		tp = tp.Max(*p.max)
	}
	if p.stacked {
		tp = tp.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(60)
	}
	for i, t := range p.targets {
		tp = tp.WithTarget(prometheus.NewDataqueryBuilder().Expr(t.expr).LegendFormat(t.legend).RefId(string(rune('A' + i))))
	}
	return tp
}

// DashboardJSON is the dashboard as committed (charts/headroom/files/):
// indented, with a final newline.
func DashboardJSON() ([]byte, error) {
	d, err := Dashboard()
	if err != nil {
		return nil, err
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return []byte(buf.String()), nil
}
