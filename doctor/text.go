package doctor

import (
	"slices"
	"strconv"
	"strings"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Block kinds: multi-line evidence collected before it is parsed whole.
type blockKind int

const (
	blockNone blockKind = iota
	blockScreen
	blockDmon
	blockCSV
	blockCSVNoHeader
	blockProm
)

// maxBlockLines bounds a block; a longer one is parsed and a new one begun.
const maxBlockLines = 100_000

// maxEvents bounds the recognised lines kept per log for citing.
const maxEvents = 512

// frame is one traceback frame: the function and where it was printed.
type frame struct {
	fn   string
	line Line
}

// textScanner reads one source line by line.
type textScanner struct {
	e   *Evidence
	in  *Input
	src string
	n   int
	cur string

	log     *LogFacts
	ndArgs  map[string]any // non-default args, as logged
	cfgArgs map[string]any // the engine config line, translated to flag names

	frames []frame
	// Phase marks: the line that moved the log into each phase.
	marks map[string]Line

	block      blockKind
	blockStart int
	blockLines []string
	blanks     int

	desc describeState

	cmd      strings.Builder
	cmdStart int
	cmdOpen  bool
}

func newTextScanner(e *Evidence, in *Input) *textScanner {
	return &textScanner{e: e, in: in, src: in.Source, marks: map[string]Line{}}
}

func (s *textScanner) here() Line { return newLine(s.src, s.n, s.cur) }

func (s *textScanner) line(l string) {
	s.n++
	s.in.Lines++
	s.cur = l
	if s.block != blockNone {
		if len(s.blockLines) < maxBlockLines && s.continues(l) {
			s.blockLines = append(s.blockLines, l)
			return
		}
		s.flush()
	}
	if s.cmdOpen {
		s.cmd.WriteString(" ")
		s.cmd.WriteString(strings.TrimSuffix(strings.TrimSpace(l), "\\"))
		if !strings.HasSuffix(strings.TrimSpace(l), "\\") {
			s.endCommand()
		}
		return
	}
	if s.startBlock(l) {
		return
	}
	s.plain(l)
}

func (s *textScanner) finish() {
	if s.block != blockNone {
		s.flush()
	}
	if s.cmdOpen {
		s.endCommand()
	}
	s.desc.finish(s)
}

// maxGPUPIDs bounds the engine and worker process ids kept per log.
const maxGPUPIDs = 64

// gpuPID reads the process id of an engine or worker line's prefix,
// "(EngineCore_DP0 pid=212)" or "(VllmWorker rank=1 pid=305)"; the API
// server's "(APIServer pid=1)" holds no GPU memory and is not read.
func gpuPID(l string) (int, bool) {
	if !strings.HasPrefix(l, "(") || strings.HasPrefix(l, "(APIServer") {
		return 0, false
	}
	end := strings.IndexByte(l, ')')
	if end < 0 || end > 80 {
		return 0, false
	}
	_, v, ok := strings.Cut(l[:end], " pid=")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// plain handles a line outside any block.
func (s *textScanner) plain(l string) {
	s.hostLine(l)
	if pid, ok := gpuPID(l); ok {
		log := s.logFacts()
		if !slices.Contains(log.GPUPIDs, pid) && len(log.GPUPIDs) < maxGPUPIDs {
			log.GPUPIDs = append(log.GPUPIDs, pid)
		}
	}
	if fn, ok := tracebackFrame(l); ok {
		s.frames = append(s.frames, frame{fn: fn, line: s.here()})
		s.rephase(fn)
		if len(s.frames) > 64 {
			s.frames = s.frames[len(s.frames)-64:]
		}
		return
	}
	if strings.Contains(l, "Traceback (most recent call last)") {
		s.frames = s.frames[:0]
		return
	}
	if ev, ok := vllm.ParseLogLine(l); ok {
		if s.extra(ev) {
			return
		}
		if !extraKinds[ev.Kind] {
			s.event(ev)
			if ev.Kind == vllm.LogVersion && ev.Args != "" {
				// The engine's config line is also its version line.
				s.engineConfig(ev.Args)
				s.in.addKind(KindVLLMLog)
			}
			return
		}
	}
	if s.desc.line(s, l) {
		s.in.addKind(KindDescribe)
		return
	}
	if rec, ok := traffic.ParseLine([]byte(l)); ok {
		s.e.Traffic.Add(rec)
		s.in.addKind(KindRequestLog)
		if len(s.e.TrafficSources) == 0 || s.e.TrafficSources[len(s.e.TrafficSources)-1] != s.src {
			s.e.TrafficSources = append(s.e.TrafficSources, s.src)
		}
		return
	}
	s.command(l)
}

// tracebackFrame reads `File "x.py", line N, in fn`.
func tracebackFrame(l string) (string, bool) {
	i := strings.Index(l, `File "`)
	if i < 0 {
		return "", false
	}
	j := strings.LastIndex(l, ", in ")
	if j < i || !strings.Contains(l[i:j], `", line `) {
		return "", false
	}
	fn := strings.TrimSpace(l[j+len(", in "):])
	if fn == "" || strings.ContainsAny(fn, " \t") {
		return "", false
	}
	return fn, true
}

func (s *textScanner) logFacts() *LogFacts {
	if s.log == nil {
		s.log = &LogFacts{Source: s.src}
		s.e.Logs = append(s.e.Logs, s.log)
	}
	return s.log
}

// event handles a line vllm.ParseLogLine recognised.
func (s *textScanner) event(ev vllm.LogEvent) {
	log := s.logFacts()
	here := s.here()
	log.Report.Add(ev)
	if ev.Kind.IsError() || len(log.Events) < maxEvents {
		log.Events = append(log.Events, LogEventLine{Event: ev, Line: here})
	}
	if ev.Kind == vllm.LogErrOOM {
		s.in.addKind(KindOOM)
		o := OOMFacts{Line: here, GPU: ev.Device}
		if ev.OOM != nil {
			o.OOM = *ev.OOM
		}
		o.Phase, o.PhaseLine = s.phase(ev.Message)
		s.e.OOMs = append(s.e.OOMs, o)
		s.frames = s.frames[:0]
		return
	}
	s.in.addKind(KindVLLMLog)
	switch ev.Kind {
	case vllm.LogVersion:
		log.Starts++
		if log.VersionLine.zero() {
			log.VersionLine = here
		}
		if n := len(log.Versions); n == 0 || log.Versions[n-1] != ev.Version {
			log.Versions = append(log.Versions, ev.Version)
		}
		if log.Starts > 1 {
			// A restart: the phases begin again.
			s.marks = map[string]Line{}
		}
	case vllm.LogLoading:
		s.mark(PhaseLoading, here)
	case vllm.LogWeights:
		s.mark(PhaseProfiling, here)
		if ev.Seconds > 0 {
			log.LoadSeconds = ev.Seconds
		}
	case vllm.LogAvailableKV, vllm.LogKVTokens, vllm.LogGPUBlocks:
		s.mark(PhaseKVAlloc, here)
	case vllm.LogGraphCapture, vllm.LogCUDAGraphPool:
		s.mark(PhaseSampler, here)
	case vllm.LogReady:
		s.mark(PhaseServing, here)
	}
}

// mark records the first line of a phase.
func (s *textScanner) mark(phase string, at Line) {
	if _, ok := s.marks[phase]; !ok {
		s.marks[phase] = at
	}
}

// framePhases maps vLLM functions in a traceback to the phase they run in
// (vllm/v1/worker/gpu_model_runner.py, gpu_worker.py; V0's model_runner.py
// and worker.py use the same names). The innermost known frame wins.
var framePhases = map[string]string{
	"load_model":                     PhaseLoading,
	"load_weights":                   PhaseLoading,
	"_load_weights":                  PhaseLoading,
	"weight_loader":                  PhaseLoading,
	"initialize_model":               PhaseLoading,
	"_initialize_model":              PhaseLoading,
	"profile_run":                    PhaseProfiling,
	"determine_available_memory":     PhaseProfiling,
	"determine_num_available_blocks": PhaseProfiling,
	"initialize_kv_cache":            PhaseKVAlloc,
	"_allocate_kv_cache_tensors":     PhaseKVAlloc,
	"initialize_from_config":         PhaseKVAlloc,
	"_initialize_kv_caches":          PhaseKVAlloc,
	"initialize_cache":               PhaseKVAlloc,
	"_init_cache_engine":             PhaseKVAlloc,
	"capture_model":                  PhaseCapture,
	"_capture_cudagraphs":            PhaseCapture,
	"capture":                        PhaseCapture,
	"_dummy_sampler_run":             PhaseSampler,
	"_dummy_pooler_run":              PhaseSampler,
	"execute_model":                  PhaseServing,
	"step":                           PhaseServing,
	"step_with_batch_queue":          PhaseServing,
}

// frameWindow is how close (in lines) a traceback must be to an OOM line
// to place it.
const frameWindow = 80

// profiledSampler reports a sampler run inside vLLM's memory profiling:
// V1's profile_run calls _dummy_sampler_run to measure the sampler's peak
// inside the budget (vllm/v1/worker/gpu_model_runner.py), and only the
// later call from compile_or_warm_up_model, after the KV cache is
// allocated, runs outside it. The innermost frame alone cannot tell them
// apart; an enclosing profile frame does.
func profiledSampler(inner string, outer []frame) bool {
	if framePhases[inner] != PhaseSampler {
		return false
	}
	for _, f := range outer {
		if framePhases[f.fn] == PhaseProfiling {
			return true
		}
	}
	return false
}

// rephase moves the last OOM, placed in the sampler warm-up by the frames
// of its own traceback, into the profiling when a chained traceback that
// follows it ("The above exception was the direct cause ...") shows the
// sampler run inside profile_run: the phase is read from the whole
// traceback, not its innermost part.
func (s *textScanner) rephase(fn string) {
	if framePhases[fn] != PhaseProfiling || len(s.e.OOMs) == 0 {
		return
	}
	o := &s.e.OOMs[len(s.e.OOMs)-1]
	if o.Phase == PhaseSampler && s.n-o.Line.Line <= frameWindow {
		o.Phase = PhaseProfiling
	}
}

// phase places an OOM: vLLM's own sampler message, then the innermost
// known traceback frame, then the last phase the log reached.
func (s *textScanner) phase(msg string) (string, Line) {
	if strings.Contains(msg, "warming up sampler") || strings.Contains(msg, "warming up pooler") {
		// vLLM's message names the sampler run, not which of its two
		// calls: inside profile_run (the frames say so, or the log shows
		// the weights loaded and no KV cache sized yet) it is the
		// profiling; after it, or with nothing else to go by, the
		// warm-up the message names.
		for i := len(s.frames) - 1; i >= 0 && s.n-s.frames[i].line.Line <= frameWindow; i-- {
			if framePhases[s.frames[i].fn] == PhaseProfiling {
				return PhaseProfiling, s.frames[i].line
			}
		}
		if !s.marks[PhaseLoading].zero() && s.marks[PhaseKVAlloc].zero() && s.marks[PhaseCapture].zero() {
			return PhaseProfiling, s.here()
		}
		return PhaseSampler, s.here()
	}
	for i := len(s.frames) - 1; i >= 0; i-- {
		f := s.frames[i]
		if s.n-f.line.Line > frameWindow {
			break
		}
		if p, ok := framePhases[f.fn]; ok {
			if p == PhaseServing && s.marks[PhaseServing].zero() && !s.marks[PhaseKVAlloc].zero() {
				// execute_model also runs the profile and capture runs.
				continue
			}
			if profiledSampler(f.fn, s.frames[:i]) {
				return PhaseProfiling, f.line
			}
			return p, f.line
		}
	}
	for _, p := range []string{PhaseServing, PhaseSampler, PhaseCapture, PhaseKVAlloc, PhaseProfiling, PhaseLoading} {
		if at, ok := s.marks[p]; ok {
			if p == PhaseKVAlloc && s.log != nil && !s.log.Settings.EnforceEager {
				// The KV cache was sized; unless graphs are off, capture
				// follows at once and is where memory runs short.
				return PhaseCapture, at
			}
			return p, at
		}
	}
	return "", Line{}
}

// extraKinds are the recognised lines that feed LogFacts directly rather
// than the start-up report and its cited events.
var extraKinds = map[vllm.LogKind]bool{
	vllm.LogArgs: true, vllm.LogNamespaceArgs: true, vllm.LogEngineConfig: true,
	vllm.LogPreemption: true, vllm.LogStats: true, vllm.LogCaptureStart: true,
	vllm.LogEngineDead: true, vllm.LogInitTime: true,
}

// extra records the settings lines, preemption warnings, engine
// statistics, CUDA-graph capture starting, engine death and the start-up
// time. It reports false for other kinds, and for an args dict that does
// not parse (the line is then read as something else).
func (s *textScanner) extra(ev vllm.LogEvent) bool {
	switch ev.Kind {
	case vllm.LogArgs:
		m, ok := parsePyDict(ev.Args)
		if !ok {
			return false
		}
		s.ndArgs = m
		s.settingsLine()
		if v, ok := m["enable_sleep_mode"].(bool); ok && v {
			s.logFacts().SleepMode = true
		}
	case vllm.LogNamespaceArgs:
		s.ndArgs = parseKeywords(ev.Args)
		s.settingsLine()
	case vllm.LogEngineConfig:
		s.engineConfig(ev.Args)
	case vllm.LogPreemption:
		// The warnings counted, or the engine's own running total where
		// it logs one (a log cut short keeps only the last warnings);
		// the line cited is the one that gives the count.
		log := s.logFacts()
		log.Preemptions++
		if n := int(min(ev.Preemptions, 1<<31-1)); n >= log.Preemptions {
			log.Preemptions, log.PreemptionLine = n, s.here()
		} else if log.PreemptionLine.zero() {
			log.PreemptionLine = s.here()
		}
	case vllm.LogStats:
		log := s.logFacts()
		if ev.KVUsage > log.MaxKVUsage || (log.KVUsageLine.zero() && strings.Contains(s.cur, "KV cache usage")) {
			log.MaxKVUsage, log.KVUsageLine = ev.KVUsage, s.here()
		}
		log.MaxRunning = max(log.MaxRunning, ev.Running)
		log.MaxWaiting = max(log.MaxWaiting, ev.Waiting)
		s.mark(PhaseServing, s.here())
	case vllm.LogCaptureStart:
		s.logFacts()
		s.mark(PhaseCapture, s.here())
	case vllm.LogEngineDead:
		log := s.logFacts()
		if log.EngineDead.zero() {
			log.EngineDead = s.here()
		}
	case vllm.LogInitTime:
		if ev.Seconds > 0 {
			s.logFacts().InitSeconds = ev.Seconds
		}
	default:
		return false
	}
	s.in.addKind(KindVLLMLog)
	return true
}

// engineConfig reads the engine config line's keyword list.
func (s *textScanner) engineConfig(args string) {
	s.cfgArgs = translateConfig(parseKeywords(args))
	s.settingsLine()
}

// settingsLine rebuilds the log's settings from what it showed: the
// config line's effective values, overridden by the non-default args.
func (s *textScanner) settingsLine() {
	log := s.logFacts()
	log.SettingsLines = append(log.SettingsLines, s.here())
	merged := map[string]any{}
	for k, v := range s.cfgArgs {
		merged[k] = v
	}
	for k, v := range s.ndArgs {
		if settingKeys[k] {
			merged[k] = v
		}
	}
	set, model := settingsFromMap(merged)
	log.Settings, log.HasSettings = set, true
	if model != "" {
		log.Model = model
	}
}

// settingKeys are the vLLM arguments (as logged, snake_case) that shape
// memory or that remedies mention; others (host, port, api_key ...) are
// left out of the settings.
var settingKeys = map[string]bool{
	"model": true, "tensor_parallel_size": true, "pipeline_parallel_size": true, "data_parallel_size": true,
	"gpu_memory_utilization": true, "max_model_len": true, "max_num_seqs": true, "max_num_batched_tokens": true,
	"dtype": true, "quantization": true, "kv_cache_dtype": true, "block_size": true, "enforce_eager": true,
	"kv_cache_memory_bytes": true, "cpu_offload_gb": true, "max_cudagraph_capture_size": true,
	"enable_prefix_caching": true, "enable_sleep_mode": true, "swap_space": true, "enable_chunked_prefill": true,
}

// settingsFromMap reads settings entry by entry, dropping those vLLM's
// flag parser refuses, so one odd value loses only itself.
func settingsFromMap(m map[string]any) (vllm.Settings, string) {
	ok := map[string]any{}
	for k, v := range m {
		if _, err := vllm.FromMap(map[string]any{k: v}); err == nil {
			ok[k] = v
		}
	}
	set, err := vllm.FromMap(ok)
	if err != nil {
		return vllm.Settings{}, ""
	}
	model, _ := m["model"].(string)
	return set, model
}

// translateConfig maps the engine config line's keys to flag names:
// max_seq_len is the effective --max-model-len, dtype is printed as
// torch.bfloat16, None means not set.
func translateConfig(cfg map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cfg {
		if v == nil {
			continue
		}
		switch k {
		case "model", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
			"quantization", "enforce_eager", "kv_cache_dtype":
			out[k] = v
		case "max_seq_len":
			out["max_model_len"] = v
		case "dtype":
			if str, ok := v.(string); ok {
				out["dtype"] = strings.TrimPrefix(str, "torch.")
			}
		}
	}
	return out
}

// command recognises a pasted `vllm serve ...` or api_server command line,
// continued over lines that end in a backslash.
func (s *textScanner) command(l string) {
	t := strings.TrimSpace(l)
	if !strings.Contains(t, "vllm serve") && !strings.Contains(t, "vllm.entrypoints.") {
		return
	}
	s.cmd.Reset()
	s.cmd.WriteString(strings.TrimSuffix(t, "\\"))
	s.cmdStart = s.n
	s.cmdOpen = true
	if !strings.HasSuffix(t, "\\") {
		s.endCommand()
	}
}

func (s *textScanner) endCommand() {
	s.cmdOpen = false
	text := s.cmd.String()
	words, err := vllm.SplitCommandLine(text)
	if err != nil {
		return
	}
	set, err := vllm.ParseCommand(words)
	if err != nil {
		s.in.Notes = append(s.in.Notes, "line "+strconv.Itoa(s.cmdStart)+": a vllm command that does not parse: "+err.Error())
		return
	}
	s.e.Commands = append(s.e.Commands, CommandFacts{Line: newLine(s.src, s.cmdStart, text), Settings: set})
	s.in.addKind(KindVLLMCommand)
}
