package doctor

import (
	"encoding/json"
	"errors"
	"path"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/vllm"
)

// K8sFacts is what manifests, `kubectl get -o yaml/json` and `kubectl
// describe` say about the workload and its cluster.
type K8sFacts struct {
	Containers []ContainerFacts `json:"containers,omitempty"`
	HPAs       []HPAFacts       `json:"hpas,omitempty"`
	// Sharing cites GPU time-slicing or shared-GPU resources.
	Sharing []Line `json:"gpu_sharing,omitempty"`
	// GPUHints name the GPU: node labels, a MIG resource, a cloud
	// instance type.
	GPUHints []GPUHint     `json:"gpu_hints,omitempty"`
	Restarts []RestartFact `json:"restarts,omitempty"`
	// OOMKilled, CrashLoop, ProbeFailures and SchedulingFailures cite the
	// container states and events of that name.
	OOMKilled          []Line `json:"oom_killed,omitempty"`
	CrashLoop          []Line `json:"crash_loop,omitempty"`
	ProbeFailures      []Line `json:"probe_failures,omitempty"`
	SchedulingFailures []Line `json:"scheduling_failures,omitempty"`
	// SchedulingReasons are the scheduler's words of each failure
	// ("0/4 nodes are available: 2 Insufficient nvidia.com/gpu, ..."),
	// as SchedulingFailures cites them; GPUShort is set when one says
	// that nodes lack the GPUs the pod asks for.
	SchedulingReasons []string `json:"scheduling_reasons,omitempty"`
	GPUShort          bool     `json:"gpu_short,omitempty"`
}

// schedulingFailure files a FailedScheduling event with its message.
func (k *K8sFacts) schedulingFailure(message string, at Line) {
	k.SchedulingFailures = append(k.SchedulingFailures, at)
	if _, rest, ok := strings.Cut(message, "FailedScheduling"); ok {
		// A describe row: the message follows the reason, age and
		// source columns.
		if _, m, ok := strings.Cut(rest, "0/"); ok {
			message = "0/" + m
		}
	}
	// The scheduler's verdict, without its note on preemption.
	message, _, _ = strings.Cut(message, " preemption:")
	k.SchedulingReasons = append(k.SchedulingReasons, strings.TrimSpace(message))
	k.GPUShort = k.GPUShort || strings.Contains(message, "Insufficient nvidia.com/gpu") || strings.Contains(message, "Insufficient amd.com/gpu")
}

// ContainerFacts is one container of a workload.
type ContainerFacts struct {
	Workload  string `json:"workload"`
	Container string `json:"container"`
	Line      Line   `json:"line"`
	// VLLM is set when the container runs vLLM (by image or command).
	VLLM      bool         `json:"vllm"`
	Image     string       `json:"image,omitempty"`
	Version   vllm.Version `json:"vllm_version,omitzero"`
	ImageLine Line         `json:"image_line,omitzero"`
	// Settings are read from the command and args.
	Settings    vllm.Settings `json:"settings"`
	HasSettings bool          `json:"has_settings"`
	ArgsLine    Line          `json:"args_line,omitzero"`
	// FlagLines cite, per flag set (vLLM's name, no dashes), the line of
	// the manifest that sets it, so a finding about a value points at it.
	FlagLines map[string]Line `json:"-"`
	// GPUResource is the extended resource (nvidia.com/gpu, a MIG
	// profile, nvidia.com/gpu.shared) and GPUCount its limit.
	GPUResource string `json:"gpu_resource,omitempty"`
	GPUCount    int    `json:"gpu_count,omitempty"`
	GPULine     Line   `json:"gpu_line,omitzero"`
	// MemoryLimit is the container's host-memory limit in bytes.
	MemoryLimit int64        `json:"memory_limit_bytes,omitempty"`
	MemoryLine  Line         `json:"memory_line,omitzero"`
	Probes      []ProbeFacts `json:"probes,omitempty"`
}

// ProbeFacts is one probe and the seconds it allows before the kubelet
// acts: initialDelaySeconds + failureThreshold × periodSeconds (Kubernetes
// defaults 0, 3, 10).
type ProbeFacts struct {
	Kind          string  `json:"kind"`
	BudgetSeconds float64 `json:"budget_seconds"`
	// DelaySeconds and PeriodSeconds are the probe's, with Kubernetes'
	// defaults (kube.ProbeWindow): a remedy keeps its period.
	DelaySeconds  int32 `json:"initial_delay_seconds"`
	PeriodSeconds int32 `json:"period_seconds"`
	Line          Line  `json:"line"`
}

// probeFacts reads a probe as kube.ProbeWindow does, so the doctor and the
// webhook count its window alike.
func probeFacts(kind string, p *corev1.Probe, at Line) ProbeFacts {
	window, period, _ := kube.ProbeWindow(p)
	return ProbeFacts{Kind: kind, BudgetSeconds: window.Seconds(), DelaySeconds: max(p.InitialDelaySeconds, 0), PeriodSeconds: period, Line: at}
}

// HPAFacts is one HorizontalPodAutoscaler.
type HPAFacts struct {
	Name    string   `json:"name"`
	Metrics []string `json:"metrics"`
	// CPUOnly is set when it scales on CPU or memory alone (nothing that
	// tracks queue depth or KV-cache use).
	CPUOnly bool `json:"cpu_only"`
	Line    Line `json:"line"`
}

// GPUHint is a GPU named by the cluster.
type GPUHint struct {
	// Name is something gpu.Resolve reads (a MIG resource, an instance
	// type), or empty when Labels carry it.
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Line   Line              `json:"line"`
}

// RestartFact is a container's restart count.
type RestartFact struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Line  Line   `json:"line"`
}

// doc is one YAML/JSON document and where it sits in its source.
type doc struct {
	src   string
	first int // line number of the document's first line
	lines []string
}

// find returns the first line at or after from that contains every needle.
func (d doc) find(from int, needles ...string) Line {
	for i := max(from, 0); i < len(d.lines); i++ {
		ok := true
		for _, n := range needles {
			if !strings.Contains(d.lines[i], n) {
				ok = false
				break
			}
		}
		if ok {
			return newLine(d.src, d.first+i, d.lines[i])
		}
	}
	if len(d.lines) > 0 && from == 0 {
		return newLine(d.src, d.first, d.lines[0])
	}
	return d.find(0, needles...)
}

// flagLine is the first line from from on that names --flag (as its own
// word, or in "--flag=value").
func (d doc) flagLine(from int, flag string) (Line, bool) {
	for i := max(from, 0); i < len(d.lines); i++ {
		l := d.lines[i]
		if j := strings.Index(l, "--"+flag); j >= 0 {
			rest := l[j+2+len(flag):]
			if rest == "" || strings.ContainsAny(rest[:1], "= \"',") {
				// A flag alone as a list item has its value on the next
				// item: that is the line with the value.
				if t := strings.Trim(strings.TrimSpace(rest), `"'`); t == "" && i+1 < len(d.lines) {
					if next := strings.TrimSpace(d.lines[i+1]); strings.HasPrefix(next, "- ") && !strings.HasPrefix(strings.Trim(next[2:], `"' `), "-") {
						return newLine(d.src, d.first+i+1, d.lines[i+1]), true
					}
				}
				return newLine(d.src, d.first+i, l), true
			}
		}
	}
	return Line{}, false
}

func (d doc) index(l Line) int { return max(l.Line-d.first, 0) }

// splitDocs cuts a YAML stream at "---" lines.
func splitDocs(src string, data []byte) []doc {
	var out []doc
	cur := doc{src: src, first: 1}
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.HasPrefix(l, "---") && strings.TrimSpace(strings.Trim(l, "-")) == "" {
			out = append(out, cur)
			cur = doc{src: src, first: i + 2}
			continue
		}
		cur.lines = append(cur.lines, l)
	}
	return append(out, cur)
}

type objectHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// readManifests parses Kubernetes objects; it reports whether any was read.
func (e *Evidence) readManifests(in *Input, data []byte) bool {
	found := false
	for _, d := range splitDocs(in.Source, data) {
		text := strings.Join(d.lines, "\n")
		if strings.TrimSpace(text) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			in.Notes = append(in.Notes, "line "+strconv.Itoa(d.first)+": not valid YAML/JSON: "+err.Error())
			continue
		}
		in.Lines += len(d.lines)
		if e.readObject(in, d, js, 0) {
			found = true
		}
	}
	return found
}

func (e *Evidence) readObject(in *Input, d doc, js []byte, depth int) bool {
	var h objectHead
	if err := json.Unmarshal(js, &h); err != nil || h.Kind == "" {
		return false
	}
	name := h.Kind + "/" + h.Metadata.Name
	at := d.find(0, "name: "+h.Metadata.Name)
	if h.Metadata.Name == "" {
		at = d.find(0, "kind")
	}
	note := func(err error) {
		in.Notes = append(in.Notes, name+": "+err.Error())
	}
	switch h.Kind {
	case "List", "PodList", "DeploymentList", "StatefulSetList", "EventList", "NodeList", "ConfigMapList", "HorizontalPodAutoscalerList":
		if depth > 0 {
			return false
		}
		ok := false
		for _, it := range h.Items {
			if e.readObject(in, d, it, depth+1) {
				ok = true
			}
		}
		return ok
	case "Pod":
		var p corev1.Pod
		if err := json.Unmarshal(js, &p); err != nil {
			note(err)
			return false
		}
		e.podSpec(d, name, at, p.Spec)
		e.podStatus(d, name, p.Status)
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet":
		var spec struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(js, &spec); err != nil {
			note(err)
			return false
		}
		if h.Kind == "Deployment" {
			var dep appsv1.Deployment
			if json.Unmarshal(js, &dep) == nil {
				spec.Spec.Template = dep.Spec.Template
			}
		}
		e.podSpec(d, name, at, spec.Spec.Template.Spec)
	case "Job":
		var j batchv1.Job
		if err := json.Unmarshal(js, &j); err != nil {
			note(err)
			return false
		}
		e.podSpec(d, name, at, j.Spec.Template.Spec)
	case "HorizontalPodAutoscaler":
		e.hpa(d, name, at, h.APIVersion, js)
	case "ConfigMap":
		var cm corev1.ConfigMap
		if err := json.Unmarshal(js, &cm); err != nil {
			note(err)
			return false
		}
		return e.configMap(d, cm)
	case "Node":
		var n corev1.Node
		if err := json.Unmarshal(js, &n); err != nil {
			note(err)
			return false
		}
		e.nodeLabels(d, n.Labels)
	case "Event":
		var ev corev1.Event
		if err := json.Unmarshal(js, &ev); err != nil {
			note(err)
			return false
		}
		e.event(ev.Reason, ev.Message, d.find(0, ev.Reason))
	case "Workspace":
		var ws struct {
			Resource struct {
				InstanceType string `json:"instanceType"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(js, &ws); err != nil {
			note(err)
			return false
		}
		if ws.Resource.InstanceType == "" {
			return false
		}
		e.K8s.GPUHints = append(e.K8s.GPUHints, GPUHint{Name: ws.Resource.InstanceType, Line: d.find(0, "instanceType")})
	default:
		return false
	}
	return true
}

// podSpec reads each container of a pod template.
func (e *Evidence) podSpec(d doc, workload string, at Line, spec corev1.PodSpec) {
	if len(spec.NodeSelector) > 0 {
		e.nodeLabels(d, spec.NodeSelector)
	}
	for _, c := range spec.Containers {
		from := d.index(d.find(d.index(at), "name: "+c.Name))
		cf := ContainerFacts{Workload: workload, Container: c.Name, Line: d.find(from, c.Name), Image: c.Image}
		if c.Image != "" {
			cf.ImageLine = d.find(from, c.Image)
			cf.Version = imageVersion(c.Image)
		}
		words := append(append([]string{}, c.Command...), c.Args...)
		cf.VLLM = strings.Contains(strings.ToLower(c.Image), "vllm") || strings.Contains(strings.Join(words, " "), "vllm")
		if set, ok := commandSettings(c.Command, c.Args, c.Image); ok {
			cf.Settings, cf.HasSettings = set, true
			if len(c.Args) > 0 {
				cf.ArgsLine = d.find(from, "args")
			} else {
				cf.ArgsLine = d.find(from, "command")
			}
			for flag := range set.Set {
				if l, ok := d.flagLine(d.index(cf.ArgsLine), flag); ok {
					if cf.FlagLines == nil {
						cf.FlagLines = map[string]Line{}
					}
					cf.FlagLines[flag] = l
				}
			}
		}
		for _, env := range c.Env {
			if strings.HasPrefix(env.Name, "VLLM_") || env.Name == "PYTORCH_CUDA_ALLOC_CONF" {
				if cf.Settings.Env == nil {
					cf.Settings.Env = map[string]string{}
				}
				cf.Settings.Env[env.Name] = env.Value
			}
		}
		for rname, q := range c.Resources.Limits {
			r := string(rname)
			switch {
			case r == "memory":
				cf.MemoryLimit = q.Value()
				cf.MemoryLine = d.find(from, "memory:")
			case strings.HasPrefix(r, "nvidia.com/") || strings.HasPrefix(r, "amd.com/gpu"):
				cf.GPUResource, cf.GPUCount = r, int(q.Value())
				cf.GPULine = d.find(from, r)
				if strings.HasPrefix(r, "nvidia.com/mig-") {
					e.K8s.GPUHints = append(e.K8s.GPUHints, GPUHint{Name: r, Line: cf.GPULine})
				}
				if r == "nvidia.com/gpu.shared" {
					e.K8s.Sharing = append(e.K8s.Sharing, cf.GPULine)
				}
			}
		}
		for _, p := range []struct {
			kind  string
			probe *corev1.Probe
		}{{"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}, {"startup", c.StartupProbe}} {
			if p.probe == nil {
				continue
			}
			cf.Probes = append(cf.Probes, probeFacts(p.kind, p.probe, d.find(from, p.kind+"Probe")))
		}
		e.K8s.Containers = append(e.K8s.Containers, cf)
		if cf.HasSettings && cf.Settings.Set[vllm.FlagConfig] {
			e.configFiles = append(e.configFiles, configFile{container: len(e.K8s.Containers) - 1, volumes: spec.Volumes, c: c})
			e.readConfigFiles()
		}
	}
}

// commandSettings reads vLLM settings from a container's command and
// args: a vllm serve / api_server command, `sh -c "..."`, flags alone, or
// the args of vLLM's official image, whose entrypoint is `vllm serve`
// (the model may come first, as a positional argument).
func commandSettings(command, args []string, image string) (vllm.Settings, bool) {
	set, err := commandSettingsWith(command, args, image, nil)
	return set, err == nil
}

// errNoCommand is a container that starts no vLLM command headroom reads.
var errNoCommand = errors.New("no vLLM command")

// commandSettingsWith is commandSettings reading a --config file with read
// (vllm.ParseFlagsWith); the error is the last parse's, errNoCommand when
// nothing reads as a vLLM command.
func commandSettingsWith(command, args []string, image string, read vllm.ConfigReader) (vllm.Settings, error) {
	var last error = errNoCommand
	if len(command) == 0 && len(args) > 0 && vllm.ReadImage(image).Official {
		set, err := vllm.ParseFlagsWith(args, read)
		var unread *vllm.ConfigReadError
		if err == nil || errors.As(err, &unread) {
			// The image's line, read but for its file: no other reading
			// of the words is the command.
			return set, err
		}
		last = err
	}
	words := append(append([]string{}, command...), args...)
	if len(words) >= 3 && (path.Base(words[0]) == "sh" || path.Base(words[0]) == "bash") && strings.HasPrefix(words[1], "-") && strings.Contains(words[1], "c") {
		split, err := vllm.SplitCommandLine(strings.Join(words[2:], " "))
		if err != nil {
			return vllm.Settings{}, err
		}
		words = split
	}
	if len(words) == 0 {
		return vllm.Settings{}, last
	}
	joined := strings.Join(words, " ")
	if strings.Contains(joined, "vllm") || strings.HasPrefix(words[0], "-") {
		set, err := vllm.ParseCommandWith(words, read)
		if err == nil {
			return set, nil
		}
		last = err
	}
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		set, err := vllm.ParseFlagsWith(args, read)
		if err == nil {
			return set, nil
		}
		last = err
	}
	return vllm.Settings{}, last
}

// configFile is a container whose vLLM command names a --config file,
// until the ConfigMap mounted at its path is read (in any input, before or
// after the workload).
type configFile struct {
	container int // in K8s.Containers
	volumes   []corev1.Volume
	c         corev1.Container
}

// errConfigMapNotRead is a --config file whose ConfigMap no input holds
// yet.
var errConfigMapNotRead = errors.New("its ConfigMap is not among the inputs")

// readConfigFiles reads, for every container still waiting, its --config
// file from the ConfigMaps read so far: the file's flags join the
// container's settings (the line's own win), as the webhook reads them
// from the cluster.
func (e *Evidence) readConfigFiles() {
	kept := e.configFiles[:0]
	for _, p := range e.configFiles {
		spec := &corev1.PodSpec{Volumes: p.volumes}
		read := func(file string) ([]byte, error) {
			keys, err := kube.ConfigMapFile(spec, p.c, file)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				if cm, ok := e.configMaps[k.Name]; ok {
					if v, ok := cm.Data[k.Key]; ok {
						return []byte(v), nil
					}
					if v, ok := cm.BinaryData[k.Key]; ok {
						return v, nil
					}
				}
			}
			return nil, errConfigMapNotRead
		}
		set, err := commandSettingsWith(p.c.Command, p.c.Args, p.c.Image, read)
		if errors.Is(err, errConfigMapNotRead) {
			kept = append(kept, p)
			continue
		}
		if err != nil {
			continue // another volume, or a file vLLM would refuse: the line alone stays
		}
		cf := &e.K8s.Containers[p.container]
		set.Env = cf.Settings.Env
		cf.Settings = set
	}
	e.configFiles = kept
}

// imageVersion reads a vLLM release from a vLLM image's tag
// ("vllm/vllm-openai:v0.6.3", vendors' images: vllm.ReadImage); zero for
// other images or tags.
func imageVersion(image string) vllm.Version { return vllm.ReadImage(image).Version }

func (e *Evidence) podStatus(d doc, name string, st corev1.PodStatus) {
	for _, cs := range st.ContainerStatuses {
		if cs.RestartCount > 0 {
			e.K8s.Restarts = append(e.K8s.Restarts, RestartFact{Name: name + "/" + cs.Name, Count: int(cs.RestartCount), Line: d.find(0, "restartCount")})
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			e.K8s.OOMKilled = append(e.K8s.OOMKilled, d.find(0, "OOMKilled"))
		}
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			e.K8s.OOMKilled = append(e.K8s.OOMKilled, d.find(0, "OOMKilled"))
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			e.K8s.CrashLoop = append(e.K8s.CrashLoop, d.find(0, "CrashLoopBackOff"))
		}
	}
}

func (e *Evidence) hpa(d doc, name string, at Line, apiVersion string, js []byte) {
	h := HPAFacts{Name: name, Line: at}
	if strings.HasSuffix(apiVersion, "/v1") {
		var v1 autoscalingv1.HorizontalPodAutoscaler
		if json.Unmarshal(js, &v1) == nil {
			s := kube.ScalingV1(&v1)
			h.Metrics, h.CPUOnly = s.Metrics, s.HostOnly != ""
			h.Line = d.find(0, "targetCPUUtilizationPercentage")
		}
	} else {
		var v2 autoscalingv2.HorizontalPodAutoscaler
		if json.Unmarshal(js, &v2) == nil {
			s := kube.ScalingV2(&v2)
			h.Metrics, h.CPUOnly = s.Metrics, s.HostOnly != ""
			if len(v2.Spec.Metrics) > 0 {
				h.Line = d.find(0, "metrics:")
			}
		}
	}
	e.K8s.HPAs = append(e.K8s.HPAs, h)
}

// configMap reads the NVIDIA device plugin's time-slicing config and a
// KAITO inference config (a vllm: section of flags).
func (e *Evidence) configMap(d doc, cm corev1.ConfigMap) bool {
	if len(e.configMaps) < maxConfigMaps {
		if e.configMaps == nil {
			e.configMaps = map[string]corev1.ConfigMap{}
		}
		e.configMaps[cm.Name] = cm
		e.readConfigFiles()
	}
	read := false
	for key, v := range cm.Data {
		if strings.Contains(v, "timeSlicing") {
			var cfg struct {
				Sharing struct {
					TimeSlicing struct {
						Resources []struct {
							Name     string `json:"name"`
							Replicas int    `json:"replicas"`
						} `json:"resources"`
					} `json:"timeSlicing"`
				} `json:"sharing"`
			}
			if yaml.Unmarshal([]byte(v), &cfg) == nil {
				for _, r := range cfg.Sharing.TimeSlicing.Resources {
					if r.Replicas > 1 {
						e.K8s.Sharing = append(e.K8s.Sharing, d.find(0, "replicas"))
						read = true
					}
				}
			}
		}
		if strings.HasSuffix(key, ".yaml") && strings.Contains(v, "vllm:") {
			var cfg struct {
				VLLM map[string]any `json:"vllm"`
			}
			if yaml.Unmarshal([]byte(v), &cfg) == nil && len(cfg.VLLM) > 0 {
				set, _ := settingsFromMap(cfg.VLLM)
				e.Commands = append(e.Commands, CommandFacts{Line: d.find(0, "vllm:"), Settings: set})
				read = true
			}
		}
	}
	return read
}

// GPU-feature-discovery and device-plugin node labels.
const (
	labelReplicas = "nvidia.com/gpu.replicas"
	labelSharing  = "nvidia.com/gpu.sharing-strategy"
)

func (e *Evidence) nodeLabels(d doc, labels map[string]string) {
	if n, err := strconv.Atoi(labels[labelReplicas]); err == nil && n > 1 {
		e.K8s.Sharing = append(e.K8s.Sharing, d.find(0, labelReplicas))
	} else if s := labels[labelSharing]; s != "" && s != "none" {
		e.K8s.Sharing = append(e.K8s.Sharing, d.find(0, labelSharing))
	} else if s := labels[gpu.LabelGKESharing]; s != "" {
		e.K8s.Sharing = append(e.K8s.Sharing, d.find(0, gpu.LabelGKESharing))
	}
	if _, err := gpu.FromNodeLabels(labels); err == nil {
		// The line of the label that named the GPU: GPU feature
		// discovery's product, else GKE's accelerator.
		key := gpu.LabelProduct
		if labels[key] == "" {
			key = gpu.LabelGKEAccelerator
		}
		e.K8s.GPUHints = append(e.K8s.GPUHints, GPUHint{Labels: labels, Line: d.find(0, key)})
	}
}

// event files a Kubernetes event by reason.
func (e *Evidence) event(reason, message string, at Line) {
	switch {
	case reason == "OOMKilling" || strings.Contains(message, "OOMKilled"):
		e.K8s.OOMKilled = append(e.K8s.OOMKilled, at)
	case reason == "Unhealthy" && (strings.Contains(message, "Liveness probe failed") || strings.Contains(message, "Startup probe failed")):
		e.K8s.ProbeFailures = append(e.K8s.ProbeFailures, at)
	case reason == "BackOff" && strings.Contains(message, "restarting failed container"):
		e.K8s.CrashLoop = append(e.K8s.CrashLoop, at)
	case reason == "FailedScheduling":
		e.K8s.schedulingFailure(message, at)
	}
}
