package probe

import (
	"strconv"
	"strings"

	"headroom.dev/headroom/vllm"
)

// ServeArgs is the argument list of one launch: serve, the model, the
// settings' flags (the user's --host and --port dropped), then the
// loopback address and port.
func ServeArgs(s vllm.Settings, port int) []string {
	model := s.Model
	s.Model = ""
	args := []string{"serve"}
	if strings.HasPrefix(model, "-") {
		args = append(args, "--model="+model)
	} else {
		args = append(args, model)
	}
	s.Extra = withoutFlags(s.Extra, "--host", "--port")
	args = append(args, s.Args()...)
	return append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
}

// withoutFlags drops the named flags and their values from verbatim
// flags (as vllm.ParseFlags keeps them in Extra: the flag, then its value).
func withoutFlags(extra []string, names ...string) []string {
	var out []string
	for i := 0; i < len(extra); i++ {
		tok := extra[i]
		drop := false
		for _, n := range names {
			if tok == n {
				drop = true
				if i+1 < len(extra) && !strings.HasPrefix(extra[i+1], "-") {
					i++
				}
			} else if strings.HasPrefix(tok, n+"=") {
				drop = true
			}
		}
		if !drop {
			out = append(out, tok)
		}
	}
	return out
}

func lengthName(n int) string {
	if n == vllm.AutoMaxModelLen {
		return "auto"
	}
	return strconv.Itoa(n)
}
