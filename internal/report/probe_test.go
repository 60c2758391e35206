//go:build unix

package report

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"headroom.dev/headroom/internal/standin"
	"headroom.dev/headroom/probe"
)

// Probe is driven against the engine stand-in probe/testdata/fakevllm,
// which stands in for vllm and the GPU under it (there is no GPU where
// these tests run); FAKEVLLM_* assignments in the pasted command set its
// behaviour, as VLLM_* ones would vLLM's.

func TestMain(m *testing.M) { standin.Main(m) }

func probeEnv(t *testing.T) Env {
	vars := map[string]string{"HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": t.TempDir()}
	return Env{Getenv: func(k string) string { return vars[k] }}
}

func probeRequest(assign ...string) Request {
	return Request{GPU: "L4", Command: append(assign, "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct")}
}

// TestProbeAuto: a release with --max-model-len auto starts in one launch;
// the report names it "auto" and its numbers as the log gave them, gives the
// KV cache in GiB to two places (30,000 tokens × 128 KiB for Llama-3.1-8B
// in bf16 = 3.66 GiB), and points at the calibration record written.
func TestProbeAuto(t *testing.T) {
	env := probeEnv(t)
	var phases []probe.Phase
	r, err := Probe(context.Background(), env, probeRequest("FAKEVLLM_KV_TOKENS=30000"), ProbeOptions{
		Bin: standin.Bin(t), Strategy: probe.StrategyAuto, Progress: func(p probe.Progress) { phases = append(phases, p.Phase) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "meta-llama/Llama-3.1-8B-Instruct" || r.GPU.Name != "L4" || r.GPU.Count != 1 || r.MaxModelLen != 30000 ||
		r.Launches != 1 || r.KVCacheTokens != 30000 || r.AvailableKVCacheGiB != 3.66 || r.VLLMVersion != "0.19.0" || r.Strategy != "auto" {
		t.Errorf("report %+v", r)
	}
	b, _ := json.Marshal(r.History)
	if len(r.History) != 1 || !strings.Contains(string(b), `"max_model_len":"auto"`) || !strings.Contains(string(b), `"auto_fit":{"from":131072,"to":30000}`) {
		t.Errorf("history %s", b)
	}
	if r.CalibrationFile != filepath.Join(env.Getenv("XDG_CACHE_HOME"), "headroom", "calibration.jsonl") {
		t.Errorf("calibration file %q", r.CalibrationFile)
	}
	if len(phases) == 0 {
		t.Error("no progress")
	}
}

// TestProbeNothingStarts: the report is whole and the error wraps
// probe.ErrNothingStarts; no calibration file is named, none was written.
func TestProbeNothingStarts(t *testing.T) {
	r, err := Probe(context.Background(), probeEnv(t), probeRequest("FAKEVLLM_FAIL=oom"), ProbeOptions{Bin: standin.Bin(t), Strategy: probe.StrategyAuto})
	if !errors.Is(err, probe.ErrNothingStarts) || r.MaxModelLen != 0 || r.Launches == 0 || len(r.History) != r.Launches || r.CalibrationFile != "" {
		t.Errorf("%v\n%+v", err, r)
	}
}

// TestProbeInterrupted: ending the context during a launch stops it and
// says which launch it was.
func TestProbeInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Probe(ctx, probeEnv(t), probeRequest("FAKEVLLM_LOAD_DELAY=1m"), ProbeOptions{Bin: standin.Bin(t), Strategy: probe.StrategyAuto,
		Progress: func(p probe.Progress) {
			if p.Launch == 1 {
				cancel()
			}
		}})
	if err == nil || err.Error() != "interrupted during launch 1; every engine process it started was stopped" {
		t.Errorf("got %v", err)
	}
}

// TestProbeBadInput: each is one line naming what to give, and nothing is
// launched. Without --gpu the GPU is read from NVML or nvidia-smi, which
// are not on this PATH.
func TestProbeBadInput(t *testing.T) {
	bin := standin.Bin(t)
	t.Setenv("PATH", t.TempDir())
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{GPU: "L4", Command: []string{"vllm", "serve"}}, "no model: give --model"},
		{Request{Command: []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"}}, "no GPU: give --gpu"},
		{Request{GPU: "L5", Command: []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"}}, "L5"},
	} {
		_, err := Probe(context.Background(), probeEnv(t), c.req, ProbeOptions{Bin: bin, Strategy: probe.StrategyAuto})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want %q", c.req, err, c.want)
		}
	}
}
