package admission

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"headroom.dev/headroom/internal/kubetest"
)

// groupObject reads testdata/groups/NAME.yaml.
func groupObject(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	return kubetest.ReadObject(t, filepath.Join("testdata", "groups", name+".yaml"))
}

// groupRequest is the CREATE review of o.
func groupRequest(t testing.TB, o *unstructured.Unstructured) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "llm", Name: o.GetName(),
		Kind: metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: o.GetKind()}, Object: runtime.RawExtension{Raw: raw}}
}

func set(t testing.TB, o *unstructured.Unstructured, value any, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(o.Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

// leaderScript is the vLLM example's leader script with other flags.
func leaderScript(flags string) string {
	return "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE); vllm serve meta-llama/Llama-3.1-405B-Instruct --port 8080 " + flags
}

func setLeaderScript(t testing.TB, o *unstructured.Unstructured, flags string) {
	t.Helper()
	leader := o.Object["spec"].(map[string]any)["leaderWorkerTemplate"].(map[string]any)["leaderTemplate"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	leader["command"] = []any{"sh", "-c", leaderScript(flags)}
}

func denialText(t testing.TB, r *admissionv1.AdmissionResponse) string {
	t.Helper()
	if r.Allowed || r.Result == nil {
		t.Fatalf("allowed, want a denial; warnings %q", r.Warnings)
	}
	return r.Result.Message
}

func hasAll(t testing.TB, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%q\nlacks %q", text, s)
		}
	}
}

// Llama-3.1-405B-Instruct on pods of 8 × H100-80GB (79.19 GiB each), as
// vLLM's LeaderWorkerSet example serves it, vLLM 0.19.0 (the image's tag).
// Its weights per GPU (memory's TestAlternativesMultiNode works them from
// its config): 94.53 GiB at tp 8, half the layers each at tp 8 × pp 2.
func TestLeaderWorkerSet(t *testing.T) {
	h := newTestHandler(t)
	ctx := context.Background()

	// The example: tp 8 × pp 2 on 2 pods of 8 is the group's 16 GPUs, and
	// at 32768 tokens it fits: admitted, nothing to warn about.
	o := groupObject(t, "lws-405b")
	r := h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed || len(r.Warnings) != 0 {
		t.Fatalf("the example: allowed %v, warnings %q, %+v", r.Allowed, r.Warnings, r.Result)
	}
	var typed lwsv1.LeaderWorkerSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &typed); err != nil {
		t.Fatal(err)
	}
	e := h.EvaluateLeaderWorkerSet(ctx, "llm", &typed, nil)
	if len(e.Engines) != 1 || e.Engines[0].Budget == nil {
		t.Fatalf("evaluation %+v", e)
	}
	if b := e.Engines[0].Budget; b.Count != 16 || b.Settings.TensorParallelSize != 8 || b.Settings.PipelineParallelSize != 2 || len(b.Stages) != 2 || !b.Fits {
		t.Errorf("planned on %d GPUs at tp %d × pp %d, %d stages, fits %v", b.Count, b.Settings.TensorParallelSize, b.Settings.PipelineParallelSize, len(b.Stages), b.Fits)
	}

	// The same model at tp 8 in a group of one 8-GPU pod: 94.53 GiB of
	// weights per GPU. The multi-node fix: a second pod as a second
	// pipeline stage (size: 2, --pipeline-parallel-size 2).
	o = groupObject(t, "lws-405b")
	set(t, o, int64(1), "spec", "leaderWorkerTemplate", "size")
	setLeaderScript(t, o, "--tensor-parallel-size 8 --max-model-len 32768")
	msg := denialText(t, h.Validate(ctx, groupRequest(t, o)))
	hasAll(t, msg, `leader container "vllm-leader": meta-llama/Llama-3.1-405B-Instruct on 8 × H100-80GB`,
		"weights take 94.53 GiB per GPU",
		"size: 2 (16 × H100-80GB) and --pipeline-parallel-size 2 in the leader's vllm command: tensor parallel inside a pod, pipeline parallel across pods")
	if strings.Contains(msg, "--tensor-parallel-size 16") {
		t.Errorf("tensor parallel across the nodes offered: %s", msg)
	}

	// tp 8 × pp 2 = 16 GPUs in a group of one 8-GPU pod: vLLM does not
	// start. The fix: size 2 (8 + 8 = 16). tp 8 × pp 1 on the 8 it has
	// is not offered: it is the 94.53 GiB above.
	o = groupObject(t, "lws-405b")
	set(t, o, int64(1), "spec", "leaderWorkerTemplate", "size")
	msg = denialText(t, h.Validate(ctx, groupRequest(t, o)))
	hasAll(t, msg, "the group has 8 GPUs (1 pod × 8 × H100-80GB) but --tensor-parallel-size 8 × --pipeline-parallel-size 2 = 16: vLLM does not start", "To fix: size: 2")
	if strings.Contains(msg, "; or") {
		t.Errorf("a fix that does not fit offered: %s", msg)
	}

	// tp 8 × pp 2 in a group of 3 pods: 8 of its 24 GPUs idle. Fixes:
	// size 2, or tp 8 × pp 3 over all 24 (126 layers split in 3 stages,
	// fits as 2 stages do).
	o = groupObject(t, "lws-405b")
	set(t, o, int64(3), "spec", "leaderWorkerTemplate", "size")
	msg = denialText(t, h.Validate(ctx, groupRequest(t, o)))
	hasAll(t, msg, "the group has 24 GPUs (3 pods × 8 × H100-80GB) but --tensor-parallel-size 8 × --pipeline-parallel-size 2 = 16: 8 of its GPUs sit idle",
		"To fix: size: 2; or --tensor-parallel-size 8 --pipeline-parallel-size 3 in the leader's vllm command")

	// tp 16 across the two pods: it starts, with a warning to keep tensor
	// parallel inside a pod.
	o = groupObject(t, "lws-405b")
	setLeaderScript(t, o, "--tensor-parallel-size 16 --max-model-len 32768")
	r = h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed || !contains(r.Warnings, "--tensor-parallel-size 16 spans pods of 8 GPUs") || !contains(r.Warnings, "--tensor-parallel-size 8 --pipeline-parallel-size 2 in the leader's vllm command") {
		t.Errorf("tp 16: allowed %v, warnings %q", r.Allowed, r.Warnings)
	}

	// Without a memory-backed /dev/shm in the workers, Ray and NCCL warn.
	o = groupObject(t, "lws-405b")
	unstructured.RemoveNestedField(o.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec", "volumes")
	r = h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed || !contains(r.Warnings, `worker container "vllm-worker": no memory-backed /dev/shm`) || contains(r.Warnings, `leader container "vllm-leader": no memory-backed`) {
		t.Errorf("no /dev/shm: %q", r.Warnings)
	}
}

// Mutation writes the fills into the leader's script, after `vllm serve`.
func TestLeaderWorkerSetAutofix(t *testing.T) {
	h := newTestHandler(t)
	o := groupObject(t, "lws-405b")
	setLeaderScript(t, o, "--tensor-parallel-size 8 --pipeline_parallel_size 2")
	o.SetAnnotations(map[string]string{AnnotationAutofix: "true"})
	req := groupRequest(t, o)
	resp := h.Mutate(context.Background(), req)
	var ops []PatchOp
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	patched := applyPatch(t, req.Object.Raw, resp.Patch)
	var got unstructured.Unstructured
	if err := got.UnmarshalJSON(patched); err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "leaderWorkerTemplate", "leaderTemplate", "spec", "containers")
	script := containers[0].(map[string]any)["command"].([]any)[2].(string)
	prefix := leaderScript("--tensor-parallel-size 8 --pipeline_parallel_size 2") + " --max-model-len="
	if !strings.HasPrefix(script, prefix) || !strings.Contains(script, " --gpu-memory-utilization=") {
		t.Errorf("leader script %q", script)
	}
	if plan := got.GetAnnotations()[AnnotationPlan]; !strings.Contains(plan, "meta-llama/Llama-3.1-405B-Instruct on 16 × H100-80GB, TP 8 PP 2") || !strings.HasSuffix(plan, "; fits") {
		t.Errorf("plan %q", plan)
	}
	// Validated after the fill, it is admitted.
	req.Object.Raw = patched
	if r := h.Validate(context.Background(), req); !r.Allowed {
		t.Errorf("filled group denied: %s", r.Result.Message)
	}
}

// Llama-3.1-70B-Instruct on one A100-80GB (79.15 GiB) through KServe's
// Hugging Face runtime, vLLM 0.8.2 (what KServe v0.15.0's server is built
// with), at the model's full 131072 tokens. Its weights, from its config
// (hidden 8192, 80 layers, 64 heads of 128 with 8 KV heads, intermediate
// 28672, vocabulary 128256 untied):
//
//	a layer: 8192² × 2 (q, o) + 2 × 8192 × 1024 (k, v) + 3 × 8192 × 28672
//	  (MLP) + 2 × 8192 (norms) = 855,654,400; × 80 = 68,452,352,000
//	+ embedding and head 2 × 128256 × 8192 + final norm 8192
//	= 70,553,706,496 parameters × 2 bytes + rotary table 131072 × 128 × 2
//	= 141,140,967,424 bytes = 131.45 GiB on one GPU.
//
// What fits on A100s: at tp 2 each GPU holds 65.7 GiB of weights, and one
// 131072-token request needs 2 × 8 × 128 × 80 × 2 B = 320 KiB of KV a token
// (160 KiB a GPU at tp 2) × 131072 = 20 GiB more than the ~71 GiB budget
// holds; at tp 4, 32.9 GiB of weights and 10 GiB for that request fit. So
// the predictor's GPUs go to 4 (KServe's server sets tensor parallel to the
// GPUs it sees).
func TestInferenceService(t *testing.T) {
	h := newTestHandler(t)
	ctx := context.Background()
	o := groupObject(t, "isvc-70b")
	msg := denialText(t, h.Validate(ctx, groupRequest(t, o)))
	params := int64(80*(8192*8192*2+2*8192*1024+3*8192*28672+2*8192) + 2*128256*8192 + 8192)
	if params != 70_553_706_496 {
		t.Fatalf("worked parameters %d", params)
	}
	hasAll(t, msg, "predictor: meta-llama/Llama-3.1-70B-Instruct on 1 × A100-80GB (79.15 GiB, from nodeSelector nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB)",
		"weights take 131.45 GiB per GPU", "nvidia.com/gpu: 4 in the predictor's resources and no workerSpec (4 × A100-80GB)")
	e, err := h.EvaluateInferenceService(ctx, "llm", o.Object, nil)
	if err != nil || len(e.Engines) != 1 || e.Engines[0].Budget == nil {
		t.Fatalf("evaluation %+v, %v", e, err)
	}
	if b := e.Engines[0].Budget; b.PerGPU.Weights != params*2+131072*128*2 || b.Settings.Version.String() != "0.8.2" {
		t.Errorf("weights %d bytes at vLLM %s", b.PerGPU.Weights, b.Settings.Version)
	}

	// With four GPUs (KServe passes them to vLLM as tensor parallel 4) and
	// the older --max_length spelling of the context, it is admitted.
	set(t, o, "4", "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu")
	set(t, o, []any{"--model_name=llama3", "--model_id=meta-llama/Llama-3.1-70B-Instruct", "--max_length", "32768"}, "spec", "predictor", "model", "args")
	r := h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed {
		t.Fatalf("4 × A100: %s", r.Result.Message)
	}
	e, _ = h.EvaluateInferenceService(ctx, "llm", o.Object, nil)
	if b := e.Engines[0].Budget; b.Settings.TensorParallelSize != 4 || b.MaxModelLen != 32768 {
		t.Errorf("tp %d, max-model-len %d", b.Settings.TensorParallelSize, b.MaxModelLen)
	}

	// The model from an hf:// storageUri; autofix appends to args.
	o = groupObject(t, "isvc-70b")
	set(t, o, "4", "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu")
	set(t, o, []any{"--model_name=llama3"}, "spec", "predictor", "model", "args")
	set(t, o, "hf://meta-llama/Llama-3.1-70B-Instruct:main", "spec", "predictor", "model", "storageUri")
	o.SetAnnotations(map[string]string{AnnotationAutofix: "true"})
	req := groupRequest(t, o)
	resp := h.Mutate(ctx, req)
	var got unstructured.Unstructured
	if err := got.UnmarshalJSON(applyPatch(t, req.Object.Raw, resp.Patch)); err != nil {
		t.Fatal(err)
	}
	args, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "predictor", "model", "args")
	if len(args) != 3 || args[0] != "--model_name=llama3" || !strings.HasPrefix(args[1], "--max-model-len=") || !strings.HasPrefix(args[2], "--gpu-memory-utilization=") {
		t.Errorf("args after autofix %q", args)
	}
	if plan := got.GetAnnotations()[AnnotationPlan]; !strings.HasPrefix(plan, "meta-llama/Llama-3.1-70B-Instruct on 4 × A100-80GB, TP 4 PP 1, vLLM 0.8.2") {
		t.Errorf("plan %q", plan)
	}

	// Not vLLM: the transformers backend. A model from S3 names no model.
	o = groupObject(t, "isvc-70b")
	set(t, o, []any{"--model_name=llama3", "--model_id=meta-llama/Llama-3.1-70B-Instruct", "--backend=huggingface"}, "spec", "predictor", "model", "args")
	if r := h.Validate(ctx, groupRequest(t, o)); !r.Allowed || len(r.Warnings) != 0 {
		t.Errorf("transformers backend: %+v", r)
	}
	o = groupObject(t, "isvc-70b")
	set(t, o, []any{"--model_name=llama3"}, "spec", "predictor", "model", "args")
	set(t, o, "s3://models/llama-70b", "spec", "predictor", "model", "storageUri")
	if r := h.Validate(ctx, groupRequest(t, o)); !r.Allowed || !contains(r.Warnings, `no --model_id in args and storageUri "s3://models/llama-70b"`) {
		t.Errorf("s3 model: %+v", r)
	}

	// A --config file in the Hugging Face runtime's args: KServe's server
	// parses its args with its own parser, which headroom does not follow
	// into the file, so the line alone is checked, and a warning says so.
	o = groupObject(t, "isvc-70b")
	set(t, o, "4", "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu")
	set(t, o, []any{"--model_id=meta-llama/Llama-3.1-70B-Instruct", "--config", "/etc/vllm/serve.yaml", "--max_length", "32768"}, "spec", "predictor", "model", "args")
	if r := h.Validate(ctx, groupRequest(t, o)); !r.Allowed || !contains(r.Warnings, "predictor: the flags of its --config file are not read (--config /etc/vllm/serve.yaml: KServe's Hugging Face server") {
		t.Errorf("--config in the runtime's args: %+v", r)
	}
}

// KServe's multi-node layout: workerSpec's tensorParallelSize GPUs on the
// head and on each of pipelineParallelSize - 1 workers. Llama-3.1-405B at
// tp 4 × pp 2 on 8 H100s holds an eighth of the model a GPU, ~94.5 GiB as
// at tp 8 (TestLeaderWorkerSet); the fix keeps 4 GPUs a pod and adds
// stages: tp 4 × pp 4 on 16, ~47 GiB a GPU.
func TestInferenceServiceMultiNode(t *testing.T) {
	h := newTestHandler(t)
	o := groupObject(t, "isvc-70b")
	set(t, o, []any{"--model_name=llama", "--model_id=meta-llama/Llama-3.1-405B-Instruct", "--max_model_len=32768"}, "spec", "predictor", "model", "args")
	set(t, o, map[string]any{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "spec", "predictor", "nodeSelector")
	set(t, o, map[string]any{"tensorParallelSize": int64(4), "pipelineParallelSize": int64(2)}, "spec", "predictor", "workerSpec")
	msg := denialText(t, h.Validate(context.Background(), groupRequest(t, o)))
	hasAll(t, msg, "meta-llama/Llama-3.1-405B-Instruct on 8 × H100-80GB", "workerSpec.tensorParallelSize: 4 and workerSpec.pipelineParallelSize: 4 (16 × H100-80GB)")

	// Its head holds 8 GPU workers and the server: the fixture's 24Gi
	// (sized for one A100) is below that pod's host plan.
	set(t, o, map[string]any{"tensorParallelSize": int64(8), "pipelineParallelSize": int64(2)}, "spec", "predictor", "workerSpec")
	msg = denialText(t, h.Validate(context.Background(), groupRequest(t, o)))
	hasAll(t, msg, "predictor: its memory limit 24Gi is below the 28.71 GiB vLLM holds in host memory", "of predictor to 77Gi")
	set(t, o, "80Gi", "spec", "predictor", "model", "resources", "limits", "memory")
	// A worker pod holds its GPUs' workers alone: 8Gi is below them.
	set(t, o, map[string]any{"tensorParallelSize": int64(8), "pipelineParallelSize": int64(2),
		"containers": []any{map[string]any{"name": "worker-container", "resources": map[string]any{"limits": map[string]any{"memory": "8Gi"}}}}},
		"spec", "predictor", "workerSpec")
	msg = denialText(t, h.Validate(context.Background(), groupRequest(t, o)))
	hasAll(t, msg, `workerSpec container "worker-container": its memory limit 8Gi is below the 26.71 GiB`)
	if strings.Contains(msg, "predictor: its memory limit") {
		t.Errorf("80Gi holds the head: %s", msg)
	}
	set(t, o, map[string]any{"tensorParallelSize": int64(8), "pipelineParallelSize": int64(2)}, "spec", "predictor", "workerSpec")
	r := h.Validate(context.Background(), groupRequest(t, o))
	e, _ := h.EvaluateInferenceService(context.Background(), "llm", o.Object, nil)
	if !r.Allowed || len(e.Engines) != 1 || e.Engines[0].Budget.Count != 16 || e.Engines[0].Budget.Settings.PipelineParallelSize != 2 {
		t.Errorf("tp 8 × pp 2: %+v", r)
	}
}

// The pods of a multi-node group are each checked against the host plan
// of one pod: Llama-3.1-405B at TP 8 × PP 2 over two pods of 8 H100s
// holds 8 GPU workers in each (3 GiB each by #48436 and #57469), the
// leader also the API server and engine core. By term (docs/host.md):
//
//	workers 8 × 3 GiB                                  24.00 GiB
//	request buffers 8 × 5 B × 1024 seqs × 32768 tokens  1.25 GiB
//	shm rings 160 + 8 × 100 + 24 MiB                     0.96 GiB
//	NCCL shm 56 GPU pairs × 9,637,888 B                  0.50 GiB
//	                                        a worker:   26.71 GiB
//	server processes 2 × 1 GiB               the leader: 28.71 GiB
//
// A 16Gi limit is below both: denied for the leader and the worker, each
// by its own plan; the fixture's 1124Gi passes.
func TestLeaderWorkerSetHostMemory(t *testing.T) {
	h := newTestHandler(t)
	o := groupObject(t, "lws-405b")
	for _, tmpl := range []string{"leaderTemplate", "workerTemplate"} {
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "leaderWorkerTemplate", tmpl, "spec", "containers")
		cs[0].(map[string]any)["resources"].(map[string]any)["limits"].(map[string]any)["memory"] = "16Gi"
		if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "leaderWorkerTemplate", tmpl, "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
	c := h.Check(context.Background(), groupRequest(t, o))
	var leader, worker string
	for _, d := range c.Evaluation.Denials {
		if d.Code != CodeHostMemory {
			continue
		}
		switch {
		case strings.HasPrefix(d.Message, `leader container "vllm-leader": its memory limit 16Gi is below`):
			leader = d.Message
		case strings.HasPrefix(d.Message, `worker container "vllm-worker": its memory limit 16Gi is below`):
			worker = d.Message
		}
	}
	if leader == "" || worker == "" || !strings.Contains(leader, "server processes") || strings.Contains(worker, "server processes") ||
		!strings.Contains(worker, "worker processes 24.00 GiB") {
		t.Fatalf("leader %q\nworker %q\ndenials %v", leader, worker, c.Evaluation.Denials)
	}
	t.Logf("%s\n%s", leader, worker)
	if len(c.Evaluation.PodFixes) != 0 {
		t.Errorf("a group's pod fixes are said in words, not as a patch of the wrong template: %+v", c.Evaluation.PodFixes)
	}
	if r := h.Validate(context.Background(), groupRequest(t, groupObject(t, "lws-405b"))); !r.Allowed {
		t.Errorf("1124Gi denied: %s", r.Result.Message)
	}
}

// A custom predictor is a pod spec at /spec/predictor: with autofix the
// mutating webhook mounts /dev/shm and sets the memory limit there (Qwen2.5-7B
// at TP 2 on two L4s, 4Gi against an 8.41 GiB host plan), and the result
// is admitted.
func TestInferenceServiceCustomAutofix(t *testing.T) {
	h := newTestHandler(t)
	o := groupObject(t, "isvc-70b")
	unstructured.RemoveNestedField(o.Object, "spec", "predictor", "model")
	set(t, o, map[string]any{"nvidia.com/gpu.product": "NVIDIA-L4"}, "spec", "predictor", "nodeSelector")
	set(t, o, []any{map[string]any{"name": "vllm", "image": "vllm/vllm-openai:v0.19.0",
		"args":      []any{"vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2", "--max-model-len", "8192", "--gpu-memory-utilization", "0.85"},
		"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "2", "memory": "4Gi"}}}}, "spec", "predictor", "containers")
	if r := h.Validate(context.Background(), groupRequest(t, o)); r.Allowed {
		t.Fatalf("4Gi and no /dev/shm admitted: %q", r.Warnings)
	}
	o.SetAnnotations(map[string]string{AnnotationAutofix: "true"})
	req := groupRequest(t, o)
	resp := h.Mutate(context.Background(), req)
	if len(resp.Patch) == 0 || !contains(resp.Warnings, `autofix: mount an emptyDir of medium Memory`) {
		t.Fatalf("patch %s, notes %q", resp.Patch, resp.Warnings)
	}
	req.Object.Raw = applyPatch(t, req.Object.Raw, resp.Patch)
	if r := h.Validate(context.Background(), req); !r.Allowed {
		t.Errorf("the autofixed predictor is denied: %s", r.Result.Message)
	}
}
