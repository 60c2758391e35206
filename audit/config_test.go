package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfig writes a kubeconfig with two contexts: prod (namespace llm)
// and dev (no namespace), prod current.
func kubeconfig(t *testing.T, dir string) string {
	t.Helper()
	const doc = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
- name: dev
  cluster: {server: "https://dev.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: prod
  context: {cluster: prod, user: u, namespace: llm}
- name: dev
  context: {cluster: dev, user: u}
current-context: prod
`
	p := filepath.Join(dir, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfig: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; the
// context's namespace unless one is given, "default" for a context
// without one, none for every namespace; and the limits an audit of
// hundreds of workloads needs.
func TestConfig(t *testing.T) {
	home := t.TempDir()
	kubeconfig(t, filepath.Join(home, ".kube"))
	explicit := kubeconfig(t, t.TempDir())
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		name     string
		conn     Connection
		host, ns string
	}{
		{"home", Connection{Getenv: env(map[string]string{"HOME": home})}, "https://prod.example:6443", "llm"},
		{"KUBECONFIG", Connection{Getenv: env(map[string]string{"KUBECONFIG": explicit, "HOME": "/nonexistent"}), Context: "dev"}, "https://dev.example:6443", "default"},
		{"flag", Connection{Kubeconfig: explicit, Namespace: "team"}, "https://prod.example:6443", "team"},
		{"all namespaces", Connection{Kubeconfig: explicit, AllNamespaces: true}, "https://prod.example:6443", ""},
	} {
		c.conn.Timeout = 7 * time.Second
		cfg, ns, err := Config(c.conn)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if cfg.Host != c.host || ns != c.ns || cfg.Timeout != 7*time.Second || cfg.QPS != 50 || cfg.Burst != 100 || cfg.UserAgent != "headroom-audit" {
			t.Errorf("%s: host %s ns %q timeout %s QPS %v burst %d agent %s", c.name, cfg.Host, ns, cfg.Timeout, cfg.QPS, cfg.Burst, cfg.UserAgent)
		}
	}
	// Nothing to read, and not in a cluster: one line saying what to give.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, _, err := Config(Connection{Getenv: env(map[string]string{"HOME": t.TempDir()})})
	if err == nil || !strings.HasSuffix(err.Error(), "(give --kubeconfig, or run in a cluster)") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no configuration: %v", err)
	}
}
