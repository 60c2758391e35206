package vllm

import (
	"sort"
	"strings"
)

// Args renders the settings as vLLM flags: `--name value` pairs (a bare
// --enforce-eager) for the fields that are set (non-zero), in a fixed order,
// then Extra verbatim. The model is not among them (CommandLine puts it
// first); nor is Version, which is not a flag. A value that would read as a
// flag is attached with "=". ParseFlags(s.Args()) gives back the same fields.
func (s Settings) Args() []string {
	var out []string
	for _, f := range engineFlags {
		v := f.get(s)
		switch {
		case v == "":
		case f.isBool:
			out = append(out, "--"+f.name)
		case isFlag(v) || v == "--":
			out = append(out, "--"+f.name+"="+v)
		default:
			out = append(out, "--"+f.name, v)
		}
	}
	return append(out, s.Extra...)
}

// CommandLine renders `vllm serve MODEL FLAGS...` as one shell-quoted line,
// preceded by the Env assignments (sorted by name). ParseCommand of its
// SplitCommandLine gives back the same settings.
func (s Settings) CommandLine() string {
	var words []string
	names := make([]string, 0, len(s.Env))
	for name := range s.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		words = append(words, name+"="+shellQuote(s.Env[name]))
	}
	words = append(words, "vllm", "serve")
	switch {
	case s.Model == "":
	case isFlag(s.Model) || s.Model == "--":
		words = append(words, shellQuote("--model="+s.Model))
	default:
		words = append(words, shellQuote(s.Model))
	}
	for _, a := range s.Args() {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// ShellJoin joins words into one line a POSIX shell splits back into the
// same words, each quoted as shellQuote does.
func ShellJoin(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellQuote(w)
	}
	return strings.Join(out, " ")
}

// shellQuote quotes a word for a POSIX shell: as is when it holds only
// characters no shell treats specially, otherwise in single quotes.
func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(w) && safe; i++ {
		c := w[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-_./:=,+@%", c) >= 0
	}
	if safe {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
