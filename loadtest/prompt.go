package loadtest

import (
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
)

// words are what prompts are made of: common English words of one to
// three syllables, which every BPE tokenizer of the models we serve cuts
// into one or two tokens. Random order keeps a prompt's prefix from
// matching another's, so prefix caching does not shorten the prefill
// (vllm bench serve's random dataset draws random token ids for the same
// reason).
var words = strings.Fields(`time year people way day man thing woman life child world school state
family student group country problem hand part place case week company system program question work
government number night point home water room mother area money story fact month lot right study book
eye job word business issue side kind head house service friend father power hour game line end member
law car city community name president team minute idea kid body information back parent face others
level office door health person art war history party result change morning reason research girl guy
moment air teacher force education foot boy age policy music market sense nation plan college interest
death experience effect class control care field development role effort rate heart drug show leader
light voice wife police mind price report decision son view relationship town road arm difference value
building action model season society tax director position player record paper space ground form event
official matter center couple site project activity star table need court oil situation cost industry
figure street image phone data picture practice piece land product doctor wall patient worker news test
movie north love support technology step baby computer type attention film tree source organization hair
window evidence population river garden summer winter island mountain orange silver yellow purple
quickly slowly gently happily bright quiet simple strong little ancient modern careful common gentle`)

// Calibration turns a requested prompt length in tokens into a number of
// words, from what the server reports. The server tokenizes; we cannot,
// without the model's tokenizer. Its usage.prompt_tokens for prompts of
// known word counts fits tokens = Fixed + PerWord × words by least squares:
// PerWord is the tokenizer's rate on our words, Fixed the chat template's
// (or BOS) tokens around any prompt. It is safe for concurrent use.
type Calibration struct {
	mu sync.Mutex
	// sums of the fit
	n, sx, sy, sxx, sxy float64
	fixed, perWord      float64
}

// Samples bounds the replies the fit takes: after that many the rate is
// known to well under a percent and later prompts keep their lengths.
const calibrationSamples = 64

// Default rate before any reply: about 1.3 tokens per English word
// (OpenAI's rule of thumb, "100 tokens ~= 75 words").
const defaultTokensPerWord = 1.0 / 0.75

// NewCalibration starts at the default rate with no fixed part.
func NewCalibration() *Calibration {
	return &Calibration{perWord: defaultTokensPerWord}
}

// Observe takes one reply: a prompt of nwords words was counted as
// promptTokens by the server. It reports whether the fit used it.
func (c *Calibration) Observe(nwords int, promptTokens int64) bool {
	if nwords <= 0 || promptTokens <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= calibrationSamples {
		return false
	}
	x, y := float64(nwords), float64(promptTokens)
	c.n++
	c.sx += x
	c.sy += y
	c.sxx += x * x
	c.sxy += x * y
	// Two distinct lengths give a line; one gives a rate through the origin.
	den := c.n*c.sxx - c.sx*c.sx
	fixed, perWord := 0.0, c.sy/c.sx
	if den > 1e-9*c.n*c.sxx {
		perWord = (c.n*c.sxy - c.sx*c.sy) / den
		fixed = (c.sy - perWord*c.sx) / c.n
	}
	// A template never removes tokens, and a tokenizer cuts our words into
	// between a fifth of a token (never) and a few tokens each: outside
	// that the fit is noise from a server whose usage is not real.
	if perWord >= 0.2 && perWord <= 10 && fixed >= 0 {
		c.fixed, c.perWord = fixed, perWord
	} else if r := c.sy / c.sx; r >= 0.2 && r <= 10 {
		c.fixed, c.perWord = 0, r
	}
	return true
}

// Words returns the number of words whose prompt the server counts as
// about tokens tokens (at least one word).
func (c *Calibration) Words(tokens int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := math.Round((float64(tokens) - c.fixed) / c.perWord)
	return int(max(w, 1))
}

// Rate returns the fit: tokens per word and the fixed tokens.
func (c *Calibration) Rate() (perWord, fixed float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.perWord, c.fixed
}

// prompt returns n random words separated by spaces.
func prompt(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// Prompt is a prompt of random words that is generated as it is sent,
// never held: Words words drawn from a PCG seeded with (Seed, Stream),
// the same text prompt builds from that generator. A 10M-token prompt is
// about 50 MB of text; twenty of them in flight were a gigabyte held.
type Prompt struct {
	Seed, Stream uint64
	Words        int
}

// Reader is the prompt's text.
func (p Prompt) Reader() io.Reader {
	return &promptReader{rng: rand.New(rand.NewPCG(p.Seed, p.Stream)), left: p.Words}
}

// Len is the text's length in bytes, generated once to count it.
func (p Prompt) Len() int64 {
	rng := rand.New(rand.NewPCG(p.Seed, p.Stream))
	n := int64(max(p.Words-1, 0))
	for range p.Words {
		n += int64(len(words[rng.IntN(len(words))]))
	}
	return n
}

// String is the whole text, for the short warm-up prompts and tests.
func (p Prompt) String() string {
	var b strings.Builder
	_, _ = io.Copy(&b, p.Reader())
	return b.String()
}

type promptReader struct {
	rng  *rand.Rand
	left int
	// pending is the rest of a word that did not fit the last read.
	pending string
	started bool
}

func (r *promptReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if r.pending == "" {
			if r.left == 0 {
				break
			}
			w := words[r.rng.IntN(len(words))]
			if r.started {
				w = " " + w
			}
			r.started = true
			r.left--
			r.pending = w
		}
		c := copy(b[n:], r.pending)
		n += c
		r.pending = r.pending[c:]
	}
	if n == 0 && r.left == 0 && r.pending == "" {
		return 0, io.EOF
	}
	return n, nil
}
