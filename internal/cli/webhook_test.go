package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhookBadInput: every refused start is exit code 2 with one line
// that says what to give.
func TestWebhookBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"webhook"}, "TLS is required"},
		{[]string{"webhook", "--tls-cert-file", junk}, "TLS is required"},
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--no-cluster", "--log-format", "xml"}, `unknown --log-format "xml"`},
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--no-cluster", "--log-level", "loud"}, `unknown --log-level "loud"`},
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--no-cluster", "--lookup-timeout", "0s"}, "--lookup-timeout must be positive"},
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--no-cluster", "--kubeconfig", junk}, "either --kubeconfig or --no-cluster"},
		// Outside a cluster, with no kubeconfig anywhere.
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk}, "not running in a cluster and no --kubeconfig"},
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--kubeconfig", junk}, "API server configuration"},
		// The key pair is loaded before listening: a bad pair stops the start.
		{[]string{"webhook", "--tls-cert-file", junk, "--tls-private-key-file", junk, "--no-cluster", "--listen", "127.0.0.1:0"}, "TLS key pair"},
		{[]string{"webhook", "--no-cluster", "extra"}, "unknown command"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), tc.args, Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }})
		msg := stderr.String()
		if code != ExitBadInput || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, msg, tc.want)
		}
	}
}
