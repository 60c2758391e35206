package traffic

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
)

// Record is what one request-log line says about one request.
type Record struct {
	// Input and Output are the request's prompt and generated tokens.
	Input, Output int64
	// Unix is the request's time in seconds since 1970-01-01 UTC; valid
	// when HasTime. Nano is the nanoseconds within that second, where the
	// log carries a fraction (an ISO 8601 ".789", a Unix time in
	// milliseconds or more, a JSON number with decimals); 0 otherwise, and
	// digits past the ninth are dropped. A replay orders requests by both.
	Unix    int64
	Nano    int32
	HasTime bool
	// NoYear marks a time read from a line without a year (vLLM's own log
	// format, "06-20 12:34:56"): it is placed in the year 2000 (a leap
	// year, so 02-29 is valid) and only differences between such times
	// mean anything.
	NoYear bool
	// OutputIsLimit marks Output as the request's max_tokens, the most it
	// may generate: vLLM's request log shows the limit, not the outcome.
	OutputIsLimit bool
	// Endpoint is the API the request called, where the line says
	// (EndpointChat or EndpointCompletions, from vLLM's request ids:
	// chatcmpl-… for a chat, cmpl-… for a completion); "" otherwise.
	Endpoint string
}

// The OpenAI API's endpoints, as every package spells them.
const (
	EndpointCompletions = "completions"
	EndpointChat        = "chat"
)

// maxDigits bounds a token count at 12 digits (< 10^12 < 2^40): a larger
// number is not a token count, and the bound keeps sums far from overflow.
const maxDigits = 12

// noYearBase is the year given to times that carry none (see Record.NoYear).
const noYearBase = 2000

var (
	receivedRequest = []byte("Received request")
	chatRequestID   = []byte("Received request chatcmpl-")
	cmplRequestID   = []byte("Received request cmpl-")
	promptTokenIDs  = []byte("prompt_token_ids: [")
	maxTokensKey    = []byte("max_tokens=")
	createdKey      = []byte(`"created"`)
	timeWord        = []byte("time")
	tsKey           = []byte("ts")
)

// dateCache remembers the last date and minute parsed: consecutive log
// lines share them, and validating a date and counting days is most of a
// timestamp's cost. The key is the 16 bytes "YYYY-MM-DDTHH:MM" as two
// words, compared without a call.
type dateCache struct {
	k1, k2 uint64
	minute int64 // Unix seconds of the minute, before any zone offset
	ok     bool
}

// ParseLine reads one request-log line. It returns ok when the line holds
// a prompt or output token count; the first count of each kind wins. It
// does not allocate.
//
// Keys: input_tokens, prompt_tokens (and num_prompt_tokens) for the
// prompt; output_tokens, completion_tokens for the output; written as
// key=value, key: value or "key": value, the value optionally quoted. A
// key inside a JSON string (preceded by an escaped quote) is not a key.
// prompt_tokens_details and the like are other keys. Times: a timestamp
// at the start of the line (RFC 3339 / ISO 8601 with T or a space, after
// an optional "[" or a "(proc pid=N)" prefix, or vLLM's "LEVEL MM-DD
// HH:MM:SS"), else a time=, ts=, timestamp= or "created" key holding a
// date or Unix seconds (milli-, micro- or nanoseconds by magnitude).
func ParseLine(line []byte) (Record, bool) {
	var c dateCache
	var r Record
	if !c.parse(line, &r) {
		return Record{}, false
	}
	return r, true
}

// parse is ParseLine filling r (which must be zero), with c's cache.
func (c *dateCache) parse(line []byte, r *Record) bool {
	have := 0 // keyInput | keyOutput bits found
	// The search is for the 'k' of "_tokens": rarer in logs than '_',
	// which also starts request_id, latency_ms and most other keys, so
	// fewer stops on the way to the counts.
	for i := kOffset; i < len(line) && have != keyInput|keyOutput; {
		j := bytes.IndexByte(line[i:], 'k')
		if j < 0 {
			break
		}
		u := i + j - kOffset // the '_' of "_tokens"
		i = u + kOffset + 1
		if len(line)-u < 8 || binary.LittleEndian.Uint64(line[u:])&mask7 != leTokens {
			continue
		}
		k := keyKind(line, u)
		if k == keyNone || have&k != 0 {
			continue
		}
		v, sp, ok := countAt(line, u+7)
		for ok {
			if k == keyInput {
				r.Input = v
			} else {
				r.Output = v
			}
			have |= k
			// Side by side ("input_tokens=N output_tokens=M", the common
			// order or the other): the next key is read where it
			// stands, without a search. It is the first of its kind,
			// as the search would have found it next.
			if sp < 0 || have == keyInput|keyOutput || len(line)-sp < 16 {
				break
			}
			w := binary.LittleEndian.Uint64(line[sp+1:])
			switch {
			case k == keyInput && w&mask6 == leOutput && binary.LittleEndian.Uint64(line[sp+7:]) == leTokensEq:
				k = keyOutput
				v, sp, ok = countAt(line, sp+14)
			case k == keyOutput && w&mask5 == leInput && binary.LittleEndian.Uint64(line[sp+6:]) == leTokensEq:
				k = keyInput
				v, sp, ok = countAt(line, sp+13)
			default:
				ok = false
			}
		}
	}
	haveIn, haveOut := have&keyInput != 0, have&keyOutput != 0
	if !haveIn || !haveOut {
		if k := bytes.Index(line, receivedRequest); k >= 0 {
			haveIn, haveOut = vllmRequest(line[k:], r, haveIn, haveOut)
		}
	}
	if !haveIn && !haveOut {
		return false
	}
	r.Unix, r.Nano, r.NoYear, r.HasTime = c.leadingTime(line)
	if !r.HasTime {
		r.Unix, r.Nano, r.HasTime = c.keyedTime(line)
	}
	return true
}

// countAt reads the value of a count key whose name ends at p: the count,
// and the index of the space after it when it was written "key=N " (-1
// otherwise), where a next key may stand.
func countAt(line []byte, p int) (v int64, space int, ok bool) {
	if p+10 <= len(line) && line[p] == '=' {
		// key=value with one to seven digits and a separator after them,
		// the common case, inline.
		x := binary.LittleEndian.Uint64(line[p+1:])
		n := bits.TrailingZeros64(nonDigits(x)) >> 3
		if c := line[p+1+n]; n >= 1 && n <= 7 && (c == ' ' || c == ',' || c == '}') {
			space = -1
			if c == ' ' {
				space = p + 1 + n
			}
			return swarDigits(x, n), space, true
		}
	}
	v, ok = valueAfterKey(line, p)
	return v, -1, ok
}

// kOffset is the index of 'k' in "_tokens".
const kOffset = 3

// Key kinds found before "_tokens".
const (
	keyNone   = 0
	keyInput  = 1
	keyOutput = 2
)

// Little-endian words of the key parts, so a key is checked with a load
// and a compare: leTokens is "_tokens" (7 bytes, masked by mask7); the
// others are the last bytes of the 8 before the underscore.
const (
	mask5         = 1<<40 - 1
	mask6         = 1<<48 - 1
	mask7         = 1<<56 - 1
	leTokens      = '_' | 't'<<8 | 'o'<<16 | 'k'<<24 | 'e'<<32 | 'n'<<40 | 's'<<48
	leTokensEq    = leTokens | '='<<56
	leInput       = 'i' | 'n'<<8 | 'p'<<16 | 'u'<<24 | 't'<<32
	lePrompt      = 'p' | 'r'<<8 | 'o'<<16 | 'm'<<24 | 'p'<<32 | 't'<<40
	leOutput      = 'o' | 'u'<<8 | 't'<<16 | 'p'<<24 | 'u'<<32 | 't'<<40
	leLetion      = 'l' | 'e'<<8 | 't'<<16 | 'i'<<24 | 'o'<<32 | 'n'<<40
	leComp        = 'c' | 'o'<<8 | 'm'<<16 | 'p'<<24
	wordWindow    = 8
	completionLen = len("completion")
)

// keyKind tells which count the "_tokens" at u belongs to: input_tokens
// or prompt_tokens (keyInput), output_tokens or completion_tokens
// (keyOutput), each starting a key (see wordBefore).
func keyKind(line []byte, u int) int {
	if u < completionLen {
		return keyKindShort(line, u)
	}
	w := binary.LittleEndian.Uint64(line[u-wordWindow:])
	var s, k int
	switch {
	case w>>24 == leInput:
		s, k = u-5, keyInput
	case w>>16 == lePrompt:
		s, k = u-6, keyInput
	case w>>16 == leOutput:
		s, k = u-6, keyOutput
	case w>>16 == leLetion && binary.LittleEndian.Uint32(line[u-completionLen:]) == leComp:
		s, k = u-completionLen, keyOutput
	default:
		return keyNone
	}
	if (s > 0 && line[s-1] == ' ') || startsKey(line, s) {
		return k
	}
	return keyNone
}

// keyKindShort is keyKind for a key near the start of the line.
func keyKindShort(line []byte, u int) int {
	switch {
	case wordBefore(line, u, "input"), wordBefore(line, u, "prompt"):
		return keyInput
	case wordBefore(line, u, "output"), wordBefore(line, u, "completion"):
		return keyOutput
	}
	return keyNone
}

// startsKey reports whether a key word starting at s starts a key: at the
// line's start, after a non-identifier byte that is not an escaped quote,
// or after "num_". A space before it is the common case.
func startsKey(line []byte, s int) bool {
	if s > 0 && line[s-1] == ' ' {
		return true
	}
	return keyStart(line, s) || (s >= 4 && string(line[s-4:s]) == "num_" && keyStart(line, s-4))
}

// wordBefore reports whether w ends at u and starts a key (startsKey;
// "num_" is vLLM's num_prompt_tokens).
func wordBefore(line []byte, u int, w string) bool {
	s := u - len(w)
	if s < 0 || string(line[s:u]) != w {
		return false
	}
	return startsKey(line, s)
}

// keyStart reports whether a key may start at s.
func keyStart(line []byte, s int) bool {
	if s == 0 {
		return true
	}
	c := line[s-1]
	if isIdent(c) {
		return false
	}
	// \"prompt_tokens\" is text inside a JSON string, not a key.
	return !(c == '"' && s >= 2 && line[s-2] == '\\')
}

func isIdent(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// valueAfterKey reads the integer after a key ending at p: `=N`, `: N`,
// `": N`, values optionally quoted.
func valueAfterKey(line []byte, p int) (int64, bool) {
	if p+1 < len(line) && line[p] == '=' && line[p+1]-'0' <= 9 {
		return parseCount(line, p+1) // key=value, the common case
	}
	p, ok := valueStart(line, p)
	if !ok {
		return 0, false
	}
	return parseCount(line, p)
}

// valueStart skips from the end of a key (p) past an optional closing
// quote, spaces, the separator (= or :), more spaces and an opening quote:
// where the value begins, or false when no separator follows the key.
func valueStart(line []byte, p int) (int, bool) {
	if p < len(line) && line[p] == '"' {
		p++
	}
	for p < len(line) && line[p] == ' ' {
		p++
	}
	if p >= len(line) || (line[p] != '=' && line[p] != ':') {
		return p, false
	}
	p++
	for p < len(line) && (line[p] == ' ' || line[p] == '\t') {
		p++
	}
	if p < len(line) && (line[p] == '"' || line[p] == '\'') {
		p++
	}
	return p, true
}

// parseCount reads a count of at most maxDigits digits at p; the byte
// after it must end the number (not a digit, letter or decimal point
// followed by a digit).
func parseCount(line []byte, p int) (int64, bool) {
	if p+8 <= len(line) {
		// Up to seven digits and the byte after them, eight bytes at a
		// time: no branch on the number's length.
		x := binary.LittleEndian.Uint64(line[p:])
		if nd := nonDigits(x); nd != 0 {
			n := bits.TrailingZeros64(nd) >> 3
			if n == 0 || !endsNumber(line, p+n) {
				return 0, false
			}
			return swarDigits(x, n), true
		}
	}
	if p >= len(line) {
		return 0, false
	}
	var v int64
	q := p
	for q < len(line) {
		d := line[q] - '0'
		if d > 9 {
			break
		}
		v = v*10 + int64(d)
		q++
	}
	if q == p || q-p > maxDigits || !endsNumber(line, q) {
		return 0, false
	}
	return v, true
}

// swarDigits is the value of the first n (1..7) bytes of x, ASCII digits,
// the first one most significant (x loaded little-endian). They are
// shifted up so zeros pad the front, then combined in pairs, fours and
// eights with two multiplications (D. Lemire, "Faster integer parsing",
// 2018).
func swarDigits(x uint64, n int) int64 {
	const (
		mask   = 0x000000FF000000FF
		mul100 = 100 + 1000000<<32
		mul1   = 1 + 10000<<32
	)
	v := (x - swarZeros) << (8 * uint(8-n))
	v = v*10 + v>>8
	v = ((v&mask)*mul100 + ((v>>16)&mask)*mul1) >> 32
	return int64(v)
}

// endsNumber reports whether the byte at q (if any) ends a number.
func endsNumber(line []byte, q int) bool {
	if q >= len(line) {
		return true
	}
	c := line[q]
	return !isIdent(c) && !(c == '.' && q+1 < len(line) && isDigit(line[q+1]))
}

// vllmRequest reads vLLM's "Received request ID: ... params:
// SamplingParams(..., max_tokens=N, ...), prompt_token_ids: [...]" line
// (vllm/entrypoints/logger.py, RequestLogger.log_inputs; newer releases
// print num_prompt_tokens, read by the key scan). The prompt length is the
// number of ids when no count was found; --max-log-len truncates that list,
// so it is a lower bound there. The output is max_tokens, marked as a limit.
func vllmRequest(s []byte, r *Record, haveIn, haveOut bool) (bool, bool) {
	switch {
	case bytes.HasPrefix(s, chatRequestID):
		r.Endpoint = EndpointChat
	case bytes.HasPrefix(s, cmplRequestID):
		r.Endpoint = EndpointCompletions
	}
	if !haveIn {
		if k := bytes.Index(s, promptTokenIDs); k >= 0 {
			ids := s[k+len(promptTokenIDs):]
			if end := bytes.IndexByte(ids, ']'); end >= 0 {
				ids = bytes.TrimSpace(ids[:end])
				if len(ids) > 0 {
					r.Input = int64(bytes.Count(ids, []byte{','}) + 1)
				}
				haveIn = true
			}
		}
	}
	if !haveOut {
		if k := bytes.Index(s, maxTokensKey); k >= 0 && keyStart(s, k) {
			if v, ok := parseCount(s, k+len(maxTokensKey)); ok {
				r.Output, r.OutputIsLimit, haveOut = v, true, true
			}
		}
	}
	return haveIn, haveOut
}

// leadingTime reads a timestamp at the start of a line.
func (c *dateCache) leadingTime(line []byte) (unix int64, nano int32, noYear, ok bool) {
	if c.ok && len(line) >= 20 && binary.LittleEndian.Uint64(line) == c.k1 && binary.LittleEndian.Uint64(line[8:]) == c.k2 {
		// The minute of the last line: only the seconds, a fraction and
		// the zone remain. An offset (+hh:mm) takes the full parse.
		s1, s2 := line[17]-'0', line[18]-'0'
		if line[16] == ':' && s1 <= 6 && s2 <= 9 && s1*10+s2 <= 60 {
			j := 19
			if line[j] == '.' || line[j] == ',' {
				if ms, ok := millis(line, j+1); ok {
					nano, j = ms, j+4 // the common ".123"
				} else {
					nano, j = fraction(line, j+1)
				}
			}
			if j == len(line) || (line[j] != '+' && line[j] != '-') {
				return c.minute + int64(s1)*10 + int64(s2), nano, false, true
			}
		}
	}
	if len(line) > 0 && line[0]-'0' <= 9 {
		if t, ns, _, ok := c.parseDateTime(line, 0); ok {
			return t, ns, false, true // the common case: the line starts with its time
		}
	}
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	if i < len(line) && line[i] == '(' {
		// vLLM V1 prefixes "(APIServer pid=1) " or "(EngineCore_DP0 pid=7) ".
		end := bytes.IndexByte(line[i:min(len(line), i+64)], ')')
		if end < 0 {
			return 0, 0, false, false
		}
		i += end + 1
		for i < len(line) && line[i] == ' ' {
			i++
		}
	}
	if i < len(line) && line[i] == '[' {
		i++
	}
	if t, ns, _, ok := c.parseDateTime(line, i); ok {
		return t, ns, false, true
	}
	// vLLM: "INFO 06-20 12:34:56 [logger.py:39] ...".
	j := i
	for j < len(line) && line[j] >= 'A' && line[j] <= 'Z' {
		j++
	}
	if j == i || j-i > 8 || j >= len(line) || line[j] != ' ' {
		return 0, 0, false, false
	}
	j++
	if t, ns, _, ok := c.parseDateTime(line, j); ok {
		return t, ns, false, true
	}
	mo, ok1 := twoDigits(line, j)
	d, ok2 := twoDigits(line, j+3)
	if !ok1 || !ok2 || line[j+2] != '-' || j+5 >= len(line) || line[j+5] != ' ' {
		return 0, 0, false, false
	}
	secs, end, ok := parseClock(line, j+6)
	if !ok || !validDate(noYearBase, mo, d) {
		return 0, 0, false, false
	}
	// vLLM's own format ("%m-%d %H:%M:%S") has no fraction; a handler
	// configured with one (",123" or ".123") gives it.
	if end+1 < len(line) && (line[end] == '.' || line[end] == ',') {
		nano, _ = fraction(line, end+1)
	}
	return daysFromCivil(noYearBase, mo, d)*86400 + secs, nano, true, true
}

// keyedTime finds a time= / ts= / timestamp= / "created" key.
func (c *dateCache) keyedTime(line []byte) (int64, int32, bool) {
	if k := bytes.Index(line, createdKey); k >= 0 && keyStart(line, k) {
		if t, ns, ok := c.timeValue(line, k+len(createdKey)); ok {
			return t, ns, true
		}
	}
	for i := 0; ; {
		k := bytes.Index(line[i:], timeWord)
		if k < 0 {
			break
		}
		k += i
		i = k + len(timeWord)
		if k > 0 && line[k-1] == '@' {
			k-- // "@timestamp"
		}
		if !keyStart(line, k) {
			continue
		}
		end := k + len(timeWord)
		if line[k] == '@' {
			end++
		}
		if len(line)-end >= 5 && string(line[end:end+5]) == "stamp" {
			end += 5
		}
		if t, ns, ok := c.timeValue(line, end); ok {
			return t, ns, true
		}
	}
	for i := 0; ; {
		k := bytes.Index(line[i:], tsKey)
		if k < 0 {
			break
		}
		k += i
		i = k + len(tsKey)
		if keyStart(line, k) {
			if t, ns, ok := c.timeValue(line, k+len(tsKey)); ok {
				return t, ns, true
			}
		}
	}
	return 0, 0, false
}

// timeValue reads the value of a time key ending at p: a date, or Unix
// time whose unit follows from its size (seconds may carry decimals, as
// JSON numbers and Python's time.time() do).
func (c *dateCache) timeValue(line []byte, p int) (int64, int32, bool) {
	p, ok := valueStart(line, p)
	if !ok {
		return 0, 0, false
	}
	if t, ns, _, ok := c.parseDateTime(line, p); ok {
		return t, ns, true
	}
	// Nineteen digits hold today's time in nanoseconds; past
	// maxUnixDigits the number overflows int64 and is no time.
	var v int64
	n := 0
	for p < len(line) && isDigit(line[p]) && n < maxUnixDigits && v <= (math.MaxInt64-9)/10 {
		v = v*10 + int64(line[p]-'0')
		p++
		n++
	}
	if n < 9 || (p < len(line) && isDigit(line[p])) {
		return 0, 0, false // a small number is no Unix time of this century
	}
	switch {
	case v < 1e11:
		var ns int32
		if p+1 < len(line) && line[p] == '.' {
			ns, _ = fraction(line, p+1)
		}
		return v, ns, true
	case v < 1e14:
		return v / 1e3, int32(v % 1e3 * 1e6), true
	case v < 1e17:
		return v / 1e6, int32(v % 1e6 * 1e3), true
	default:
		return v / 1e9, int32(v % 1e9), true
	}
}

// maxUnixDigits bounds a Unix time: nanoseconds since 1970 take 19 digits
// until 2286.
const maxUnixDigits = 19

// millis reads a fraction of exactly three digits at i as nanoseconds:
// the milliseconds most logs print, without fraction's general path.
func millis(b []byte, i int) (int32, bool) {
	if i+3 >= len(b) {
		return 0, false
	}
	d0, d1, d2 := b[i]-'0', b[i+1]-'0', b[i+2]-'0'
	if d0 > 9 || d1 > 9 || d2 > 9 || b[i+3]-'0' <= 9 {
		return 0, false
	}
	return int32(d0)*1e8 + int32(d1)*1e7 + int32(d2)*1e6, true
}

// fracScale[n] turns n fraction digits into nanoseconds: 10^(9−n).
var fracScale = [10]int64{1e9, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 100, 10, 1}

// fraction reads the digits of a decimal fraction at i (after the point or
// comma) as nanoseconds, and returns the index after the last digit.
// Digits past the ninth are read over and dropped.
func fraction(b []byte, i int) (int32, int) {
	if i+8 <= len(b) {
		// Up to seven digits (milli- and microseconds), eight bytes at a
		// time.
		x := binary.LittleEndian.Uint64(b[i:])
		if nd := nonDigits(x); nd != 0 {
			n := bits.TrailingZeros64(nd) >> 3
			if n == 0 {
				return 0, i
			}
			return int32(swarDigits(x, n) * fracScale[n]), i + n
		}
	}
	var v int64
	n := 0
	for i < len(b) && isDigit(b[i]) {
		if n < 9 {
			v = v*10 + int64(b[i]-'0')
			n++
		}
		i++
	}
	return int32(v * fracScale[n]), i
}

// SWAR constants: eight bytes at once.
const (
	swarOnes  = 0x0101010101010101
	swarHigh  = 0xF0 * swarOnes
	swarLow   = 0x0F * swarOnes
	swarZeros = '0' * swarOnes
)

// nonDigits returns x with a non-zero byte where x's byte is not an ASCII
// digit: the high nibble must be 3 and the low nibble below 10 (adding 6
// carries into the high nibble, and never out of the byte).
func nonDigits(x uint64) uint64 {
	return ((x & swarHigh) ^ (swarZeros & swarHigh)) | (((x & swarLow) + 6*swarOnes) & swarHigh)
}

// parseDateTime reads "YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|±HH:MM|±HHMM]" at i
// and returns Unix seconds, the fraction's nanoseconds and the index after
// it.
func (c *dateCache) parseDateTime(b []byte, i int) (int64, int32, int, bool) {
	if len(b)-i < 19 || (b[i+10] != 'T' && b[i+10] != ' ') {
		return 0, 0, i, false
	}
	k1, k2 := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
	if !c.ok || k1 != c.k1 || k2 != c.k2 {
		y1, ok1 := twoDigits(b, i)
		y2, ok2 := twoDigits(b, i+2)
		mo, ok3 := twoDigits(b, i+5)
		d, ok4 := twoDigits(b, i+8)
		h, ok5 := twoDigits(b, i+11)
		mi, ok6 := twoDigits(b, i+14)
		y := y1*100 + y2
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || b[i+4] != '-' || b[i+7] != '-' || b[i+13] != ':' ||
			h > 23 || mi > 59 || !validDate(y, mo, d) {
			return 0, 0, i, false
		}
		c.k1, c.k2, c.minute, c.ok = k1, k2, daysFromCivil(y, mo, d)*86400+h*3600+mi*60, true
	}
	sec, ok := twoDigits(b, i+17)
	if !ok || b[i+16] != ':' || sec > 60 {
		return 0, 0, i, false
	}
	t := c.minute + sec
	end := i + 19
	var nano int32
	if end < len(b) && (b[end] == '.' || b[end] == ',') {
		nano, end = fraction(b, end+1)
	}
	if end < len(b) {
		switch b[end] {
		case 'Z':
			end++
		case '+', '-':
			h, okh := twoDigits(b, end+1)
			if !okh {
				break
			}
			m, k := int64(0), end+3
			if k < len(b) && b[k] == ':' {
				k++
			}
			if mm, okm := twoDigits(b, k); okm {
				m, k = mm, k+2
			}
			off := h*3600 + m*60
			if b[end] == '+' {
				off = -off
			}
			t += off
			end = k
		}
	}
	return t, nano, end, true
}

// parseClock reads "HH:MM:SS" at i.
func parseClock(b []byte, i int) (int64, int, bool) {
	h, ok1 := twoDigits(b, i)
	m, ok2 := twoDigits(b, i+3)
	s, ok3 := twoDigits(b, i+6)
	if !ok1 || !ok2 || !ok3 || b[i+2] != ':' || b[i+5] != ':' || h > 23 || m > 59 || s > 60 {
		return 0, i, false
	}
	return h*3600 + m*60 + s, i + 8, true
}

func twoDigits(b []byte, i int) (int64, bool) {
	if i < 0 || i+2 > len(b) || !isDigit(b[i]) || !isDigit(b[i+1]) {
		return 0, false
	}
	return int64(b[i]-'0')*10 + int64(b[i+1]-'0'), true
}

func validDate(y, m, d int64) bool {
	if y < 1970 || m < 1 || m > 12 || d < 1 {
		return false
	}
	days := [...]int64{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m-1]
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		days = 29
	}
	return d <= days
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (H. Hinnant's days_from_civil).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
