package doctor

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// Line is one line of evidence: where it is and what it says.
type Line struct {
	Source string `json:"source"`
	// Line is 1-based; 0 when the fact comes from a whole document.
	Line int    `json:"line"`
	Text string `json:"text"`
}

// maxEvidenceText clips a quoted line; OOM messages and config lines run
// to kilobytes.
const maxEvidenceText = 400

func newLine(source string, n int, text string) Line {
	text = strings.TrimSpace(text)
	if len(text) > maxEvidenceText {
		text = text[:maxEvidenceText] + "…"
	}
	return Line{Source: source, Line: n, Text: text}
}

func (l Line) String() string {
	if l.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", l.Source, l.Line, l.Text)
	}
	return fmt.Sprintf("%s: %s", l.Source, l.Text)
}

// Ref is "source:line", or the source alone.
func (l Line) Ref() string {
	if l.Line > 0 {
		return fmt.Sprintf("%s:%d", l.Source, l.Line)
	}
	return l.Source
}

func (l Line) zero() bool { return l.Source == "" && l.Text == "" }

// Input kinds, as reported per source.
const (
	KindOOM         = "cuda_oom"
	KindVLLMLog     = "vllm_log"
	KindSMIScreen   = "nvidia_smi"
	KindSMIQuery    = "nvidia_smi_query"
	KindSMIDmon     = "nvidia_smi_dmon"
	KindMetrics     = "prometheus_metrics"
	KindRequestLog  = "request_log"
	KindManifest    = "kubernetes_manifest"
	KindDescribe    = "kubectl_describe"
	KindVLLMCommand = "vllm_command"
	// KindHost is a host-memory failure: the kernel's cgroup OOM killer,
	// /dev/shm running out (HostFacts).
	KindHost = "host_memory"
)

// Input says what one source was recognised as.
type Input struct {
	Source string   `json:"source"`
	Kinds  []string `json:"kinds"`
	Lines  int      `json:"lines"`
	// Notes say what could not be read, and why.
	Notes []string `json:"notes,omitempty"`
}

func (in *Input) addKind(k string) {
	for _, x := range in.Kinds {
		if x == k {
			return
		}
	}
	in.Kinds = append(in.Kinds, k)
}

// Phases of a vLLM start-up and run, for placing an out-of-memory error.
const (
	PhaseLoading   = "loading_weights"
	PhaseProfiling = "profiling"
	PhaseKVAlloc   = "kv_cache_allocation"
	PhaseCapture   = "cudagraph_capture"
	PhaseSampler   = "sampler_warmup"
	PhaseServing   = "serving"
)

// OOMFacts is one CUDA out-of-memory error with the phase it hit.
type OOMFacts struct {
	Line Line     `json:"line"`
	OOM  vllm.OOM `json:"numbers"`
	GPU  int      `json:"gpu"`
	// Phase is where the error struck (the Phase constants), "" when the
	// evidence does not say; PhaseLine is what placed it.
	Phase     string `json:"phase,omitempty"`
	PhaseLine Line   `json:"phase_evidence,omitzero"`
}

// LogFacts is what one source's vLLM log lines say.
type LogFacts struct {
	Source string             `json:"source"`
	Report vllm.StartupReport `json:"startup"`
	// Versions are the releases the log names, in order; more than one
	// means the log spans restarts on different releases.
	Versions    []vllm.Version `json:"versions,omitempty"`
	VersionLine Line           `json:"version_line,omitzero"`
	// Starts counts start-ups (version lines): more than one means
	// restarts inside the log.
	Starts int `json:"starts"`
	// Settings are the engine flags the log shows (non-default args, the
	// engine's config line); SettingsLines the lines they come from.
	Settings      vllm.Settings `json:"settings"`
	HasSettings   bool          `json:"has_settings"`
	SettingsLines []Line        `json:"settings_lines,omitempty"`
	// Model is the served model the log names.
	Model string `json:"model,omitempty"`
	// Events are the recognised lines that findings cite.
	Events []LogEventLine `json:"-"`
	// Preemptions counts preemption warnings, or is the engine's own
	// cumulative count where a warning names it and it is higher;
	// PreemptionLine is the line that gives the count (the first warning
	// when none names one).
	Preemptions    int  `json:"preemptions"`
	PreemptionLine Line `json:"preemption_line,omitzero"`
	// MaxKVUsage is the highest "GPU KV cache usage: X%" of the engine's
	// statistics lines, as a fraction; MaxRunning and MaxWaiting the
	// highest running and waiting request counts.
	MaxKVUsage  float64 `json:"max_kv_cache_usage"`
	KVUsageLine Line    `json:"kv_usage_line,omitzero"`
	MaxRunning  int     `json:"max_running"`
	MaxWaiting  int     `json:"max_waiting"`
	// InitSeconds is how long engine start-up took ("init engine ... took
	// N seconds"), LoadSeconds the weight loading.
	InitSeconds float64 `json:"init_seconds,omitempty"`
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	// EngineDead is the first line saying the engine died at run time.
	EngineDead Line `json:"engine_dead,omitzero"`
	// SleepMode is set when the engine runs with --enable-sleep-mode
	// (expandable segments are then unsafe).
	SleepMode bool `json:"sleep_mode,omitempty"`
	// GPUPIDs are the process ids of the engine and its workers, from
	// the "(EngineCore_DP0 pid=N)" prefixes of their lines: the
	// processes that hold GPU memory (the API server holds none).
	GPUPIDs []int `json:"gpu_pids,omitempty"`
}

// LogEventLine is a recognised vLLM line and where it is.
type LogEventLine struct {
	Event vllm.LogEvent
	Line  Line
}

// GPUFacts is one nvidia-smi reading.
type GPUFacts struct {
	Line Line            `json:"line"`
	Kind string          `json:"kind"`
	GPUs []telemetry.GPU `json:"gpus"`
	// ProcessLines cite each process row of the screen, by PID.
	ProcessLines map[int]Line          `json:"-"`
	MIG          []telemetry.MIGDevice `json:"mig,omitempty"`
	// Dmon holds dmon's samples; the peak frame-buffer use per GPU is in
	// GPUs (UsedBytes), with no total.
	Dmon []telemetry.DmonSample `json:"-"`
}

// MetricFacts is one /metrics exposition.
type MetricFacts struct {
	Line  Line                  `json:"line"`
	VLLM  *telemetry.VLLMSample `json:"vllm,omitempty"`
	Lines map[string]Line       `json:"-"`
	// GPUUsedBytes and GPUTotalBytes come from generic exporters
	// (gpu_memory_used_bytes / gpu_memory_total_bytes, DCGM's FB_USED /
	// FB_FREE in MiB); 0 when absent.
	GPUUsedBytes  int64 `json:"gpu_used_bytes,omitempty"`
	GPUTotalBytes int64 `json:"gpu_total_bytes,omitempty"`
}

// Evidence is everything read from the inputs. Build it with NewEvidence
// and Read; Diagnose turns it into findings.
type Evidence struct {
	Inputs  []*Input      `json:"inputs"`
	Logs    []*LogFacts   `json:"logs,omitempty"`
	OOMs    []OOMFacts    `json:"ooms,omitempty"`
	GPUs    []GPUFacts    `json:"gpus,omitempty"`
	Metrics []MetricFacts `json:"metrics,omitempty"`
	K8s     K8sFacts      `json:"kubernetes,omitzero"`
	Host    HostFacts     `json:"host,omitzero"`
	// Traffic holds the request logs read; TrafficSources names them.
	Traffic        *traffic.Profile `json:"-"`
	TrafficSources []string         `json:"-"`
	// Commands are pasted `vllm serve` command lines found in text.
	Commands []CommandFacts `json:"commands,omitempty"`

	// configMaps are the ConfigMaps read, by name, and configFiles the
	// containers whose --config file waits for one (k8s.go).
	configMaps  map[string]corev1.ConfigMap
	configFiles []configFile
}

// maxConfigMaps bounds the ConfigMaps doctor keeps to pair with a
// container's --config file: inputs are bounded, and so is this.
const maxConfigMaps = 1000

// CommandFacts is a vLLM command line found in the evidence.
type CommandFacts struct {
	Line     Line          `json:"line"`
	Settings vllm.Settings `json:"settings"`
}

// NewEvidence returns empty evidence whose request-log profile uses opt.
func NewEvidence(opt traffic.Options) (*Evidence, error) {
	p, err := traffic.NewProfile(opt)
	if err != nil {
		return nil, err
	}
	return &Evidence{Traffic: p}, nil
}

// Empty reports whether nothing was recognised in any input.
func (e *Evidence) Empty() bool {
	for _, in := range e.Inputs {
		if len(in.Kinds) > 0 {
			return false
		}
	}
	return true
}
