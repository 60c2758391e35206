package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every number flag of every command refuses NaN in one line, exit 2:
// --kv-threshold NaN was taken (its alert could then never fire), and
// --range-ratio NaN drew lengths of -9223372036854775808.
func TestNumberFlagsRefuseNaN(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	n := 0
	walk = func(c *cobra.Command, path []string) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "float64" && f.Value.Type() != "float32" {
				return
			}
			n++
			code, out, errs := run(t, offline, append(path, "--"+f.Name, "NaN")...)
			want := "headroom: --" + f.Name + " NaN is not a number"
			if code != ExitBadInput || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
				t.Errorf("%s --%s NaN: exit %d, stdout %.100q, stderr %q; want exit 2 and %q", strings.Join(path, " "), f.Name, code, out, errs, want)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub, append(path, sub.Name()))
		}
	}
	walk(newRoot(Env{}), nil)
	t.Logf("%d number flags", n)
	if n < 8 {
		t.Errorf("%d number flags found; the commands have more", n)
	}
}
