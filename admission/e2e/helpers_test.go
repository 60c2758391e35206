package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"

	"headroom.dev/headroom/admission"
)

// localWebhook skips the test without a kube-apiserver and etcd, listens on
// loopback for the webhook, and returns the listener with the deployed
// webhook configurations pointed at it.
func localWebhook(t *testing.T) (net.Listener, string, []*admissionregv1.MutatingWebhookConfiguration, []*admissionregv1.ValidatingWebhookConfiguration) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs a kube-apiserver and etcd: run KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh) go test ./admission/e2e/")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("https://127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
	mut, val := webhookConfigs(t, base)
	return ln, base, mut, val
}

// serveWebhook serves the webhook with deps on ln, with the certificate
// pair tls.crt and tls.key of certDir, until the test ends. The context it
// returns ends then too.
func serveWebhook(t *testing.T, ln net.Listener, certDir string, deps admission.Deps) context.Context {
	t.Helper()
	srv, err := admission.NewServer(admission.ServerConfig{
		CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key"),
		Handler: admission.NewHandler(deps), Metrics: deps.Metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return ctx
}
