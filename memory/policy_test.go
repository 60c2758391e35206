package memory_test

import (
	"testing"

	"headroom.dev/headroom/memory"
)

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]string{"": memory.PolicyHeadroom, "headroom": memory.PolicyHeadroom, "kaito": memory.PolicyKAITO} {
		if got, err := memory.ParsePolicy(in); got != want || err != nil {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"KAITO", "aggressive", " headroom"} {
		if got, err := memory.ParsePolicy(in); err == nil || got != "" {
			t.Errorf("ParsePolicy(%q) = %q, %v; want an error", in, got, err)
		}
	}
	if _, err := memory.ParsePolicy("max"); err == nil || err.Error() != `unknown policy "max": use headroom or kaito` {
		t.Errorf("message: %v", err)
	}
}
