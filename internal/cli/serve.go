package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/web"
)

func newServeCmd(env Env) *cobra.Command {
	var listen string
	var offline bool
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:8080]",
		Short: "Serve the planner, doctor and simulation as a web page",
		Example: `  headroom serve
  headroom serve --listen :8080 --offline`,
		Long: `Serves a web page and a JSON API (/api/plan, /api/gpus, /api/models,
/api/doctor, /api/simulate) that answer with the same JSON as the CLI's -o json.
The page's files are embedded: it works without the internet. Models are looked
up in the catalog and, unless --offline, on the Hugging Face Hub; never on the
server's disk (upload a config.json instead).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(env.Stderr, nil))
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return badInput("--listen %s: %v", listen, err)
			}
			h := web.Handler(web.Options{Env: reportEnv(env), Offline: offline || getenv(env, "HF_HUB_OFFLINE") == "1", Log: log})
			return serveWeb(cmd.Context(), web.NewServer(listen, h), ln, log)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on (host:port); the default is reachable from this machine only")
	cmd.Flags().BoolVar(&offline, "offline", false, "never fetch models from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
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
