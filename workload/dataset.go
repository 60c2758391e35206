package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"headroom.dev/headroom/traffic"
)

// vllm bench serve's --dataset-name values the workload replays. Random is
// the synthetic traffic of the length flags; the others read a file.
const (
	DatasetRandom   = "random"
	DatasetShareGPT = "sharegpt"
	DatasetCustom   = "custom"
)

// DatasetNames lists the --dataset-name values accepted, for errors.
const DatasetNames = "random, sharegpt or custom"

// Dataset is a file of prompts sampled as vllm bench serve samples it
// (vllm/benchmarks/datasets.py): --dataset-name, --dataset-path and the
// dataset's own flags.
//
//   - sharegpt: a JSON array of {"conversations": [{"value": ...}, ...]}
//     (ShareGPT_V3's layout). Entries with at least two turns are kept and
//     shuffled with random.seed(Seed); walking them in that order, the first
//     turn is the prompt and the second's token count is max_tokens (or
//     OutputLen), and bench's is_valid_sequence drops a prompt or reply
//     under 4 tokens (the reply only when OutputLen is not given), a prompt
//     over 1024 and a pair over 2048, until NumRequests are taken.
//   - custom: JSON lines {"prompt": ..., "output_tokens": N} (CustomDataset);
//     a line without output_tokens takes OutputLen, default 256. No filter.
//
// Either way, when fewer than NumRequests pass, bench oversamples: it seeds
// random again with Seed and appends random.choice picks of the requests it
// has. NoShuffle is --disable-shuffle, NoOversample --no-oversample.
//
// Token lengths are estimated from the text (BytesPerToken): no tokenizer is
// read. So the prompts are picked in bench's seeded order, but the length
// filters may keep a different prompt where an estimate and the model's
// tokenizer fall on two sides of 4, 1024 or 2048 tokens: the replay is a
// sample of the same file, and its note says so.
type Dataset struct {
	Name, Path string
	OutputLen  int
	// Seed is vllm bench serve's --seed (its default is 0).
	Seed                    uint64
	NoShuffle, NoOversample bool
}

// BytesPerToken is the estimate of a text's tokens: 4 bytes of UTF-8 per
// token, the common rule of thumb of about 4 characters of English text
// per token for the BPE vocabularies of today's models (Llama 3, Qwen,
// GPT); a CJK character, 3 bytes, counts 0.75. No pure-Go reader of
// Hugging Face's tokenizer.json is kept well enough to depend on, so the
// model's tokenizer is not run.
const BytesPerToken = 4

// EstimateTokens is the tokens of a text of n bytes of UTF-8, rounded.
func EstimateTokens(n int64) int64 { return (n + BytesPerToken/2) / BytesPerToken }

// vllm bench serve's ShareGPT filter (is_valid_sequence's defaults) and
// the custom dataset's default output length.
const (
	shareGPTMinLen      = 4
	shareGPTMaxPrompt   = 1024
	shareGPTMaxTotal    = 2048
	customDefaultOutput = 256
)

// Bounds of a dataset file. ShareGPT_V3_unfiltered_cleaned_split.json, the
// file bench's docs name, is 642 MB of 94,145 conversations; the bounds
// are far above it and keep a wrong file from taking the machine: a
// conversation is kept as two lengths (8 bytes), at most maxDatasetEntries
// of them (80 MB), from at most maxDatasetBytes of (decompressed) text.
const (
	maxDatasetBytes   = 4 << 30
	maxDatasetEntries = 10_000_000
	maxJSONDepth      = 64
)

// Validate reports a Dataset that cannot be read, naming the flag.
func (d Dataset) Validate() error {
	switch d.Name {
	case DatasetShareGPT, DatasetCustom:
	default:
		return fmt.Errorf("--dataset-name %q: headroom replays %s (vllm bench serve's sonnet, hf, burstgpt and the others are not read)", d.Name, DatasetNames)
	}
	switch {
	case d.Path == "" && d.Name == DatasetCustom:
		return fmt.Errorf("--dataset-name %s needs --dataset-path FILE (the dataset vllm bench serve samples)", d.Name)
	case d.OutputLen < 0 || d.OutputLen > maxTokens:
		return fmt.Errorf("--%s-output-len must be between 1 and %d", d.Name, maxTokens)
	}
	return nil
}

func (d Dataset) String() string {
	out := "the replies' lengths"
	if d.Name == DatasetCustom {
		out = fmt.Sprintf("output_tokens (else %d)", cmp(d.OutputLen, customDefaultOutput))
	}
	if d.OutputLen > 0 && d.Name == DatasetShareGPT {
		out = strconv.Itoa(d.OutputLen)
	}
	if d.Name == DatasetShareGPT && d.Path == "" {
		return "sharegpt: headroom's ShareGPT stand-in (no --dataset-path)"
	}
	if d.Name == DatasetShareGPT && standsInForShareGPT(d.Path) {
		out += "; headroom's ShareGPT stand-in if the file is absent"
	}
	return fmt.Sprintf("%s %s (seed %d, outputs %s)", d.Name, d.Path, d.Seed, out)
}

func cmp(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// pair is one dataset entry's estimated prompt and output tokens; output
// 0 means the entry gives none.
type pair struct{ prompt, output int32 }

// readDataset reads d's entries from r (gzip recognised).
func readDataset(r io.Reader, d Dataset) ([]pair, error) {
	br, err := traffic.Text(r)
	if err != nil {
		return nil, err
	}
	s := &jsonScan{r: br, limit: maxDatasetBytes, maxEntries: maxDatasetEntries}
	if d.Name == DatasetCustom {
		return s.custom()
	}
	return s.shareGPT()
}

// sampleDataset picks num requests from entries as bench's sample() does.
func sampleDataset(entries []pair, d Dataset, num int) ([]pair, Sampled, error) {
	info := Sampled{Entries: len(entries)}
	if !d.NoShuffle {
		newPyRandom(d.Seed).shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	}
	out := make([]pair, 0, min(num, len(entries)))
	for _, e := range entries {
		if len(out) >= num {
			break
		}
		p := e
		switch d.Name {
		case DatasetShareGPT:
			if d.OutputLen > 0 {
				p.output = int32(d.OutputLen)
			}
			if !validSequence(int(p.prompt), int(p.output), d.OutputLen > 0) {
				info.Filtered++
				continue
			}
		case DatasetCustom:
			if p.output == 0 {
				p.output = int32(cmp(d.OutputLen, customDefaultOutput))
			}
		}
		out = append(out, p)
	}
	info.Taken = len(out)
	if len(out) < num && !d.NoOversample {
		if len(out) == 0 {
			return nil, info, fmt.Errorf("--dataset-path %s: no entry of its %d passes vllm bench serve's filters (prompt 4 to 1024 tokens, reply from 4, both at most 2048)", d.Path, len(entries))
		}
		// maybe_oversample_requests: random.seed(seed), then one
		// random.choice(requests) per missing request. (Releases before
		// request ids were numbered drew them with random.choices(k=...),
		// floor(random() × n) each, and may repeat other prompts.)
		r, have := newPyRandom(d.Seed), len(out)
		for len(out) < num {
			out = append(out, out[r.choice(have)])
		}
		info.Oversampled = num - have
	}
	return out, info, nil
}

// validSequence is bench's is_valid_sequence with its defaults.
func validSequence(prompt, output int, fixedOutput bool) bool {
	return prompt >= shareGPTMinLen && (fixedOutput || output >= shareGPTMinLen) &&
		prompt <= shareGPTMaxPrompt && prompt+output <= shareGPTMaxTotal
}

// Sampled says what a dataset's sampling did.
type Sampled struct {
	// Entries were read (a ShareGPT conversation of two turns or more, a
	// custom line); Filtered were dropped by the length filter; Taken
	// passed; Oversampled are repeats added to reach the count.
	Entries, Filtered, Taken, Oversampled int
}

// datasetStream yields a dataset's sampled requests at the Spec's
// arrivals.
type datasetStream struct {
	d Dataset
	// standIn: the file was not found and the lengths are the ShareGPT
	// stand-in's (sharegpt.go), n requests cycling over reqs.
	standIn  bool
	n        int
	reqs     []pair
	info     Sampled
	arrivals *arrivalTimes
	i        int
	buf      []byte
}

func (s *datasetStream) Next() (Request, error) {
	if s.i >= s.count() {
		return Request{}, io.EOF
	}
	p := s.reqs[s.i%len(s.reqs)]
	s.i++
	s.buf = strconv.AppendInt(append(s.buf[:0], s.d.Name+"-"...), int64(s.i-1), 10)
	return Request{ID: string(s.buf), At: s.arrivals.next(), Prompt: max(int(p.prompt), 1), Output: max(int(p.output), 1)}, nil
}

// count is how many requests the stream yields.
func (s *datasetStream) count() int {
	if s.standIn {
		return s.n
	}
	return len(s.reqs)
}

// Note says how the dataset was sampled and that its lengths are
// estimated.
func (s *datasetStream) Note() string {
	var b strings.Builder
	if s.standIn {
		file := s.d.Path
		if file == "" {
			file = "no --dataset-path given"
		} else {
			file += " not found"
		}
		fmt.Fprintf(&b, "sharegpt: %s, so %d requests of headroom's ShareGPT stand-in: prompts log-normal (σ %.1f, mean %.0f tokens), outputs what models generated from it (log-normal σ %.2f, at most %.0f, mean %.0f)",
			file, s.count(), shareGPTPromptSigma, shareGPTPromptMean, ShareGPTOutputs.Sigma, ShareGPTOutputs.Longest, shareGPTOutputMean)
		if s.d.OutputLen > 0 {
			fmt.Fprintf(&b, ", here %d each", s.d.OutputLen)
		}
		b.WriteString(", fitted on published vllm bench serve runs of that file; give the file for its own lengths")
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %d requests from the %d entries of %s", s.d.Name, len(s.reqs), s.info.Entries, s.d.Path)
	if s.d.NoShuffle {
		b.WriteString(" in file order")
	} else {
		fmt.Fprintf(&b, " in vllm bench serve's order for --seed %d", s.d.Seed)
	}
	if s.info.Filtered > 0 {
		fmt.Fprintf(&b, ", %d dropped by its length filter", s.info.Filtered)
	}
	if s.info.Oversampled > 0 {
		fmt.Fprintf(&b, ", %d repeated to reach the count", s.info.Oversampled)
	}
	fmt.Fprintf(&b, "; token lengths estimated at %d bytes of text per token, not with the model's tokenizer, so this replays a sample of the same file (near the filter's bounds bench may keep other prompts)", BytesPerToken)
	return b.String()
}

// jsonScan reads JSON as a stream, keeping only the lengths of strings and
// short keys and numbers: a dataset's text is never held, so memory stays
// bounded whatever its size.
type jsonScan struct {
	r *bufio.Reader
	// n bytes were read, of at most limit; at most maxEntries are kept.
	n, limit   int64
	maxEntries int
	depth      int
	// key holds the start of the last string read with capture (at most
	// keyCap bytes; long is set when it had more).
	key  []byte
	long bool
	line int
}

const keyCap = 32

// errTooBig is a file past the byte limit.
type errTooBig int64

func (e errTooBig) Error() string {
	return fmt.Sprintf("over %d MiB of text: more than headroom reads of a dataset (cut it)", int64(e)>>20)
}

func (s *jsonScan) errf(format string, a ...any) error {
	return fmt.Errorf("byte %d: %s", s.n, fmt.Sprintf(format, a...))
}

func (s *jsonScan) readByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, err
	}
	if s.n++; s.n > s.limit {
		return 0, errTooBig(s.limit)
	}
	if c == '\n' {
		s.line++
	}
	return c, nil
}

// peek returns the next byte that is not white space, unread; io.EOF at
// the end. White space is skipped a buffer at a time.
func (s *jsonScan) peek() (byte, error) {
	for {
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				return 0, err
			}
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		i := 0
		for ; i < len(buf); i++ {
			c := buf[i]
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				break
			}
			if c == '\n' {
				s.line++
			}
		}
		if s.n+int64(i) > s.limit {
			return 0, errTooBig(s.limit)
		}
		s.n += int64(i)
		if i < len(buf) {
			c := buf[i]
			_, err := s.r.Discard(i)
			return c, err
		}
		if _, err := s.r.Discard(i); err != nil {
			return 0, err
		}
	}
}

func (s *jsonScan) expect(want byte) error {
	c, err := s.peek()
	if err == io.EOF {
		return s.errf("the text ends where %q is due", want)
	}
	if err != nil {
		return err
	}
	if c != want {
		return s.errf("%q where %q is due", c, want)
	}
	_, err = s.readByte()
	return err
}

// str reads a string (its opening quote next) and returns its length in
// UTF-8 bytes once unescaped; capture keeps its start in key.
func (s *jsonScan) str(capture bool) (int64, error) {
	if err := s.expect('"'); err != nil {
		return 0, err
	}
	s.key, s.long = s.key[:0], false
	var n int64
	add := func(b ...byte) {
		n += int64(len(b))
		if capture {
			if len(s.key)+len(b) <= keyCap {
				s.key = append(s.key, b...)
			} else {
				s.long = true
			}
		}
	}
	for {
		if !capture {
			// The run of plain bytes up to the next quote, escape or
			// control character, counted without a call per byte.
			k, err := s.plain()
			if err != nil {
				return 0, err
			}
			n += k
		}
		c, err := s.readByte()
		if err != nil {
			return 0, err
		}
		switch {
		case c == '"':
			return n, nil
		case c < 0x20:
			return 0, s.errf("a control character inside a string")
		case c != '\\':
			add(c)
			continue
		}
		e, err := s.readByte()
		if err != nil {
			return 0, err
		}
		switch e {
		case '"', '\\', '/':
			add(e)
		case 'b', 'f', 'n', 'r', 't':
			add(map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[e])
		case 'u':
			var v int
			for range 4 {
				h, err := s.readByte()
				if err != nil {
					return 0, err
				}
				d := strings.IndexByte("0123456789abcdef", h|0x20)
				if d < 0 {
					return 0, s.errf("a bad \\u escape")
				}
				v = v<<4 | d
			}
			switch {
			case v < 0x80:
				add(byte(v))
			case v < 0x800:
				add(0xc0, 0x80) // the length is what counts
			case v >= 0xd800 && v < 0xe000:
				// Half of a surrogate pair: the pair is one 4-byte rune.
				add(0xf0, 0x80)
			default:
				add(0xe0, 0x80, 0x80)
			}
		default:
			return 0, s.errf("a bad escape \\%c", e)
		}
	}
}

// plain skips the bytes of a string up to the next '"', '\\' or control
// character and returns how many it skipped.
func (s *jsonScan) plain() (int64, error) {
	var n int64
	for {
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				if err == io.EOF {
					return n, nil // readByte reports the end
				}
				return n, err
			}
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		i := 0
		for i < len(buf) && buf[i] != '"' && buf[i] != '\\' && buf[i] >= 0x20 {
			i++
		}
		if s.n+int64(i) > s.limit {
			return n, errTooBig(s.limit)
		}
		s.n += int64(i)
		n += int64(i)
		if _, err := s.r.Discard(i); err != nil {
			return n, err
		}
		if i < len(buf) {
			return n, nil
		}
	}
}

// scalar reads a number, true, false or null and returns its text (at most
// keyCap bytes).
func (s *jsonScan) scalar() (string, error) {
	if _, err := s.peek(); err == io.EOF {
		return "", s.errf("the text ends where a value is due")
	} else if err != nil {
		return "", err
	}
	var b []byte
	for {
		c, err := s.r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		if strings.IndexByte("0123456789+-.eEtruefalsn", c) < 0 {
			if err := s.r.UnreadByte(); err != nil {
				return "", err
			}
			break
		}
		if s.n++; s.n > s.limit {
			return "", errTooBig(s.limit)
		}
		if len(b) >= keyCap {
			return "", s.errf("a value too long")
		}
		b = append(b, c)
	}
	v := string(b)
	if v == "true" || v == "false" || v == "null" {
		return v, nil
	}
	if _, err := strconv.ParseFloat(v, 64); err != nil || v == "" {
		return "", s.errf("not a JSON value")
	}
	return v, nil
}

// skip reads any value.
func (s *jsonScan) skip() error {
	c, err := s.peek()
	if err == io.EOF {
		return s.errf("the text ends where a value is due")
	}
	if err != nil {
		return err
	}
	switch c {
	case '"':
		_, err := s.str(false)
		return err
	case '[':
		return s.array(func(int) error { return s.skip() })
	case '{':
		return s.object(func() error { return s.skip() })
	}
	_, err = s.scalar()
	return err
}

// array reads an array (its '[' next), calling elem for each element with
// its index.
func (s *jsonScan) array(elem func(i int) error) error {
	if s.depth++; s.depth > maxJSONDepth {
		return s.errf("nested deeper than %d", maxJSONDepth)
	}
	defer func() { s.depth-- }()
	if err := s.expect('['); err != nil {
		return err
	}
	for i := 0; ; i++ {
		c, err := s.peek()
		if err != nil {
			if err == io.EOF {
				return s.errf("the text ends inside an array")
			}
			return err
		}
		if c == ']' && i == 0 {
			_, err := s.readByte()
			return err
		}
		if err := elem(i); err != nil {
			return err
		}
		c, err = s.peek()
		if err != nil {
			if err == io.EOF {
				return s.errf("the text ends inside an array")
			}
			return err
		}
		if _, err := s.readByte(); err != nil {
			return err
		}
		switch c {
		case ']':
			return nil
		case ',':
		default:
			return s.errf("%q where ',' or ']' is due", c)
		}
	}
}

// object reads an object (its '{' next), calling val after each key (in
// s.key) with the value next.
func (s *jsonScan) object(val func() error) error {
	if s.depth++; s.depth > maxJSONDepth {
		return s.errf("nested deeper than %d", maxJSONDepth)
	}
	defer func() { s.depth-- }()
	if err := s.expect('{'); err != nil {
		return err
	}
	for i := 0; ; i++ {
		c, err := s.peek()
		if err != nil {
			if err == io.EOF {
				return s.errf("the text ends inside an object")
			}
			return err
		}
		if c == '}' && i == 0 {
			_, err := s.readByte()
			return err
		}
		if _, err := s.str(true); err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := val(); err != nil {
			return err
		}
		c, err = s.peek()
		if err != nil {
			if err == io.EOF {
				return s.errf("the text ends inside an object")
			}
			return err
		}
		if _, err := s.readByte(); err != nil {
			return err
		}
		switch c {
		case '}':
			return nil
		case ',':
		default:
			return s.errf("%q where ',' or '}' is due", c)
		}
	}
}

func (s *jsonScan) keyIs(k string) bool { return !s.long && string(s.key) == k }

// textBytes reads a value that should be a string and returns its length;
// another kind of value counts 0 (no prompt).
func (s *jsonScan) textBytes() (int64, error) {
	c, err := s.peek()
	if err != nil {
		return 0, s.skip()
	}
	if c != '"' {
		return 0, s.skip()
	}
	return s.str(false)
}

func tokens32(n int64) int32 { return int32(min(EstimateTokens(n), maxTokens)) }

// shareGPT reads a ShareGPT file: the entries whose "conversations" is a
// list of two turns or more, with the first two turns' "value" lengths.
func (s *jsonScan) shareGPT() ([]pair, error) {
	var out []pair
	err := s.array(func(int) error {
		c, err := s.peek()
		if err != nil || c != '{' {
			return s.skip()
		}
		var e pair
		turns := -1
		err = s.object(func() error {
			if !s.keyIs("conversations") {
				return s.skip()
			}
			c, err := s.peek()
			if err != nil || c != '[' {
				turns = -1
				return s.skip()
			}
			e, turns = pair{}, 0
			return s.array(func(i int) error {
				turns = i + 1
				c, err := s.peek()
				if i > 1 || err != nil || c != '{' {
					return s.skip()
				}
				return s.object(func() error {
					if !s.keyIs("value") {
						return s.skip()
					}
					n, err := s.textBytes()
					if i == 0 {
						e.prompt = tokens32(n)
					} else {
						e.output = tokens32(n)
					}
					return err
				})
			})
		})
		if err != nil {
			return err
		}
		if turns >= 2 {
			if len(out) >= s.maxEntries {
				return fmt.Errorf("over %d conversations: more than headroom samples from (cut the file)", s.maxEntries)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, notShareGPT(err)
	}
	if _, err := s.peek(); err != io.EOF {
		return nil, notShareGPT(s.errf("text after the list"))
	}
	return out, nil
}

func notShareGPT(err error) error {
	var big errTooBig
	if errors.As(err, &big) {
		return err
	}
	return fmt.Errorf("not a ShareGPT file (a JSON list of {\"conversations\": [{\"value\": ...}, ...]}): %v", err)
}

// custom reads JSON lines {"prompt": ..., "output_tokens": N}.
func (s *jsonScan) custom() ([]pair, error) {
	var out []pair
	for {
		c, err := s.peek()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		line := s.line + 1
		if c != '{' {
			return nil, fmt.Errorf("line %d: not a JSON object {\"prompt\": ..., \"output_tokens\": N}", line)
		}
		var e pair
		prompt := false
		err = s.object(func() error {
			switch {
			case s.keyIs("prompt"):
				c, err := s.peek()
				if err != nil || c != '"' {
					return fmt.Errorf("line %d: \"prompt\" is not a string", line)
				}
				n, err := s.str(false)
				e.prompt, prompt = tokens32(n), true
				return err
			case s.keyIs("output_tokens"):
				v, err := s.scalar()
				if err != nil {
					return err
				}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 1 || f > maxTokens {
					return fmt.Errorf("line %d: output_tokens %s: want a whole number from 1 to %d", line, v, maxTokens)
				}
				e.output = int32(f)
				return nil
			}
			return s.skip()
		})
		if err != nil {
			var big errTooBig
			if errors.As(err, &big) {
				return nil, err
			}
			return nil, fmt.Errorf("not vllm bench serve's custom JSON lines: %v", err)
		}
		if !prompt {
			return nil, fmt.Errorf("line %d: no \"prompt\" (vllm bench serve's custom dataset needs one on every line)", line)
		}
		if len(out) >= s.maxEntries {
			return nil, fmt.Errorf("over %d lines: more than headroom samples from (cut the file)", s.maxEntries)
		}
		out = append(out, e)
	}
}
