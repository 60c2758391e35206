package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// The simulation panel takes speculative decoding as the CLI does: the
// pasted command's --speculative-config, and acceptance_rate for
// --acceptance-rate; the answer is the CLI's bytes.
func TestSimulateSpeculativeSameBytesAsCLI(t *testing.T) {
	srv := newSimServer(t)
	const spec = `{"method":"ngram","num_speculative_tokens":3}`
	_, want := runCLI(t, "simulate", "-o", "json", "--gpu", "L4", "--max-model-len", "4096", "--offline",
		"--rate", "2", "--duration", "20s", "--window", "1s", "--prompt-tokens", "fixed:512", "--output-tokens", "fixed:64",
		"--acceptance-rate", "0.6", "--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--speculative-config", spec)
	command, _ := json.Marshal("vllm serve Qwen/Qwen2.5-7B-Instruct --speculative-config '" + spec + "'")
	code, got := post(t, srv.URL+"/api/simulate", `{"plan": {"gpu": "L4", "command": `+string(command)+`, "flags": {"max-model-len": "4096"}},
		"rate": 2, "duration_s": 20, "prompt_tokens": 512, "output_tokens": 64, "acceptance_rate": 0.6}`)
	if code != http.StatusOK || !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("status %d; API and CLI differ at byte %d:\nAPI: %.300s\nCLI: %.300s", code, i, got[max(i-100, 0):], want[max(i-100, 0):])
	}
	var r struct {
		Speculative *struct {
			TokenAcceptance  float64 `json:"token_acceptance"`
			AcceptanceSource string  `json:"acceptance_source"`
		} `json:"speculative"`
	}
	if err := json.Unmarshal(got, &r); err != nil || r.Speculative == nil || r.Speculative.TokenAcceptance != 0.6 || r.Speculative.AcceptanceSource != "--acceptance-rate" {
		t.Errorf("speculative %+v (%v)", r.Speculative, err)
	}
	if code, got := post(t, srv.URL+"/api/simulate", `{"plan": {"gpu": "L4", "command": "vllm serve Qwen/Qwen2.5-7B-Instruct"}, "rate": 1, "duration_s": 5, "prompt_tokens": 10, "output_tokens": 10, "acceptance_rate": 0.6}`); code != http.StatusBadRequest || !bytes.Contains(got, []byte("speculative-config")) {
		t.Errorf("acceptance_rate without a speculative config: %d %s", code, got)
	}
}
