package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/graceful"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/slo"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
	"headroom.dev/headroom/workload"
)

// fields are what both bodies hold: the model, the GPU and the vLLM
// settings, by the JSON names of the CLI's flags. Flags holds vLLM flags by
// name without dashes ({"max-model-len": "8192"}); they win over the same
// flags in Command, as headroom's flags do over a pasted command.
type fields struct {
	Model       string `json:"model"`
	GPU         string `json:"gpu"`
	GPUCount    int    `json:"gpu_count"`
	GPUsPerNode int    `json:"gpus_per_node"`
	GPUMemory   string `json:"gpu_memory"`
	VLLMVersion string `json:"vllm_version"`
	VLLMInstall string `json:"vllm_install"`
	VLLMImage   string `json:"vllm_image"`
	Command     string `json:"command"`
	// VLLMConfig is the YAML of the file a --config of Command names: the
	// page reads no file, so the user gives its text.
	VLLMConfig string            `json:"vllm_config"`
	Flags      map[string]string `json:"flags"`
	Policy     string            `json:"policy"`
}

// planBody is the JSON of POST /api/plan.
type planBody struct {
	fields
	Config         string `json:"config"`
	EnforceEager   *bool  `json:"enforce_eager"`
	TypicalContext int    `json:"typical_context"`
	AllGPUs        bool   `json:"all_gpus"`
	// UpgradeTo and MaxKVLoss are plan's --upgrade-to and --max-kv-loss
	// ("20%" or "0.2"): the answer is then the upgrade preflight.
	UpgradeTo string `json:"upgrade_to"`
	MaxKVLoss string `json:"max_kv_loss"`
}

// doctorBody is the JSON of POST /api/doctor: the evidence as text, and
// what the doctor's flags would say.
type doctorBody struct {
	fields
	Text string `json:"text"`
}

// simulateBody is the JSON of POST /api/simulate: a plan (as for
// /api/plan) and a synthetic traffic.
type simulateBody struct {
	Plan         planFields `json:"plan"`
	Rate         float64    `json:"rate"`
	DurationS    float64    `json:"duration_s"`
	PromptTokens int        `json:"prompt_tokens"`
	OutputTokens int        `json:"output_tokens"`
	Bursts       []string   `json:"bursts"`
	// Endpoint is --endpoint: completions (also "") or chat.
	Endpoint string `json:"endpoint"`
	// AcceptanceRate is --acceptance-rate (0: the method's default).
	AcceptanceRate float64 `json:"acceptance_rate"`
}

// capacityBody is the JSON of POST /api/capacity: a plan (its GPU left
// out: the options are gpus), a synthetic traffic (a steady rate, or a
// rate rising to peak_rate over period_s) and the SLO, as `headroom
// capacity` takes them.
type capacityBody struct {
	Plan         planFields         `json:"plan"`
	GPUs         []string           `json:"gpus"`
	Rate         float64            `json:"rate"`
	PeakRate     float64            `json:"peak_rate"`
	PeriodS      float64            `json:"period_s"`
	DurationS    float64            `json:"duration_s"`
	PromptTokens int                `json:"prompt_tokens"`
	OutputTokens int                `json:"output_tokens"`
	SLO          string             `json:"slo"`
	WindowS      float64            `json:"window_s"`
	Router       string             `json:"router"`
	Prices       map[string]float64 `json:"prices"`
	StartupS     float64            `json:"startup_s"`
	CoolDownS    float64            `json:"cool_down_s"`
	// Storage is where a new replica reads its checkpoint from, for the
	// start-up estimate without startup_s (capacity --storage).
	Storage string `json:"storage"`
	// Endpoint is --endpoint: completions (also "") or chat.
	Endpoint string `json:"endpoint"`
	// AcceptanceRate is --acceptance-rate (0: the method's default).
	AcceptanceRate float64 `json:"acceptance_rate"`
}

// Bounds of a capacity request: a day of traffic at a peak of 46 req/s
// (the peak rate × duration_s; the README's day, 2 rising to 40 req/s,
// is 3.5 million by it and 1.8 million in fact), as many GPU options as a
// page compares, at most 32 replicas, and windows of at least a minute;
// the answer comes within CapacityTime (a day of two options takes about
// a minute of CPU), past which it is 422.
const (
	maxCapacityRequests = 4_000_000
	maxCapacityGPUs     = 4
	maxCapacityReplicas = 32
	minCapacityWindowS  = 60
	maxCapacityDuration = 7 * 24 * 3600
)

// planFields is a plan inside another body: the common fields, and the
// config.json upload.
type planFields struct {
	fields
	Config string `json:"config"`
}

// Bounds of a simulation one request may ask for: the server answers
// within its write timeout.
const (
	maxSimSeconds  = 3600
	maxSimRequests = 200_000
	maxSimTokens   = 1 << 20
	maxBursts      = 16
	// maxBurstRequests bounds one burst's requests.
	maxBurstRequests = 10_000
	// maxSimBlocks bounds one simulation's KV pool: a 20-byte-a-block
	// pool of a million blocks is 20 MB, and a real plan has fewer (an
	// H100 serving Llama-3.1-8B holds about 30,000 blocks of 16 tokens).
	maxSimBlocks = 1_000_000
)

type planCall struct {
	req report.Request
	opt memory.Options
	// upgrade is set when the body names upgrade_to.
	upgrade *upgradeCall
}

// upgradeCall is the release an upgrade preflight plans on too, and the
// share of KV-cache tokens it may lose.
type upgradeCall struct {
	to      vllm.Version
	maxLoss float64
}

type doctorCall struct {
	req    report.Request
	text   string
	policy string
}

// maxFlags bounds the flags of one request; vLLM has about a hundred.
const maxFlags = 64

func decodePlan(body io.Reader) (planCall, error) {
	var b planBody
	req, policy, err := decodeFields(body, &b, &b.fields)
	if err != nil {
		return planCall{}, err
	}
	if b.EnforceEager != nil {
		req.Flags = append(req.Flags, fmt.Sprintf("--enforce-eager=%t", *b.EnforceEager))
	}
	req.Config = []byte(b.Config)
	req.AllGPUs = b.AllGPUs
	if b.TypicalContext < 0 {
		return planCall{}, errors.New("typical_context must be positive")
	}
	if req.AllGPUs && (req.GPU != "" || req.GPUMemory != "") {
		return planCall{}, errors.New("all_gpus plans on every GPU: leave gpu and gpu_memory empty")
	}
	up, err := decodeUpgrade(b)
	if err != nil {
		return planCall{}, err
	}
	return planCall{req: req, opt: memory.Options{Policy: policy, TypicalContext: b.TypicalContext}, upgrade: up}, nil
}

// decodeUpgrade reads upgrade_to and max_kv_loss as plan reads
// --upgrade-to and --max-kv-loss, with the same refusals.
func decodeUpgrade(b planBody) (*upgradeCall, error) {
	to, loss := strings.TrimSpace(b.UpgradeTo), strings.TrimSpace(b.MaxKVLoss)
	switch {
	case to == "" && loss == "":
		return nil, nil
	case to == "":
		return nil, errors.New("max_kv_loss needs upgrade_to: the vLLM release to plan on too, like 0.21.0")
	case b.AllGPUs:
		return nil, errors.New("upgrade_to compares one deployment: give gpu, without all_gpus")
	}
	v, err := vllm.ParseRelease(to)
	if err != nil {
		return nil, fmt.Errorf("upgrade_to: %v", err)
	}
	u := &upgradeCall{to: v, maxLoss: memory.DefaultMaxKVLoss}
	if loss != "" {
		if u.maxLoss, err = report.ParseShare(loss); err != nil {
			return nil, fmt.Errorf("max_kv_loss %v", err)
		}
	}
	return u, nil
}

func decodeDoctor(body io.Reader) (doctorCall, error) {
	var b doctorBody
	req, policy, err := decodeFields(body, &b, &b.fields)
	if err != nil {
		return doctorCall{}, err
	}
	return doctorCall{req: req, text: b.Text, policy: policy}, nil
}

// decodeSimulate reads POST /api/simulate into the same request the CLI
// builds from its flags: the plan, and the traffic in the workload
// language (Poisson at rate over duration_s, fixed lengths, bursts).
func decodeSimulate(body io.Reader) (report.SimRequest, error) {
	var b simulateBody
	if err := decodeStrict(body, &b); err != nil {
		return report.SimRequest{}, err
	}
	req, err := requestFrom(b.Plan.fields)
	if err != nil {
		return report.SimRequest{}, err
	}
	if b.Plan.Config != "" {
		return report.SimRequest{}, errors.New("simulating an uploaded config.json is not supported: name a catalog or Hugging Face model")
	}
	switch {
	case !(b.Rate >= 0) || math.IsInf(b.Rate, 0) || !(b.DurationS > 0) || b.DurationS > maxSimSeconds:
		return report.SimRequest{}, fmt.Errorf("rate must be 0 or more and duration_s between 0 and %d seconds", maxSimSeconds)
	case b.Rate*b.DurationS > maxSimRequests:
		return report.SimRequest{}, fmt.Errorf("rate × duration_s is %.0f requests: at most %d here (run `headroom simulate` for more)", b.Rate*b.DurationS, maxSimRequests)
	case b.PromptTokens <= 0 || b.OutputTokens <= 0 || b.PromptTokens > maxSimTokens || b.OutputTokens > maxSimTokens:
		return report.SimRequest{}, fmt.Errorf("prompt_tokens and output_tokens must be between 1 and %d", maxSimTokens)
	case len(b.Bursts) > maxBursts:
		return report.SimRequest{}, fmt.Errorf("%d bursts: at most %d", len(b.Bursts), maxBursts)
	case b.Rate == 0 && len(b.Bursts) == 0:
		return report.SimRequest{}, errors.New("no traffic: give a rate or a burst")
	}
	endpoint, err := bodyEndpoint(b.Endpoint)
	if err != nil {
		return report.SimRequest{}, err
	}
	spec := workload.Spec{Rate: b.Rate, Duration: b.DurationS, Prompt: workload.Fixed(b.PromptTokens), Output: workload.Fixed(b.OutputTokens),
		Seed: 1, Arrival: workload.Poisson, Burstiness: 1, Endpoint: endpoint}
	for _, s := range b.Bursts {
		burst, err := workload.ParseBurst(s)
		if err != nil {
			return report.SimRequest{}, err
		}
		if burst.Count > maxBurstRequests || burst.Tokens > maxSimTokens {
			return report.SimRequest{}, fmt.Errorf("burst %q: at most %d requests of %d tokens", s, maxBurstRequests, maxSimTokens)
		}
		spec.Bursts = append(spec.Bursts, burst)
	}
	// About 60 points for the panel's chart, a second at the finest.
	window := math.Max(1, math.Ceil(b.DurationS/60))
	return report.SimRequest{Engine: report.EngineRequest{Plan: req, AcceptanceRate: b.AcceptanceRate}, Workload: spec, Window: window}, nil
}

// decodeCapacity reads POST /api/capacity into the request the CLI builds
// from its flags.
func decodeCapacity(body io.Reader) (report.CapacityRequest, error) {
	var b capacityBody
	if err := decodeStrict(body, &b); err != nil {
		return report.CapacityRequest{}, err
	}
	req, err := requestFrom(b.Plan.fields)
	if err != nil {
		return report.CapacityRequest{}, err
	}
	if b.Plan.Config != "" {
		return report.CapacityRequest{}, errors.New("sizing an uploaded config.json is not supported: name a catalog or Hugging Face model")
	}
	req.GPU, req.GPUMemory = "", ""
	peak := max(b.Rate, b.PeakRate)
	switch {
	case len(b.GPUs) == 0 || len(b.GPUs) > maxCapacityGPUs:
		return report.CapacityRequest{}, fmt.Errorf("gpus: give 1 to %d GPU options", maxCapacityGPUs)
	case !(b.Rate > 0) || math.IsInf(peak, 0) || !(b.DurationS > 0) || b.DurationS > maxCapacityDuration:
		return report.CapacityRequest{}, fmt.Errorf("rate must be positive and duration_s between 0 and %d seconds", maxCapacityDuration)
	case peak*b.DurationS > maxCapacityRequests:
		return report.CapacityRequest{}, fmt.Errorf("the peak rate × duration_s is %.0f requests: at most %d here (run `headroom capacity` for more)", peak*b.DurationS, maxCapacityRequests)
	case b.PromptTokens <= 0 || b.OutputTokens <= 0 || b.PromptTokens > maxSimTokens || b.OutputTokens > maxSimTokens:
		return report.CapacityRequest{}, fmt.Errorf("prompt_tokens and output_tokens must be between 1 and %d", maxSimTokens)
	case b.WindowS != 0 && (b.WindowS < minCapacityWindowS || b.WindowS > b.DurationS):
		return report.CapacityRequest{}, fmt.Errorf("window_s must be between %d and duration_s", minCapacityWindowS)
	case b.StartupS < 0 || b.CoolDownS < 0 || b.PeriodS < 0:
		return report.CapacityRequest{}, errors.New("startup_s, cool_down_s and period_s must not be negative")
	}
	bounds, err := slo.Parse(b.SLO)
	if err != nil || len(bounds) == 0 {
		return report.CapacityRequest{}, fmt.Errorf("slo: give bounds such as ttft_p99=2s,tpot_p99=100ms (%v)", err)
	}
	storage, err := startup.ParseStorage(b.Storage)
	if err != nil {
		return report.CapacityRequest{}, fmt.Errorf("storage: %v", err)
	}
	router := b.Router
	if router == "" {
		router = sim.RoundRobin
	}
	if !slices.Contains(sim.Routers, router) {
		return report.CapacityRequest{}, fmt.Errorf("router %q: use %s", router, strings.Join(sim.Routers, ", "))
	}
	prices := map[string]float64{}
	for name, usd := range b.Prices {
		sel, err := gpu.Resolve(name)
		if err != nil || sel.Count != 1 || !(usd > 0) || usd > 1000 {
			return report.CapacityRequest{}, fmt.Errorf("prices: %q must be a catalog GPU with a price between 0 and 1000 USD an hour", name)
		}
		prices[sel.Device.Name] = usd
	}
	for _, g := range b.GPUs {
		if _, err := gpu.Resolve(g); err != nil {
			return report.CapacityRequest{}, fmt.Errorf("gpus: %v", err)
		}
	}
	endpoint, err := bodyEndpoint(b.Endpoint)
	if err != nil {
		return report.CapacityRequest{}, err
	}
	spec := workload.Spec{Rate: b.Rate, PeakRate: b.PeakRate, Period: b.PeriodS, Duration: b.DurationS, Prompt: workload.Fixed(b.PromptTokens),
		Output: workload.Fixed(b.OutputTokens), Seed: 1, Arrival: workload.Poisson, Burstiness: 1, Endpoint: endpoint}
	if err := spec.Validate(); err != nil {
		return report.CapacityRequest{}, err
	}
	return report.CapacityRequest{Engine: report.EngineRequest{Plan: req, AcceptanceRate: b.AcceptanceRate}, GPUs: b.GPUs, Workload: spec, SLO: bounds, WindowS: b.WindowS,
		Router: router, Prices: prices, StartupS: b.StartupS, Storage: storage, CoolDownS: b.CoolDownS, MaxReplicas: maxCapacityReplicas}, nil
}

// bodyEndpoint reads a body's endpoint as --endpoint reads it; absent is
// completions.
func bodyEndpoint(s string) (string, error) {
	if s == "" {
		return workload.EndpointCompletions, nil
	}
	return workload.ParseEndpoint(s)
}

// decodeStrict reads exactly one JSON object with known fields only, so a
// misspelt field is an error instead of a silent default. It decodes from
// the request's stream: the decoder's buffer is the one copy of the JSON
// (a body read first and decoded after was two). A body past its bound is
// the *http.MaxBytesError, for a 413.
func decodeStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return tooBig
		}
		if errors.Is(err, graceful.ErrSlowBody) {
			return err
		}
		return fmt.Errorf("request is not the JSON object expected (%v): web/README.md has the request bodies", err)
	}
	if dec.More() {
		return errors.New("request has more than one JSON value: send one object")
	}
	if tooBig := (*http.MaxBytesError)(nil); errors.As(dec.Decode(new(json.RawMessage)), &tooBig) {
		return tooBig
	}
	return nil
}

// decodeFields decodes body into v, whose common part is f, and turns f
// into a request and a policy.
func decodeFields(body io.Reader, v any, f *fields) (report.Request, string, error) {
	if err := decodeStrict(body, v); err != nil {
		return report.Request{}, "", err
	}
	req, err := requestFrom(*f)
	if err != nil {
		return req, "", err
	}
	policy, err := memory.ParsePolicy(f.Policy)
	return req, policy, err
}

func requestFrom(f fields) (report.Request, error) {
	gpuCount, command, flags := f.GPUCount, f.Command, f.Flags
	req := report.Request{Model: strings.TrimSpace(f.Model), GPU: strings.TrimSpace(f.GPU), GPUMemory: strings.TrimSpace(f.GPUMemory),
		Version: strings.TrimSpace(f.VLLMVersion), Install: strings.TrimSpace(f.VLLMInstall), Image: strings.TrimSpace(f.VLLMImage),
		GPUCount: gpuCount, GPUsPerNode: f.GPUsPerNode}
	if gpuCount < 0 {
		return req, errors.New("gpu_count must be positive")
	}
	if f.GPUsPerNode < 0 {
		return req, errors.New("gpus_per_node must be positive")
	}
	if strings.TrimSpace(command) != "" {
		words, err := vllm.SplitCommandLine(command)
		if err != nil {
			return req, fmt.Errorf("command: %v", err)
		}
		req.Command = words
	}
	if f.VLLMConfig != "" {
		if !slices.ContainsFunc(req.Command, func(w string) bool { return w == "--config" || strings.HasPrefix(w, "--config=") }) {
			return req, errors.New("vllm_config is the YAML of the file a --config in the command names: add --config FILE to the command, or leave vllm_config empty")
		}
		text := []byte(f.VLLMConfig)
		req.ReadConfig = func(string) ([]byte, error) { return text, nil }
	}
	if len(flags) > maxFlags {
		return req, fmt.Errorf("%d flags: at most %d", len(flags), maxFlags)
	}
	names := make([]string, 0, len(flags))
	for name := range flags {
		if !flagName(name) {
			return req, fmt.Errorf("flag %q: give vLLM flag names without dashes, like max-model-len", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if v := strings.TrimSpace(flags[name]); v != "" {
			// A switch reads "true" or "false", as in a KAITO map.
			words, err := vllm.FlagWords(name, v)
			if err != nil {
				return req, err
			}
			req.Flags = append(req.Flags, words...)
		}
	}
	return req, nil
}

func flagName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
