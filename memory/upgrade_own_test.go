package memory_test

import (
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

func upgradeInput(t *testing.T, id string, set vllm.Settings) memory.Input {
	t.Helper()
	spec, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("%s not in the catalog", id)
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return memory.Input{Model: spec, Device: sel.Device, Settings: set}
}

// Llama-3.1-8B from 0.10.1 to 0.19.0: non-torch moves from 0.11 to 0.25
// GiB at 0.17.0, where no vLLM rule of it starts: headroom takes the
// nearer calibration release's figure. That is headroom's, not vLLM's: the
// later plan holds the earlier figure, the loss counts vLLM's rules only,
// and the plan with 0.19.0's own figure is given apart. Before, the 0.14
// GiB of calibration counted as the upgrade's cost.
func TestUpgradeKeepsOurCalibrationOut(t *testing.T) {
	in := upgradeInput(t, "meta-llama/Llama-3.1-8B-Instruct", vllm.Settings{MaxModelLen: 32768, Version: vllm.MustVersion("0.10.1")})
	u, err := memory.PlanUpgrade(in, vllm.MustVersion("0.19.0"))
	if err != nil {
		t.Fatal(err)
	}
	if u.After.PerGPU.NonTorch != u.Before.PerGPU.NonTorch {
		t.Errorf("non-torch %d -> %d: the calibration point is not held", u.Before.PerGPU.NonTorch, u.After.PerGPU.NonTorch)
	}
	ours := false
	for _, c := range u.Changes {
		if c.Term == "per_gpu.non_torch_gib" {
			ours = c.Ours && c.From == "0.11" && c.To == "0.25" && len(c.Causes) == 0
		}
		if c.Label == "" || c.Label == c.Term {
			t.Errorf("change %s has no label in words", c.Term)
		}
	}
	if !ours {
		t.Errorf("non-torch's change not marked as headroom's calibration: %+v", u.Changes)
	}
	own := memory.Budget{}
	at := in
	at.Settings.Version = vllm.MustVersion("0.19.0")
	if own, err = memory.Plan(at); err != nil {
		t.Fatal(err)
	}
	want := float64(u.Before.KVTokens-u.After.KVTokens) / float64(u.Before.KVTokens)
	if u.OwnKVTokens != own.KVTokens || u.After.KVTokens <= own.KVTokens || u.KVLoss != want {
		t.Errorf("own %d (plan on 0.19.0 %d), held %d, loss %.5f want %.5f", u.OwnKVTokens, own.KVTokens, u.After.KVTokens, u.KVLoss, want)
	}
}

// Qwen3-30B-A3B at utilization 0.90 from 0.18.0 to 0.21.0: the CUDA-graph
// estimate moves inside the budget and the KV cache loses 13%. The
// preflight offers what keeps it: the 0.18.0 pool pinned, and the lowest
// utilization that gives as many tokens on 0.21.0, each planned again and
// fitting (before, it said OK with no remedy).
func TestUpgradeRemedies(t *testing.T) {
	set := vllm.Settings{MaxModelLen: 8192, GPUMemoryUtilization: 0.9, Version: vllm.MustVersion("0.18.0"),
		Set: map[string]bool{vllm.FlagGPUMemoryUtilization: true}}
	in := upgradeInput(t, "Qwen/Qwen3-30B-A3B", set)
	u, err := memory.PlanUpgrade(in, vllm.MustVersion("0.21.0"))
	if err != nil {
		t.Fatal(err)
	}
	if u.KVLoss < 0.10 || len(u.Remedies) != 2 {
		t.Fatalf("loss %.3f, remedies %+v", u.KVLoss, u.Remedies)
	}
	pin, raise := u.Remedies[0], u.Remedies[1]
	if pin.Kind != memory.RemedyPinKVPool || pin.Args[0] != "--kv-cache-memory-bytes" || pin.KVTokens < u.Before.KVTokens {
		t.Errorf("pin %+v, before %d tokens", pin, u.Before.KVTokens)
	}
	if raise.Kind != memory.RemedyRaiseUtilization || raise.Args[0] != "--gpu-memory-utilization" || raise.KVTokens < u.Before.KVTokens {
		t.Errorf("raise %+v, before %d tokens", raise, u.Before.KVTokens)
	}
	// The utilization found is the lowest: one hundredth less does not
	// give the tokens back.
	at := in
	at.Settings.Version = vllm.MustVersion("0.21.0")
	at.Settings.GPUMemoryUtilization = 0.91
	if b, err := memory.Plan(at); err != nil || raise.Args[1] != "0.92" || b.KVTokens >= u.Before.KVTokens {
		t.Errorf("raise to %s; at 0.91: %d tokens (want fewer than %d), %v", raise.Args[1], b.KVTokens, u.Before.KVTokens, err)
	}
}
