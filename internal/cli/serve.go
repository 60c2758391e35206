package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/web"
)

func newServeCmd(env Env) *cobra.Command {
	var listen string
	var offline bool
	var simTime time.Duration
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:8080] [--cluster]",
		Short: "Serve the planner, doctor and simulation as a web page",
		Example: `  headroom serve
  headroom serve --listen :8080 --offline
  headroom serve --cluster --kubeconfig ~/.kube/prod   # and /cluster.html`,
		Long: `Serves a web page and a JSON API (/api/plan, /api/gpus, /api/models,
/api/doctor, /api/simulate) that answer with the same JSON as the CLI's -o json.
The page's files are embedded: it works without the internet. Models are looked
up in the catalog and, unless --offline, on the Hugging Face Hub; never on the
server's disk (upload a config.json instead).

With --cluster it also serves cluster.html and /api/audit: every vLLM workload of
the cluster as ` + "`headroom audit --live -o json`" + ` ranks it (the same JSON), each with
its plan's card, its pods' live KV-cache use and the fix. It needs the audit's
read-only role (README, headroom audit); one audit answers for 10 seconds.

It keeps a memory budget of 256 MiB (set GOMEMLIMIT=200MiB beside it, as the
chart does): at most 2 simulations and 2 plans or doctor reports run at once,
4 times as many wait, and past that a request gets 429 (503 when its wait
runs out), before its body is read. A simulation holds at most 1,000,000 KV
blocks and 200,000 requests and stops at --max-simulation-time (422). See
docs/servers.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cluster.check(); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(env.Stderr, nil))
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return badInput("--listen %s: %v", listen, err)
			}
			if simTime <= 0 || simTime > web.DefaultSimulationTime {
				return badInput("--max-simulation-time %s: give a duration above 0 and at most %s (the server's write timeout is 60 s)", simTime, web.DefaultSimulationTime)
			}
			opt := web.Options{Env: reportEnv(env), Offline: offline || getenv(env, "HF_HUB_OFFLINE") == "1", Log: log, SimulationTime: simTime}
			if cluster.enabled {
				if opt.Audit, err = clusterAuditor(env, cluster); err != nil {
					ln.Close()
					return err
				}
				log.Info("cluster page", "url", fmt.Sprintf("http://%s/cluster.html", ln.Addr()))
			}
			return serveWeb(cmd.Context(), web.NewServer(listen, web.Handler(opt)), ln, log)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on (host:port); the default is reachable from this machine only")
	cmd.Flags().DurationVar(&simTime, "max-simulation-time", web.DefaultSimulationTime, "stop a simulation of /api/simulate after this long (422); a queued request waits at most as long, and at most 20s")
	cmd.Flags().BoolVar(&offline, "offline", false, "never fetch models from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
	addClusterFlags(cmd, &cluster)
	return cmd
}

// serveWeb runs srv on ln until ctx ends (main cancels it on SIGINT and
// SIGTERM).
func serveWeb(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log.Info("serving", "url", fmt.Sprintf("http://%s/", ln.Addr()))
	return graceful.Serve(ctx, srv, ln)
}
