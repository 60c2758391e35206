package doctor

import (
	"strconv"
	"strings"
)

// vLLM prints its settings as Python reprs: the start-up line
// "non-default args: {'model': 'x', 'max_model_len': 8192, ...}" (a dict
// repr, vllm/entrypoints/utils.py log_non_default_args) and the engine's
// "with config: model='x', ..., max_seq_len=8192, ..." (keyword=value).
// This file reads both, leniently: a value that is no Python literal (an
// enum repr "<LoadFormat.AUTO: 'auto'>", "torch.bfloat16") is kept as its
// text, and one malformed entry never loses the others.

// maxPyDepth bounds nesting: settings are at most a few levels deep, and
// the bound keeps hostile input from recursing without end.
const maxPyDepth = 16

type pyReader struct {
	s string
	i int
}

// parsePyDict reads "{'k': v, ...}" at the start of s. Keys that are not
// strings are skipped with their values.
func parsePyDict(s string) (map[string]any, bool) {
	r := pyReader{s: s}
	r.space()
	if !r.eat('{') {
		return nil, false
	}
	out := map[string]any{}
	for {
		r.space()
		if r.eat('}') {
			return out, true
		}
		if r.i >= len(r.s) {
			return out, len(out) > 0
		}
		key, ok := r.value(0)
		r.space()
		if !r.eat(':') {
			r.skipEntry()
			if !r.eat(',') {
				return out, len(out) > 0
			}
			continue
		}
		r.space()
		v, _ := r.value(0)
		if k, isStr := key.(string); ok && isStr {
			out[k] = v
		}
		r.space()
		if !r.eat(',') {
			r.skipEntry()
			if !r.eat(',') {
				r.eat('}')
				return out, true
			}
		}
	}
}

// parseKeywords reads "k=v, k2=v2, ..." (the engine config line) into a
// map; a value stops at a top-level ", name=".
func parseKeywords(s string) map[string]any {
	out := map[string]any{}
	r := pyReader{s: s}
	for r.i < len(r.s) {
		r.space()
		start := r.i
		for r.i < len(r.s) && (isWordByte(r.s[r.i])) {
			r.i++
		}
		key := r.s[start:r.i]
		if key == "" || !r.eat('=') {
			r.skipEntry()
			if !r.eat(',') {
				break
			}
			continue
		}
		v, _ := r.value(0)
		out[key] = v
		r.space()
		if !r.eat(',') {
			r.skipEntry()
			if !r.eat(',') {
				break
			}
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (r *pyReader) space() {
	for r.i < len(r.s) && (r.s[r.i] == ' ' || r.s[r.i] == '\t') {
		r.i++
	}
}

func (r *pyReader) eat(c byte) bool {
	if r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

// value reads one literal; ok is false when it fell back to raw text.
func (r *pyReader) value(depth int) (any, bool) {
	r.space()
	if r.i >= len(r.s) || depth > maxPyDepth {
		return nil, false
	}
	switch c := r.s[r.i]; {
	case c == '\'' || c == '"':
		return r.str()
	case c == '{':
		return r.dict(depth)
	case c == '[' || c == '(':
		return r.list(depth)
	}
	raw := r.raw()
	switch raw {
	case "True":
		return true, true
	case "False":
		return false, true
	case "None":
		return nil, true
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(raw, 64); err == nil {
		return f, true
	}
	return raw, false
}

// str reads a quoted string with Python's backslash escapes (the ones
// that matter for settings; others keep the escaped byte).
func (r *pyReader) str() (any, bool) {
	q := r.s[r.i]
	r.i++
	var b strings.Builder
	for r.i < len(r.s) {
		c := r.s[r.i]
		r.i++
		switch {
		case c == q:
			return b.String(), true
		case c == '\\' && r.i < len(r.s):
			e := r.s[r.i]
			r.i++
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), false
}

func (r *pyReader) dict(depth int) (any, bool) {
	r.i++ // {
	out := map[string]any{}
	for {
		r.space()
		if r.i >= len(r.s) {
			return out, false
		}
		if r.eat('}') {
			return out, true
		}
		k, _ := r.value(depth + 1)
		r.space()
		if !r.eat(':') {
			r.skipEntry()
			r.eat(',')
			r.eat('}')
			return out, false
		}
		v, _ := r.value(depth + 1)
		if ks, ok := k.(string); ok {
			out[ks] = v
		}
		r.space()
		if !r.eat(',') {
			r.space()
			if r.eat('}') {
				return out, true
			}
			r.skipEntry()
			r.eat('}')
			return out, false
		}
	}
}

func (r *pyReader) list(depth int) (any, bool) {
	closing := byte(']')
	if r.s[r.i] == '(' {
		closing = ')'
	}
	r.i++
	out := []any{}
	for {
		r.space()
		if r.i >= len(r.s) {
			return out, false
		}
		if r.eat(closing) {
			return out, true
		}
		before := r.i
		v, _ := r.value(depth + 1)
		out = append(out, v)
		r.space()
		if !r.eat(',') {
			r.space()
			if r.eat(closing) {
				return out, true
			}
			if r.i == before {
				r.i++ // never stand still
			}
			r.skipEntry()
			r.eat(closing)
			return out, false
		}
	}
}

// raw reads text up to a top-level ',', ':' (inside a dict) or closing
// bracket, keeping "<...>" and nested brackets whole.
func (r *pyReader) raw() string {
	start := r.i
	depth := 0
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c == '<' || c == '(' || c == '[' || c == '{':
			depth++
		case c == '>' || c == ')' || c == ']' || c == '}':
			if depth == 0 {
				return strings.TrimSpace(r.s[start:r.i])
			}
			depth--
		case (c == ',' || c == ':') && depth == 0:
			return strings.TrimSpace(r.s[start:r.i])
		case c == '\'' || c == '"':
			r.str()
			continue
		}
		r.i++
	}
	return strings.TrimSpace(r.s[start:r.i])
}

// skipEntry moves to the next top-level ',' or closing bracket.
func (r *pyReader) skipEntry() {
	if r.i < len(r.s) && r.s[r.i] != ',' {
		r.raw()
	}
}
