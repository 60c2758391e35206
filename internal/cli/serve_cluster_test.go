package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestServeClusterBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--kubeconfig", "/tmp/kc"}, "are for --cluster"},
		{[]string{"serve", "-n", "llm"}, "are for --cluster"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--cluster", "--kubeconfig", "/nonexistent/kubeconfig"}, "API server configuration"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tc.args, Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
		if code != ExitBadInput || !strings.Contains(errb.String(), tc.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
	}
}
