package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/httpserve"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/web"
)

func newServeCmd(env Env) *cobra.Command {
	var listen string
	var offline bool
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
read-only role (README, headroom audit); one audit answers for 10 seconds.`,
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
			opt := web.Options{Env: reportEnv(env), Offline: offline || getenv(env, "HF_HUB_OFFLINE") == "1", Log: log,
				Simulate: Simulator(env)}
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
	return httpserve.Serve(ctx, srv, ln)
}

// Simulator runs the page's simulations through this CLI's own `simulate`
// command, in process, so the panel shows exactly `headroom simulate -o
// json` for the same input. The command sees only flags built here from
// the decoded request: vLLM's flags by name, never the ones that read or
// write files (--requests, --calibration, --trace, --plot), and models are
// never looked up on the server's disk.
func Simulator(env Env) web.Simulator {
	return func(ctx context.Context, req web.SimulateRequest) ([]byte, error) {
		args, err := simulateArgs(req)
		if err != nil {
			return nil, err
		}
		var out, errb bytes.Buffer
		code := Main(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: env.Getenv, HTTPClient: env.HTTPClient, ModelFS: report.NoFS})
		if code == ExitBadInput {
			return nil, errors.New(strings.TrimPrefix(strings.TrimSpace(errb.String()), "headroom: "))
		}
		return out.Bytes(), nil
	}
}

// simulateArgs is the command line of a simulation request.
func simulateArgs(req web.SimulateRequest) ([]string, error) {
	p := req.Plan
	if len(p.Config) > 0 {
		return nil, errors.New("simulating an uploaded config.json is not supported: name a catalog or Hugging Face model")
	}
	args := []string{"simulate", "-o", "json"}
	add := func(name, v string) {
		if v != "" {
			args = append(args, "--"+name, v)
		}
	}
	add("model", p.Model)
	add("gpu", p.GPU)
	add("gpu-memory", p.GPUMemory)
	add("vllm-version", p.Version)
	if p.GPUCount > 0 {
		add("gpu-count", strconv.Itoa(p.GPUCount))
	}
	if p.Offline {
		args = append(args, "--offline")
	}
	allowed := map[string]bool{"--enforce-eager": true}
	for _, v := range vllmStringFlags {
		allowed["--"+v.name] = true
	}
	for i := 0; i < len(p.Flags); i++ {
		name, _, hasValue := strings.Cut(p.Flags[i], "=")
		if !allowed[name] {
			return nil, fmt.Errorf("flag %s: the simulation takes vLLM's memory and scheduler flags only", name)
		}
		args = append(args, p.Flags[i])
		if !hasValue && i+1 < len(p.Flags) {
			i++
			args = append(args, p.Flags[i])
		}
	}
	if req.Rate > 0 {
		add("rate", strconv.FormatFloat(req.Rate, 'g', -1, 64))
	}
	add("duration", strconv.FormatFloat(req.DurationS, 'g', -1, 64)+"s")
	// About 60 points for the panel's chart, a second at the finest.
	add("window", strconv.Itoa(max(1, int(math.Ceil(req.DurationS/60))))+"s")
	add("prompt-tokens", "fixed:"+strconv.Itoa(req.PromptTokens))
	add("output-tokens", "fixed:"+strconv.Itoa(req.OutputTokens))
	for _, b := range req.Bursts {
		add("burst", b)
	}
	if len(p.Command) > 0 {
		args = append(append(args, "--"), p.Command...)
	}
	return args, nil
}
