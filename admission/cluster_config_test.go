package admission

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRESTConfig: --kubeconfig, else the pod's service account, else
// $KUBECONFIG; with none of them no cluster (nil, no error), and
// ~/.kube/config is not read unasked.
func TestRESTConfig(t *testing.T) {
	const doc = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://k8s.example:6443\"}\n" +
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	home := t.TempDir()
	path := filepath.Join(home, ".kube", "config")
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		name       string
		kubeconfig string
		vars       map[string]string
	}{
		{"flag", path, nil},
		{"KUBECONFIG", "", map[string]string{"KUBECONFIG": path}},
	} {
		cfg, err := RESTConfig(c.kubeconfig, env(c.vars))
		if err != nil || cfg == nil || cfg.Host != "https://k8s.example:6443" || cfg.Timeout != 10*time.Second || cfg.UserAgent != "headroom-webhook" {
			t.Errorf("%s: %+v, %v", c.name, cfg, err)
		}
	}
	if cfg, err := RESTConfig("", env(map[string]string{"HOME": home})); cfg != nil || err != nil {
		t.Errorf("nothing given: %+v, %v", cfg, err)
	}
	// In a pod the kubelet sets both variables and mounts the token; with
	// the host alone there is no service account to read.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := RESTConfig("", env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": path})); err == nil ||
		!strings.HasPrefix(err.Error(), "API server configuration: ") {
		t.Errorf("in a pod without a service account: %v", err)
	}
	if _, err := RESTConfig(filepath.Join(home, "none"), env(nil)); err == nil || !strings.HasPrefix(err.Error(), "API server configuration: ") {
		t.Errorf("missing kubeconfig: %v", err)
	}
}
