package memory

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// testdata/sampler-sort-h100.json: the sort path of vLLM's top-k/top-p
// (0.11.1–0.16) run on a real H100 as the dummy sampler runs it, the CUDA
// caching allocator's peak beyond the bf16 logits. The 36 bytes a logit
// that sortBytesPerLogit reads from the code (a float32 copy 4, sorted
// values 4, int64 indices 8, the scatter's int64 reverse index 8, the
// radix sort's alternate values and indices 12) are what the allocator
// held: 36.015–36.056 over six shapes, the rest a few MiB of rounding and
// the sampled ids, well inside samplerFixedBytes.
func TestSortSamplerMeasured(t *testing.T) {
	data, err := os.ReadFile("testdata/sampler-sort-h100.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Torch, GPU string
		Runs       []struct {
			Vocab, Rows int64
			Peak        int64 `json:"peak_beyond_logits_bytes"`
		}
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.GPU != "NVIDIA H100 80GB HBM3" || len(m.Runs) != 6 {
		t.Fatalf("%s, %d runs", m.GPU, len(m.Runs))
	}
	for _, r := range m.Runs {
		logits := float64(r.Rows * r.Vocab)
		rest := float64(r.Peak) - logits*sortBytesPerLogit
		if per := float64(r.Peak) / logits; math.Abs(per-sortBytesPerLogit) > 0.1 || rest < 0 || rest > samplerFixedBytes {
			t.Errorf("vocabulary %d × %d rows: %.3f bytes a logit measured (%.1f MiB beyond %d), want %d and at most %d MiB beside",
				r.Vocab, r.Rows, per, rest/mib, sortBytesPerLogit, sortBytesPerLogit, samplerFixedBytes/mib)
		}
	}
}
