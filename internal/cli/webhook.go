package cli

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"headroom.dev/headroom/admission"
)

type webhookFlags struct {
	listen, certFile, keyFile string
	kubeconfig                string
	noCluster                 bool
	enableHTTP2               bool
	lookupTimeout             time.Duration
	logFormat, logLevel       string
	podChecks                 string
}

func newWebhookCmd(env Env) *cobra.Command {
	var f webhookFlags
	cmd := &cobra.Command{
		Use:   "webhook --tls-cert-file FILE --tls-private-key-file FILE",
		Short: "Serve the Kubernetes admission webhook that stops OOM-bound vLLM deployments",
		Long: `Serves admission.k8s.io/v1 AdmissionReviews over HTTPS for Deployments,
StatefulSets, Pods, KAITO Workspaces, LeaderWorkerSets and KServe InferenceServices
that run vLLM:

  POST /validate  denies a server that will not start (weights do not fit, the KV
                  cache cannot hold one --max-model-len request, TP does not divide
                  the heads, a memory limit below the host plan, no /dev/shm where
                  vLLM writes there) with the planner's numbers; warns on thin
                  margins, short probes, shared GPUs, CPU-only autoscaling and
                  Hugging Face tokens in plain env values (--pod-checks)
  POST /mutate    adds PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True where safe,
                  and with headroom.dev/autofix: "true" fills a missing
                  --max-model-len / --gpu-memory-utilization and writes headroom.dev/plan
  GET /healthz, /readyz, /metrics

The certificate files are reloaded when they change. ConfigMaps (model configs,
KAITO inference configs), HorizontalPodAutoscalers and HPA targets are read from
the API server: in-cluster by default, or with --kubeconfig or $KUBECONFIG.
With none of them (a laptop), or with --no-cluster, it serves without them and
says so in one log line; checks that need them warn. deploy/ holds the manifests.

Unless the GOGC environment variable is set, the server runs with GOGC=400: its
live heap is a few MiB while every review allocates tens of KiB, so Go's default
of 100 would collect about ten times a second at 500 reviews/s, in the latency of
the reviews in flight. GOGC and GOMEMLIMIT set in the environment are honoured.`,
		Example: `  headroom webhook --tls-cert-file /certs/tls.crt --tls-private-key-file /certs/tls.key
  headroom webhook --listen 127.0.0.1:9443 --tls-cert-file c.pem --tls-private-key-file k.pem --kubeconfig ~/.kube/config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWebhook(cmd, env, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":8443", "address to serve HTTPS on")
	fl.StringVar(&f.certFile, "tls-cert-file", "", "PEM serving certificate (chain); reloaded on change")
	fl.StringVar(&f.keyFile, "tls-private-key-file", "", "PEM private key of the certificate; reloaded on change")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server (default: the in-cluster service account, then $KUBECONFIG)")
	fl.BoolVar(&f.enableHTTP2, "enable-http2", false, "offer HTTP/2 as well as HTTP/1.1 (off: HTTP/2 stream-reset floods, CVE-2023-44487; HTTP/1.1 also costs less CPU per review)")
	fl.BoolVar(&f.noCluster, "no-cluster", false, "run without the API server even where one is found: ConfigMaps and HPAs are not read (checks that need them warn); the default outside a cluster with no kubeconfig")
	fl.DurationVar(&f.lookupTimeout, "lookup-timeout", 2*time.Second, "limit on each API read during one admission")
	fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	addPodChecksFlag(fl, &f.podChecks)
	return cmd
}

func runWebhook(cmd *cobra.Command, env Env, f webhookFlags) error {
	if f.certFile == "" || f.keyFile == "" {
		return badInput("TLS is required: give --tls-cert-file and --tls-private-key-file (the API server calls webhooks over HTTPS only)")
	}
	if f.lookupTimeout <= 0 {
		return badInput("--lookup-timeout must be positive")
	}
	if f.noCluster && f.kubeconfig != "" {
		return badInput("give either --kubeconfig or --no-cluster, not both")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return badInput("unknown --log-level %q: use debug, info, warn or error", f.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch f.logFormat {
	case "json":
		log = slog.New(slog.NewJSONHandler(env.Stderr, opts))
	case "text":
		log = slog.New(slog.NewTextHandler(env.Stderr, opts))
	default:
		return badInput("unknown --log-format %q: use json or text", f.logFormat)
	}

	policy, err := admission.ParsePodPolicy(f.podChecks)
	if err != nil {
		return badInput("--pod-checks: %v", err)
	}
	metrics := admission.NewMetrics()
	deps := admission.Deps{Log: log, Metrics: metrics, LookupTimeout: f.lookupTimeout, PodChecks: policy}
	var cfg *rest.Config
	if !f.noCluster {
		var err error
		if cfg, err = admission.RESTConfig(f.kubeconfig, func(k string) string { return getenv(env, k) }); err != nil {
			return usageError{err}
		}
	}
	if cfg != nil {
		c, err := admission.NewCluster(cfg)
		if err != nil {
			return fmt.Errorf("API client: %v", err)
		}
		deps.ConfigMaps, deps.HPAs, deps.PodTemplates = c, c, c
	}
	srv, err := admission.NewServer(admission.ServerConfig{
		Addr: f.listen, CertFile: f.certFile, KeyFile: f.keyFile,
		Handler: admission.NewHandler(deps), Metrics: metrics, Log: log, EnableHTTP2: f.enableHTTP2,
	})
	if err != nil {
		return usageError{err}
	}
	switch {
	case f.noCluster:
		log.Info("serving without the API server (--no-cluster): ConfigMaps and HPAs are not read, checks that need them warn")
	case cfg == nil:
		log.Warn("serving without the API server: not in a cluster, no --kubeconfig, no $KUBECONFIG; ConfigMaps and HPAs are not read, checks that need them warn (give --kubeconfig to read them)")
	default:
		log.Info("reading from the API server", "host", cfg.Host)
	}
	gogc := getenv(env, "GOGC")
	if admission.TuneGC(gogc) {
		gogc = strconv.Itoa(admission.ServerGCPercent)
	}
	log.Info("garbage collector target", "GOGC", gogc)
	// main cancels the context on SIGINT and SIGTERM (how Kubernetes stops a pod).
	return srv.ListenAndServe(cmd.Context())
}

func getenv(env Env, name string) string {
	if env.Getenv == nil {
		return ""
	}
	return env.Getenv(name)
}
