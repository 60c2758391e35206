package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"headroom.dev/headroom/audit"
	"headroom.dev/headroom/web"
)

// clusterFlags are serve's --cluster and the audit's connection flags.
type clusterFlags struct {
	enabled bool
	audit   auditFlags
}

func addClusterFlags(cmd *cobra.Command, f *clusterFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.enabled, "cluster", false, "also serve the cluster page (cluster.html) and /api/audit: every vLLM workload as `headroom audit --live` ranks it")
	fl.StringVar(&f.audit.kubeconfig, "kubeconfig", "", "with --cluster: kubeconfig file (default $KUBECONFIG, then ~/.kube/config, then the in-cluster service account)")
	fl.StringVar(&f.audit.context, "context", "", "with --cluster: kubeconfig context to use")
	fl.StringVarP(&f.audit.namespace, "namespace", "n", "", "with --cluster: audit this namespace only (default: every namespace)")
}

// check refuses the connection flags without --cluster: they would be
// silently ignored.
func (f clusterFlags) check() error {
	if !f.enabled && (f.audit.kubeconfig != "" || f.audit.context != "" || f.audit.namespace != "") {
		return badInput("--kubeconfig, --context and --namespace are for --cluster: add --cluster to serve the cluster page")
	}
	return nil
}

// clusterAuditor is what the cluster page shows: `headroom audit --live`
// over every namespace (or --namespace), with the audit's own
// configuration and client. It only reads (the audit's role).
func clusterAuditor(env Env, f clusterFlags) (web.Auditor, error) {
	af := f.audit
	af.allNamespaces = af.namespace == ""
	af.timeout = defaultAuditTimeout
	cfg, ns, err := auditConfig(env, af)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, badInput("API client: %v", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, badInput("API client: %v", err)
	}
	opt := audit.Options{Namespace: ns, AllNamespaces: af.allNamespaces, Live: true, Metrics: audit.ProxyMetrics{Host: cfg.Host, Client: hc},
		MetricsTimeout: metricsTimeout(af.timeout)}
	return func(ctx context.Context) (audit.Report, error) { return audit.Run(ctx, client, opt) }, nil
}
