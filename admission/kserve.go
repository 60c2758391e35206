package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"headroom.dev/headroom/host"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// KServe facts the InferenceService check uses, from github.com/kserve/kserve
// v0.15.0.
//
// KServe's API types are not imported: pkg/apis/serving/v1beta1 pulls in
// Knative (serving and pkg), controller-runtime's webhook packages and
// client-go's typed clientset, whose init alone the webhook avoids
// (Cluster's comment). The few fields read are decoded into the small
// types below; their JSON names are those of KServe's v1beta1 types, and
// the end-to-end test creates these objects through KServe's own CRD.
const (
	kindInferenceService = "InferenceService"
	kserveGroup          = "serving.kserve.io"
	// kserveHFFormat is the model format of KServe's Hugging Face runtime
	// (config/runtimes/kserve-huggingfaceserver.yaml).
	kserveHFFormat = "huggingface"
	// kserveHFPrefix starts a storageUri on the Hugging Face Hub
	// ("hf://org/model[:revision]", python/kserve/kserve/storage/storage.py).
	kserveHFPrefix = "hf://"
	// kserveDefaultTP and kserveDefaultPP are what a multi-node predictor
	// runs with when its workerSpec leaves them out: the Hugging Face
	// multi-node runtime's workerSpec (tensorParallelSize 1,
	// pipelineParallelSize 2), which are also pkg/constants'
	// DefaultTensorParallelSize and DefaultPipelineParallelSize.
	kserveDefaultTP = 1
	kserveDefaultPP = 2
)

// kserveVLLM is the vLLM release KServe v0.15.0's Hugging Face server is
// built with (python/huggingfaceserver/poetry.lock: vllm 0.8.2); its image
// tag names KServe's release, not vLLM's.
var kserveVLLM = vllm.Version{Major: 0, Minor: 8, Patch: 2}

// inferenceService is what the check reads of a KServe v1beta1
// InferenceService.
type inferenceService struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Predictor *kservePredictor `json:"predictor"`
	} `json:"spec"`
}

// kservePredictor is spec.predictor: a model served by a runtime (model, or
// the older huggingface), a pod spec of its own (containers: a custom
// predictor), and for multi-node serving a workerSpec.
type kservePredictor struct {
	corev1.PodSpec `json:",inline"`
	Model          *kserveModel      `json:"model,omitempty"`
	HuggingFace    *kserveModel      `json:"huggingface,omitempty"`
	WorkerSpec     *kserveWorkerSpec `json:"workerSpec,omitempty"`
}

// kserveModel is a ModelSpec: the format, the runtime, where the model is,
// and the runtime container's overrides (args, resources, env).
type kserveModel struct {
	ModelFormat *struct {
		Name string `json:"name"`
	} `json:"modelFormat,omitempty"`
	Runtime          *string `json:"runtime,omitempty"`
	StorageURI       *string `json:"storageUri,omitempty"`
	corev1.Container `json:",inline"`
}

// kserveWorkerSpec is spec.predictor.workerSpec.
type kserveWorkerSpec struct {
	corev1.PodSpec       `json:",inline"`
	PipelineParallelSize *int `json:"pipelineParallelSize,omitempty"`
	TensorParallelSize   *int `json:"tensorParallelSize,omitempty"`
}

// hfModel returns the predictor's model served by the Hugging Face runtime
// and its JSON pointer; nil when it has none.
func (p *kservePredictor) hfModel() (*kserveModel, string) {
	if m := p.Model; m != nil {
		hf := m.ModelFormat != nil && strings.EqualFold(m.ModelFormat.Name, kserveHFFormat)
		if m.Runtime != nil && strings.Contains(strings.ToLower(*m.Runtime), "huggingface") {
			hf = true
		}
		if hf {
			return m, "/spec/predictor/model"
		}
	}
	if p.HuggingFace != nil {
		return p.HuggingFace, "/spec/predictor/huggingface"
	}
	return nil, ""
}

// kserveOwnArgs are the arguments KServe's Hugging Face server reads
// itself and does not hand to vLLM, by name with dashes for underscores,
// and whether each takes a value: the model server's (--model_name, which
// every runtime passes, the ports, the protocol; kserve/model_server.py)
// and the Hugging Face server's for its transformers backend
// (huggingfaceserver/__main__.py), KServe v0.15.0. --model_id and
// --backend are read below. Not among them: what the two parsers share a
// destination with vLLM's own arguments (--max_model_len,
// --trust_remote_code, --tokenizer_revision, --disable_log_requests, and
// --dtype, which KServe defines only without vLLM), which reach vLLM's
// engine arguments as vLLM's flags.
var kserveOwnArgs = map[string]bool{
	"http-port": true, "grpc-port": true, "workers": true, "max-threads": true,
	"max-asyncio-workers": true, "enable-grpc": true, "enable-docs-url": true,
	"enable-latency-logging": true, "configure-logging": true, "log-config-file": true,
	"access-log-format": true, "model-name": true, "predictor-host": true, "protocol": true,
	"predictor-protocol": true, "predictor-use-ssl": true, "predictor-request-timeout-seconds": true,
	"grpc-max-send-message-length": true, "grpc-max-receive-message-length": true,
	"predictor-request-retries": true, "enable-predictor-health-check": false,
	"model-dir": true, "disable-lower-case": false, "disable-special-tokens": false,
	"tensor-input-names": true, "return-token-type-ids": false, "return-probabilities": false,
}

// kserveRenamed are KServe's names of vLLM's arguments: --max_length
// (its older --max_model_len, dest max_model_len) and --model_revision,
// which the server copies to vLLM's revision.
var kserveRenamed = map[string]string{
	"max-length":     vllm.FlagMaxModelLen,
	"model-revision": "revision",
}

// kserveLaunch reads the vLLM settings the Hugging Face server passes on
// from a model's args: its own --model_id (or an hf:// storageUri) names
// the model, --backend=huggingface serves without vLLM (ok false), its
// names of vLLM's arguments are read as vLLM's (kserveRenamed), and the
// arguments only KServe reads (kserveOwnArgs) are left out, so that
// --model_name, which every InferenceService passes, is not taken for a
// vLLM flag headroom does not know.
func kserveLaunch(m *kserveModel) (l launch, ok bool, err error) {
	var args []string
	backend, modelID := "", ""
	for i := 0; i < len(m.Args); i++ {
		a := m.Args[i]
		name, value, hasValue := strings.Cut(a, "=")
		key := strings.ReplaceAll(strings.TrimLeft(name, "-"), "_", "-")
		if !strings.HasPrefix(name, "--") {
			args = append(args, a)
			continue
		}
		if key == "backend" || key == "model-id" {
			if !hasValue && i+1 < len(m.Args) {
				i++
				value = m.Args[i]
			}
			if key == "backend" {
				backend = value
			} else {
				modelID = value
			}
			continue
		}
		if takesValue, own := kserveOwnArgs[key]; own {
			if takesValue && !hasValue && i+1 < len(m.Args) {
				i++
			}
			continue
		}
		if to, renamed := kserveRenamed[key]; renamed {
			name = "--" + to
			if hasValue {
				a = name + "=" + value
			} else {
				a = name
			}
		}
		args = append(args, a)
	}
	if strings.EqualFold(backend, "huggingface") {
		return launch{}, false, nil
	}
	// KServe's Hugging Face server parses its args with its own parser
	// beside vLLM's arguments; whether it expands a --config file as
	// vLLM's FlexibleArgumentParser does is not encoded, so the line is
	// checked alone and the warning says so.
	unread := func(string) ([]byte, error) {
		return nil, errors.New("KServe's Hugging Face server passes its args through its own parser, which headroom does not follow into the file")
	}
	l.settings, err = vllm.ParseFlagsWith(args, unread)
	var cre *vllm.ConfigReadError
	if errors.As(err, &cre) {
		l.settings, err = vllm.ParseFlags(args)
		l.configUnread = cre.Error()
	}
	if err != nil {
		return launch{}, true, err
	}
	switch {
	case modelID != "":
		l.settings.Model = modelID
	case m.StorageURI != nil && strings.HasPrefix(*m.StorageURI, kserveHFPrefix):
		id, _, _ := strings.Cut(strings.TrimPrefix(*m.StorageURI, kserveHFPrefix), ":")
		l.settings.Model = id
	}
	l.settings.Version, l.versionFrom = kserveVLLM, ReleaseFromRuntime
	l.appendable = true
	return l, true, nil
}

// reviewInferenceService checks an InferenceService and, for the mutating
// webhook, adds flags to its model's args.
func (h *Handler) reviewInferenceService(ctx context.Context, namespace string, raw []byte, mutate bool) (decision, error) {
	var o inferenceService
	if err := decodeObject(raw, &o); err != nil {
		return decision{Evaluation: Evaluation{Kind: kindInferenceService}}, err
	}
	d := decision{Evaluation: h.evaluateInferenceService(ctx, namespace, &o, nil, !mutate)}
	if !mutate || !d.RunsVLLM {
		return d, nil
	}
	ann := o.Metadata.Annotations
	fix := autofix(ann)
	var plans []string
	for _, s := range d.Engines {
		notes, plan := fixContainer(&d.patch, s.path, s.c, s.l, s.a, fix)
		d.notes = append(d.notes, notes...)
		if plan != nil {
			plans = append(plans, PlanSummary(*plan))
		}
	}
	if fix {
		// Only a custom predictor has pod fixes: its pod spec is
		// /spec/predictor.
		d.notes = append(d.notes, autofixPod(&d.patch, PodSpecPath(kindInferenceService), d.PodFixes)...)
	}
	if fix && len(plans) > 0 {
		d.patch.setAnnotation("/metadata", ann, AnnotationPlan, strings.Join(plans, " | "))
	}
	return d, nil
}

// EvaluateInferenceService runs the validating webhook's checks on a KServe
// InferenceService, given as the API's unstructured content (what a
// dynamic client lists); node as for EvaluateLeaderWorkerSet. The error is
// for an object whose fields do not have the InferenceService's types.
func (h *Handler) EvaluateInferenceService(ctx context.Context, namespace string, obj map[string]any, node map[string]string) (Evaluation, error) {
	var o inferenceService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &o); err != nil {
		return Evaluation{Kind: kindInferenceService}, err
	}
	return h.evaluateInferenceService(ctx, namespace, &o, node, true), nil
}

// evaluateInferenceService plans an InferenceService's predictor: the
// Hugging Face runtime with the vLLM backend (its args, its resources'
// GPUs, and with a workerSpec KServe's multi-node layout), or a custom
// predictor whose containers run vLLM, checked as a pod's.
func (h *Handler) evaluateInferenceService(ctx context.Context, namespace string, o *inferenceService, node map[string]string, explain bool) Evaluation {
	e := Evaluation{Kind: kindInferenceService}
	p := o.Spec.Predictor
	if p == nil {
		return e
	}
	ann := o.Metadata.Annotations
	m, path := p.hfModel()
	if m == nil {
		if len(p.Containers) == 0 {
			return e
		}
		w := Workload{Kind: kindInferenceService, Namespace: namespace, Name: o.Metadata.Name, Spec: &p.PodSpec, Node: node}
		w.Meta.Annotations = ann
		e = h.evaluatePods(ctx, w, explain)
		for i := range e.Engines {
			e.Engines[i].path = PodSpecPath(kindInferenceService) + pointer("containers", index(e.Engines[i].index))
		}
		return e
	}
	const label = "predictor"
	l, ok, err := kserveLaunch(m)
	if !ok {
		return e
	}
	e.RunsVLLM = true
	e.Bypass = bypassed(ann)
	if err != nil {
		e.warn(CodeNotChecked, "%s: memory not checked: its vLLM args cannot be read: %v", label, err)
		return e
	}
	e.configUnread(label, l)
	if l.settings.Model == "" && ann[AnnotationModelConfig] == "" {
		where := "no storageUri"
		if m.StorageURI != nil {
			where = fmt.Sprintf("storageUri %q", clip(*m.StorageURI))
		}
		e.warn(CodeNotChecked, "%s: memory not checked: no --model_id in args and %s, which names no Hugging Face model (hf://ORG/NAME); name the model with --model_id or its config.json with the annotation %s", label, where, AnnotationModelConfig)
		return e
	}
	ev := h.readGPU(ann, &p.PodSpec, m.Container, node)
	// One pod: it may take more of its node's GPUs, eight unless its
	// instance type says.
	g := group{kind: kindInferenceService, pods: 1, leaderGPUs: ev.count, nodeGPUs: memory.DefaultGPUsPerNode}
	if ev.sel.SKU != "" {
		g.nodeGPUs = ev.sel.Count
	}
	set := l.settings
	if ws := p.WorkerSpec; ws != nil {
		// KServe gives the head and every worker tensorParallelSize GPUs
		// (its raw deployment reconciler overwrites their limits) and
		// runs pipelineParallelSize pods: the head and the rest as workers.
		tp, pp := kserveDefaultTP, kserveDefaultPP
		if ws.TensorParallelSize != nil {
			tp = *ws.TensorParallelSize
		}
		if ws.PipelineParallelSize != nil {
			pp = *ws.PipelineParallelSize
		}
		if tp < 1 || tp > maxGPUs || pp < 1 || pp > maxGroupPods {
			e.warn(CodeNotChecked, "%s: memory not checked: workerSpec tensorParallelSize %d and pipelineParallelSize %d are not GPU and pod counts", label, tp, pp)
			return e
		}
		g = group{kind: kindInferenceService, pods: pp, leaderGPUs: tp, workerGPUs: tp}
		set.PipelineParallelSize = pp
		set.Set = withSet(set.Set, vllm.FlagPipelineParallelSize)
		if !ev.known {
			for _, c := range ws.Containers {
				if wev := h.readGPU(ann, &ws.PodSpec, c, node); wev.known {
					ev.sel, ev.known, ev.from = wev.sel, true, "workerSpec's "+wev.from
					break
				}
			}
		}
	}
	// The server sets --tensor-parallel-size to the GPUs it sees
	// (vllm_model.py: torch.cuda.device_count()), whatever args say; it
	// is not the user's flag, so the planner may change it as freely as
	// the GPU count.
	if g.leaderGPUs > 0 {
		set.TensorParallelSize = g.leaderGPUs
		delete(set.Set, vllm.FlagTensorParallelSize)
	}
	ev.count = g.gpus()
	if g.gpus() > 0 {
		ev.count = max(set.TensorParallelSize, 1) * max(set.PipelineParallelSize, 1) * max(set.DataParallelSize, 1)
	}
	sub := subject{label: label, settings: set, env: literalEnv(m.Container), gpu: ev, group: &g}
	a := h.assess(ctx, namespace, ann, sub, explain)
	e.Denials = append(e.Denials, a.denials...)
	e.Warnings = append(e.Warnings, a.warnings...)
	if a.planned() {
		// The pods' host memory, each against one pod's plan: the head
		// alone holds all of it; with a workerSpec, the head its
		// tensorParallelSize GPUs' workers and the server, each worker
		// its own GPUs' workers.
		head := host.Options{Env: l.envOf(m.Container)}
		if p.WorkerSpec != nil {
			head.GPUs = g.leaderGPUs
		}
		e.groupHostCheck(h.podPolicy, &p.PodSpec, 0, m.Container, label, *a.budget, head)
		if ws := p.WorkerSpec; ws != nil {
			for wi, wc := range ws.Containers {
				e.groupHostCheck(h.podPolicy, &ws.PodSpec, wi, wc, fmt.Sprintf("workerSpec container %q", wc.Name), *a.budget, host.Options{GPUs: g.workerGPUs, Worker: true, Env: l.envOf(wc)})
			}
		}
	}
	l.settings = set
	e.Engines = append(e.Engines, Engine{Container: m.Name, GPUFrom: ev.from, Input: a.in, Budget: a.budget, path: path, c: m.Container, l: l, a: a})
	return e
}

// withSet is set with flag marked given, copied.
func withSet(set map[string]bool, flag string) map[string]bool {
	out := make(map[string]bool, len(set)+1)
	for k, v := range set {
		out[k] = v
	}
	out[flag] = true
	return out
}
