// Package telemetry reads what a running vLLM server and its GPUs report:
// GPU memory per device and per process (NVML, with nvidia-smi as the
// fallback), vLLM's Prometheus /metrics under the metric names of any
// release, and the gauges headroom's exporter serves for autoscalers.
//
// Parsers of outside text (nvidia-smi's CSV queries, its default screen,
// `nvidia-smi dmon`, Prometheus exposition text) never panic and return one
// readable error; the numbers they return are bytes (int64) and fractions.
package telemetry
