package monitoring

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Thresholds of the alerts. Each says where it comes from.
const (
	// OOMRiskHigh: telemetry.OOMRisk reaches 0.6 with a full KV cache and a
	// fifth of the requests waiting (K = 1, Q = 0.2: 1·(1+0.2)/2), or six
	// preemptions a minute alone (P = 6/10). The chart's KEDA ScaledObject
	// scales out at the same value (keda.oomRiskThreshold).
	OOMRiskHigh = 0.6
	// KVCacheFull is the KV usage `headroom watch` counts as pressure
	// (telemetry.DefaultKVThreshold).
	KVCacheFull = telemetry.DefaultKVThreshold
	// PreemptionsPerMinute: one preemption a minute, sustained, is a tenth
	// of what the OOM risk counts as certain pressure
	// (telemetry.RiskPreemptionsPerMinute): the KV cache runs out again and
	// again and work is recomputed.
	PreemptionsPerMinute = telemetry.RiskPreemptionsPerMinute / 10
	// DriftTolerance is how far vLLM's own count of KV blocks may stray
	// from the plan's before the plan no longer describes the server
	// (memory.DriftShare: beyond the planner's largest error).
	DriftTolerance = memory.DriftShare
	// KVBelowPlanShare is the share of the planned KV cache under which a
	// server is far below the plan (1 − memory.DefaultMaxKVLoss), as the
	// audit and the upgrade preflight count it.
	KVBelowPlanShare = 1 - memory.DefaultMaxKVLoss
)

// Windows of the alerts.
const (
	rateWindow    = "5m"
	restartWindow = "15m"
)

// kube-state-metrics' names, for the OOMKilled alert: the one place the
// rules read metrics neither vLLM nor headroom exports (kube-state-metrics
// docs/metrics/workload/pod-metrics.md).
const (
	ksmLastTerminatedReason = "kube_pod_container_status_last_terminated_reason"
	ksmRestarts             = "kube_pod_container_status_restarts_total"
)

// RuleFile is a Prometheus rules file (what promtool checks and what the
// PrometheusRule's spec holds).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a named list of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations"`
}

// Severities.
const (
	warning  = "warning"
	critical = "critical"
)

// where names the series in a notification: the pod the scrape labels it
// with, and the node where the scrape adds it (the chart's DaemonSet
// exporter, whose pod is the exporter's own: the node says whose GPU).
const where = `{{ $labels.namespace }}/{{ $labels.pod }}{{ with $labels.node }} on node {{ . }}{{ end }}`

// Rules returns the alert rules.
func Rules() RuleFile {
	kv := anyName(vllm.MetricKVCacheUsage, plain)
	waiting := anyName(vllm.MetricRequestsWaiting, plain)
	preemptionsRate := anyName(vllm.MetricPreemptions, func(n string) string { return fmt.Sprintf("rate(%s[%s])", n, rateWindow) })
	reserveMiB := memory.RedundancyBytes >> 20
	// The DaemonSet exporter's namespace is its own, not the server's:
	// with a node, audit every namespace.
	audit := "headroom audit{{ if not $labels.node }} -n {{ $labels.namespace }}{{ end }} --live"

	rules := []Rule{
		{
			Alert: "HeadroomOOMRiskHigh",
			Expr:  fmt.Sprintf("%s >= %s", telemetry.MetricOOMRisk, fmtFloat(OOMRiskHigh)),
			For:   "5m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "vLLM at " + where + " is close to running out of GPU memory (OOM risk {{ $value | printf \"%.2f\" }})",
				"description": fmt.Sprintf("headroom's OOM risk (KV usage, the share of requests waiting, preemptions, GPU margin) has stayed at or above %s for 5 minutes: a longer prompt or a burst will preempt running requests or fail with CUDA out of memory.", fmtFloat(OOMRiskHigh)),
				"runbook":     "Run `" + audit + "`: it names what is at risk in this workload (KV cache full, requests waiting, preemptions, thin margin) and the setting to change (--max-num-seqs, --max-model-len, --gpu-memory-utilization) with its value; scale out if the plan is already right.",
			},
		},
		{
			Alert: "HeadroomKVCacheFull",
			Expr:  fmt.Sprintf("%s >= %s", kv, fmtFloat(KVCacheFull)),
			For:   "15m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "vLLM's KV cache at " + where + " has been {{ $value | humanizePercentage }} full for 15 minutes",
				"description": fmt.Sprintf("The KV cache of %s stayed at or above %.0f%%: new long requests wait or preempt running ones.", "{{ $labels.model_name }}", 100*KVCacheFull),
				"runbook":     "Run `headroom plan --gpu GPU -- <the pod's vllm serve command>` for the KV tokens and the --max-num-seqs the cache holds, and `headroom plan --profile requests.log ...` to choose --max-num-seqs from the traffic; `" + audit + "` shows the workload's findings. Add a replica when the traffic outgrows one.",
			},
		},
		{
			Alert: "HeadroomPreemptions",
			Expr:  fmt.Sprintf("%s * 60 > %s", preemptionsRate, fmtFloat(PreemptionsPerMinute)),
			For:   "10m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "vLLM at " + where + " preempts {{ $value | printf \"%.1f\" }} requests a minute",
				"description": fmt.Sprintf("vLLM preempted more than %s request a minute for 10 minutes: its KV cache runs out under the load and the preempted requests are recomputed from scratch.", fmtFloat(PreemptionsPerMinute)),
				"runbook":     "Run `headroom simulate --gpu GPU --requests requests.log --compare -- <the pod's vllm serve command>`: it replays the traffic and gives the --max-num-seqs that stops the preemptions; `" + audit + "` shows the live numbers.",
			},
		},
		{
			Alert: "HeadroomRequestsWaitingKVFull",
			Expr:  fmt.Sprintf("(%s > 0) and (%s >= %s)", waiting, kv, fmtFloat(KVCacheFull)),
			For:   "2m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "Requests wait at " + where + " while the KV cache is full",
				"description": fmt.Sprintf("{{ $value }} requests waited for 2 minutes while the KV cache was at or above %.0f%%: vLLM cannot admit them until running ones finish (what `headroom watch` calls kv_pressure).", 100*KVCacheFull),
				"runbook":     "Run `headroom watch --url <the pod's /metrics>` to follow KV usage and the queue together, then `headroom plan --profile requests.log ...` for the --max-num-seqs and --max-model-len the traffic needs; scale out (the chart's KEDA option scales on headroom_queue_depth).",
			},
		},
		{
			Alert: "HeadroomGPUMemoryBelowReserve",
			Expr: fmt.Sprintf("(%[1]s - %[2]s) < (%[3]d + %[1]s / %[4]d)",
				telemetry.MetricGPUTotal, telemetry.MetricGPUUsed, memory.RedundancyBytes, memory.FragmentationDivisor),
			For: "5m", Labels: map[string]string{"severity": critical},
			Annotations: map[string]string{
				"summary":     "GPU {{ $labels.gpu }} seen by " + where + " has less free memory than the fragmentation reserve",
				"description": fmt.Sprintf("Free GPU memory stayed under %d MiB + 1%% of the card (the reserve headroom keeps beyond vLLM's budget: vLLM's redundancy buffer and the allocator's fragmentation) for 5 minutes: the next allocation outside vLLM's budget (a sampler warm-up, a CUDA graph, another process) can fail with CUDA out of memory.", reserveMiB),
				"runbook":     "Run `headroom snapshot` on the node to see which processes hold the GPU, then `headroom plan --gpu GPU -- <the vllm serve command>`: its recommended --gpu-memory-utilization leaves the reserve free.",
			},
		},
		{
			Alert:  "HeadroomVLLMRestarted",
			Expr:   fmt.Sprintf("increase(%s[%s]) > 0", telemetry.MetricVLLMRestarts, restartWindow),
			Labels: map[string]string{"severity": critical},
			Annotations: map[string]string{
				"summary":     "vLLM seen by the exporter at " + where + " started anew",
				"description": "The exporter saw vLLM's process start again (its start time changed or its counters fell back) in the last 15 minutes: it crashed or was restarted. A CUDA out-of-memory error kills the engine this way.",
				"runbook":     "Run `kubectl logs -n {{ $labels.namespace }} <the vLLM pod> --previous | headroom doctor -`: it names the cause (CUDA OOM in the KV cache, the weights, the activation peak, another process; or not memory at all) and the settings to change.",
			},
		},
		{
			Alert: "HeadroomVLLMOOMKilled",
			Expr: fmt.Sprintf("(%s{reason=\"OOMKilled\"} == 1) and on (namespace, pod, container) (increase(%s[%s]) > 0) and on (namespace, pod) group by (namespace, pod) (max_over_time(%s[1h]))",
				ksmLastTerminatedReason, ksmRestarts, restartWindow, anyName(vllm.MetricRequestsRunning, plain)),
			Labels: map[string]string{"severity": critical},
			Annotations: map[string]string{
				"summary":     "The vLLM container {{ $labels.container }} of " + where + " was OOMKilled",
				"description": "A container of a pod serving vLLM restarted in the last 15 minutes after the kernel killed it for host memory (its resources.limits.memory), not GPU memory.",
				"runbook":     "Run `" + audit + "` and `kubectl logs -n {{ $labels.namespace }} {{ $labels.pod }} -c {{ $labels.container }} --previous | headroom doctor -`: raise the memory limit above what vLLM's CPU side holds (swap space, CPU offload, the tokenizer), or lower --swap-space.",
			},
		},
		{
			Alert: "HeadroomKVCacheBelowPlan",
			Expr: fmt.Sprintf("(%s / %s) < %s",
				telemetry.MetricVLLMNumGPUBlocks, telemetry.MetricPlanNumGPUBlocks, fmtFloat(KVBelowPlanShare)),
			For: "15m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "vLLM at " + where + " gets {{ $value | humanizePercentage }} of the KV cache the plan gives it",
				"description": fmt.Sprintf("vLLM's own count of KV blocks (vllm:cache_config_info) stayed under %.0f%% of the blocks headroom plans for its model, flags, GPU and release for 15 minutes: something takes GPU memory the plan gives the KV cache (the CUDA-graph estimate inside the budget from 0.21.0, another process on the GPU at start-up, a utilization other than the planned).", 100*KVBelowPlanShare),
				"runbook":     "Run `" + audit + "`: it names the pod, the cause and the fix (a pinned --kv-cache-memory-bytes from `headroom plan --pin-kv`, the planned utilization, the process to move); `--learn` records the pod's numbers for later plans.",
			},
		},
		{
			Alert: "HeadroomSettingsDrift",
			Expr: fmt.Sprintf("(abs(%[1]s - %[2]s) > %[3]s * %[2]s) or (%[4]s != %[5]s)",
				telemetry.MetricVLLMNumGPUBlocks, telemetry.MetricPlanNumGPUBlocks, fmtFloat(DriftTolerance),
				telemetry.MetricVLLMUtilization, telemetry.MetricPlanUtilization),
			For: "15m", Labels: map[string]string{"severity": warning},
			Annotations: map[string]string{
				"summary":     "vLLM at " + where + " no longer runs as planned",
				"description": fmt.Sprintf("vLLM's own cache configuration (vllm:cache_config_info) differs from the exporter's plan: its --gpu-memory-utilization is not the planned one, or its KV blocks are more than %.0f%% off the plan's (more than the planner's error): its settings, its vLLM release or what else holds the GPU changed since the plan.", 100*DriftTolerance),
				"runbook":     "Run `headroom plan --gpu GPU -- <the vllm serve command the pod runs now>` and compare with the exporter's command (its arguments after --); `kubectl logs <the pod> | headroom doctor -` reads vLLM's start-up log and says which number moved.",
			},
		},
	}
	return RuleFile{Groups: []RuleGroup{{Name: "headroom", Rules: rules}}}
}

// RulesYAML is the rules file as committed (charts/headroom/files/).
func RulesYAML() ([]byte, error) {
	body, err := yaml.Marshal(Rules())
	if err != nil {
		return nil, err
	}
	return append([]byte(header("#")), body...), nil
}

// header is the generated files' first lines.
func header(comment string) string {
	return comment + " Generated by package monitoring (go test ./monitoring -update); do not edit.\n"
}
