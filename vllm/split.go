package vllm

import (
	"fmt"
	"strings"
)

// SplitCommandLine splits a pasted shell one-liner into words the way a POSIX
// shell would, so that ParseCommand can read it:
//
//   - single quotes keep everything literally; double quotes keep everything
//     but \$, \`, \", \\ and backslash-newline;
//   - a backslash before a newline joins the lines (also when spaces, tabs or
//     a carriage return sit between them: pasted text often has them, and the
//     intent is always a continuation);
//   - $VAR, $(cmd) and `cmd` are left as they are: nothing is expanded;
//   - a newline without a backslash is plain whitespace, because pasted
//     commands often lose their backslashes on the way; # starts a comment;
//   - the words of the first command only are returned: an unquoted |, ||,
//     &&, ; or & ends it, and redirections (> log, 2>&1, &> log) are dropped,
//     because launch lines are often pasted with `2>&1 | tee log` or `&`.
//
// A no-break space (U+00A0, common in text copied from web pages) counts as
// whitespace. Unterminated quotes are an error.
func SplitCommandLine(s string) ([]string, error) {
	words, _, err := splitFirst(s, false)
	return words, err
}

// SplitScriptCommand is SplitCommandLine for the first command of a script
// a container runs (`sh -c SCRIPT`), where a newline without a backslash
// ends the command as the shell ends it: scripts are not pasted text. end
// is the byte offset in script just after the command's last word (its
// redirections left out), where flags can be written into the script.
func SplitScriptCommand(script string) (words []string, end int, err error) {
	return splitFirst(script, true)
}

// splitFirst splits the first command of s; newlineEnds makes an unescaped
// newline end it.
func splitFirst(s string, newlineEnds bool) ([]string, int, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		discard bool // the next word is a redirection target
		i       int
		lastEnd int // just after the last word kept
	)
	flush := func() {
		if !inWord {
			return
		}
		if discard {
			discard = false
		} else {
			words = append(words, cur.String())
			lastEnd = i
		}
		cur.Reset()
		inWord = false
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\':
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r') {
				j++
			}
			switch {
			case j < len(s) && s[j] == '\n':
				i = j + 1 // line continuation
			case j == len(s):
				// A trailing backslash (last line copied with its "\"):
				// the word before it ends there.
				flush()
				i = j
			default:
				cur.WriteByte(s[i+1])
				inWord = true
				i += 2
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, 0, fmt.Errorf("unterminated single quote in the command line: close the quote that starts at %q", clip(s[i:]))
			}
			cur.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			j := i + 1
			closed := false
			for j < len(s) {
				d := s[j]
				if d == '"' {
					closed = true
					j++
					break
				}
				if d == '\\' && j+1 < len(s) {
					switch n := s[j+1]; n {
					case '$', '`', '"', '\\':
						cur.WriteByte(n)
						j += 2
						continue
					case '\n':
						j += 2
						continue
					}
				}
				cur.WriteByte(d)
				j++
			}
			if !closed {
				return nil, 0, fmt.Errorf("unterminated double quote in the command line: close the quote that starts at %q", clip(s[i:]))
			}
			inWord = true
			i = j
		case c == '\n' && newlineEnds:
			flush()
			return words, lastEnd, nil
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
			i++
		case c == 0xC2 && i+1 < len(s) && s[i+1] == 0xA0: // U+00A0 no-break space
			flush()
			i += 2
		case c == '#' && !inWord:
			if newlineEnds {
				flush()
				return words, lastEnd, nil
			}
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '>' || c == '<' || (c == '&' && i+1 < len(s) && s[i+1] == '>'):
			if inWord && isDigits(cur.String()) {
				// "2>&1": the digits name a file descriptor, not a word.
				cur.Reset()
				inWord = false
			}
			flush()
			i++
			if i < len(s) && (s[i] == '>' || s[i] == '&' || s[i] == '|') {
				i++
			}
			discard = true
		case c == '|' || c == '&' || c == ';':
			flush()
			return words, lastEnd, nil
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	flush()
	return words, lastEnd, nil
}

// clip shortens text quoted in an error message to one short line.
func clip(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
