package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/sim/serve"
)

// runSimulateServe serves the simulated engine of the plan until the
// command's context ends (Ctrl-C, SIGTERM).
func runSimulateServe(cmd *cobra.Command, env Env, f simulateFlags, args []string) error {
	if f.requests != "" || f.rate > 0 || f.compare || f.trace != "" || f.plot != "" || f.slo != "" {
		return badInput("--serve takes its traffic from HTTP clients: drop --requests, --rate, --compare, --trace, --plot and --slo")
	}
	if f.timeScale <= 0 {
		return badInput("--time-scale must be positive")
	}
	setup, err := setupEngine(cmd, env, f.plan, f, f.calibration, args)
	if err != nil {
		return err
	}
	ev, sched, cal, d := setup.given.ev, setup.sched, setup.cal, setup.given
	if !d.budget.Fits && sched.blocksOverride == 0 {
		fmt.Fprintln(env.Stderr, "headroom: the plan does not fit, so there is no engine to serve; see `headroom plan` (or give --num-gpu-blocks-override)")
		return errNoFit
	}
	timer, stepDesc, err := stepTimer(f.stepTime, d.budget, cal)
	if err != nil {
		return err
	}
	cfg, err := engineConfig(d, sched, timer)
	if err != nil {
		return err
	}
	cfg.TokenEvents = true
	e, err := sim.New(cfg)
	if err != nil {
		return usageError{err}
	}
	name := f.servedModelName
	if name == "" {
		name = ev.Settings.Model
	}
	srv, err := serve.New(serve.Options{Engine: e, Model: name, TimeScale: f.timeScale, Version: ev.Settings.Version})
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return badInput("--listen %s: %v", f.listen, err)
	}
	fmt.Fprintf(env.Stderr, "headroom simulate: serving %s on http://%s (%s KV blocks of %d tokens, max-num-seqs %d, step time %s, time scale %g)\n",
		name, ln.Addr(), humanInt(int64(cfg.NumGPUBlocks)), cfg.BlockSize, cfg.MaxNumSeqs, stepDesc, f.timeScale)
	for _, n := range ev.Notes {
		fmt.Fprintf(env.Stderr, "note: %s\n", n)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		_ = srv.Run(ctx)
		close(done)
	}()
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
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
