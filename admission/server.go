package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Server timeouts. The API server gives a webhook call at most 30 s
// (timeoutSeconds ≤ 30), and the configurations in deploy/ give it 10 s.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 90 * time.Second
	shutdownTimeout   = 10 * time.Second
	maxHeaderBytes    = 64 << 10
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the address to listen on, e.g. ":8443".
	Addr string
	// CertFile and KeyFile hold the PEM serving certificate and key; they
	// are reloaded when they change.
	CertFile, KeyFile string
	Handler           Reviewer
	// Metrics are served on /metrics; nil serves none.
	Metrics *Metrics
	// Log receives the server's own messages; nil discards.
	Log *slog.Logger
	// EnableHTTP2 offers HTTP/2 next to HTTP/1.1. Off by default: HTTP/2
	// servers were open to stream-reset and CONTINUATION floods
	// (CVE-2023-44487, and CVE-2023-45288 in Go's own HTTP/2), which is
	// why Kubernetes webhook and operator scaffolding (kubebuilder) turns
	// it off unless asked, and the API server reuses pooled HTTP/1.1
	// connections to a webhook just as well. Over HTTP/1.1 a review is served on its
	// connection's goroutine, whose stack has grown already, where HTTP/2
	// starts a goroutine per request and grows its stack again: in the load
	// benchmark a review cost 0.62-0.73 ms of server CPU over HTTP/1.1
	// against 0.91-0.97 ms over HTTP/2.
	EnableHTTP2 bool
}

// Reviewer serves the two admission endpoints. The webhook's is *Handler;
// the load benchmark serves a no-op one behind the same server, to measure
// what the server costs around the reviews.
type Reviewer interface {
	ValidateHandler() http.Handler
	MutateHandler() http.Handler
}

// Server is the webhook's HTTPS server: POST /validate and /mutate, GET
// /healthz (the process serves), /readyz (it takes reviews: false while
// shutting down) and /metrics. TLS is required: the API server calls
// webhooks over HTTPS only.
type Server struct {
	http  *http.Server
	certs *certReloader
	log   *slog.Logger
	ready atomic.Bool
}

// NewServer loads the certificate and builds the server; it does not
// listen yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("admission server needs a Handler")
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("TLS is required: give --tls-cert-file and --tls-private-key-file")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	certs, err := newCertReloader(cfg.CertFile, cfg.KeyFile, log)
	if err != nil {
		return nil, err
	}
	s := &Server{certs: certs, log: log}
	mux := http.NewServeMux()
	mux.Handle("/validate", cfg.Handler.ValidateHandler())
	mux.Handle("/mutate", cfg.Handler.MutateHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics.Handler())
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(cfg.EnableHTTP2)
	s.http = &http.Server{
		Addr:              cfg.Addr,
		Protocols:         &protocols,
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelInfo),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.getCertificate,
		},
	}
	return s, nil
}

// ListenAndServe listens on the configured address and serves until ctx is
// done, then shuts down gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.http.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %v", s.http.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves TLS on ln until ctx is done, then stops taking new
// connections, lets running reviews finish (up to 10 s) and returns nil.
// It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	s.ready.Store(true)
	s.log.Info("serving admission webhook", "addr", ln.Addr().String())
	go func() { errc <- s.http.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		s.ready.Store(false)
		return err
	case <-ctx.Done():
	}
	s.ready.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(sctx)
	<-errc // ErrServerClosed
	s.log.Info("admission webhook stopped")
	return err
}
