package audit

import (
	"cmp"
	"slices"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/telemetry"
)

// Levels of a finding, worst first. A workload's status is its worst
// finding's level, "ok" when it has none worse than LevelInfo.
const (
	LevelWillNotStart = "will_not_start"
	LevelRisk         = "at_risk"
	LevelNotChecked   = "not_checked"
	LevelInfo         = "info"
	StatusOK          = "ok"
)

// severity orders levels for ranking.
var severity = map[string]int{LevelWillNotStart: 4, LevelRisk: 3, LevelNotChecked: 2, LevelInfo: 1, StatusOK: 0}

// Finding is one thing the audit found.
type Finding struct {
	Level   string `json:"level"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Engine is one planned vLLM server of a workload.
type Engine struct {
	Container   string  `json:"container,omitempty"`
	Model       string  `json:"model"`
	GPU         string  `json:"gpu"`
	GPUCount    int     `json:"gpu_count"`
	GPUFrom     string  `json:"gpu_from"`
	Fits        bool    `json:"fits"`
	MaxModelLen int     `json:"max_model_len"`
	MaxNumSeqs  int     `json:"max_num_seqs"`
	KVTokens    int64   `json:"kv_cache_tokens"`
	Concurrency float64 `json:"max_concurrency"`
	// Summary is the webhook's one-line plan (headroom.dev/plan).
	Summary string `json:"summary"`
	// PerGPU is one GPU's plan, part by part, in bytes; UnusedBytes what
	// it leaves free (memory.Budget.Unused). The cluster page draws the
	// card from them.
	PerGPU            memory.Parts `json:"per_gpu"`
	UnusedBytes       int64        `json:"unused_bytes"`
	CUDAGraphInBudget bool         `json:"cudagraph_in_budget"`
}

// PodState is what the audit read of one running pod.
type PodState struct {
	Name     string `json:"name"`
	Node     string `json:"node,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Restarts int32  `json:"restarts"`
	// LastTermination is the reason the container last stopped
	// ("OOMKilled", "Error"), from its status.
	LastTermination string `json:"last_termination,omitempty"`
	// Metrics is the server's /metrics (Options.Live); MetricsError says
	// why it could not be read.
	Metrics      *telemetry.VLLMSample `json:"metrics,omitempty"`
	MetricsError string                `json:"metrics_error,omitempty"`
	// KV compares the KV cache the server got (vllm:cache_config_info)
	// with the plan for its model, flags, GPU and release; nil without
	// both.
	KV *memory.KVGap `json:"kv_cache_vs_plan,omitempty"`
	// Simulated is true when the server says it is headroom's simulated
	// stand-in (simulate --serve): its numbers are never learned.
	Simulated bool `json:"simulated,omitempty"`
}

// PodKV is one pod's KV cache against its plan, for the ranking of pods
// far below the plan and for calibration records (--learn).
type PodKV struct {
	Namespace string       `json:"namespace"`
	Workload  string       `json:"workload"`
	Pod       string       `json:"pod"`
	Model     string       `json:"model"`
	GPU       string       `json:"gpu"`
	Version   string       `json:"vllm_version"`
	Simulated bool         `json:"simulated,omitempty"`
	Gap       memory.KVGap `json:"kv_cache_vs_plan"`
	// Record is the calibration record the comparison makes (what
	// --learn writes); Learnable is false for a simulated server.
	Record    probe.Record `json:"-"`
	Learnable bool         `json:"-"`
}

// Workload is one audited object.
type Workload struct {
	Kind      string     `json:"kind"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	Engines   []Engine   `json:"engines,omitempty"`
	Findings  []Finding  `json:"findings"`
	Pods      []PodState `json:"pods,omitempty"`
}

// Summary counts workloads by status.
type Summary struct {
	Workloads    int `json:"workloads"`
	WillNotStart int `json:"will_not_start"`
	AtRisk       int `json:"at_risk"`
	NotChecked   int `json:"not_checked"`
	OK           int `json:"ok"`
}

// Report is the audit of a cluster (or of some namespaces of it).
type Report struct {
	// Scope says what was audited: "namespace llm", "all namespaces",
	// with the label selector.
	Scope string `json:"scope"`
	// Workloads are ranked: worst status first, then most findings at
	// that level, then namespace and name.
	Workloads []Workload `json:"workloads"`
	// Cluster holds what could not be read at all (a forbidden list).
	Cluster []Finding `json:"cluster,omitempty"`
	Summary Summary   `json:"summary"`
	// KVVsPlan are the live pods whose KV cache was compared with the
	// plan, smallest share of the plan first (--live).
	KVVsPlan []PodKV `json:"kv_vs_plan,omitempty"`
}

// AtRisk reports whether some workload will not start or is at risk.
func (r Report) AtRisk() bool { return r.Summary.WillNotStart+r.Summary.AtRisk > 0 }

// add records a finding and raises the workload's status.
func (w *Workload) add(level, code, message string) {
	w.Findings = append(w.Findings, Finding{Level: level, Code: code, Message: message})
}

// finish sets the status and orders the findings worst first.
func (w *Workload) finish() {
	slices.SortStableFunc(w.Findings, func(a, b Finding) int { return severity[b.Level] - severity[a.Level] })
	w.Status = StatusOK
	if len(w.Findings) > 0 && severity[w.Findings[0].Level] > severity[LevelInfo] {
		w.Status = w.Findings[0].Level
	}
	if w.Findings == nil {
		w.Findings = []Finding{}
	}
}

// count is the number of findings at the workload's own status level.
func (w *Workload) count() int {
	n := 0
	for _, f := range w.Findings {
		if f.Level == w.Status {
			n++
		}
	}
	return n
}

// rank orders the workloads and fills the summary.
func (r *Report) rank() {
	slices.SortStableFunc(r.Workloads, func(a, b Workload) int {
		return cmp.Or(severity[b.Status]-severity[a.Status], b.count()-a.count(),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	r.Summary = Summary{Workloads: len(r.Workloads)}
	for _, w := range r.Workloads {
		switch w.Status {
		case LevelWillNotStart:
			r.Summary.WillNotStart++
		case LevelRisk:
			r.Summary.AtRisk++
		case LevelNotChecked:
			r.Summary.NotChecked++
		default:
			r.Summary.OK++
		}
	}
	if r.Workloads == nil {
		r.Workloads = []Workload{}
	}
	slices.SortStableFunc(r.KVVsPlan, func(a, b PodKV) int {
		return cmp.Or(cmp.Compare(a.Gap.Share, b.Gap.Share), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod))
	})
}
