package admission

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certReloader serves a TLS certificate that follows its files: each
// handshake compares the files' modification times and sizes with the
// loaded pair's and reloads on a change. A Secret volume updates by
// swapping a symlink, cert-manager rewrites the files in place; os.Stat
// follows both. A pair that does not load (the two files caught between
// writes) keeps the previous certificate in service and is retried on the
// next handshake.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
}

// fileStamp identifies one version of a file.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// newCertReloader loads the pair once; a pair that does not load at start
// is an error.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads the pair if its files changed since the last load.
func (r *certReloader) reload() error {
	cs, err := stamp(r.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %v", err)
	}
	ks, err := stamp(r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS private key: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && cs == r.certStat && ks == r.keyStat {
		return nil
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key pair %s, %s: %v", r.certFile, r.keyFile, err)
	}
	first := r.cert == nil
	r.cert, r.certStat, r.keyStat = &c, cs, ks
	if !first {
		r.log.Info("reloaded TLS certificate", "cert", r.certFile, "key", r.keyFile)
	}
	return nil
}

// getCertificate implements tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if err := r.reload(); err != nil {
		r.log.Warn("keeping the loaded TLS certificate", "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}
