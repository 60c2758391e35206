package cli

import (
	"slices"
	"strings"

	"headroom.dev/headroom/vllm"
)

// pastedWords is the vLLM command after --, as the words vLLM would get:
// one argument holding a whole line with spaces (the command quoted as one
// word) is split as a shell splits it.
func pastedWords(args []string) []string {
	if len(args) == 1 && strings.ContainsAny(args[0], " \t\n") {
		if words, err := vllm.SplitCommandLine(args[0]); err == nil && len(words) > 1 {
			return words
		}
	}
	return args
}

// outputAfterDash refuses headroom's own -o/--output among the words after
// --: vLLM has no such flag, so it would be planned as one of vLLM's and
// the format asked for silently not given.
func outputAfterDash(words []string) error {
	for _, w := range words {
		name, _, _ := strings.Cut(w, "=")
		glued := strings.HasPrefix(w, "-o") && slices.Contains(outputFormats, w[2:]) // -ojson
		if name == "-o" || name == "--output" || glued {
			return badInput("%s after --: headroom's flags go before -- (the words after it are vLLM's); move it before the vllm command", w)
		}
	}
	return nil
}

// outputFormats are the -o values any headroom command takes.
var outputFormats = []string{"table", "json", "yaml", "args", "kaito", "markdown", "text", "csv", "patch", "wide"}
