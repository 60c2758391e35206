package workload

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Request is one request of a workload.
type Request struct {
	ID string
	// At is when the request is due, in seconds from the start. A closed
	// loop sends it at At or when a slot frees, whichever is later.
	At float64
	// Prompt and Output are its prompt tokens and the tokens it generates
	// (max_tokens, with ignore_eos).
	Prompt, Output int
	// PrefixID, when not 0, names a prompt prefix of PrefixTokens tokens
	// that every request with the same id shares.
	PrefixID     uint64
	PrefixTokens int
	// Endpoint is the API the request called where its line says
	// (EndpointChat or EndpointCompletions: a vLLM log's request id, a JSON
	// line's "endpoint"); "" calls the Spec's.
	Endpoint string
}

// Stream yields a workload's requests in order of At; io.EOF ends it.
type Stream interface {
	Next() (Request, error)
}

// Arrival processes of a rate.
const (
	Poisson  = "poisson"
	Constant = "constant"
)

// Spec describes a workload. The zero value is no traffic.
type Spec struct {
	// Rate is requests per second; +Inf sends them all at once (vllm bench
	// serve's default, --request-rate inf). Arrival is how they are spaced:
	// Poisson (gaps drawn from a gamma distribution of shape Burstiness: 1,
	// the default, is Poisson; below 1 burstier, above 1 more even, as
	// vllm bench serve --burstiness) or Constant.
	Rate       float64
	Arrival    string
	Burstiness float64
	// PeakRate, when above Rate, makes a Poisson rate follow the day:
	// Rate at 0, rising as a cosine to PeakRate at Period/2 and back to
	// Rate at Period (default 24 h), over and over. Arrivals are drawn at
	// PeakRate and each kept with the share rate(t)/PeakRate (thinning: a
	// Poisson process of rate rate(t), exactly).
	PeakRate float64
	Period   float64
	// Concurrency, when > 0, is a closed loop: at most this many requests
	// in flight, the next sent when one finishes (vllm bench serve
	// --max-concurrency). Without a Rate every request is due at once.
	Concurrency int
	// NumRequests and Duration bound the run: at most NumRequests requests,
	// none due (or, in a closed loop, sent) after Duration seconds. With
	// neither, a synthetic workload has DefaultNumRequests.
	NumRequests int
	Duration    float64
	// Log is a request log to replay (any format package traffic reads, or
	// JSON lines {"arrival_s", "prompt_tokens", "output_tokens"}): its own
	// times divided by Speedup, or, with a Rate or Concurrency, only its
	// sizes. Its lines without a size take Prompt's and Output's.
	Log     string
	Speedup float64
	// Dataset, when its Name is set, is a dataset file sampled as vllm
	// bench serve samples it: its requests' sizes, at the Spec's arrivals,
	// NumRequests of them (default DefaultNumRequests).
	Dataset Dataset
	// Prompt and Output are the lengths of synthetic requests.
	Prompt, Output Dist
	// PrefixTokens, when > 0, puts a prefix of that many tokens shared by
	// every request in front of each prompt (vllm bench serve
	// --random-prefix-len).
	PrefixTokens int
	// Bursts are added at their times, their outputs drawn from Output.
	Bursts []Burst
	// Seed fixes the arrival times and lengths.
	Seed uint64
	// Endpoint is the API the requests call: EndpointCompletions (also
	// ""), vllm bench serve's default, or EndpointChat. A chat request is
	// rendered by the model's chat template in vLLM's API server, which
	// costs it CPU a completion does not (sim.Calibration.FrontEndFor).
	Endpoint string
}

// The OpenAI API's endpoints a workload calls (package traffic's
// spelling, which a request log's lines carry).
const (
	EndpointCompletions = traffic.EndpointCompletions
	EndpointChat        = traffic.EndpointChat
)

// ParseEndpoint reads an endpoint as headroom's flags and vllm bench
// serve's --endpoint spell it: completions or chat, /v1/completions or
// /v1/chat/completions.
func ParseEndpoint(s string) (string, error) {
	switch strings.TrimRight(strings.TrimSpace(s), "/") {
	case EndpointCompletions, "/v1/completions", "v1/completions":
		return EndpointCompletions, nil
	case EndpointChat, "/v1/chat/completions", "v1/chat/completions":
		return EndpointChat, nil
	}
	return "", fmt.Errorf("endpoint %q: use completions or chat (/v1/completions or /v1/chat/completions)", s)
}

// Chat reports whether the requests call the chat endpoint.
func (s Spec) Chat() bool { return s.Endpoint == EndpointChat }

// DefaultNumRequests is vllm bench serve's --num-prompts default.
const DefaultNumRequests = 1000

// MaxRequests bounds a synthetic workload: a Spec whose rate × duration
// or request count exceeds it is refused up front. Ten million requests
// simulate in about a minute; more is a typo, or a question a shorter
// run answers the same.
const MaxRequests = 10_000_000

// Burst is Count requests of Tokens prompt tokens due together At seconds
// from the start.
type Burst struct {
	Count, Tokens int
	At            float64
}

func (b Burst) String() string {
	return fmt.Sprintf("%dx%d@%s", b.Count, b.Tokens, time.Duration(b.At*float64(time.Second)))
}

// ParseBurst reads COUNTxTOKENS@TIME, e.g. 50x30000@60s.
func ParseBurst(s string) (Burst, error) {
	bad := fmt.Errorf("burst %q: want COUNTxTOKENS@TIME, e.g. 50x30000@60s", s)
	what, at, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		return Burst{}, bad
	}
	c, t, ok := strings.Cut(what, "x")
	if !ok {
		return Burst{}, bad
	}
	count, err1 := strconv.Atoi(c)
	tokens, ok := vllm.HumanInt(t)
	d, err3 := time.ParseDuration(at)
	if err1 != nil || !ok || err3 != nil || count <= 0 || tokens <= 0 || d < 0 {
		return Burst{}, bad
	}
	// Far beyond any real burst, and a typo away from a run that never ends.
	if count > 1_000_000 || tokens > maxTokens {
		return Burst{}, fmt.Errorf("burst %q: at most 1000000 requests of at most %d tokens", s, maxTokens)
	}
	return Burst{Count: count, Tokens: int(tokens), At: d.Seconds()}, nil
}

// Validate reports a Spec that cannot run, in one line naming the flag.
func (s Spec) Validate() error {
	switch {
	case math.IsNaN(s.Rate) || s.Rate < 0:
		return errors.New("--rate must be a positive number of requests per second, or inf")
	case s.Concurrency < 0:
		return errors.New("--concurrency must be 1 or more")
	case s.NumRequests < 0:
		return errors.New(errNumRequests)
	case math.IsNaN(s.Duration) || s.Duration < 0:
		return errors.New(errDuration)
	case s.Log != "" && !(s.Speedup > 0):
		return errors.New("--speedup must be positive, e.g. 2")
	case s.Arrival != "" && s.Arrival != Poisson && s.Arrival != Constant:
		return fmt.Errorf("--arrival %q: use poisson or constant", s.Arrival)
	case s.Burstiness < 0 || math.IsNaN(s.Burstiness):
		return errors.New(errBurstiness)
	case math.IsNaN(s.PeakRate) || s.PeakRate < 0 || math.IsInf(s.PeakRate, 1):
		return errors.New("--peak-rate must be a finite number of requests per second")
	case s.PeakRate > 0 && (s.Rate <= 0 || math.IsInf(s.Rate, 1) || s.PeakRate < s.Rate):
		return errors.New("--peak-rate needs a finite --rate (the trough) at most the peak, e.g. --rate 2 --peak-rate 40")
	case s.PeakRate > s.Rate && (s.Arrival == Constant || (s.Burstiness != 0 && s.Burstiness != 1) || s.Concurrency > 0):
		return errors.New("--peak-rate is a Poisson rate over the day: it takes no --arrival constant, --burstiness or --concurrency")
	case math.IsNaN(s.Period) || s.Period < 0:
		return errors.New("--period must be positive, e.g. 24h")
	case s.PrefixTokens < 0 || s.PrefixTokens > maxTokens:
		return fmt.Errorf("--prefix-tokens must be between 0 and %d", maxTokens)
	case s.Endpoint != "" && s.Endpoint != EndpointCompletions && s.Endpoint != EndpointChat:
		return fmt.Errorf("--endpoint %q: use completions or chat", s.Endpoint)
	case s.Dataset.Name != "" && s.Log != "":
		return errors.New("--dataset-name and --requests both give the requests' sizes: give one")
	case s.Log == "" && s.Rate == 0 && s.Concurrency == 0 && len(s.Bursts) == 0:
		return errors.New("no traffic: give --rate R, --concurrency N, --burst or --requests FILE")
	case s.Dataset.Name != "" && len(s.Bursts) > 0:
		return errors.New("--burst adds synthetic requests: not with --dataset-name (replay the dataset alone)")
	case s.Log != "" && len(s.Bursts) > 0:
		// A replayed log is the traffic as it was: a burst would have to
		// be merged into its times, and was dropped instead.
		return errors.New("--burst adds synthetic requests: not with --requests (add the burst's lines to the log, or replay it alone)")
	case s.Dataset.Name != "":
		if err := s.Dataset.Validate(); err != nil {
			return err
		}
	case s.Log == "" && (s.Prompt == nil || s.Output == nil):
		return errors.New("no request lengths: give --prompt-tokens and --output-tokens")
	case s.Log == "" && Least(s.Output) < 1:
		// vLLM's SamplingParams refuses max_tokens below 1, and so does
		// the stand-in server: a request of 0 output tokens is no request.
		return fmt.Errorf("--output-tokens %s: vLLM refuses max_tokens below 1: give lengths of 1 or more", s.Output)
	case s.Log == "" && s.PrefixTokens == 0 && Least(s.Prompt) < 1:
		return fmt.Errorf("--prompt-tokens %s: vLLM refuses an empty prompt: give lengths of 1 or more", s.Prompt)
	}
	for _, b := range s.Bursts {
		if s.Duration > 0 && b.At > s.Duration {
			return fmt.Errorf("--burst %s comes after the traffic ends (--duration %s): move it within, or lengthen --duration", b, seconds(s.Duration))
		}
	}
	if n := s.synthCount(); n > MaxRequests {
		return fmt.Errorf("%s requests: at most %d in one run (lower --rate, --duration or --num-requests)", humanCount(n), MaxRequests)
	}
	return nil
}

// synthCount is the most requests a synthetic Spec sends.
func (s Spec) synthCount() float64 {
	if s.Log != "" {
		return 0
	}
	var n float64
	for _, b := range s.Bursts {
		n += float64(b.Count)
	}
	if s.Rate == 0 && s.Concurrency == 0 {
		return n
	}
	if s.Dataset.Name != "" {
		return n + float64(s.datasetCount())
	}
	switch {
	case s.NumRequests > 0:
		return n + float64(s.NumRequests)
	case s.Duration > 0 && s.Rate > 0 && !math.IsInf(s.Rate, 1):
		return n + max(s.Rate, s.PeakRate)*s.Duration
	case s.Duration > 0:
		// All at once for a duration: a closed loop, bounded by time.
		return n
	}
	return n + DefaultNumRequests
}

// Messages a zero and a negative value share: both are refused alike.
const (
	errNumRequests = "--num-requests must be 1 or more"
	errDuration    = "--duration must be positive"
	errBurstiness  = "--burstiness must be positive (1 is Poisson)"
)

// humanCount is a count of requests in words: "12000", "2.5 million",
// "1 trillion"; past a thousand trillion, a power of ten ("1e+18").
func humanCount(n float64) string {
	for _, u := range []struct {
		v    float64
		name string
	}{{1e15, ""}, {1e12, "trillion"}, {1e9, "billion"}, {1e6, "million"}} {
		switch {
		case n >= u.v && u.name == "":
			return strconv.FormatFloat(n, 'g', 3, 64)
		case n >= u.v:
			return fmt.Sprintf("%.3g %s", n/u.v, u.name)
		}
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}

// Describe is the Spec in words, for reports.
func (s Spec) Describe() string {
	var parts []string
	switch {
	case s.Log != "" && s.Rate == 0 && s.Concurrency == 0:
		d := "requests of " + s.Log
		if s.Speedup != 1 && s.Speedup > 0 {
			d += fmt.Sprintf(" at %gx speed", s.Speedup)
		}
		parts = append(parts, d)
	case s.Log != "":
		parts = append(parts, "the sizes of "+s.Log)
	}
	switch {
	case math.IsInf(s.Rate, 1):
		parts = append(parts, "all at once")
	case s.Rate > 0:
		kind := "Poisson"
		if s.PeakRate > s.Rate {
			parts = append(parts, fmt.Sprintf("Poisson %g req/s rising to %g req/s at %s and back over %s", s.Rate, s.PeakRate, seconds(s.period()/2), seconds(s.period())))
			break
		}
		if s.Arrival == Constant {
			kind = "constant"
		} else if s.Burstiness > 0 && s.Burstiness != 1 {
			kind = fmt.Sprintf("gamma (burstiness %g)", s.Burstiness)
		}
		parts = append(parts, fmt.Sprintf("%s %g req/s", kind, s.Rate))
	}
	if s.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("closed loop of %d", s.Concurrency))
	}
	if s.Dataset.Name != "" {
		parts = append(parts, s.Dataset.String())
	} else if s.Log == "" && (s.Rate > 0 || s.Concurrency > 0) {
		parts = append(parts, fmt.Sprintf("prompts %s, outputs %s", s.Prompt, s.Output))
	}
	if s.PrefixTokens > 0 {
		parts = append(parts, fmt.Sprintf("a shared prefix of %d tokens", s.PrefixTokens))
	}
	if s.Rate > 0 || s.Concurrency > 0 || s.Log != "" {
		switch n, d := s.bound(); {
		case n > 0 && d > 0:
			parts = append(parts, fmt.Sprintf("%d requests within %s", n, seconds(d)))
		case n > 0:
			parts = append(parts, fmt.Sprintf("%d requests", n))
		case d > 0:
			parts = append(parts, "for "+seconds(d))
		}
	}
	for _, b := range s.Bursts {
		parts = append(parts, "plus a burst "+b.String())
	}
	if s.Chat() {
		parts = append(parts, "to /v1/chat/completions")
	}
	return strings.Join(parts, ", ")
}

func seconds(d float64) string { return time.Duration(d * float64(time.Second)).String() }

// bound is the count and duration that end the stream: a synthetic Spec
// with neither has DefaultNumRequests.
func (s Spec) bound() (int, float64) {
	if s.NumRequests == 0 && s.Duration == 0 && s.Log == "" && (s.Rate > 0 || s.Concurrency > 0) {
		return DefaultNumRequests, 0
	}
	return s.NumRequests, s.Duration
}

// Open returns the Spec's requests. open reads a file (the log); the
// returned closer closes it.
func (s Spec) Open(open func(name string) (io.ReadCloser, error)) (Stream, io.Closer, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	n, d := s.bound()
	arrivals := s.arrivals()
	if s.Dataset.Name != "" {
		st, err := s.openDataset(open, arrivals)
		if err != nil {
			return nil, nil, err
		}
		return &bounded{src: st, n: n, d: d}, io.NopCloser(nil), nil
	}
	if s.Log == "" {
		// The bound ends the arrival process, not the bursts: a burst is
		// added on top of the traffic (Validate keeps it within a
		// --duration).
		return &synthetic{spec: s, arrivals: arrivals, lengths: newRand(s.Seed, 2), limit: n, until: d}, io.NopCloser(nil), nil
	}
	f, err := open(s.Log)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, nil, fmt.Errorf("--requests %s: %v", s.Log, err)
	}
	rp, err := newReplay(f, s.Speedup, s.Prompt, s.Output, newRand(s.Seed, 3))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("--requests %s: %w", s.Log, err)
	}
	rp.name, rp.endpoint = s.Log, s.Endpoint
	if s.Rate > 0 || s.Concurrency > 0 {
		// The log's sizes, at the Spec's arrivals.
		rp.untimed = arrivals
	}
	// Read up to the first request now, so a log that cannot be replayed
	// is one clear error here, not in the middle of a run.
	if _, err := rp.start(); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("--requests %s: %w", s.Log, err)
	}
	return &bounded{src: rp, n: n, d: d}, f, nil
}

// DefaultPeriod is the period of a rate that rises to PeakRate: a day.
const DefaultPeriod = 24 * 3600.0

func (s Spec) period() float64 {
	if s.Period > 0 {
		return s.Period
	}
	return DefaultPeriod
}

// RateAt is the Spec's arrival rate at t seconds (the trough Rate, or the
// day's cosine up to PeakRate).
func (s Spec) RateAt(t float64) float64 {
	if s.PeakRate <= s.Rate {
		return s.Rate
	}
	return s.Rate + (s.PeakRate-s.Rate)*(1-math.Cos(2*math.Pi*t/s.period()))/2
}

// datasetCount is the number of requests a dataset is sampled for:
// NumRequests, else vllm bench serve's --num-prompts default.
func (s Spec) datasetCount() int {
	if s.NumRequests > 0 {
		return s.NumRequests
	}
	return DefaultNumRequests
}

// openDataset reads and samples the Spec's dataset; the file is closed
// when it returns (only the sampled lengths are kept).
func (s Spec) openDataset(open func(name string) (io.ReadCloser, error), arrivals *arrivalTimes) (*datasetStream, error) {
	d := s.Dataset
	var f io.ReadCloser
	err := fs.ErrNotExist
	if d.Path != "" {
		f, err = open(d.Path)
	}
	if errors.Is(err, fs.ErrNotExist) && d.Name == DatasetShareGPT && standsInForShareGPT(d.Path) {
		return &datasetStream{d: d, standIn: true, n: s.datasetCount(), reqs: shareGPTStandInPairs(s.datasetCount(), d.OutputLen), arrivals: arrivals}, nil
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("--dataset-path %s: %v", d.Path, err)
	}
	defer f.Close()
	entries, err := readDataset(f, d)
	if err != nil {
		return nil, fmt.Errorf("--dataset-path %s: %v", d.Path, err)
	}
	reqs, info, err := sampleDataset(entries, d, s.datasetCount())
	if err != nil {
		return nil, err
	}
	return &datasetStream{d: d, reqs: reqs, info: info, arrivals: arrivals}, nil
}

// arrivals is the Spec's arrival process without bursts.
func (s Spec) arrivals() *arrivalTimes {
	a := &arrivalTimes{rng: newRand(s.Seed, 1), rate: s.Rate, constant: s.Arrival == Constant, shape: s.Burstiness}
	if a.shape == 0 {
		a.shape = 1
	}
	if s.PeakRate > s.Rate {
		a.rate, a.thin = s.PeakRate, s.RateAt
	}
	return a
}

func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d^stream))
}

// arrivalTimes yields due times: all 0 without a rate (or at +Inf),
// else gaps of mean 1/rate.
type arrivalTimes struct {
	rng      *rand.Rand
	rate     float64
	constant bool
	shape    float64
	t        float64
	started  bool
	// thin, when set, is the rate over time: arrivals drawn at rate are
	// kept with the share thin(t)/rate.
	thin func(float64) float64
}

func (a *arrivalTimes) next() float64 {
	if a.rate <= 0 || math.IsInf(a.rate, 1) {
		return 0
	}
	if !a.started {
		// The first request goes at a gap from 0, as vllm bench serve
		// sleeps before each request.
		a.started = true
	}
	for {
		switch {
		case a.constant:
			a.t += 1 / a.rate
		case a.shape == 1:
			a.t += a.rng.ExpFloat64() / a.rate
		default:
			a.t += gamma(a.rng, a.shape) / (a.rate * a.shape)
		}
		if a.thin == nil || a.rng.Float64()*a.rate < a.thin(a.t) {
			return a.t
		}
	}
}

// gamma draws from a gamma distribution of shape k and scale 1
// (Marsaglia and Tsang's method; for k < 1 boosted by U^(1/k)).
func gamma(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gamma(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// synthetic is generated traffic: the arrival process's requests, at
// most limit of them and none due past until (0: no bound), with bursts
// merged in at their times.
type synthetic struct {
	spec         Spec
	arrivals     *arrivalTimes
	lengths      *rand.Rand
	bursts       []Burst
	left         int
	next         float64
	started      bool
	stopped      bool // no rate-driven arrivals
	n            int
	limit, drawn int
	until        float64
	buf          []byte
}

func (s *synthetic) Next() (Request, error) {
	if !s.started {
		s.started = true
		s.bursts = append([]Burst(nil), s.spec.Bursts...)
		sort.SliceStable(s.bursts, func(i, j int) bool { return s.bursts[i].At < s.bursts[j].At })
		if len(s.bursts) > 0 {
			s.left = s.bursts[0].Count
		}
		s.stopped = s.spec.Rate == 0 && s.spec.Concurrency == 0
		if !s.stopped {
			s.draw()
		}
	}
	if len(s.bursts) > 0 && (s.stopped || s.bursts[0].At <= s.next) {
		b := s.bursts[0]
		if s.left--; s.left == 0 {
			s.bursts = s.bursts[1:]
			if len(s.bursts) > 0 {
				s.left = s.bursts[0].Count
			}
		}
		return s.request(b.At, b.Tokens), nil
	}
	if s.stopped {
		return Request{}, io.EOF
	}
	at := s.next
	s.draw()
	return s.request(at, max(s.spec.Prompt.Sample(s.lengths), 1)), nil
}

// draw takes the arrival process's next due time, or stops it at its
// bound. Drawn no further than the bound, the times and lengths before
// it are those of the unbounded process.
func (s *synthetic) draw() {
	if s.limit > 0 && s.drawn >= s.limit {
		s.stopped = true
		return
	}
	s.next = s.arrivals.next()
	s.drawn++
	if s.until > 0 && s.next > s.until {
		s.stopped = true
	}
}

func (s *synthetic) request(at float64, prompt int) Request {
	s.n++
	s.buf = strconv.AppendInt(append(s.buf[:0], 'r'), int64(s.n), 10)
	r := Request{ID: string(s.buf), At: at, Prompt: prompt, Output: max(s.spec.Output.Sample(s.lengths), 1)}
	if p := s.spec.PrefixTokens; p > 0 {
		r.Prompt += p
		r.PrefixID, r.PrefixTokens = 1, p
	}
	return r
}

// LogCounts is what a replayed log's stream says of the lines it did not
// take as they are: lines that are no request (skipped) and lines sent
// with the line before them (no time, or out of order).
type LogCounts interface {
	LogCounts() (skipped, outOfOrder int64)
}

// LogNote says what LogCounts counted, or how a dataset was sampled (and
// that its lengths are estimated); "" when nothing.
func LogNote(st Stream) string {
	if b, ok := st.(*bounded); ok {
		if d, ok := b.src.(*datasetStream); ok {
			return d.Note()
		}
	}
	c, ok := st.(LogCounts)
	if !ok {
		return ""
	}
	var notes []string
	if skipped, late := c.LogCounts(); skipped != 0 || late != 0 {
		notes = append(notes, fmt.Sprintf("request log: %d lines that are no request skipped, %d without a time or out of order sent with the line before", skipped, late))
	}
	if b, ok := st.(*bounded); ok {
		if r, ok := b.src.(*replay); ok {
			if n := r.endpointNote(); n != "" {
				notes = append(notes, n)
			}
		}
	}
	return strings.Join(notes, "; ")
}

func (b *bounded) LogCounts() (int64, int64) {
	if r, ok := b.src.(*replay); ok {
		return r.Skipped, r.OutOfOrder
	}
	return 0, 0
}

// bounded ends a stream at n requests or past d seconds (0: no bound).
type bounded struct {
	src  Stream
	n    int
	d    float64
	sent int
}

func (b *bounded) Next() (Request, error) {
	if b.n > 0 && b.sent >= b.n {
		return Request{}, io.EOF
	}
	r, err := b.src.Next()
	if err != nil {
		return r, err
	}
	if b.d > 0 && r.At > b.d {
		return Request{}, io.EOF
	}
	b.sent++
	return r, nil
}
