package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/sim/serve"
)

// runSimulateServe serves the simulated engine of the plan until the
// command's context ends (Ctrl-C, SIGTERM).
func runSimulateServe(cmd *cobra.Command, env Env, f simulateFlags, args []string) error {
	for _, name := range []string{"requests", "rate", "concurrency", "bench", "burst", "num-requests", "duration", "compare", "trace", "plot", "slo"} {
		if cmd.Flags().Changed(name) {
			return badInput("--serve takes its traffic from HTTP clients: drop --%s", name)
		}
	}
	if f.timeScale <= 0 {
		return badInput("--time-scale must be positive")
	}
	if err := checkArgs(cmd, args); err != nil {
		return err
	}
	en, err := report.SimEngine(cmd.Context(), reportEnv(env), openFile(cmd), report.EngineRequest{
		Plan: request(cmd, f.plan, args), StepTime: f.stepTime, Calibration: f.calibration})
	if err != nil {
		return simError(env, err)
	}
	cfg := en.Config
	cfg.TokenEvents = true
	e, err := sim.New(cfg)
	if err != nil {
		return usageError{err}
	}
	name := f.servedModelName
	if name == "" {
		name = en.Evidence.Settings.Model
	}
	srv, err := serve.New(serve.Options{Engine: e, Model: name, TimeScale: f.timeScale, Version: en.Evidence.Settings.Version,
		StreamInterval: en.Budget.Settings.StreamInterval})
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return badInput("--listen %s: %v", f.listen, err)
	}
	fmt.Fprintf(env.Stderr, "headroom simulate: serving %s on http://%s (%s KV blocks of %d tokens, max-num-seqs %d, step time %s, time scale %g)\n",
		name, ln.Addr(), humanInt(int64(cfg.NumGPUBlocks)), cfg.BlockSize, cfg.MaxNumSeqs, en.StepTime, f.timeScale)
	for _, n := range en.Notes {
		if dp := en.Budget.Settings.DataParallelSize; dp > 1 && strings.HasPrefix(n, report.DataParallelNote) {
			n = fmt.Sprintf("%s %d: this serves one of the %d engines (its own scheduler and KV cache); run %d behind a balancer for the whole server", report.DataParallelNote, dp, dp, dp)
		}
		fmt.Fprintf(env.Stderr, "note: %s\n", n)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		_ = srv.Run(ctx)
		close(done)
	}()
	// No write timeout: a stream lasts as long as its generation. A body
	// must arrive within ReadTimeout, so a trickled one holds no slot.
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		err = hs.Shutdown(sctx)
	}
	cancel()
	<-done
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
