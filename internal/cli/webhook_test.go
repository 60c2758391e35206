package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"headroom.dev/headroom/admission"
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

// TestWebhookServesOutsideCluster: the README's command, with no cluster,
// no --kubeconfig and no $KUBECONFIG, serves on loopback TLS, says in one
// log line that it reads nothing from an API server, plans what needs no
// lookup and warns where a lookup was needed.
func TestWebhookServesOutsideCluster(t *testing.T) {
	dir := t.TempDir()
	cert, err := admission.WriteSelfSignedCert(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	logr, logw := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		args := []string{"webhook", "--listen", "127.0.0.1:0", "--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-private-key-file", filepath.Join(dir, "tls.key")}
		exit <- Main(ctx, args, Env{Stdout: io.Discard, Stderr: logw, Getenv: func(string) string { return "" }})
		logw.Close()
	}()
	defer func() {
		stop()
		select {
		case code := <-exit:
			if code != 0 {
				t.Errorf("exit %d after stop, want 0", code)
			}
		case <-time.After(15 * time.Second):
			t.Error("the webhook did not stop")
		}
	}()

	// Read the log up to the line with the address it serves on.
	type entry struct {
		Level, Msg, Addr string
	}
	lines := make(chan entry)
	go func() {
		sc := bufio.NewScanner(logr)
		for sc.Scan() {
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("log line %q is not JSON: %v", sc.Text(), err)
			}
			lines <- e
		}
		close(lines)
	}()
	var addr string
	var noCluster []string
	for addr == "" {
		select {
		case e, ok := <-lines:
			if !ok {
				t.Fatal("the webhook exited before serving")
			}
			if strings.Contains(e.Msg, "API server") {
				noCluster = append(noCluster, e.Level+" "+e.Msg)
			}
			if e.Msg == "serving admission webhook" {
				addr = e.Addr
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no \"serving admission webhook\" log line in 15 s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	if len(noCluster) != 1 || !strings.HasPrefix(noCluster[0], "WARN serving without the API server") || !strings.Contains(noCluster[0], "--kubeconfig") {
		t.Errorf("log lines about the API server: %q; want one warning that it serves without one", noCluster)
	}

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	review := func(fixture string) (allowed bool, message string, warnings []string) {
		t.Helper()
		body, err := os.ReadFile(filepath.Join("..", "..", "admission", "testdata", "reviews", fixture+".json"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post("https://"+addr+"/validate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Response struct {
				Allowed  bool
				Status   struct{ Message string }
				Warnings []string
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d, %v", fixture, resp.StatusCode, err)
		}
		return out.Response.Allowed, out.Response.Status.Message, out.Response.Warnings
	}
	// Llama 3.1 8B on an L4 with its full 131072-token context: 131072
	// tokens × 128 KiB (32 layers × 8 KV heads × 128 × K and V × 2 bytes)
	// = 16 GiB of KV cache for one request, more than the card has left
	// after 14.96 GiB of weights. The catalog and the planner need no
	// cluster.
	if allowed, msg, _ := review("deployment-kv"); allowed || !strings.Contains(msg, "16.00 GiB") {
		t.Errorf("deployment-kv: allowed %v, message %q; want denied with 16.00 GiB", allowed, msg)
	}
	// The model's config is in a ConfigMap, which needs the API server:
	// allowed (fail-open) with a warning saying why it was not checked.
	allowed, _, warnings := review("deployment-model-config")
	if !allowed || len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "memory not checked: ConfigMap llm/acme-moe-config (annotation headroom.dev/model-config): the webhook runs without access to the API server") {
		t.Errorf("deployment-model-config: allowed %v, warnings %q; want allowed with a warning that the ConfigMap could not be read", allowed, warnings)
	}
}
