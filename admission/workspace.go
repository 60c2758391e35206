package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// KAITO facts the Workspace check uses (docs/kaito.md, KAITO at 056b8280).
const (
	// kaitoConfigKey is the key of a Workspace's inference ConfigMap that
	// holds the YAML whose vllm: section is passed to vLLM as flags (§6).
	kaitoConfigKey = "inference_config.yaml"
	// kaitoRuntimeAnnotation selects the runtime; "transformers" serves
	// with Hugging Face transformers instead of vLLM.
	kaitoRuntimeAnnotation = "kaito.sh/runtime"
	// kaitoUtilization is the --gpu-memory-utilization KAITO's operator
	// always passes (pkg/model/interface.go, §4c); kaitoUtilizationA10 is
	// its override for the A10 (gpuMemoryUtilizationByGPUModel).
	kaitoUtilization    = 0.84
	kaitoUtilizationA10 = 0.82
	// kaitoA10 is the catalog name of the GPU KAITO overrides.
	kaitoA10 = "A10"
	// maxWorkspaceNodes bounds resource.count.
	maxWorkspaceNodes = 1024
)

// workspace is what the check reads of a kaito.sh Workspace. The object is
// read as plain JSON: headroom does not import KAITO's API types, and the
// fields below have the same shape in v1alpha1 and v1beta1.
type workspace struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Resource struct {
		InstanceType  string `json:"instanceType"`
		Count         *int64 `json:"count"`
		LabelSelector *struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"labelSelector"`
	} `json:"resource"`
	Inference *struct {
		Preset *struct {
			Name string `json:"name"`
		} `json:"preset"`
		Config   string          `json:"config"`
		Template json.RawMessage `json:"template"`
	} `json:"inference"`
}

// reviewWorkspace checks a KAITO Workspace: the preset's model on
// resource.count nodes of resource.instanceType, with the vllm: flags of its
// inference ConfigMap and KAITO's own defaults for the rest.
func (h *Handler) reviewWorkspace(ctx context.Context, namespace string, raw []byte, mutate bool) (decision, error) {
	e, err := h.evaluateWorkspace(ctx, namespace, raw, !mutate)
	d := decision{Evaluation: e}
	if err != nil || !mutate || len(e.Engines) == 0 {
		return d, err
	}
	var ws workspace
	if err := decodeObject(raw, &ws); err != nil {
		return d, err
	}
	if ann := ws.Metadata.Annotations; autofix(ann) && e.Engines[0].Budget != nil {
		d.patch.setAnnotation("/metadata", ann, AnnotationPlan, PlanSummary(*e.Engines[0].Budget))
	}
	return d, nil
}

// evaluateWorkspace checks a Workspace; explain as for assess.
func (h *Handler) evaluateWorkspace(ctx context.Context, namespace string, raw []byte, explain bool) (Evaluation, error) {
	e := Evaluation{Kind: "Workspace"}
	var ws workspace
	if err := decodeObject(raw, &ws); err != nil {
		return e, err
	}
	ann := ws.Metadata.Annotations
	e.Bypass = bypassed(ann)
	if ws.Inference == nil || strings.EqualFold(ann[kaitoRuntimeAnnotation], "transformers") {
		return e, nil // a tuning Workspace, or not served by vLLM
	}
	e.RunsVLLM = true
	if ws.Inference.Preset == nil || ws.Inference.Preset.Name == "" {
		if len(ws.Inference.Template) > 0 {
			e.warn(CodeNotChecked, "workspace: memory not checked: it runs a custom inference template, which headroom does not read")
		} else {
			e.RunsVLLM = false
		}
		return e, nil
	}
	sub := subject{label: "workspace", settings: vllm.Settings{Model: ws.Inference.Preset.Name}}
	if name := ws.Inference.Config; name != "" {
		s, err := h.kaitoSettings(ctx, namespace, name)
		if err != nil {
			e.warn(CodeInferenceConfig, "workspace: inference config %s/%s: %v; planned with KAITO's defaults", namespace, name, err)
		} else {
			s.Model = sub.settings.Model
			sub.settings = s
		}
	}
	sub.gpu = workspaceGPU(ws, ann)
	sub.defaults = kaitoDefaults(sub.gpu)
	a := h.assess(ctx, namespace, ann, sub, explain)
	e.Denials = append(e.Denials, a.denials...)
	e.Warnings = append(e.Warnings, a.warnings...)
	e.Engines = append(e.Engines, Engine{GPUFrom: sub.gpu.from, Input: a.in, Budget: a.budget, a: a})
	return e, nil
}

// kaitoSettings reads the vllm: section of a Workspace's inference ConfigMap.
func (h *Handler) kaitoSettings(ctx context.Context, namespace, name string) (vllm.Settings, error) {
	cm, err := h.getConfigMap(ctx, namespace, name)
	if err != nil {
		return vllm.Settings{}, err
	}
	raw, ok := configMapValue(cm.Data, cm.BinaryData, kaitoConfigKey)
	if !ok {
		return vllm.Settings{}, fmt.Errorf("no %s key", kaitoConfigKey)
	}
	return kaitoConfig(raw)
}

// kaitoConfig reads the vllm: section of an inference_config.yaml.
func kaitoConfig(raw []byte) (vllm.Settings, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return vllm.Settings{}, fmt.Errorf("%s: %v", kaitoConfigKey, oneLine(err))
	}
	section, _ := doc["vllm"].(map[string]any)
	s, err := vllm.FromMap(section)
	if err != nil {
		return vllm.Settings{}, fmt.Errorf("%s: %v", kaitoConfigKey, err)
	}
	return s, nil
}

// KAITOConfigMap writes the inference ConfigMap a Workspace names in
// inference.config, the one kaitoSettings reads: its inference_config.yaml
// holds a vllm: section with args as vllm.ToMap writes them (KAITO passes
// them after its own flags, so they win, §6). It is named for the model
// (the last part of its id, in the letters a Kubernetes name takes) and
// carries plan, a one-line summary, as AnnotationPlan.
func KAITOConfigMap(model, plan string, args []string) (map[string]any, error) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			return c
		}
		return '-'
	}, name)
	inner, err := yaml.Marshal(map[string]any{"vllm": vllm.ToMap(args)})
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name + "-inference-params", "annotations": map[string]string{AnnotationPlan: plan}},
		"data":       map[string]string{kaitoConfigKey: string(inner)},
	}, nil
}

// workspaceGPU resolves a Workspace's GPUs: the headroom.dev/gpu annotation,
// else resource.instanceType (a cloud SKU), else GFD or instance-type
// labels in resource.labelSelector (BYO nodes). Unlike KAITO, an unknown
// SKU is reported, whatever its name (KAITO silently accepts unknown
// Standard_N*/Standard_D* names, docs/kaito.md §3).
func workspaceGPU(ws workspace, ann map[string]string) gpuEvidence {
	var ev gpuEvidence
	nodes := int64(1)
	if c := ws.Resource.Count; c != nil {
		if *c < 1 || *c > maxWorkspaceNodes {
			ev.unresolved = fmt.Sprintf("resource.count %d is not a node count from 1 to %d", *c, maxWorkspaceNodes)
			return ev
		}
		nodes = *c
	}
	var labels map[string]string
	if ls := ws.Resource.LabelSelector; ls != nil {
		labels = ls.MatchLabels
	}
	name, from := "", ""
	switch {
	case ann[AnnotationGPU] != "":
		name, from = ann[AnnotationGPU], "annotation "+AnnotationGPU
	case ws.Resource.InstanceType != "":
		name, from = ws.Resource.InstanceType, "resource.instanceType"
	case labels[gpu.LabelProduct] != "":
		name, from = labels[gpu.LabelProduct], "resource.labelSelector "+gpu.LabelProduct
	case labels[labelInstanceType] != "":
		name, from = labels[labelInstanceType], "resource.labelSelector "+labelInstanceType
	default:
		ev.unresolved = fmt.Sprintf("no resource.instanceType, no %s annotation and no GPU label in resource.labelSelector", AnnotationGPU)
		return ev
	}
	sel, err := gpu.Resolve(name)
	if err != nil {
		ev.unresolved = fmt.Sprintf("%s %q: %v", from, name, err)
		return ev
	}
	if strings.HasSuffix(strings.ToUpper(name), "-SHARED") {
		ev.shared = append(ev.shared, fmt.Sprintf("the GPU product %q carries GPU feature discovery's -SHARED suffix", name))
	}
	ev.sel, ev.known, ev.from = sel, true, fmt.Sprintf("%s=%s", from, name)
	ev.count = sel.Count * int(nodes)
	return ev
}

// kaitoDefaults fills what KAITO's operator passes when the inference
// config leaves it out: --max-model-len=auto (PR #2156, §6),
// --gpu-memory-utilization 0.84 (A10: 0.82), and the parallelism. KAITO
// picks tensor and pipeline parallelism itself (configureParallelism);
// headroom assumes it shards over the GPUs of a node with tensor
// parallelism (the largest power of two that fits the node and divides the
// attention heads) and over nodes with pipeline parallelism. That is a
// reading of the flags KAITO passes, not of its code.
func kaitoDefaults(ev gpuEvidence) func(model.Spec, *vllm.Settings) {
	return func(spec model.Spec, s *vllm.Settings) {
		if !s.Set[vllm.FlagMaxModelLen] {
			s.MaxModelLen = vllm.AutoMaxModelLen
		}
		if !s.Set[vllm.FlagGPUMemoryUtilization] {
			s.GPUMemoryUtilization = kaitoUtilization
			if ev.sel.Device.Name == kaitoA10 {
				s.GPUMemoryUtilization = kaitoUtilizationA10
			}
		}
		perNode := max(ev.sel.Count, 1)
		nodes := max(ev.count/perNode, 1)
		if !s.Set[vllm.FlagTensorParallelSize] {
			// The largest power of two that fits the node and that vLLM
			// shards the attention over: the sizes vLLM deployments use
			// (7 divides Qwen2.5-7B's 28 heads but not its 4 KV heads).
			tp := 1
			for tp*2 <= perNode && memory.TPShards(spec, tp*2) {
				tp *= 2
			}
			s.TensorParallelSize = tp
		}
		if !s.Set[vllm.FlagPipelineParallelSize] {
			s.PipelineParallelSize = nodes
		}
	}
}

// oneLine keeps the first line of an error.
func oneLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
