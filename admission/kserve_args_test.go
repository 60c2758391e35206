package admission

import (
	"context"
	"strings"
	"testing"
)

// An InferenceService on KServe's Hugging Face runtime carries KServe's own
// arguments beside vLLM's: --model_name (every runtime passes it), the
// model server's ports and switches, the transformers backend's tokenizer
// options. None reaches vLLM, so none is a "flag headroom does not know";
// vLLM's own flags (--max-num-seqs), the names both parsers share
// (--max_model_len) and KServe's names of vLLM's (--model_revision, which
// the server copies to vLLM's revision) are still read.
func TestInferenceServiceOwnArgs(t *testing.T) {
	h := newTestHandler(t)
	ctx := context.Background()
	o := groupObject(t, "isvc-70b")
	set(t, o, "4", "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu")
	set(t, o, []any{
		"--model_name=llama", "--model_id=meta-llama/Llama-3.1-70B-Instruct",
		"--http_port", "8080", "--grpc_port=8081", "--enable_grpc", "false", "--workers", "1",
		"--predictor_protocol=v2", "--enable_predictor_health_check", "--model_dir=/mnt/models",
		"--disable_lower_case", "--tensor_input_names", "input_ids,attention_mask",
		"--max_model_len=32768", "--max-num-seqs", "64",
	}, "spec", "predictor", "model", "args")
	r := h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed {
		t.Fatalf("denied: %s", r.Result.Message)
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, "not a flag headroom knows") || strings.Contains(w, "not modelled") {
			t.Errorf("a KServe argument taken for a vLLM flag: %q", w)
		}
	}
	e, err := h.EvaluateInferenceService(ctx, "llm", o.Object, nil)
	if err != nil || len(e.Engines) != 1 || e.Engines[0].Budget == nil {
		t.Fatalf("evaluation %+v, %v", e, err)
	}
	if s := e.Engines[0].Budget.Settings; s.MaxModelLen != 32768 || s.MaxNumSeqs != 64 || s.TensorParallelSize != 4 {
		t.Errorf("max-model-len %d, max-num-seqs %d, tp %d", s.MaxModelLen, s.MaxNumSeqs, s.TensorParallelSize)
	}

	// --model_revision is vLLM's --revision: another checkpoint than the
	// catalog's may be served, and the warning says so under vLLM's name.
	set(t, o, []any{"--model_name=llama", "--model_id=meta-llama/Llama-3.1-70B-Instruct", "--model_revision", "refs/pr/12", "--max_length", "32768"}, "spec", "predictor", "model", "args")
	r = h.Validate(ctx, groupRequest(t, o))
	if !r.Allowed || !contains(r.Warnings, "--revision") || contains(r.Warnings, "model-revision") || contains(r.Warnings, "model-name") {
		t.Errorf("--model_revision: %+v", r.Warnings)
	}
}
