package web_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// The page takes vLLM's flags as the CLI does, switches included
// ("enable-lora": "true", as a form or a KAITO map writes them), and a flag
// the planner does not model comes back named, in the same bytes.
func TestFeatureFlagsSameBytesAsCLI(t *testing.T) {
	srv := newServer(t)
	_, want := runCLI(t, "plan", "--gpu", "L4", "--vllm-version", "0.27.1", "-o", "json", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct",
		"--max-model-len", "8192", "--compilation-config", `{"cudagraph_mode":"FULL"}`, "--enable-lora", "--max-lora-rank", "64", "--max-loras", "4",
		"--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`)
	code, got := post(t, srv.URL+"/api/plan", `{"gpu": "L4", "vllm_version": "0.27.1", "command": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --compilation-config '{\"cudagraph_mode\":\"FULL\"}'",
		"flags": {"enable-lora": "true", "max-loras": "4", "max-lora-rank": "64", "speculative-config": "{\"method\":\"ngram\",\"num_speculative_tokens\":3}"}}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("status %d; API and CLI differ:\nAPI: %s\nCLI: %s", code, got, want)
	}
	for _, s := range []string{`"code": "flags_not_modelled"`, "--compilation-config: compile passes", `"--max-loras"`} {
		if !strings.Contains(string(got), s) {
			t.Errorf("the plan lacks %s", s)
		}
	}
	code, got = post(t, srv.URL+"/api/plan", `{"gpu": "L4", "model": "Qwen/Qwen2.5-7B-Instruct", "flags": {"enable-lora": "maybe"}}`)
	if code != http.StatusBadRequest || !bytes.Contains(got, []byte("enable-lora")) {
		t.Errorf("a switch set to maybe: %d %s", code, got)
	}
}
