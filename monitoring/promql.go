package monitoring

import (
	"fmt"
	"strings"

	"headroom.dev/headroom/vllm"
)

// anyName applies f to each wire name vLLM has given m (newest first) and
// joins the results with `or`, so the expression finds the quantity on
// every release. f gets the name and returns a PromQL expression.
func anyName(m vllm.Metric, f func(name string) string) string {
	names := vllm.MetricWireNames(m)
	if len(names) == 0 {
		panic(fmt.Sprintf("monitoring: vllm knows no name of %q", m)) // a programming error, caught by every test
	}
	if len(names) == 1 {
		return f(names[0])
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = f(n)
	}
	return "(" + strings.Join(parts, " or ") + ")"
}

// plain is the selector of a name with no matchers.
func plain(name string) string { return name }

// vllmSelector returns an f for anyName that selects name with matchers
// (e.g. `namespace=~"$namespace"`); suffix is appended to the name
// (_bucket of a histogram).
func withMatchers(suffix, matchers string) func(string) string {
	return func(name string) string {
		if matchers == "" {
			return name + suffix
		}
		return name + suffix + "{" + matchers + "}"
	}
}

// fmtFloat writes a threshold the way a person reads it (0.9, 1, 157286400).
func fmtFloat(v float64) string { return fmt.Sprintf("%g", v) }
