package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/progress"
)

type auditFlags struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	selector      string
	live          bool
	learn         bool
	output        string
	timeout       time.Duration
}

func newAuditCmd(env Env) *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Plan every vLLM workload of a cluster and rank the ones at risk",
		Long: `audit finds every Deployment, StatefulSet, Pod, KAITO Workspace, LeaderWorkerSet and
KServe InferenceService that runs vLLM,
resolves its GPUs (limits, node selectors and affinity, its nodes' GPU feature discovery
labels, MIG resources), plans each with the admission webhook's checks, and ranks them:
will not start, thin margin, more max-num-seqs than the KV cache holds, CPU-only HPAs,
probes that restart a loading server, shared GPUs. --live adds each pod's /metrics
(through the API server's pod proxy), restarts and OOM kills.

Exit code 1 when a workload will not start or is at risk; 2 on bad input.`,
		Example: `  headroom audit -A
  headroom audit -n llm -l team=search --live -o markdown
  headroom audit --kubeconfig ~/.kube/prod -A -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAudit(cmd, env, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, then ~/.kube/config, then the in-cluster service account)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context to use")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "namespace to audit (default: the context's)")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "audit every namespace")
	fl.StringVarP(&f.selector, "selector", "l", "", "label selector, e.g. app=llm,tier!=dev")
	fl.BoolVar(&f.live, "live", false, "read each running pod's /metrics through the API server, with restarts and OOM kills")
	fl.BoolVar(&f.learn, "learn", false, "with --live: write each compared pod's KV cache as a calibration record (model, GPU, release) that later plans use; a simulated server is never learned")
	fl.StringVarP(&f.output, "output", "o", "table", "table, json, yaml or markdown")
	fl.DurationVar(&f.timeout, "timeout", defaultAuditTimeout, "timeout of each request to the API server")
	return cmd
}

// defaultAuditTimeout bounds each request of an audit to the API server.
const defaultAuditTimeout = 30 * time.Second

func runAudit(cmd *cobra.Command, env Env, f auditFlags) error {
	if err := checkFormat(f.output, "table", "json", "yaml", "markdown"); err != nil {
		return err
	}
	if f.learn && !f.live {
		return badInput("--learn records what --live reads: add --live")
	}
	cfg, ns, err := auditConfig(env, f)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return badInput("API client: %v", err)
	}
	opt := audit.Options{Namespace: ns, AllNamespaces: f.allNamespaces, Selector: f.selector, Live: f.live,
		Progress: auditProgress(env.Stderr), MetricsProgress: metricsProgress(env.Stderr), MetricsTimeout: metricsTimeout(f.timeout)}
	if f.live {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return badInput("API client: %v", err)
		}
		opt.Metrics = audit.ProxyMetrics{Host: cfg.Host, Client: hc}
	}
	r, err := audit.Run(cmd.Context(), client, opt)
	if err != nil {
		return badInput("%v", err)
	}
	if err := writeAs(env.Stdout, f.output, r, formats[audit.Report]{"markdown": writeAuditMarkdown, "": writeAuditTable}); err != nil {
		return err
	}
	if f.learn {
		if err := learn(env, r); err != nil {
			return err
		}
	}
	if r.AtRisk() {
		return errNoFit
	}
	return nil
}

// auditConfig is the audit's API server and namespace (audit.Config).
// client-go's own log (klog, to stderr) is silenced: what it would say of
// a failed read ("Unexpected error when reading response body") the
// audit says once, as a finding.
func auditConfig(env Env, f auditFlags) (*rest.Config, string, error) {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	cfg, ns, err := audit.Config(audit.Connection{Kubeconfig: f.kubeconfig, Context: f.context, Namespace: f.namespace,
		AllNamespaces: f.allNamespaces, Timeout: f.timeout, Getenv: env.Getenv})
	if err != nil {
		return nil, "", usageError{err}
	}
	return cfg, ns, nil
}

// auditProgress shows the count of workloads evaluated: a live line on a
// terminal, a plain line every 100 otherwise.
func auditProgress(w io.Writer) func(done, total int) {
	line := progress.New(w)
	return func(done, total int) {
		switch {
		case line.Live() && done == total:
			line.Print(fmt.Sprintf("audited %d workloads", total))
		case line.Live():
			line.Set(fmt.Sprintf("auditing %d/%d", done, total))
		case done%100 == 0 || done == total:
			line.Print(fmt.Sprintf("audited %d/%d", done, total))
		}
	}
}

// metricsTimeout bounds one pod's /metrics read: the API server's
// timeout, at most audit.DefaultMetricsTimeout.
func metricsTimeout(apiTimeout time.Duration) time.Duration {
	if apiTimeout > 0 && apiTimeout < audit.DefaultMetricsTimeout {
		return apiTimeout
	}
	return audit.DefaultMetricsTimeout
}

// metricsProgress shows the pods whose /metrics were read (--live), as
// auditProgress does the workloads: a live line on a terminal, else a
// line when the reads start, every 50 and at the end, so that pods that
// hang show on stderr while they are waited on.
func metricsProgress(w io.Writer) func(done, total int) {
	line := progress.New(w)
	started := false
	return func(done, total int) {
		if !started && !line.Live() {
			line.Print(fmt.Sprintf("reading /metrics of %d pods, %d at a time", total, audit.LiveReads))
		}
		started = true
		switch {
		case line.Live() && done == total:
			line.Print(fmt.Sprintf("read /metrics of %d pods", total))
		case line.Live():
			line.Set(fmt.Sprintf("reading /metrics: %d/%d pods", done, total))
		case done%50 == 0 || done == total:
			line.Print(fmt.Sprintf("read /metrics of %d/%d pods", done, total))
		}
	}
}

// statusText is how the table shows a status.
var statusText = map[string]string{
	audit.LevelWillNotStart: "WILL NOT START",
	audit.LevelRisk:         "AT RISK",
	audit.LevelNotChecked:   "not checked",
	audit.StatusOK:          "ok",
}

func engineText(w audit.Workload) string {
	var parts []string
	for _, e := range w.Engines {
		parts = append(parts, fmt.Sprintf("%s on %s", e.Model, report.GPUCount(e.GPUCount, e.GPU)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

func writeAuditTable(w io.Writer, r audit.Report) error {
	s := r.Summary
	fmt.Fprintf(w, "%s: %d vLLM workloads: %d will not start, %d at risk, %d not checked, %d ok\n\n", r.Scope, s.Workloads, s.WillNotStart, s.AtRisk, s.NotChecked, s.OK)
	for _, f := range r.Cluster {
		fmt.Fprintf(w, "%s: %s\n", f.Level, f.Message)
	}
	if len(r.Workloads) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tNAMESPACE\tKIND/NAME\tSERVES\tFINDINGS")
	for _, wl := range r.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", statusText[wl.Status], wl.Namespace, wl.Kind, wl.Name, engineText(wl), strings.Join(riskCodes(wl, "%s"), ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, wl := range r.Workloads {
		shown := detail(wl)
		if len(shown) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s/%s/%s\n", statusText[wl.Status], wl.Namespace, wl.Kind, wl.Name)
		for _, f := range shown {
			fmt.Fprintf(w, "  - [%s] %s\n", f.Code, f.Message)
		}
	}
	if len(r.KVVsPlan) > 0 {
		fmt.Fprintln(w, "\nKV cache against the plan, smallest share first:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARE\tNAMESPACE\tPOD\tMODEL\tGPU\tVLLM\tBLOCKS (GOT/PLANNED)")
		for _, k := range r.KVVsPlan {
			note := ""
			if k.Simulated {
				note = " (simulated)"
			}
			fmt.Fprintf(tw, "%.0f%%\t%s\t%s%s\t%s\t%s\t%s\t%d/%d\n", 100*k.Gap.Share, k.Namespace, k.Pod, note, k.Model, k.GPU, k.Version, k.Gap.ActualBlocks, k.Gap.PredictedBlocks)
		}
		return tw.Flush()
	}
	return nil
}

// learn appends a calibration record for each compared pod that is not a
// simulated stand-in, and names the file and each record on stderr (so
// stdout stays the report).
func learn(env Env, r audit.Report) error {
	path, err := probe.CalibrationPath(env.Getenv)
	if err != nil {
		return usageError{err}
	}
	n := 0
	for _, k := range r.KVVsPlan {
		if !k.Learnable {
			fmt.Fprintf(env.Stderr, "not learned: pod %s/%s is a simulated stand-in; its numbers are no measurement\n", k.Namespace, k.Pod)
			continue
		}
		if err := probe.AppendRecord(path, k.Record); err != nil {
			return fmt.Errorf("writing the calibration record: %v", err)
		}
		n++
		fmt.Fprintf(env.Stderr, "learned: %s: %s on %s, vLLM %s: %d KV blocks (%d tokens) from pod %s/%s\n", path, k.Model, k.GPU, k.Version, k.Gap.ActualBlocks, k.Gap.ActualTokens, k.Namespace, k.Pod)
	}
	if n == 0 {
		fmt.Fprintf(env.Stderr, "learned nothing: no live pod's KV cache was compared with a plan (%s unchanged)\n", path)
	}
	return nil
}

func writeAuditMarkdown(w io.Writer, r audit.Report) error {
	s := r.Summary
	fmt.Fprintf(w, "## headroom audit (%s)\n\n%d vLLM workloads: **%d will not start**, **%d at risk**, %d not checked, %d ok.\n\n", r.Scope, s.Workloads, s.WillNotStart, s.AtRisk, s.NotChecked, s.OK)
	for _, f := range r.Cluster {
		fmt.Fprintf(w, "- %s: %s\n", f.Level, f.Message)
	}
	if len(r.Workloads) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\n| status | namespace | workload | serves | findings |\n|---|---|---|---|---|")
	for _, wl := range r.Workloads {
		fmt.Fprintf(w, "| %s | %s | %s/%s | %s | %s |\n", statusText[wl.Status], wl.Namespace, wl.Kind, wl.Name, mdCell(engineText(wl)), strings.Join(riskCodes(wl, "`%s`"), " "))
	}
	for _, wl := range r.Workloads {
		shown := detail(wl)
		if len(shown) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n### %s/%s/%s: %s\n\n", wl.Namespace, wl.Kind, wl.Name, statusText[wl.Status])
		for _, f := range shown {
			fmt.Fprintf(w, "- `%s` %s\n", f.Code, mdCell(f.Message))
		}
	}
	if len(r.KVVsPlan) > 0 {
		fmt.Fprintln(w, "\n### KV cache against the plan, smallest share first\n\n| share | namespace | pod | model | GPU | vLLM | blocks (got/planned) |\n|---|---|---|---|---|---|---|")
		for _, k := range r.KVVsPlan {
			pod := k.Pod
			if k.Simulated {
				pod += " (simulated)"
			}
			fmt.Fprintf(w, "| %.0f%% | %s | %s | %s | %s | %s | %d/%d |\n", 100*k.Gap.Share, k.Namespace, mdCell(pod), mdCell(k.Model), k.GPU, k.Version, k.Gap.ActualBlocks, k.Gap.PredictedBlocks)
		}
	}
	return nil
}

// detail is what the table and markdown list under a workload: every
// finding of one that is not ok; of one that is, what was not read of its
// pods (an "ok" with a pod unread is not a clean bill).
func detail(wl audit.Workload) []audit.Finding {
	if wl.Status != audit.StatusOK {
		return wl.Findings
	}
	var out []audit.Finding
	for _, f := range wl.Findings {
		if f.Unread() {
			out = append(out, f)
		}
	}
	return out
}

// riskCodes are the codes of a workload's findings above info, and of
// what was not read, each formatted with format.
func riskCodes(wl audit.Workload, format string) []string {
	var codes []string
	for _, f := range wl.Findings {
		if f.Level != audit.LevelInfo || f.Unread() {
			codes = append(codes, fmt.Sprintf(format, f.Code))
		}
	}
	return codes
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
