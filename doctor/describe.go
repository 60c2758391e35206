package doctor

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/vllm"
)

// describeState follows `kubectl describe` output (pods, nodes, HPAs):
// sections are opened by "Key:" lines and their items are indented
// deeper. It starts at a "Name:" line in the first column.
type describeState struct {
	active  bool
	object  string
	section string // args, command, limits, labels, metrics, env
	indent  int    // indentation of the section's header
	cont    *ContainerFacts
	args    []string
	argLine Line
	cmd     []string
	// argLines and cmdLines are where each item of args and cmd is.
	argLines, cmdLines []Line
	labels             map[string]string
	labelAt            Line
	hpa                *HPAFacts
	// inContainers is set inside "Containers:", where "  name:" opens
	// a container.
	inContainers bool
	// mounts are the container's "Mounts:"; configs the containers of
	// this object whose vLLM line names a --config file, read at the
	// object's end, when its "Volumes:" (volumes, vol the one being
	// read) are known.
	mounts    []corev1.VolumeMount
	configs   []configFile
	inVolumes bool
	volumes   []corev1.Volume
	vol       *corev1.Volume
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }

// line handles one line; it reports whether the line was describe output.
func (d *describeState) line(s *textScanner, l string) bool {
	t := strings.TrimSpace(l)
	ind := indentOf(l)
	if strings.HasPrefix(l, "Name:") {
		d.flush(s)
		d.active, d.object = true, strings.TrimSpace(strings.TrimPrefix(l, "Name:"))
		return true
	}
	if !d.active || t == "" {
		return false
	}
	if d.section != "" && ind > d.indent && !(d.section == "labels" && !strings.Contains(t, "=")) {
		d.item(s, t)
		return true
	}
	if d.section == "labels" {
		d.flushLabels(s)
	}
	d.section = ""
	key, val, hasColon := strings.Cut(t, ":")
	val = strings.TrimSpace(val)
	if !hasColon {
		return d.eventLine(s, t)
	}
	if ind == 0 {
		d.inContainers, d.inVolumes, d.vol = false, false, nil
	}
	if d.inVolumes {
		d.volume(key, val, ind)
		return true
	}
	if d.inContainers && ind == 2 && val == "" {
		d.flushContainer(s)
		d.container(s)
		d.cont.Container = key
		return true
	}
	switch key {
	case "Containers":
		d.inContainers = true
		return true
	case "Volumes":
		d.inVolumes = ind == 0
		return true
	case "Mounts":
		d.section, d.indent = "mounts", ind
		return true
	case "Reference":
		d.hpa = &HPAFacts{Name: "HorizontalPodAutoscaler/" + d.object, Line: s.here(), CPUOnly: true}
		return true
	case "Image":
		d.container(s)
		d.cont.Image, d.cont.ImageLine = val, s.here()
		d.cont.Version = imageVersion(val)
		d.cont.VLLM = d.cont.VLLM || strings.Contains(strings.ToLower(val), "vllm")
		return true
	case "Args", "Command", "Limits", "Requests", "Environment", "Metrics":
		d.section, d.indent = strings.ToLower(key), ind
		if key == "Args" || key == "Command" {
			d.container(s)
			d.argLine = s.here()
		}
		return true
	case "Labels", "Node-Selectors":
		// A pod's node selectors name its GPU as a node's labels do.
		d.section, d.indent = "labels", ind
		d.labels, d.labelAt = map[string]string{}, s.here()
		d.item(s, val)
		return true
	case "Reason":
		switch val {
		case "OOMKilled":
			s.e.K8s.OOMKilled = append(s.e.K8s.OOMKilled, s.here())
		case "CrashLoopBackOff":
			s.e.K8s.CrashLoop = append(s.e.K8s.CrashLoop, s.here())
		}
		return true
	case "Restart Count":
		if n, err := strconv.Atoi(val); err == nil && n > 0 {
			s.e.K8s.Restarts = append(s.e.K8s.Restarts, RestartFact{Name: d.object, Count: n, Line: s.here()})
		}
		return true
	case "Liveness", "Readiness", "Startup":
		d.container(s)
		d.cont.Probes = append(d.cont.Probes, probeFacts(strings.ToLower(key), describeProbe(val), s.here()))
		return true
	}
	return d.eventLine(s, t)
}

// volume reads a line of the pod's "Volumes:": "  NAME:" opens a volume,
// and its "Type:", "Name:" (a ConfigMap's) and "ConfigMapName:" (a
// projected volume's) say where a ConfigMap's files come from. describe
// prints no items, so a file's key is taken to be its name.
func (d *describeState) volume(key, val string, ind int) {
	switch {
	case ind == 2 && val == "":
		d.volumes = append(d.volumes, corev1.Volume{Name: key})
		d.vol = &d.volumes[len(d.volumes)-1]
	case d.vol == nil || ind != 4:
	case key == "Type" && strings.HasPrefix(val, "ConfigMap"):
		d.vol.ConfigMap = &corev1.ConfigMapVolumeSource{}
	case key == "Type" && strings.HasPrefix(val, "Projected"):
		d.vol.Projected = &corev1.ProjectedVolumeSource{}
	case key == "Name" && d.vol.ConfigMap != nil:
		d.vol.ConfigMap.Name = val
	case key == "ConfigMapName" && d.vol.Projected != nil:
		d.vol.Projected.Sources = append(d.vol.Projected.Sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: val}}})
	}
}

// describeMount reads a "Mounts:" item as kubectl writes it: "PATH from
// VOLUME (ro)", or "(rw,path=\"SUBPATH\")" with a subPath.
func describeMount(t string) (corev1.VolumeMount, bool) {
	path, rest, ok := strings.Cut(t, " from ")
	if !ok {
		return corev1.VolumeMount{}, false
	}
	name, flags, _ := strings.Cut(rest, " (")
	m := corev1.VolumeMount{MountPath: path, Name: name}
	for _, f := range strings.Split(strings.TrimSuffix(flags, ")"), ",") {
		switch k, v, _ := strings.Cut(f, "="); k {
		case "ro":
			m.ReadOnly = true
		case "path":
			if sub, err := strconv.Unquote(v); err == nil {
				m.SubPath = sub
			}
		}
	}
	return m, m.MountPath != "" && m.Name != ""
}

// item handles a line inside a section.
func (d *describeState) item(s *textScanner, t string) {
	switch d.section {
	case "mounts":
		if m, ok := describeMount(t); ok {
			d.mounts = append(d.mounts, m)
		}
	case "args":
		d.args = append(d.args, t)
		d.argLines = append(d.argLines, s.here())
	case "command":
		d.cmd = append(d.cmd, t)
		d.cmdLines = append(d.cmdLines, s.here())
	case "limits":
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			return
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return
		}
		d.container(s)
		switch {
		case k == "memory":
			d.cont.MemoryLimit, d.cont.MemoryLine = q.Value(), s.here()
		case strings.HasPrefix(k, "nvidia.com/") || strings.HasPrefix(k, "amd.com/gpu"):
			d.cont.GPUResource, d.cont.GPUCount, d.cont.GPULine = k, int(q.Value()), s.here()
			if strings.HasPrefix(k, "nvidia.com/mig-") {
				s.e.K8s.GPUHints = append(s.e.K8s.GPUHints, GPUHint{Name: k, Line: s.here()})
			}
			if k == "nvidia.com/gpu.shared" {
				s.e.K8s.Sharing = append(s.e.K8s.Sharing, s.here())
			}
		}
	case "environment":
		k, v, ok := strings.Cut(t, ":")
		k = strings.TrimSpace(k)
		if ok && (strings.HasPrefix(k, "VLLM_") || k == "PYTORCH_CUDA_ALLOC_CONF") {
			d.container(s)
			if d.cont.Settings.Env == nil {
				d.cont.Settings.Env = map[string]string{}
			}
			d.cont.Settings.Env[k] = strings.TrimSpace(v)
		}
	case "labels":
		if k, v, ok := strings.Cut(t, "="); ok {
			d.labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
			if strings.HasPrefix(k, "nvidia.com/gpu.replicas") || strings.HasPrefix(k, "nvidia.com/gpu.sharing-strategy") {
				d.labelAt = s.here()
			}
		}
	case "metrics":
		if d.hpa == nil {
			return
		}
		f := strings.Fields(t)
		if len(f) >= 2 {
			switch f[0] {
			case "resource":
				d.hpa.Metrics = append(d.hpa.Metrics, "resource/"+f[1])
			default:
				d.hpa.Metrics = append(d.hpa.Metrics, strings.Trim(f[0], `"`))
				d.hpa.CPUOnly = false
			}
			d.hpa.Line = s.here()
		}
	}
}

// eventLine files an Events row.
func (d *describeState) eventLine(s *textScanner, t string) bool {
	switch {
	case strings.Contains(t, "Liveness probe failed") || strings.Contains(t, "Startup probe failed"):
		s.e.K8s.ProbeFailures = append(s.e.K8s.ProbeFailures, s.here())
	case strings.Contains(t, "Back-off restarting failed container"):
		s.e.K8s.CrashLoop = append(s.e.K8s.CrashLoop, s.here())
	case strings.Contains(t, "OOMKilling") || strings.Contains(t, "OOMKilled"):
		s.e.K8s.OOMKilled = append(s.e.K8s.OOMKilled, s.here())
	case strings.Contains(t, "FailedScheduling"):
		s.e.K8s.schedulingFailure(t, s.here())
	default:
		return false
	}
	return true
}

// container returns the container being described, starting one.
func (d *describeState) container(s *textScanner) {
	if d.cont == nil {
		d.cont = &ContainerFacts{Workload: "Pod/" + d.object, Line: s.here()}
	}
}

func (d *describeState) flushLabels(s *textScanner) {
	if len(d.labels) == 0 {
		return
	}
	if n, err := strconv.Atoi(d.labels[labelReplicas]); err == nil && n > 1 {
		s.e.K8s.Sharing = append(s.e.K8s.Sharing, d.labelAt)
	} else if v := d.labels[labelSharing]; v != "" && v != "none" {
		s.e.K8s.Sharing = append(s.e.K8s.Sharing, d.labelAt)
	}
	if _, err := gpu.FromNodeLabels(d.labels); err == nil {
		s.e.K8s.GPUHints = append(s.e.K8s.GPUHints, GPUHint{Labels: d.labels, Line: d.labelAt})
	}
	d.labels = nil
}

// flush ends the object being described; its containers' --config files
// are read from its volumes and the ConfigMaps of the inputs.
func (d *describeState) flush(s *textScanner) {
	d.flushLabels(s)
	d.flushContainer(s)
	if d.hpa != nil {
		s.e.K8s.HPAs = append(s.e.K8s.HPAs, *d.hpa)
	}
	if len(d.configs) > 0 {
		for _, p := range d.configs {
			p.volumes = d.volumes
			s.e.configFiles = append(s.e.configFiles, p)
		}
		s.e.readConfigFiles()
	}
	*d = describeState{active: d.active, object: d.object}
}

// flushContainer ends the container being described.
func (d *describeState) flushContainer(s *textScanner) {
	if d.cont != nil {
		c := *d.cont
		if set, ok := commandSettings(d.cmd, d.args, c.Image); ok {
			env := c.Settings.Env
			c.Settings, c.HasSettings, c.ArgsLine = set, true, d.argLine
			if len(env) > 0 {
				if c.Settings.Env == nil {
					c.Settings.Env = map[string]string{}
				}
				for k, v := range env {
					c.Settings.Env[k] = v
				}
			}
		}
		if c.HasSettings {
			c.FlagLines = describeFlagLines(append(append([]string{}, d.cmd...), d.args...), append(append([]Line{}, d.cmdLines...), d.argLines...))
		}
		c.VLLM = c.VLLM || strings.Contains(strings.Join(append(d.cmd, d.args...), " "), "vllm")
		s.e.K8s.Containers = append(s.e.K8s.Containers, c)
		if c.HasSettings && c.Settings.Set[vllm.FlagConfig] {
			d.configs = append(d.configs, configFile{container: len(s.e.K8s.Containers) - 1,
				c: corev1.Container{Image: c.Image, Command: d.cmd, Args: d.args, VolumeMounts: d.mounts}})
		}
	}
	d.cont, d.args, d.cmd, d.argLine, d.mounts = nil, nil, nil, Line{}, nil
	d.argLines, d.cmdLines = nil, nil
}

// describeFlagLines cites, per flag (vLLM's name, no dashes), the item of
// the command or args that holds its value: describe prints one word a
// line, so "--gpu-memory-utilization" and "0.95" are two items, and the
// value's is the line a finding about the value points at.
func describeFlagLines(words []string, at []Line) map[string]Line {
	out := map[string]Line{}
	for i, w := range words {
		name, ok := strings.CutPrefix(w, "--")
		if !ok || name == "" || i >= len(at) {
			continue
		}
		if n, _, inline := strings.Cut(name, "="); inline {
			out[n] = at[i]
			continue
		}
		if i+1 < len(words) && i+1 < len(at) && !strings.HasPrefix(words[i+1], "--") {
			out[name] = at[i+1]
		} else {
			out[name] = at[i]
		}
	}
	return out
}

func (d *describeState) finish(s *textScanner) {
	if d.active {
		d.flush(s)
	}
}

// describeProbe reads "http-get http://:8000/health delay=30s
// timeout=1s period=10s #success=1 #failure=3".
func describeProbe(spec string) *corev1.Probe {
	var p corev1.Probe
	for _, f := range strings.Fields(spec) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
		if err != nil || n < 0 || n > 1e7 {
			continue
		}
		switch k {
		case "delay":
			p.InitialDelaySeconds = int32(n)
		case "period":
			p.PeriodSeconds = int32(n)
		case "#failure":
			p.FailureThreshold = int32(n)
		}
	}
	return &p
}
