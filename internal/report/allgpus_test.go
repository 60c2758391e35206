package report

import (
	"context"
	"testing"

	"headroom.dev/headroom/memory"
)

func allGPURows(t *testing.T, flags ...string) map[string]GPURow {
	t.Helper()
	e, err := Gather(context.Background(), offlineEnv(), Request{Model: "meta-llama/Llama-3.1-70B-Instruct", Flags: flags, Offline: true, AllGPUs: true})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := AllGPUs(e, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]GPURow{}
	for _, r := range rows {
		out[r.GPU] = r
	}
	return out
}

// Llama-3.1-70B at its full 131,072 tokens. Before, --all-gpus planned one
// GPU of each kind only, and 32 of 36 rows said no. At TP 2 an H100-80GB
// holds 65.7 GiB of weights and a request of 131,072 tokens needs 20 GiB
// of KV cache (80 layers × 4 KV heads a rank × 256 B a token: 160 KiB a
// token), which the rest of the 72.85 GiB budget does not have; at TP 4
// the weights are 32.9 GiB and the request 10 GiB: it fits, so the row is
// 4 × H100-80GB, 316.76 GiB together.
func TestAllGPUsTriesTensorParallel(t *testing.T) {
	rows := allGPURows(t)
	h := rows["H100-80GB"]
	if h.Count != 4 || h.TensorParallelSize != 4 || h.Verdict != RowFits || h.GPUsTotalGiB != 316.76 || h.TotalGiB != 79.19 {
		t.Errorf("H100-80GB row %+v, want 4 GPUs at TP 4 that fit, 316.76 GiB together", h)
	}
	// Eight L4s hold the weights but not one full-length request: vLLM
	// starts with a shorter context, which is not "does not start".
	if l := rows["L4"]; l.Count != 8 || l.Verdict != RowShorter || l.MaxFitLen <= 0 || l.MaxFitLen >= 131072 || l.ProblemText != "one full-length request does not fit" {
		t.Errorf("L4 row %+v, want 8 GPUs that start at a shorter context", l)
	}
	// Eight V100-16GBs (15.78 GiB each) do not hold the weights: it does
	// not start, said in words. Nor do K80s, below the compute capability
	// vLLM runs on (3.7 against 7.0), whatever their memory.
	if v := rows["V100-16GB"]; v.Verdict != RowDoesNotStart || v.MaxFitLen != 0 || v.ProblemText != "the weights do not fit" || v.FirstProblem != memory.CodeWeightsDontFit {
		t.Errorf("V100-16GB row %+v", v)
	}
	if k := rows["K80"]; k.Verdict != RowDoesNotStart || k.FirstProblem != memory.CodeComputeCapability || k.ProblemText != "too old a GPU for vLLM or these settings" {
		t.Errorf("K80 row %+v", k)
	}
	no := 0
	for _, r := range rows {
		if r.Verdict == RowDoesNotStart {
			no++
		}
	}
	// The seven whose eight cards together hold less than the 131.4 GiB
	// of weights: K80 (8 × 11.17), M60 (8 × 7.94), T4 and T4G (8 ×
	// 14.75), V100-16GB (8 × 15.78), A2 and A16 (8 × 14.70).
	if no != 7 {
		t.Errorf("%d of %d GPUs do not start the 70B at any TP from 1 to 8, want 7", no, len(rows))
	}
	// A --tensor-parallel-size of yours is kept.
	for name, r := range allGPURows(t, "--tensor-parallel-size", "2") {
		if r.TensorParallelSize != 2 || r.Count != 2 {
			t.Errorf("%s at your TP 2: %+v", name, r)
		}
	}
}
