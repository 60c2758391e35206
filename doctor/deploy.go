package doctor

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

// Options is what the caller knows beyond the evidence.
type Options struct {
	// Settings are the user's vLLM flags (a pasted command, headroom's
	// flags); they override what the evidence shows, flag by flag.
	Settings    vllm.Settings
	HasSettings bool
	// GPU is the user's --gpu; HasGPU false means: from the evidence.
	GPU    gpu.Selection
	HasGPU bool
	// Version is the user's --vllm-version; zero means from the evidence,
	// else the newest known.
	Version vllm.Version
	// ResolveModel turns a model reference (catalog id, Hugging Face id,
	// directory) into a spec. Nil leaves the planner out unless Model is
	// set.
	ResolveModel func(ref string) (model.Spec, error)
	// Model, when its Layers > 0, is the model already resolved.
	Model model.Spec
	// Policy is the utilization policy (memory.PolicyHeadroom by default).
	Policy string
}

// Deployment is the deployment the diagnosis reasons about: settings,
// model and GPU, each with where it came from.
type Deployment struct {
	Settings       vllm.Settings `json:"settings"`
	SettingsSource []string      `json:"settings_from,omitempty"`
	Model          string        `json:"model,omitempty"`
	ModelSource    string        `json:"model_from,omitempty"`
	GPU            string        `json:"gpu,omitempty"`
	GPUTotalBytes  int64         `json:"gpu_total_bytes,omitempty"`
	GPUCount       int           `json:"gpu_count,omitempty"`
	GPUSource      string        `json:"gpu_from,omitempty"`
	Version        string        `json:"vllm_version,omitempty"`
	VersionSource  string        `json:"vllm_version_from,omitempty"`
	// Measured names the log whose measured weights, activation,
	// non-torch and CUDA-graph figures replace predictions.
	Measured string `json:"measured_from,omitempty"`

	spec    model.Spec
	hasSpec bool
	// specErr is why the model could not be read, when it could not.
	specErr string
	// draft is the checkpoint --speculative-config drafts with, when
	// it loads one and the resolver read it.
	draft    *model.Spec
	device   gpu.Device
	hasGPU   bool
	measured *memory.Measured
	// measuredKVTokens is the "GPU KV cache size" the measuring log gave.
	measuredKVTokens int64
	// measuredFromMetrics is set when the measured KV cache is
	// vllm:cache_config_info's, not a log's.
	measuredFromMetrics bool
	gpuLine             Line
}

// settingsLayer is one source of settings, lowest priority first.
type settingsLayer struct {
	set  vllm.Settings
	from string
}

// resolve builds the deployment from the evidence and the options.
func resolve(ev *Evidence, opt Options) (Deployment, []string) {
	var d Deployment
	var notes []string
	var layers []settingsLayer
	for _, c := range ev.K8s.Containers {
		if c.VLLM && c.HasSettings {
			layers = append(layers, settingsLayer{c.Settings, c.ArgsLine.Ref()})
		}
	}
	for _, c := range ev.Commands {
		layers = append(layers, settingsLayer{c.Settings, c.Line.Ref()})
	}
	for _, m := range ev.Metrics {
		// What the running server says of itself outranks a manifest
		// or a pasted command; what it logged, and the user's flags,
		// outrank it.
		if set, from, ok := metricSettings(m); ok {
			layers = append(layers, settingsLayer{set, from})
		}
	}
	for _, l := range ev.Logs {
		if l.HasSettings {
			set := l.Settings
			if set.Model == "" {
				set.Model = l.Model
			}
			layers = append(layers, settingsLayer{set, fmt.Sprintf("%s (the settings vLLM logged)", l.Source)})
		}
	}
	if opt.HasSettings {
		layers = append(layers, settingsLayer{opt.Settings, "the command line given"})
	}
	var args []string
	env := map[string]string{}
	for _, l := range layers {
		args = append(args, l.set.Args()...)
		maps.Copy(env, l.set.Env)
		if l.set.Model != "" {
			d.Settings.Model, d.ModelSource = l.set.Model, l.from
		}
		d.SettingsSource = append(d.SettingsSource, l.from)
	}
	if len(args) > 0 {
		if set, err := vllm.ParseFlags(args); err == nil {
			set.Model = d.Settings.Model
			d.Settings = set
		} else {
			notes = append(notes, "the settings found do not combine: "+err.Error())
		}
	}
	if len(env) > 0 {
		d.Settings.Env = env
	}

	// Version: --vllm-version, then the last log's, then an image tag.
	switch {
	case !opt.Version.IsZero():
		d.Settings.Version, d.VersionSource = opt.Version, "--vllm-version"
	default:
		for _, l := range ev.Logs {
			if n := len(l.Versions); n > 0 {
				d.Settings.Version, d.VersionSource = l.Versions[n-1], l.VersionLine.Ref()
			}
		}
		if d.Settings.Version.IsZero() {
			for _, c := range ev.K8s.Containers {
				if !c.Version.IsZero() {
					d.Settings.Version, d.VersionSource = c.Version, c.ImageLine.Ref()
				}
			}
		}
	}
	if d.Settings.Version.IsZero() {
		d.Settings.Version = vllm.Newest()
		d.VersionSource = "assumed: the newest release these rules know; give --vllm-version"
	}
	d.Version = d.Settings.Version.String()

	// Model.
	switch {
	case opt.Model.Layers > 0:
		d.spec, d.hasSpec = opt.Model, true
		d.Model = opt.Model.ID
	case d.Settings.Model != "" && opt.ResolveModel != nil:
		spec, err := opt.ResolveModel(d.Settings.Model)
		if err != nil {
			notes = append(notes, fmt.Sprintf("model %q: %v; findings come without planner numbers", d.Settings.Model, err))
			d.specErr = err.Error()
		} else {
			d.spec, d.hasSpec = spec, true
			// A catalog alias is named by its id in the commands to
			// paste: vLLM loads the id.
			d.Settings.Model = model.Canonical(d.Settings.Model, spec)
		}
		d.Model = d.Settings.Model
	case d.Settings.Model != "":
		d.Model = d.Settings.Model
	default:
		notes = append(notes, "no model named in the evidence: paste the command after -- (e.g. -- vllm serve MODEL ...) for remedies with computed values")
	}
	if d.hasSpec {
		if spec, err := memory.ServedModel(d.spec, d.Settings); err != nil {
			notes = append(notes, fmt.Sprintf("%v; findings come without planner numbers", err))
			d.spec, d.hasSpec, d.specErr = model.Spec{}, false, err.Error()
		} else {
			d.spec = spec
		}
	}

	if c := d.Settings.Speculative; c != nil && c.NeedsDraftModel() && opt.ResolveModel != nil {
		if spec, err := opt.ResolveModel(c.Model); err != nil {
			notes = append(notes, fmt.Sprintf("the draft %q: %v; its weights and KV are not planned", c.Model, err))
		} else {
			d.draft = &spec
		}
	}
	d.resolveGPU(ev, opt, &notes)
	d.measure(ev)
	return d, notes
}

// resolveGPU picks the GPU: --gpu, then nvidia-smi's name, then the
// cluster's hints, then the total memory an OOM message or log reports.
func (d *Deployment) resolveGPU(ev *Evidence, opt Options, notes *[]string) {
	set := func(dev gpu.Device, count int, from string, at Line) {
		d.device, d.hasGPU, d.GPU, d.GPUTotalBytes, d.GPUCount, d.GPUSource, d.gpuLine = dev, true, dev.Name, dev.TotalBytes, count, from, at
	}
	if opt.HasGPU {
		set(opt.GPU.Device, opt.GPU.Count, "--gpu", Line{})
		return
	}
	for _, g := range ev.GPUs {
		for _, x := range g.GPUs {
			if x.Name == "" {
				continue
			}
			if sel, err := gpu.Resolve(x.Name); err == nil {
				n := 0
				for _, y := range g.GPUs {
					if y.Name == x.Name {
						n++
					}
				}
				set(sel.Device, n, g.Line.Ref(), g.Line)
				return
			}
		}
	}
	for _, h := range ev.K8s.GPUHints {
		var sel gpu.Selection
		var err error
		if h.Name != "" {
			sel, err = gpu.Resolve(h.Name)
		} else {
			sel, err = gpu.FromNodeLabels(h.Labels)
		}
		if err == nil {
			// A node's labels count the node's GPUs; the vLLM container's
			// limit counts the pod's.
			count := sel.Count
			for _, c := range ev.K8s.Containers {
				if c.VLLM && c.GPUCount > 0 {
					count = c.GPUCount
					break
				}
			}
			set(sel.Device, count, h.Line.Ref(), h.Line)
			return
		}
	}
	for _, o := range ev.OOMs {
		if o.OOM.Total > 0 {
			set(byTotal(o.OOM.Total), 0, o.Line.Ref()+" (the total the OOM message gives)", o.Line)
			return
		}
	}
	for _, l := range ev.Logs {
		if l.Report.TotalBytes > 0 {
			set(byTotal(l.Report.TotalBytes), 0, l.Source+" (the total vLLM logged)", Line{})
			return
		}
	}
	for _, g := range ev.GPUs {
		for _, x := range g.GPUs {
			if x.TotalBytes > 0 && x.TotalBytes != telemetry.Unknown {
				set(gpu.Custom(x.TotalBytes), len(g.GPUs), g.Line.Ref(), g.Line)
				return
			}
		}
	}
	*notes = append(*notes, "no GPU named in the evidence: give --gpu (e.g. H100-80GB) for remedies with computed values")
}

// totalMatch is how close a reported total must be to a catalog device's
// to name it: the figures are printed to 0.01 GiB.
const totalMatch = 6 << 20

// byTotal names the device whose measured total (not an estimate, not a
// MIG slice) the reported total matches, when exactly one does: vLLM's
// defaults depend on the name (an A100 gets smaller batches than an H100
// of the same size). Otherwise the device is the bare total.
func byTotal(total int64) gpu.Device {
	var found []gpu.Device
	for _, d := range gpu.Devices() {
		if d.Estimated || d.MIG != "" {
			continue
		}
		if diff := d.TotalBytes - total; diff > -totalMatch && diff < totalMatch {
			found = append(found, d)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return gpu.Custom(total)
}

// measure takes the measured parts from a start-up log that ran the same
// model with the same parallel layout: measure over guess.
func (d *Deployment) measure(ev *Evidence) {
	for _, l := range ev.Logs {
		r := l.Report
		if r.WeightsBytes == 0 && r.AvailableKVBytes == 0 && r.NumGPUBlocks == 0 {
			continue
		}
		if l.Model != "" && d.Settings.Model != "" && l.Model != d.Settings.Model {
			continue
		}
		if l.HasSettings && (tpOf(l.Settings) != tpOf(d.Settings) || ppOf(l.Settings) != ppOf(d.Settings)) {
			continue
		}
		d.measured = &memory.Measured{Weights: r.WeightsBytes, Activation: r.ActivationBytes, NonTorch: r.NonTorchBytes,
			CUDAGraph: r.CUDAGraphBytes, Source: l.Source}
		if r.AvailableKVBytes > 0 && (!l.HasSettings || l.Settings.KVCacheMemoryBytes <= 0) {
			// The KV cache was sized at the log's utilization: the
			// one it logged, else its flags', else its release's default.
			d.measured.AvailableKV, d.measured.KVTokens, d.measured.Utilization = r.AvailableKVBytes, r.KVTokens, logUtilization(l)
		}
		if r.AvailableKVBytes == 0 && r.KVTokens == 0 && r.NumGPUBlocks > 0 && (!l.HasSettings || l.Settings.KVCacheMemoryBytes <= 0) {
			// V0 logs its KV cache as blocks only: tokens are blocks of
			// the block size it ran with.
			d.measured.KVTokens, d.measured.Utilization = r.NumGPUBlocks*int64(logBlockSize(l, d.Settings)), logUtilization(l)
		}
		d.Measured = l.Source
		d.measuredKVTokens = d.measured.KVTokens
	}
	if d.measured != nil {
		return
	}
	// No start-up log: the KV cache the server reports on /metrics
	// (vllm:cache_config_info's num_gpu_blocks of block_size tokens, at
	// its gpu_memory_utilization) is measured too. A simulated
	// stand-in's is not.
	for _, m := range ev.Metrics {
		s := m.VLLM
		if s == nil || s.CacheConfig.Simulated || s.CacheConfig.NumGPUBlocks <= 0 || s.CacheConfig.BlockSize <= 0 {
			continue
		}
		if len(s.Models) == 1 && d.Settings.Model != "" && s.Models[0] != d.Settings.Model {
			continue
		}
		c := s.CacheConfig
		d.measured = &memory.Measured{KVTokens: c.NumGPUBlocks * int64(c.BlockSize), Utilization: c.GPUMemoryUtilization,
			Source: m.Line.Source}
		d.Measured, d.measuredFromMetrics = m.Line.Source+" (vllm:cache_config_info)", true
		d.measuredKVTokens = d.measured.KVTokens
		return
	}
}

// measuredKind names where the measured numbers come from, as the plan
// summary's sources say it.
func (d *Deployment) measuredKind() string {
	if d.measuredFromMetrics {
		return SourceMetrics
	}
	return SourceLog
}

// metricSettings are the settings a /metrics exposition gives of its
// server: vllm:cache_config_info's utilization, block size and KV-cache
// dtype, and the model every series names (model_name), when it names one.
func metricSettings(m MetricFacts) (vllm.Settings, string, bool) {
	s := m.VLLM
	if s == nil {
		return vllm.Settings{}, "", false
	}
	var args, what []string
	c := s.CacheConfig
	if c.GPUMemoryUtilization > 0 {
		args = append(args, "--"+vllm.FlagGPUMemoryUtilization, strconv.FormatFloat(c.GPUMemoryUtilization, 'f', -1, 64))
	}
	if c.BlockSize > 0 {
		args = append(args, "--block-size", strconv.Itoa(c.BlockSize))
	}
	if c.CacheDtype != "" && c.CacheDtype != "auto" {
		args = append(args, "--kv-cache-dtype", c.CacheDtype)
	}
	if len(args) > 0 {
		what = append(what, s.Names[vllm.MetricCacheConfig])
	}
	set, err := vllm.ParseFlags(args)
	if err != nil {
		// A label vLLM's own parser would refuse: the rest stands.
		set, args = vllm.Settings{}, nil
		what = nil
	}
	if len(s.Models) == 1 {
		set.Model = s.Models[0]
		what = append(what, "model_name")
	}
	if len(what) == 0 {
		return vllm.Settings{}, "", false
	}
	return set, fmt.Sprintf("%s (/metrics: %s)", m.Line.Source, strings.Join(what, ", ")), true
}

// logBlockSize is the --block-size a log ran with: its flags', else the
// deployment's, else vLLM's default.
func logBlockSize(l *LogFacts, s vllm.Settings) int {
	switch {
	case l.HasSettings && l.Settings.BlockSize > 0:
		return l.Settings.BlockSize
	case s.BlockSize > 0:
		return s.BlockSize
	}
	return vllm.DefaultBlockSize(s.Version)
}

// logUtilization is the --gpu-memory-utilization a start-up log ran at.
func logUtilization(l *LogFacts) float64 {
	switch {
	case l.Report.Utilization > 0:
		return l.Report.Utilization
	case l.HasSettings && l.Settings.GPUMemoryUtilization > 0:
		return l.Settings.GPUMemoryUtilization
	}
	var v vllm.Version
	if n := len(l.Versions); n > 0 {
		v = l.Versions[n-1]
	}
	return vllm.DefaultGPUMemoryUtilization(v)
}

func tpOf(s vllm.Settings) int { return max(s.TensorParallelSize, 1) }
func ppOf(s vllm.Settings) int { return max(s.PipelineParallelSize, 1) }

// input is the planner's input for the deployment with settings s.
func (d *Deployment) input(s vllm.Settings) (memory.Input, bool) {
	if !d.hasSpec || !d.hasGPU {
		return memory.Input{}, false
	}
	return memory.Input{Model: d.spec, Device: d.device, Count: d.GPUCount, Settings: s, Env: s.Env, Measured: d.measured, Draft: d.draft}, true
}
