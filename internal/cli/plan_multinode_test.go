package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// Past one node, what would fit shards by the multi-node rule: tensor
// parallel inside a node, pipeline parallel across nodes. The node is the
// instance type's (g5.12xlarge: 4 × A10G), --gpus-per-node, or 8.
//
// Llama-3.1-70B-Instruct at 8192 tokens needs 131 GiB of bf16 weights: the
// 4 × 22.19 GiB of one g5.12xlarge hold them at tp 4 only with 32.8 GiB a
// GPU; two nodes at tp 4 × pp 2 leave 16.4 GiB a GPU, and A10Gs have no
// NVLink, so the TP group's non-torch memory is the PCIe figure (0.25 +
// 0.185 × 8192 / 4 / 1024 = 0.62 GiB, not an H100 NVLink group's 2.1): they
// fit at --gpu-memory-utilization 0.85, which leaves the CUDA graphs and the
// context room outside vLLM 0.19.0's budget. The 4 GPUs given are planned
// at tp 4 (all of them: fewer do not fit), so what would fit adds the
// pipeline stages.
func TestPlanMultiNode(t *testing.T) {
	type alt struct {
		Code  string   `json:"code"`
		Args  []string `json:"args"`
		Count int      `json:"count"`
	}
	for _, gpuArgs := range [][]string{{"--gpu", "g5.12xlarge"}, {"--gpu", "A10G", "--gpu-count", "4", "--gpus-per-node", "4"}} {
		args := append([]string{"plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192", "--vllm-version", "0.19.0", "-o", "json"}, gpuArgs...)
		code, out, errs := run(t, offline, args...)
		if code != ExitNoFit {
			t.Fatalf("%v: exit %d: %s", gpuArgs, code, errs)
		}
		var r struct {
			Alternatives []alt `json:"alternatives"`
			Settings     struct {
				TP int `json:"tensor_parallel_size"`
			} `json:"settings"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		var more []alt
		for _, a := range r.Alternatives {
			if a.Code == "more_gpus" {
				more = append(more, a)
			}
		}
		if r.Settings.TP != 4 || len(more) != 1 || more[0].Count != 8 || strings.Join(more[0].Args, " ") != "--pipeline-parallel-size 2 --gpu-memory-utilization 0.85" {
			t.Errorf("%v: more GPUs %+v, want 8 at tp 4 × pp 2, utilization 0.85", gpuArgs, more)
		}
	}

	// The layout of the GPUs given follows the same rule, and is said
	// first: 16 × H100 on nodes of 8 are tp 8 × pp 2, not tp 16.
	_, out, _ := run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "H100-80GB", "--gpu-count", "16")
	if lines := strings.SplitN(out, "\n", 3); len(lines) < 3 || !strings.HasPrefix(lines[0], "FITS: meta-llama/Llama-3.1-405B-Instruct on 16 × H100-80GB, tp 8 pp 2 ") ||
		lines[1] != "  set --tensor-parallel-size 8 --pipeline-parallel-size 2: the fewest of the 16 × H100-80GB given that fit" {
		t.Errorf("no multi-node layout first:\n%s", out)
	}
	// Given the parallelism, the note on GPUs left idle stays.
	_, out, _ = run(t, offline, "plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "H100-80GB", "--gpu-count", "16", "--tensor-parallel-size", "8")
	if !strings.Contains(out, "16 GPUs given but the settings use 8; set --tensor-parallel-size 8 --pipeline-parallel-size 2 to shard the model over all of them") {
		t.Errorf("no multi-node note:\n%s", out)
	}

	code, out, errs := run(t, offline, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--gpus-per-node", "-2")
	if code != ExitBadInput || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--gpus-per-node must be positive") {
		t.Errorf("--gpus-per-node -2: exit %d, %q", code, errs)
	}
}
