package kube

import (
	"strings"
	"testing"
)

// Names and namespaces are taken as the API server takes them; what it
// refuses is refused in one line.
func TestValidNames(t *testing.T) {
	for _, ok := range []string{"vllm", "llama-8b", "a.b-c", strings.Repeat("a", 253)} {
		if err := ValidName("--target", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "vllm\n", "Vllm", "../../etc/passwd", "a_b", "-a", strings.Repeat("a", 254), "kube-system; rm -rf /"} {
		err := ValidName("--target", bad)
		if err == nil {
			t.Errorf("%q: taken", bad)
			continue
		}
		if strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
			t.Errorf("%q: not one short line: %q", bad, err)
		}
	}
	for _, ok := range []string{"default", "llm", "kube-system", strings.Repeat("a", 63)} {
		if err := ValidNamespace("--namespace", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "UPPER_case", "kube-system; rm -rf /", "a.b", strings.Repeat("a", 64), "ns\n"} {
		if err := ValidNamespace("--namespace", bad); err == nil {
			t.Errorf("%q: taken", bad)
		}
	}
}
