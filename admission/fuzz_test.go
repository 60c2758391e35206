package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzReview feeds arbitrary bodies through decoding and both webhooks. It
// asserts that nothing panics (a recovered panic shows as the "internal
// error" warning), that every answer echoes the request's uid, that only
// validation denies and only with a reason, and that every patch applies
// to the object it was made for.
func FuzzReview(f *testing.F) {
	for _, name := range fixtureNames(f) {
		body, err := os.ReadFile(filepath.Join("testdata", "reviews", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	// LeaderWorkerSets and InferenceServices (testdata/groups).
	for _, name := range []string{"lws-405b", "isvc-70b"} {
		f.Add(mustJSONBytes(f, reviewOf(f, groupObject(f, name))))
	}
	f.Add([]byte(``))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"leaderworkerset.x-k8s.io","version":"v1","kind":"LeaderWorkerSet"},"operation":"CREATE","object":{"spec":{"leaderWorkerTemplate":{"size":-3,"workerTemplate":{"spec":{"containers":[{"name":"w","command":["sh","-c","vllm serve m --tp 4096 --pp 4096"],"resources":{"limits":{"nvidia.com/gpu":"8"}}}]}}}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"serving.kserve.io","version":"v1beta1","kind":"InferenceService"},"operation":"CREATE","object":{"spec":{"predictor":{"model":{"modelFormat":{"name":"huggingface"},"storageUri":"hf://a/b:c","args":["--max_length"]},"workerSpec":{"tensorParallelSize":0}}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{"spec":{"template":{"spec":{"containers":[{"name":"v","image":"vllm/vllm-openai","args":["--model","x"]}]}}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"kaito.sh","version":"v1beta1","kind":"Workspace"},"operation":"CREATE","object":{"resource":{"count":-1}}}}`))
	// The flags that change the model served: its config read with
	// overrides, sliding layers whole, EPLB's replicas, context parallelism.
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{"metadata":{"annotations":{"headroom.dev/gpu":"H100-80GB"}},"spec":{"template":{"spec":{"containers":[{"name":"v","image":"vllm/vllm-openai:v0.19.0","args":["Qwen/Qwen3-8B","--hf-overrides","{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":32768}}","--disable-sliding-window","-dcp","1","--mamba-cache-mode","all"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}}}}}`))
	// GKE's labels: the accelerator with a MIG partition, and an affinity
	// over two accelerators with time-sharing.
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{"spec":{"template":{"spec":{"nodeSelector":{"cloud.google.com/gke-accelerator":"nvidia-tesla-a100","cloud.google.com/gke-gpu-partition-size":"1g.5gb"},"containers":[{"name":"v","image":"vllm/vllm-openai:v0.10.1","args":["Qwen/Qwen2.5-0.5B-Instruct"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"spec":{"nodeSelector":{"cloud.google.com/gke-gpu-sharing-strategy":"time-sharing"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"cloud.google.com/gke-accelerator","operator":"In","values":["nvidia-l4","nvidia-tesla-p100"]}]}]}}},"containers":[{"name":"v","image":"vllm/vllm-openai:v0.10.1","args":["meta-llama/Llama-3.1-8B-Instruct","--kv-offloading-size","20000"],"resources":{"limits":{"nvidia.com/gpu":"1","memory":"16Gi"}}}]}}}}`))
	h := newTestHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeReview(body)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			return
		}
		req := r.Request
		for _, mutate := range []bool{false, true} {
			resp, _, verdict := h.respond(context.Background(), req, mutate)
			if contains(resp.Warnings, "internal error") {
				t.Fatalf("a check panicked (mutate %v)", mutate)
			}
			if resp.UID != req.UID {
				t.Fatalf("uid %q, want %q", resp.UID, req.UID)
			}
			if !resp.Allowed && (mutate || resp.Result == nil || resp.Result.Message == "" || verdict != VerdictDenied) {
				t.Fatalf("denied without a reason, or by the mutating webhook: %+v", resp)
			}
			if _, err := json.Marshal(resp); err != nil {
				t.Fatalf("response does not encode: %v", err)
			}
			for _, w := range resp.Warnings {
				if strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					t.Fatalf("warning with a control character: %q", w)
				}
			}
			if len(resp.Patch) == 0 {
				continue
			}
			if !mutate {
				t.Fatal("validation returned a patch")
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatalf("patch does not decode: %v: %s", err, resp.Patch)
			}
			if _, err := p.Apply(req.Object.Raw); err != nil {
				t.Fatalf("patch does not apply: %v\npatch %s\nobject %s", err, resp.Patch, req.Object.Raw)
			}
		}
	})
}

// FuzzReadLaunch reads arbitrary containers: never a panic, and a launch
// that reads as vLLM can always be re-rendered.
func FuzzReadLaunch(f *testing.F) {
	f.Add("vllm/vllm-openai:v0.9.2", "", "--model\x00meta-llama/Llama-3.1-8B-Instruct\x00--max-model-len=8192")
	f.Add("acme/llm:1", "/bin/sh\x00-c", "pip list && exec vllm serve m --max-model-len 2048 | tee log")
	f.Add("acme/llm:1", "bash\x00-o\x00pipefail\x00-ec", "python3 -u -m vllm.entrypoints.openai.api_server --model m")
	f.Add("acme/llm:1", "python3\x00-mvllm.entrypoints.cli.main", "serve\x00m")
	f.Add("vllm/vllm-openai:nightly@sha256:00", "", "--\x00m")
	f.Add(":", "sh\x00-c", "'unterminated vllm serve")
	f.Add("vllm/vllm-openai:latest", "sh\x00-c", "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=$(LWS_GROUP_SIZE);\n vllm serve meta-llama/Meta-Llama-3.1-405B-Instruct --port 8080 --tensor-parallel-size 8 --pipeline_parallel_size 2 # two nodes\necho done")
	f.Fuzz(func(t *testing.T, image, command, args string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\x00")
		}
		c := corev1.Container{Image: image, Command: split(command), Args: split(args)}
		l, ok, err := readLaunch(c, nil)
		if !ok || err != nil {
			return
		}
		if l.shell && l.appendable {
			t.Errorf("a shell script is appendable: %+v", c)
		}
		_ = l.settings.Args()
		if l.script == nil {
			return
		}
		// Flags written into the script by autofix read back, last.
		patched := c
		patched.Command, patched.Args = slices.Clone(c.Command), slices.Clone(c.Args)
		list := &patched.Command
		if l.script.inArgs {
			list = &patched.Args
		}
		(*list)[l.script.index] = l.script.withFlags([]string{"--max-model-len=4096"})
		again, ok, err := readLaunch(patched, nil)
		if !ok || err != nil || again.settings.MaxModelLen != 4096 {
			t.Errorf("script %q with the flag written in reads as %+v, %v, %v", (*list)[l.script.index], again.settings, ok, err)
		}
	})
}

// reviewOf is the CREATE AdmissionReview of o.
func reviewOf(t testing.TB, o *unstructured.Unstructured) map[string]any {
	req := groupRequest(t, o)
	return map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
}

func mustJSONBytes(t testing.TB, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzKServeArgs reads arbitrary args of KServe's Hugging Face runtime: no
// panic; what reads as vLLM renders again, and --model_id names the model.
func FuzzKServeArgs(f *testing.F) {
	f.Add("--model_name=llama3\x00--model_id=meta-llama/Llama-3.1-70B-Instruct\x00--max_length\x0032768", "")
	f.Add("--model_name=x\x00--backend\x00huggingface", "hf://org/model:rev")
	f.Add("--model_id\x00--dtype=bfloat16\x00--tensor-parallel-size=4", "s3://bucket/model")
	f.Add("--max_model_len=lots", "hf://")
	f.Fuzz(func(t *testing.T, args, storage string) {
		m := &kserveModel{}
		if args != "" {
			m.Args = strings.Split(args, "\x00")
		}
		if storage != "" {
			m.StorageURI = &storage
		}
		l, ok, err := kserveLaunch(m)
		if !ok || err != nil {
			return
		}
		_ = l.settings.Args()
		var ids []string
		for _, a := range m.Args {
			if strings.Contains(strings.ReplaceAll(a, "_", "-"), "model-id") {
				ids = append(ids, a)
			}
		}
		if len(ids) == 1 {
			if v, found := strings.CutPrefix(ids[0], "--model_id="); found && v != "" && l.settings.Model != v {
				t.Errorf("--model_id=%s read as model %q", v, l.settings.Model)
			}
		}
	})
}

// FuzzEndpoint: any body posted to /validate or /mutate is answered over
// HTTP with an AdmissionReview (200) or a one-line refusal (400, 413):
// never a 5xx, never a panic, whatever the gate and the decoder see.
func FuzzEndpoint(f *testing.F) {
	for _, name := range fixtureNames(f) {
		body, err := os.ReadFile(filepath.Join("testdata", "reviews", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body, false)
	}
	f.Add(bigReview(100, "1000000000"), true)
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`), true)
	f.Add([]byte("\x00\xff"), false)
	h := newTestHandler(f)
	f.Fuzz(func(t *testing.T, body []byte, mutate bool) {
		ep, path := h.ValidateHandler(), "/validate"
		if mutate {
			ep, path = h.MutateHandler(), "/mutate"
		}
		rec := httptest.NewRecorder()
		ep.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("200 without an AdmissionReview: %.300s", rec.Body.String())
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if msg := strings.TrimSpace(rec.Body.String()); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("%d without a one-line reason: %q", rec.Code, msg)
			}
		default:
			t.Fatalf("status %d: %.300s", rec.Code, rec.Body.String())
		}
	})
}
