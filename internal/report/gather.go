package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"testing/fstest"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// Env is what building a report may touch of the outside world.
type Env struct {
	Getenv func(string) string
	// HTTPClient reaches the Hugging Face Hub; nil uses a client with timeouts.
	HTTPClient *http.Client
	// FS is where local model paths are looked up; nil means the operating
	// system's. A server passes NoFS: a request must not read the server's
	// disk.
	FS fs.FS
}

// NoFS is a file system with nothing in it.
var NoFS fs.FS = fstest.MapFS{}

// Request is a planning request as the user gave it, before anything is
// resolved: the CLI fills it from its flags, the web API from its JSON.
type Request struct {
	// Model is a catalog id, a local path or a Hugging Face id; it wins
	// over the model of the pasted command.
	Model string
	// Config, when set, is the model's config.json (uploaded); Model then
	// only names it.
	Config []byte
	// GPU names a device, instance type, GFD label or MIG profile;
	// GPUMemory gives a device by its usable bytes instead ("24GiB").
	GPU, GPUMemory string
	// GPUCount overrides the count the GPU name implies; 0 keeps it.
	GPUCount int
	// GPUsPerNode is the GPUs of one node, for what would fit past it
	// (memory.Layout); 0 takes the instance type's count, or
	// memory.DefaultGPUsPerNode.
	GPUsPerNode int
	// Version is the vLLM version whose rules apply; "" is the newest.
	Version string
	// Install is how vLLM was installed: "image" (the official image,
	// with FlashInfer) or "pip" (without it); "" takes it from Image, else
	// the official image. Image is the container image vLLM runs from
	// (--vllm-image): vLLM's official image names the install, and its tag
	// the release when Version is not given.
	Install, Image string
	// Command is the pasted `vllm serve ...`, split into words.
	Command []string
	// ReadConfig reads the file a --config of Command names; nil leaves
	// the flag not modelled (a server must not read its disk for a
	// request).
	ReadConfig vllm.ConfigReader
	// Flags are vLLM flags that override the same flags of Command
	// ("--max-model-len", "8192", ...).
	Flags []string
	// Offline never fetches from the Hub.
	Offline bool
	// AllGPUs plans on every catalog GPU: GPU is not resolved.
	AllGPUs bool
}

// Evidence is a resolved planning request.
type Evidence struct {
	Spec     model.Spec
	Sel      gpu.Selection
	Settings vllm.Settings
	Notes    []string
	// AutoCount is true when the user named one device without a count:
	// the plan then uses as many as the parallelism needs.
	AutoCount bool
	// Measured holds a matching calibration record's numbers (calibration.go).
	Measured *memory.Measured
	// VersionFrom says where Settings.Version came from: VersionGiven,
	// VersionFromImage, or VersionAssumed (nothing named one).
	VersionFrom string
	// Draft is the draft checkpoint --speculative-config names, when it
	// loads one and it could be read (resolveDraft).
	Draft *model.Spec
	// GPUsPerNode is the node size the alternatives shard past, and past
	// which a tensor-parallel group spans nodes (its non-torch memory).
	GPUsPerNode int
	// LayoutWhy says which parallel layout was chosen for the GPUs given,
	// and why (ChooseLayout); "" when the user set it.
	LayoutWhy string

	// request is what the user asked, for the notes that say what the
	// plan assumed.
	request Request
}

// Settings merges the pasted command and the overriding flags into vLLM
// settings, with Model and Version applied.
func Settings(req Request) (vllm.Settings, error) {
	var args []string
	if len(req.Command) > 0 {
		args = append(args, req.Command...)
	} else {
		args = []string{"vllm", "serve"}
		if req.Model != "" {
			args = append(args, req.Model)
		}
	}
	args = append(args, req.Flags...)
	s, err := vllm.ParseCommandWith(args, req.ReadConfig)
	var unread *vllm.ConfigReadError
	if errors.As(err, &unread) {
		// A file that is not here (a line pasted from a server) leaves
		// the line alone to be planned, and a note says so; a file that
		// reads but is not flags is the line's error, as it is vLLM's.
		if s, err = vllm.ParseCommand(args); err == nil {
			s.ConfigFile = &vllm.ConfigFile{Path: unread.Path, Unread: unread.Err.Error()}
		}
	}
	if err != nil {
		return vllm.Settings{}, err
	}
	if req.Model != "" {
		s.Model = req.Model
	}
	if req.Version != "" {
		v, err := vllm.ParseRelease(req.Version)
		if err != nil {
			return vllm.Settings{}, err
		}
		s.Version = v
	}
	if req.Image != "" {
		inst, _, _ := vllm.ImageInstall(req.Image)
		s.Install = inst
		if s.Version.IsZero() {
			s.Version = vllm.ReadImage(req.Image).Version
		}
	}
	if req.Install != "" {
		inst, err := vllm.ParseInstall(req.Install)
		if err != nil {
			return vllm.Settings{}, err
		}
		s.Install = inst
	}
	return s, nil
}

// installNote says which install the plan assumed, when the release's
// profile run depends on it (FlashInfer's sampler, or a sort without it).
func installNote(req Request, b memory.Budget) string {
	if !vllm.SamplerUsesInstall(b.Settings.Version, b.ModelRunnerV2) {
		return ""
	}
	switch {
	case req.Install != "":
		return fmt.Sprintf("vLLM installed as %s (--vllm-install): the profile run's sampler takes the %s path", b.Install, b.SamplerPath)
	case req.Image != "":
		inst, _, official := vllm.ImageInstall(req.Image)
		if official {
			return fmt.Sprintf("vLLM's official image (%s) has FlashInfer: the profile run's sampler takes the %s path", req.Image, b.SamplerPath)
		}
		return fmt.Sprintf("%s is not vLLM's official image: taken as a %s install without FlashInfer, so the profile run's sampler takes the %s path (--vllm-install image if it has FlashInfer)", req.Image, inst, b.SamplerPath)
	}
	return fmt.Sprintf("vLLM's official image assumed (it has FlashInfer): the profile run's sampler takes the %s path; for a pip install without FlashInfer pass --vllm-install pip", b.SamplerPath)
}

// Gather resolves a request: settings, model, GPU, version and any
// calibration record. Every error it returns is bad input, one line.
func Gather(ctx context.Context, env Env, req Request) (Evidence, error) {
	var e Evidence
	var err error
	if e.Settings, err = Settings(req); err != nil {
		return e, err
	}
	e.Notes = append(e.Notes, configFileNotes(e.Settings.ConfigFile)...)
	switch {
	case len(req.Config) > 0:
		if e.Spec, err = model.ParseConfig(req.Config); err != nil {
			return e, err
		}
		e.Spec.ID = e.Settings.Model
		if e.Spec.ID == "" {
			e.Spec.ID = "config.json"
		}
	case e.Settings.Model == "":
		return e, fmt.Errorf("no model: give --model (a catalog id, a directory, or a Hugging Face id) or paste `-- vllm serve MODEL ...`")
	default:
		if e.Spec, err = ResolveModel(ctx, env, e.Settings.Model, req.Offline); err != nil {
			return e, err
		}
		if id := model.Canonical(e.Settings.Model, e.Spec); id != e.Settings.Model {
			// vLLM loads the Hub id, not the catalog's alias: every
			// command printed names the id.
			e.Notes = append(e.Notes, fmt.Sprintf("%s is %s; the commands name it so, as vLLM loads it", e.Settings.Model, id))
			e.Settings.Model = id
		}
	}
	before := e.Spec
	if e.Spec, err = memory.ServedModel(e.Spec, e.Settings); err != nil {
		return e, err
	}
	if flags := e.Settings.OverrideFlags(); flags != "" {
		e.Notes = append(e.Notes, model.OverridesNote(flags, before, e.Spec))
	}
	if !req.AllGPUs {
		if e.Sel, err = ResolveGPU(req.GPU, req.GPUMemory, req.GPUCount); err != nil {
			return e, err
		}
		e.AutoCount = req.GPUCount == 0 && e.Sel.SKU == "" && e.Sel.Count == 1
	}
	switch {
	case req.GPUsPerNode < 0:
		return e, fmt.Errorf("--gpus-per-node must be positive")
	case req.GPUsPerNode > 0:
		e.GPUsPerNode = req.GPUsPerNode
	case e.Sel.SKU != "":
		// An instance type is a node: its GPUs are the node's.
		e.GPUsPerNode = e.Sel.Count
	default:
		e.GPUsPerNode = memory.DefaultGPUsPerNode
	}
	img := vllm.ReadImage(req.Image)
	e.VersionFrom = VersionGiven
	switch {
	case e.Settings.Version.IsZero() && req.Image != "" && img.VLLM:
		e.Settings.Version, e.VersionFrom = vllm.Newest(), VersionAssumed
		e.Notes = append(e.Notes, img.Note+"; or set --vllm-version")
	case e.Settings.Version.IsZero():
		e.Settings.Version, e.VersionFrom = vllm.Newest(), VersionAssumed
		e.Notes = append(e.Notes, fmt.Sprintf("vLLM %s assumed (the newest these rules know); set --vllm-version to yours", e.Settings.Version))
	case req.Version == "" && req.Image != "":
		e.VersionFrom = VersionFromImage
		e.Notes = append(e.Notes, img.Note)
	default:
		if past := vllm.PastRules(e.Settings.Version); past != "" {
			e.Notes = append(e.Notes, past)
		}
	}
	e.request = req
	resolveDraft(ctx, env, &e, req.Offline)
	if m, note := calibrationFor(env.Getenv, e); note != "" {
		e.Measured = m
		e.Notes = append(e.Notes, note)
	}
	return e, nil
}

// ResolveModel finds a model in env.FS, the catalog, or on the Hub
// (unless offline or HF_HUB_OFFLINE=1).
func ResolveModel(ctx context.Context, env Env, ref string, offline bool) (model.Spec, error) {
	opt := model.ResolveOptions{FS: env.FS, Catalog: catalog.Lookup, Suggest: func(id string) []string { return catalog.Suggest(id, 3) }}
	if !offline && env.Getenv("HF_HUB_OFFLINE") != "1" {
		client := env.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 30 * time.Second}
		}
		hub := model.NewHubFromEnv(env.Getenv, client)
		opt.Hub = &hub
	}
	return model.Resolve(ctx, ref, opt)
}

// ResolveGPU turns a GPU name or a memory size, and a count, into a
// selection.
func ResolveGPU(name, memSize string, count int) (gpu.Selection, error) {
	var sel gpu.Selection
	switch {
	case memSize != "" && name != "":
		return sel, fmt.Errorf("give either --gpu or --gpu-memory, not both")
	case memSize != "":
		n, err := gpu.ParseBytes(memSize)
		if err != nil {
			return sel, fmt.Errorf("--gpu-memory: %v", err)
		}
		if n < 1<<30 {
			return sel, fmt.Errorf("--gpu-memory %s is under 1 GiB, not a GPU's memory: give a unit, e.g. 24GiB", memSize)
		}
		sel = gpu.Selection{Device: gpu.Custom(n), Count: 1}
	case name != "":
		var err error
		if sel, err = gpu.Resolve(name); err != nil {
			return sel, err
		}
	default:
		return sel, fmt.Errorf("no GPU: give --gpu (e.g. H100-80GB, L4, g5.12xlarge) or --gpu-memory 24GiB; `headroom gpus` lists them")
	}
	if count < 0 || count > gpu.MaxCount {
		return sel, fmt.Errorf("--gpu-count %d: give 1 to %d", count, gpu.MaxCount)
	}
	if count > 0 {
		if sel.SKU != "" && count > sel.Count {
			return sel, fmt.Errorf("--gpu-count %d is more than the %d GPUs of a %s: give a larger instance type, or the GPU (--gpu %s) with --gpu-count", count, sel.Count, sel.SKU, sel.Device.Name)
		}
		sel.Count = count
	}
	return sel, nil
}

// Build plans the evidence and renders the report.
func Build(e Evidence, opt memory.Options) (Report, error) {
	e = withLayout(e)
	in, b, rec, alts, chosen, run, err := build(e, opt)
	if err != nil {
		return Report{}, err
	}
	r := newReport(e, b, rec, alts, chosen, run, buildNotes(e, b))
	addPinned(&r, in, run, rec, 0, "")
	return r, nil
}

// addPinned offers the recommendation with its KV pool pinned
// (memory.PinPool): sized from the recommended plan, or from tokens of
// traffic when tokens > 0.
func addPinned(r *Report, in memory.Input, run vllm.Settings, rec memory.Recommendation, tokens int64, why string) {
	if rec.MaxModelLen <= 0 || !rec.Budget.Fits {
		return
	}
	at := in
	at.Settings = run
	at.Settings.GPUMemoryUtilization, at.Settings.MaxModelLen, at.Settings.MaxNumSeqs = rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs
	p, ok := memory.PinPool(at, rec.Budget, tokens, why)
	if !ok {
		return
	}
	r.PinnedKV = &p
	s := recommendedSettings(run, rec)
	s.KVCacheMemoryBytes = p.Bytes
	s.GPUMemoryUtilization = 0
	r.PinnedArgs = nonNilStrings(s.Args())
}

// build plans the evidence and recommends for it: the input and its plan,
// the recommendation, the alternatives and the one chosen, and the
// settings the recommendation applies to.
func build(e Evidence, opt memory.Options) (in memory.Input, b memory.Budget, rec memory.Recommendation,
	alts []memory.Alternative, chosen *memory.Alternative, run vllm.Settings, err error) {
	in = memory.Input{Model: e.Spec, Device: e.Sel.Device, Count: e.Sel.Count, Settings: e.Settings, Measured: e.Measured, GPUsPerNode: e.GPUsPerNode, Draft: e.Draft}
	if e.AutoCount {
		in.Count = 0
	}
	if b, err = memory.Plan(in); err != nil {
		return
	}
	if rec, err = memory.Recommend(in, opt); err != nil {
		return
	}
	// A plan that does not fit is recommended for its first alternative
	// (the least change that fits), so the block and its command agree
	// with it; with none, only a recommendation that fits by itself stays.
	run = e.Settings
	if !b.Fits {
		alts = memory.AlternativesFrom(in, b, gpu.Devices())
		switch {
		case len(alts) > 0:
			chosen = &alts[0]
			if rec, err = memory.Recommend(chosen.Input, opt); err != nil {
				return
			}
			if run, err = withArgs(e.Settings, chosen.Args); err != nil {
				return
			}
		case !rec.Budget.Fits:
			rec = memory.Recommendation{Policy: rec.Policy, Why: []string{
				"nothing tried fits (more or fewer shards, more GPUs, fp8 weights or KV cache, a shorter context, another utilization, a bigger GPU): see the problems"}}
		}
	}
	return
}

// withLayout is the evidence with the parallel layout ChooseLayout picks
// for the GPUs given, when it picks one.
func withLayout(e Evidence) Evidence {
	if e.AutoCount {
		return e
	}
	in := memory.Input{Model: e.Spec, Device: e.Sel.Device, Count: e.Sel.Count, Settings: e.Settings, Measured: e.Measured, GPUsPerNode: e.GPUsPerNode, Draft: e.Draft}
	if tp, pp, why := ChooseLayout(in); tp > 0 {
		e.Settings.TensorParallelSize, e.Settings.PipelineParallelSize, e.LayoutWhy = tp, pp, why
	}
	return e
}

// ChooseLayout plans several GPUs given with no parallelism set on the
// GPUs given: the fewest GPUs (a divisor of the count) whose layout by the
// multi-node rule (memory.Layout: tensor parallel inside a node, pipeline
// parallel across nodes) fits, else the layout of all of them. It returns
// tp 0 when the user set the parallelism or gave one GPU; why says what
// was chosen, for the report's first lines.
func ChooseLayout(in memory.Input) (tp, pp int, why string) {
	set := in.Settings.Set
	if in.Count <= 1 || set[vllm.FlagTensorParallelSize] || set[vllm.FlagPipelineParallelSize] || set[vllm.FlagDataParallelSize] {
		return 0, 0, ""
	}
	lastTP, lastPP := 0, 0
	for n := 1; n <= in.Count; n++ {
		if in.Count%n != 0 {
			continue
		}
		t, p, ok := memory.Layout(n, in.GPUsPerNode, in.Model)
		if !ok {
			continue
		}
		c := in
		c.Settings.TensorParallelSize, c.Settings.PipelineParallelSize = t, p
		if t != max(in.Settings.TensorParallelSize, 1) || p != max(in.Settings.PipelineParallelSize, 1) {
			c.Measured = nil // measured at another layout
		}
		b, err := memory.Plan(c)
		if err != nil {
			continue
		}
		lastTP, lastPP = t, p
		if b.Fits {
			if n == 1 {
				return 1, 1, fmt.Sprintf("one of the %s given holds the model", GPUCount(in.Count, in.Device.Name))
			}
			return t, p, fmt.Sprintf("%s: the fewest of the %s given that fit", memory.LayoutFlags(t, p), GPUCount(in.Count, in.Device.Name))
		}
	}
	if lastTP == 0 {
		return 0, 0, ""
	}
	return lastTP, lastPP, fmt.Sprintf("%s: all of the %s given, and it does not fit", memory.LayoutFlags(lastTP, lastPP), GPUCount(in.Count, in.Device.Name))
}

// buildNotes are the plan's notes: the evidence's, and what the GPUs
// given say.
func buildNotes(e Evidence, b memory.Budget) []string {
	notes := slices.Clone(e.Notes)
	if n := installNote(e.request, b); n != "" {
		notes = append(notes, n)
	}
	if used := b.Settings.TensorParallelSize * b.Settings.PipelineParallelSize * max(b.Settings.DataParallelSize, 1); b.Count > used {
		hint := ""
		if tp, pp, ok := memory.Layout(b.Count, e.GPUsPerNode, b.Model); ok {
			hint = "; " + memory.LayoutFlags(tp, pp) + " to shard the model over all of them"
		}
		notes = append(notes, fmt.Sprintf("%d GPUs given but the settings use %d%s", b.Count, used, hint))
	}
	if e.Sel.Note != "" {
		notes = append(notes, e.Sel.Note)
	}
	if sh := memory.ExpertShapeFor(b.Model, b.Settings, b.Device); sh.Pad > 1 {
		notes = append(notes, fmt.Sprintf("the MXFP4 experts are held at %d × %d a GPU where the checkpoint's shard is %d × %d (%s takes them padded to its widths): %.1f%% more expert weights",
			sh.Intermediate, sh.Hidden, sh.ShardIntermediate, sh.ShardHidden, sh.Kernel, 100*(sh.Pad-1)))
	}
	if d := e.Sel.Device; d.Estimated {
		notes = append(notes, fmt.Sprintf("%s's usable memory (%s) is an estimate (%s); if nvidia-smi on your card shows another total, pass --gpu-memory with it", d.Name, memory.GiB(d.TotalBytes), d.Source))
	}
	return append(notes, featureNotes(b.Settings)...)
}

// withArgs is the user's settings with an alternative's flags applied.
func withArgs(user vllm.Settings, args []string) (vllm.Settings, error) {
	if len(args) == 0 {
		return user, nil
	}
	s, err := vllm.ParseFlags(append(user.Args(), args...))
	if err != nil {
		return user, err
	}
	s.Model, s.Env, s.Version, s.Install = user.Model, user.Env, user.Version, user.Install
	return s, nil
}

// WriteJSON is the JSON every front end prints: indented, and HTML
// characters left as they are: messages read "--max-num-seqs 256 -> 64",
// and "->" should not come out as "-\u003e".
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// GPUCatalog is `headroom gpus -o json`: every device, instance type and
// MIG slice the GPU catalog knows.
type GPUCatalog struct {
	Devices []gpu.Device `json:"devices"`
	SKUs    []gpu.SKU    `json:"skus"`
	MIG     []gpu.Device `json:"mig"`
}

// GPUs lists the GPU catalog.
func GPUs() GPUCatalog {
	return GPUCatalog{Devices: gpu.Devices(), SKUs: gpu.SKUs(), MIG: gpu.MIGSlices()}
}

// RequiredFree is the free memory each GPU must keep for a deployment,
// and why: what watch alerts on and the exporter's headroom counts from.
type RequiredFree struct {
	Bytes int64
	Why   string
	Notes []string
	// Plan is the plan the margin came from; nil without one.
	Plan *memory.Budget
}

// PlanRequiredFree asks the planner how much each GPU must keep free: the
// GPU's total minus vLLM's planned footprint (what the card holds once
// serving). A plan that does not fit leaves no margin (Bytes 0), and a
// note says so.
func PlanRequiredFree(e Evidence) (RequiredFree, error) {
	b, err := memory.Plan(memory.Input{Model: e.Spec, Device: e.Sel.Device, Count: e.Sel.Count, Settings: e.Settings, Draft: e.Draft})
	if err != nil {
		return RequiredFree{}, err
	}
	r := RequiredFree{Notes: e.Notes, Plan: &b}
	margin := b.Unused()
	if margin <= 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the plan does not fit (footprint %s of %s), so there is no margin to watch",
			memory.GiB(b.Footprint), memory.GiB(b.PerGPU.Total)))
		return r, nil
	}
	r.Bytes = margin
	r.Why = fmt.Sprintf("the plan for %s on %s leaves %s of %s free beyond vLLM's %s footprint",
		e.Settings.Model, e.Sel.Device.Name, memory.GiB(margin), memory.GiB(b.PerGPU.Total), memory.GiB(b.Footprint))
	return r, nil
}

// Where a plan's vLLM release came from (Evidence.VersionFrom).
const (
	VersionGiven     = "--vllm-version"
	VersionFromImage = "image tag"
	VersionAssumed   = "assumed"
)
