// Package graceful runs an http.Server until its context ends and then
// stops it gracefully: the one shutdown sequence headroom's plain-HTTP
// servers (the exporter, the web page) share. It imports nothing of
// headroom and sits on the ground floor, so telemetry (the exporter) and
// the faces (the page) both import it downwards.
package graceful

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace is how long requests in flight get to finish once the
// context ends.
const ShutdownGrace = 5 * time.Second

// Serve serves srv on ln until ctx ends, then shuts down: requests in
// flight get ShutdownGrace to finish. A clean shutdown returns nil.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(stop)
	if serveErr := <-done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
