package cli

import (
	"strings"
	"testing"
)

// `headroom --version` (cobra's convention) and `headroom version` print
// the same line.
func TestVersionFlagAndCommand(t *testing.T) {
	code, cmdOut, errs := run(t, nil, "version")
	if code != 0 || errs != "" {
		t.Fatalf("version: exit %d, stderr %q", code, errs)
	}
	code, flagOut, errs := run(t, nil, "--version")
	if code != 0 || errs != "" {
		t.Fatalf("--version: exit %d, stderr %q", code, errs)
	}
	if flagOut != cmdOut || !strings.HasPrefix(cmdOut, "headroom ") || strings.Count(cmdOut, "\n") != 1 {
		t.Errorf("version printed %q, --version %q; want the same one line", cmdOut, flagOut)
	}
}
