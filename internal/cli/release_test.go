package cli

import (
	"strings"
	"testing"
)

// Release strings, wherever a command takes one: text that is no
// release is refused in one line with exit 2 (0.0.0 became the default
// and answered "0.33.0 -> 0.33.0: OK"; 5 and 1e308 answered OK), a
// release past the rules is planned with a note saying so, and a
// release candidate keeps its label on its side of an upgrade.
func TestReleaseStrings(t *testing.T) {
	base := []string{"plan", "--gpu", "H100-80GB", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--offline"}
	for _, tc := range []struct {
		flag, value, why string
	}{
		{"--upgrade-to", "0.0.0", "older than vLLM's first release"},
		{"--upgrade-to", "5", "is one number"},
		{"--upgrade-to", "1e308", "PEP 440 suffix"},
		{"--vllm-version", "0.0.0", "older than vLLM's first release"},
		{"--vllm-version", "1e308", "PEP 440 suffix"},
		{"--vllm-version", "latest", "not of the form"},
	} {
		code, out, errs := run(t, offline, append(base, tc.flag, tc.value)...)
		if code != 2 || !strings.Contains(errs, tc.why) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
			t.Errorf("%s %s: exit %d, stderr %q, stdout %.200q; want exit 2 and one line saying %q", tc.flag, tc.value, code, errs, out, tc.why)
		}
	}
	for _, args := range [][]string{{"--upgrade-to", "99.99.99"}, {"--vllm-version", "0.40.0"}} {
		code, out, errs := run(t, offline, append(base, args...)...)
		if code != 0 || !strings.Contains(out, "is newer than the newest release these rules know (0.33.0)") {
			t.Errorf("%v: exit %d, %s%s; want the plan with a note that the release is past the rules", args, code, errs, out)
		}
	}
	r := upgrade(t, 0, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--upgrade-to", "0.33.0rc1")
	if r.From.VLLMVersion != "0.33.0" || r.To.VLLMVersion != "0.33.0rc1" {
		t.Errorf("0.33.0 -> 0.33.0rc1 planned as %s -> %s", r.From.VLLMVersion, r.To.VLLMVersion)
	}
}
