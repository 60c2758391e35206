package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
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
	f.Add([]byte(``))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{"spec":{"template":{"spec":{"containers":[{"name":"v","image":"vllm/vllm-openai","args":["--model","x"]}]}}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"kaito.sh","version":"v1beta1","kind":"Workspace"},"operation":"CREATE","object":{"resource":{"count":-1}}}}`))
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
		l, ok, err := readLaunch(c)
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
		again, ok, err := readLaunch(patched)
		if !ok || err != nil || again.settings.MaxModelLen != 4096 {
			t.Errorf("script %q with the flag written in reads as %+v, %v, %v", (*list)[l.script.index], again.settings, ok, err)
		}
	})
}
