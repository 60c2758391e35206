package report

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"headroom.dev/headroom/kube"
)

// ScaleTarget is the vLLM Deployment an autoscaler manifest scales, and
// where its metrics are.
type ScaleTarget struct {
	// Name and Namespace are the Deployment's; Model is the model_name
	// label vLLM puts on its metrics (--served-model-name).
	Name, Namespace, Model string
	// Prometheus is the server KEDA queries.
	Prometheus string
}

// Validate checks what a written manifest carries from the user, as the
// API server, KEDA and Prometheus take it: the names and the namespace
// (DNS-1123), the model label (printable, at most 253 characters: it goes
// into a PromQL string), and the Prometheus address (an http or https URL
// with a host and nothing after its path: no credentials, which belong in
// a KEDA TriggerAuthentication, no query or fragment, which KEDA's
// serverAddress does not take).
func (t ScaleTarget) Validate() error {
	if err := kube.ValidName("--target", t.Name); err != nil {
		return err
	}
	if err := kube.ValidNamespace("--namespace", t.Namespace); err != nil {
		return err
	}
	if len(t.Model) > 253 || strings.IndexFunc(t.Model, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("--served-model-name %q: a model name of at most 253 printable characters", clipped(t.Model))
	}
	return validPrometheus(t.Prometheus)
}

func validPrometheus(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("--prometheus %q: %s; give the server's address, e.g. http://prometheus-operated.monitoring.svc:9090", clipped(s), why)
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return bad("it holds a space or a control character")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad(err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("not an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return bad("no host")
	case u.User != nil:
		return bad("credentials do not belong in a manifest (KEDA reads them from a TriggerAuthentication)")
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return bad("a query or fragment, which KEDA's serverAddress does not take")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("the port is not 1 to 65535")
		}
	}
	return nil
}

func clipped(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

// labelValue is a valid Kubernetes label value (apimachinery's
// IsValidLabelValue: at most 63 characters, alphanumerics at both ends,
// '-', '_' and '.' between).
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// promName is a vLLM metric's name as a Prometheus adapter exposes it to
// the external metrics API, where a colon is not allowed.
func promName(metric string) string { return strings.ReplaceAll(metric, ":", "_") }

// selector is the PromQL label selector of the target's pods.
func (t ScaleTarget) selector() string {
	parts := []string{fmt.Sprintf("namespace=%q", t.Namespace)}
	if t.Model != "" {
		parts = append(parts, fmt.Sprintf("model_name=%q", t.Model))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// quantity writes a per-replica target as a Kubernetes quantity in
// thousandths ("620m"), the HPA's and KEDA's resolution.
func quantity(v float64) string {
	m := int64(v*1000 + 0.5)
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// KEDAScaledObject is a's thresholds as a KEDA ScaledObject (keda.sh/v1alpha1,
// KEDA 2.x): three Prometheus triggers of metricType AverageValue on sums
// over the target's pods (answered requests per second, waiting requests,
// KV-cache usage), so KEDA's HPA divides each by the replicas, as the
// replay did; the cool-down as the scale-down stabilization window;
// minimum and maximum replicas from the replay.
func KEDAScaledObject(a *Autoscaler, t ScaleTarget) map[string]any {
	trigger := func(name, query string, target float64) map[string]any {
		return map[string]any{"type": "prometheus", "name": name, "metricType": "AverageValue", "metadata": map[string]any{
			"serverAddress": t.Prometheus,
			"query":         query,
			"threshold":     strconv.FormatFloat(target, 'f', -1, 64),
		}}
	}
	sum := func(series string) string { return fmt.Sprintf("sum(%s)", series) }
	kv := sum(a.KVMetric + t.selector())
	if a.EnginesPerReplica > 1 {
		kv += fmt.Sprintf(" / %d", a.EnginesPerReplica)
	}
	cool := int64(a.CoolDownS)
	return map[string]any{
		"apiVersion": "keda.sh/v1alpha1",
		"kind":       "ScaledObject",
		"metadata":   map[string]any{"name": t.Name, "namespace": t.Namespace, "labels": map[string]any{"app.kubernetes.io/managed-by": "headroom-capacity"}},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": t.Name},
			"minReplicaCount": a.MinReplicas,
			"maxReplicaCount": a.MaxReplicas,
			"pollingInterval": int64(a.IntervalS),
			"cooldownPeriod":  cool,
			"advanced": map[string]any{"horizontalPodAutoscalerConfig": map[string]any{"behavior": map[string]any{
				"scaleDown": map[string]any{"stabilizationWindowSeconds": cool},
				"scaleUp":   map[string]any{"stabilizationWindowSeconds": 0},
			}}},
			"triggers": []any{
				trigger("vllm-request-rate", sum(fmt.Sprintf("rate(%s%s[1m])", a.RateMetric, t.selector())), a.TargetRatePerS),
				trigger("vllm-waiting", sum(a.WaitingMetric+t.selector()), a.TargetWaiting),
				trigger("vllm-kv-cache", kv, a.TargetKV),
			},
		},
	}
}

// HPAObject is a's thresholds as an autoscaling/v2 HorizontalPodAutoscaler
// on external metrics (vLLM's, through a Prometheus adapter that names
// them with underscores; the answered requests as the adapter's rate of
// the counter, named without _count, the adapter's default rule for a
// counter), AverageValue targets.
func HPAObject(a *Autoscaler, t ScaleTarget) map[string]any {
	metric := func(name string, target float64) map[string]any {
		m := map[string]any{"name": promName(name)}
		labels := map[string]any{"namespace": t.Namespace}
		// A selector's values are Kubernetes label values: a model id
		// with a slash cannot be one, and the namespace then selects.
		if labelValue.MatchString(t.Model) {
			labels["model_name"] = t.Model
		}
		m["selector"] = map[string]any{"matchLabels": labels}
		return map[string]any{"type": "External", "external": map[string]any{
			"metric": m,
			"target": map[string]any{"type": "AverageValue", "averageValue": quantity(target)},
		}}
	}
	cool := int64(a.CoolDownS)
	return map[string]any{
		"apiVersion": "autoscaling/v2",
		"kind":       "HorizontalPodAutoscaler",
		"metadata":   map[string]any{"name": t.Name, "namespace": t.Namespace, "labels": map[string]any{"app.kubernetes.io/managed-by": "headroom-capacity"}},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": t.Name},
			"minReplicas":    a.MinReplicas,
			"maxReplicas":    a.MaxReplicas,
			"metrics": []any{metric(strings.TrimSuffix(a.RateMetric, "_count"), a.TargetRatePerS),
				metric(a.WaitingMetric, a.TargetWaiting), metric(a.KVMetric, a.TargetKV*float64(max(a.EnginesPerReplica, 1)))},
			"behavior": map[string]any{
				"scaleDown": map[string]any{"stabilizationWindowSeconds": cool},
				"scaleUp":   map[string]any{"stabilizationWindowSeconds": 0},
			},
		},
	}
}
