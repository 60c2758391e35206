// Package monitoring builds what a platform team's Prometheus and Grafana
// need to watch vLLM servers with headroom: the alert rules (a Prometheus
// rules file, shipped by the chart as a PrometheusRule) and a Grafana
// dashboard (JSON, shipped by the chart as a ConfigMap for Grafana's
// dashboard sidecar).
//
// Both are generated from the names the rest of headroom defines, so they
// cannot drift from them: vLLM's metric names by release (vllm.MetricNames,
// every name a quantity has had, so one rule works on a 0.6 server and a
// 0.13 one alike), the exporter's gauges (telemetry.Metric*), the
// fragmentation reserve (memory.ReserveBytes) and the thresholds of the
// OOM risk and the watch alerts (telemetry). The generated files are
// committed under charts/headroom/files/; `go test ./monitoring -update`
// (hack/monitoring.sh) writes them, and the test fails when they differ
// from what the code generates.
//
// Decisions:
//
//   - A quantity vLLM renamed is read under each of its names joined by
//     `or`: Prometheus matches the two sides on every label but the metric
//     name, so a release that exports both names (0.9.2 to 0.10 for KV
//     usage) still gives one series, the newest name's.
//   - No aggregation where none is needed: an alert keeps every label its
//     series carries (namespace, pod, model_name, engine, gpu), so whatever
//     relabelling the user's scrape does reaches the notification.
//   - Every alert's runbook names the headroom command that explains it and
//     gives the value to set.
package monitoring
