package telemetry

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"headroom.dev/headroom/vllm"
)

// Bounds of one read of a /metrics exposition. A vLLM server's is 20-200
// KiB in lines under 1 KiB; what is past these bounds comes from a broken
// or hostile server, and the read stops there with an error that names
// the bound. The exporter, watch, loadtest and audit --live all read
// through ParseVLLMMetrics, so each of them keeps these bounds.
const (
	// MaxExpositionBytes is the most one read takes, counted after any
	// gzip of the transport is undone (so a gzip bomb stops here too).
	MaxExpositionBytes = 32 << 20
	// maxLineBytes bounds one line of a family headroom reads; a longer
	// line of another family is skipped unread.
	maxLineBytes = 64 << 10
	// chunkBytes is how much of the kept lines is parsed at once: the
	// lines of the families read are parsed in chunks and folded into
	// sums, so memory does not grow with the exposition.
	chunkBytes = 256 << 10
	// maxBucketBounds bounds the distinct le bounds of the TTFT
	// histogram (vLLM's has 20 or so).
	maxBucketBounds = 1024
	// maxModels bounds the model_name values kept.
	maxModels = 64
)

// ErrExpositionTooLarge is wrapped when a /metrics body is cut at
// MaxExpositionBytes.
var ErrExpositionTooLarge = errors.New("cut at 32 MiB, the most one /metrics read takes (a vLLM server's is 20-200 KiB)")

// Plausible bounds of what vLLM exports: a value past one is left out of
// the sample, with a note in VLLMSample.Dropped, because it comes from a
// torn or hostile exposition and would make every number derived from it
// (rates, percentiles, the risk) absurd or infinite.
const (
	// maxCount bounds a count (requests running or waiting, preemptions,
	// tokens, observations): a million a second for 30 years.
	maxCount = 1e15
	// maxSeconds bounds a latency and a finite histogram bound: 11.6 days.
	maxSeconds = 1e6
	// maxBlocks, maxBlockSize and maxKVTokens bound cache_config_info's
	// labels: 2^32 blocks and 2^40 tokens are a thousand times the KV
	// cache of the largest node, and keep the bytes of what is compared
	// with a plan (tokens × bytes a token) within int64.
	maxBlocks    = 1 << 32
	maxBlockSize = 1 << 16
	maxKVTokens  = 1 << 40
)

// readMetrics are the quantities a sample holds.
var readMetrics = append([]vllm.Metric{vllm.MetricRequestsRunning, vllm.MetricRequestsWaiting, vllm.MetricPreemptions,
	vllm.MetricPromptTokens, vllm.MetricGenerationTokens, vllm.MetricKVCacheUsage, vllm.MetricTTFT, vllm.MetricCacheConfig}, specMetrics...)

// wireNames are the names of each of readMetrics, newest first.
var wireNames = func() map[vllm.Metric][]string {
	out := map[vllm.Metric][]string{}
	for _, m := range readMetrics {
		out[m] = vllm.MetricWireNames(m)
	}
	return out
}()

// keptFamilies are the wire names of readMetrics under every release,
// and the process start time.
var keptFamilies = func() map[string]bool {
	out := map[string]bool{processStartTime: true}
	for _, names := range wireNames {
		for _, n := range names {
			out[n] = true
		}
	}
	return out
}()

// familyOf is the kept family a sample's name belongs to: itself, or a
// histogram's name without _bucket, _sum or _count; "" when none.
func familyOf(name string) string {
	if keptFamilies[name] {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && keptFamilies[base] {
			return base
		}
	}
	return ""
}

// lineName is the metric name a line of the text format starts with (a
// sample), or that a "# TYPE" or "# HELP" comment names; comment is true
// for those. Names in the quoted form of the UTF-8 syntax are not read:
// vLLM's prometheus_client writes none.
func lineName(line []byte) (name string, comment bool, typ bool) {
	line = bytes.TrimLeft(line, " \t")
	if rest, ok := bytes.CutPrefix(line, []byte("#")); ok {
		f := bytes.Fields(rest)
		if len(f) >= 2 && (string(f[0]) == "TYPE" || string(f[0]) == "HELP") {
			return string(f[1]), true, string(f[0]) == "TYPE"
		}
		return "", true, false
	}
	end := bytes.IndexFunc(line, func(r rune) bool {
		return !(r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if end < 0 {
		end = len(line)
	}
	return string(line[:end]), false, false
}

// ParseVLLMMetrics reads Prometheus text exposition (format 0.0.4, what
// vLLM's /metrics serves) and returns the vLLM quantities in it, accepting
// the names of old and new releases. It streams: only the lines of the
// families it reads are kept, parsed in chunks and folded into sums, so
// an exposition of a million lines takes no more memory than one of ten.
// Past MaxExpositionBytes it stops with an error wrapping
// ErrExpositionTooLarge; an exposition with no vllm: metric returns an
// error wrapping ErrNoVLLMMetrics. Lines of other families are not
// checked: a broken line elsewhere does not hide vLLM's numbers.
func ParseVLLMMetrics(r io.Reader) (VLLMSample, error) {
	lr := &io.LimitedReader{R: r, N: MaxExpositionBytes + 1}
	br := bufio.NewReaderSize(lr, maxLineBytes)
	f := newFold()
	var chunk bytes.Buffer
	var chunkLines []int // the exposition's line number of each chunk line
	flush := func() error {
		if chunk.Len() == 0 {
			return nil
		}
		err := f.parse(chunk.Bytes(), chunkLines)
		chunk.Reset()
		chunkLines = chunkLines[:0]
		return err
	}
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			name, _, _ := lineName(line)
			if strings.HasPrefix(name, "vllm:") {
				f.anyVLLM = true
			}
			if familyOf(name) != "" {
				return VLLMSample{}, fmt.Errorf("reading Prometheus metrics: line %d (%s) is longer than %d KiB: not read", n, name, maxLineBytes>>10)
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if err != nil && err != io.EOF {
			return VLLMSample{}, f.readError(lr, err)
		}
		if len(line) > 0 {
			name, comment, typ := lineName(line)
			if strings.HasPrefix(name, "vllm:") {
				f.anyVLLM = true
			}
			fam := familyOf(name)
			switch {
			case name == "" && !comment && f.notText == 0 && len(bytes.TrimSpace(line)) > 0:
				// Not a sample line: kept to say what the body is when
				// it holds no vLLM metric (an HTML page, a proxy's error).
				f.notText = n
			case fam == "":
			case typ:
				// A TYPE line applies to the lines after it: the
				// chunk so far is parsed without it, and every chunk
				// after starts with it.
				if err := flush(); err != nil {
					return VLLMSample{}, err
				}
				f.types[fam] = string(bytes.TrimRight(line, "\r\n")) + "\n"
			case comment:
			default:
				chunk.Write(line)
				if line[len(line)-1] != '\n' {
					chunk.WriteByte('\n')
				}
				chunkLines = append(chunkLines, n)
				if chunk.Len() >= chunkBytes {
					if err := flush(); err != nil {
						return VLLMSample{}, err
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
	}
	if lr.N <= 0 {
		return VLLMSample{}, ErrExpositionTooLarge
	}
	if err := flush(); err != nil {
		return VLLMSample{}, err
	}
	return f.sample()
}

// readError says why the body stopped: the byte bound, or the reader's
// own error (a timeout, a connection reset).
func (f *fold) readError(lr *io.LimitedReader, err error) error {
	if lr.N <= 0 {
		return ErrExpositionTooLarge
	}
	return fmt.Errorf("reading Prometheus metrics: %w", err)
}

// famAcc is what the samples of one wire name add up to.
type famAcc struct {
	// series counts the samples seen, valid or not; valid those summed.
	series, valid int
	sum, max      float64
	// absurd is the first value past its bound, or NaN, infinite or
	// negative; 0 when none.
	absurd float64
	hist   Histogram
	// badHist says why the histogram was left out; "" when it was not.
	badHist string
	cache   *CacheConfig
	start   float64
	// byPos sums a per-position family by its position label
	// (specdecode.go).
	byPos []float64
}

// fold accumulates the kept families over the chunks of an exposition.
type fold struct {
	types   map[string]string
	acc     map[string]*famAcc
	models  map[string]bool
	notes   []string
	anyVLLM bool
	// notText is the first line that is neither a sample nor a comment;
	// 0 when there is none.
	notText int
}

func newFold() *fold {
	return &fold{types: map[string]string{}, acc: map[string]*famAcc{}, models: map[string]bool{}}
}

func (f *fold) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(f.notes, msg) {
		f.notes = append(f.notes, msg)
	}
}

// parse reads one chunk of kept lines, after the TYPE lines seen so far,
// with the real text parser, and folds its families in.
func (f *fold) parse(chunk []byte, lines []int) error {
	var types strings.Builder
	typeLines := 0
	for _, name := range sortedKeys(f.types) {
		types.WriteString(f.types[name])
		typeLines++
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.MultiReader(strings.NewReader(types.String()), bytes.NewReader(chunk)))
	if err != nil {
		var pe expfmt.ParseError
		if errors.As(err, &pe) && pe.Line > typeLines && pe.Line-typeLines <= len(lines) {
			return fmt.Errorf("reading Prometheus metrics: line %d: %s", lines[pe.Line-typeLines-1], pe.Msg)
		}
		return fmt.Errorf("reading Prometheus metrics: %v", err)
	}
	for name, fam := range fams {
		if familyOf(name) != name {
			continue // a histogram's _bucket lines without its TYPE line
		}
		a := f.acc[name]
		if a == nil {
			a = &famAcc{}
			f.acc[name] = a
		}
		for _, m := range fam.GetMetric() {
			f.add(name, a, m)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// add folds one sample of the family name into a.
func (f *fold) add(name string, a *famAcc, m *dto.Metric) {
	a.series++
	if strings.HasPrefix(name, "vllm:") {
		for _, l := range m.GetLabel() {
			if l.GetName() != "model_name" || l.GetValue() == "" || f.models[l.GetValue()] {
				continue
			}
			if len(f.models) >= maxModels {
				f.note("more than %d model names: the rest are not listed", maxModels)
				continue
			}
			f.models[l.GetValue()] = true
		}
	}
	switch {
	case name == processStartTime:
		if v, ok := scalar(m); ok && v > 0 && a.start == 0 {
			a.start = v
		}
	case m.GetHistogram() != nil:
		if a.badHist != "" {
			return
		}
		h, ok := histogram(m)
		if !ok {
			a.badHist = "a count or bound that is NaN, infinite, negative or falling"
			return
		}
		if why := implausibleHistogram(h); why != "" {
			a.badHist = why
			return
		}
		a.hist = a.hist.add(h)
		a.valid++
		if len(a.hist.Buckets) > maxBucketBounds {
			a.badHist = fmt.Sprintf("more than %d distinct bucket bounds", maxBucketBounds)
		}
	case a.cache == nil && isCacheConfig(name):
		c := f.cacheConfig(name, m)
		a.cache = &c
	default:
		v, ok := scalar(m)
		if raw, typed := rawScalar(m); typed && (!ok || v < 0) {
			// NaN, ±Inf or a negative count: no reading, said as such.
			if a.absurd == 0 {
				a.absurd = raw
			}
			return
		}
		if !ok {
			return
		}
		if v > maxCount {
			if a.absurd == 0 {
				a.absurd = v
			}
			return
		}
		a.sum += v
		a.max = math.Max(a.max, v)
		a.valid++
		if isPerPosition(name) {
			f.addPosition(name, a, m, v)
		}
	}
}

// cacheConfigNames are cache_config_info's wire names.
var cacheConfigNames = vllm.MetricWireNames(vllm.MetricCacheConfig)

// rawScalar is a gauge's, counter's or untyped sample's value as written;
// typed is false for other kinds.
func rawScalar(m *dto.Metric) (v float64, typed bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

func isCacheConfig(name string) bool { return slices.Contains(cacheConfigNames, name) }

// implausibleHistogram says why a histogram is past what vLLM exports;
// "" when it is not.
func implausibleHistogram(h Histogram) string {
	if h.Count > maxCount || h.Sum > maxCount*maxSeconds {
		return fmt.Sprintf("a count of %g or a sum of %g s, more than any server observes (at most %g)", h.Count, h.Sum, maxCount)
	}
	for _, b := range h.Buckets {
		if !math.IsInf(b.UpperBound, 1) && math.Abs(b.UpperBound) > maxSeconds {
			return fmt.Sprintf("a bucket bound of %g s (at most %g s)", b.UpperBound, maxSeconds)
		}
		if b.Count > maxCount {
			return fmt.Sprintf("a bucket count of %g (at most %g)", b.Count, maxCount)
		}
	}
	return ""
}

// newest is the accumulator of m under its newest name that has samples,
// and that name.
func (f *fold) newest(m vllm.Metric) (*famAcc, string) {
	for _, name := range wireNames[m] {
		if a := f.acc[name]; a != nil && a.series > 0 {
			return a, name
		}
	}
	return nil, ""
}

// sample turns the fold into a sample, leaving out what is implausible
// with a note.
func (f *fold) sample() (VLLMSample, error) {
	s := VLLMSample{Names: map[vllm.Metric]string{}}
	if !f.anyVLLM && f.notText > 0 {
		return s, fmt.Errorf("reading Prometheus metrics: line %d is not Prometheus text (is this a vLLM server's /metrics?)", f.notText)
	}
	if !f.anyVLLM {
		return s, fmt.Errorf("%w: the exposition has no vllm: metric (is this a vLLM server's /metrics?)", ErrNoVLLMMetrics)
	}
	scalarOf := func(m vllm.Metric, combine func(*famAcc) float64) float64 {
		a, name := f.newest(m)
		if a == nil {
			return 0
		}
		switch {
		case a.absurd > maxCount:
			f.note("%s is %g, more than any server counts (at most %g): left out", name, a.absurd, maxCount)
			return 0
		case a.absurd != 0:
			f.note("%s is %g, not a count: left out", name, a.absurd)
			return 0
		}
		if a.valid == 0 {
			return 0
		}
		v := combine(a)
		if v > maxCount {
			f.note("%s sums to %g, more than any server counts (at most %g): left out", name, v, maxCount)
			return 0
		}
		s.Names[m] = name
		return v
	}
	sum := func(a *famAcc) float64 { return a.sum }
	s.RequestsRunning = scalarOf(vllm.MetricRequestsRunning, sum)
	s.RequestsWaiting = scalarOf(vllm.MetricRequestsWaiting, sum)
	s.PreemptionsTotal = scalarOf(vllm.MetricPreemptions, sum)
	s.PromptTokens = scalarOf(vllm.MetricPromptTokens, sum)
	s.GenerationTokens = scalarOf(vllm.MetricGenerationTokens, sum)
	// KV usage is the fullest engine's, capped at 1 (a server rounds
	// past it).
	s.KVCacheUsage = scalarOf(vllm.MetricKVCacheUsage, func(a *famAcc) float64 { return math.Min(a.max, 1) })

	if a, name := f.newest(vllm.MetricTTFT); a != nil {
		switch {
		case a.badHist != "":
			f.note("%s has %s: left out", name, a.badHist)
		case a.valid > 0:
			s.TTFT = a.hist
			s.Names[vllm.MetricTTFT] = name
			if p99, ok := s.TTFT.Quantile(0.99); ok {
				s.TTFTP99Seconds = p99
			}
		}
	}
	s.SpecDecode = f.specDecode(func(m vllm.Metric) float64 { return scalarOf(m, sum) })
	if a := f.acc[processStartTime]; a != nil {
		s.ProcessStartTimeSeconds = a.start
	}
	if a, name := f.newest(vllm.MetricCacheConfig); a != nil && a.cache != nil {
		s.CacheConfig = *a.cache
		s.Names[vllm.MetricCacheConfig] = name
	}
	for m := range f.models {
		s.Models = append(s.Models, m)
	}
	slices.Sort(s.Models)
	s.Dropped = f.notes
	return s, nil
}
