package memory_test

import (
	"math"
	"strconv"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/vllm"
)

// TestConcurrencyAsLogged replays vLLM 0.19.0's "Maximum concurrency for L
// tokens per request" line for every start-up of
// testdata/vllm-0.19.0-h100.csv: given the pool's blocks as logged
// (num_gpu_blocks), the planner's layout must give the logged figure to
// its two decimals. The sliding-window models tell the formulas apart:
// gemma-3-12b logs 15.88x for 130,304 tokens at 8,192, where tokens / L
// is 15.91; 48,867 blocks / (512 full + 5 sliding groups × 513) = 15.88.
func TestConcurrencyAsLogged(t *testing.T) {
	recs, col := readCSV(t, "testdata/vllm-0.19.0-h100.csv")
	sliding := 0
	for _, r := range recs[1:] {
		get := func(k string) string { return r[col[k]] }
		logged, err1 := strconv.ParseFloat(get("max_concurrency_x"), 64)
		blocks, err2 := strconv.ParseInt(get("num_gpu_blocks"), 10, 64)
		if err1 != nil || err2 != nil || get("startup_failed") == "yes" {
			continue
		}
		row := calibrationRow{}
		for _, c := range readCalibration(t) {
			if c.model == get("model") && strconv.Itoa(c.maxModelLen) == get("max_model_len") && strconv.Itoa(c.tp) == get("tensor_parallel_size") {
				row = c
				break
			}
		}
		if row.model == "" {
			continue
		}
		b, err := memory.Plan(row.input(t))
		if err != nil {
			t.Fatalf("%s: %v", row.model, err)
		}
		b.NumBlocks = blocks
		got := b.ConcurrencyAt(row.maxModelLen)
		if math.Abs(got-logged) > 0.005+1e-9 {
			t.Errorf("%s at %d tokens: %.4f requests at once from %d blocks, vLLM logged %.2fx", row.model, row.maxModelLen, got, blocks, logged)
		}
		for _, g := range b.KVGroups() {
			if g.Kind == "sliding" {
				sliding++
				break
			}
		}
	}
	if sliding < 4 {
		t.Errorf("%d sliding-window start-ups checked, want the four Gemma-2/3 ones", sliding)
	}
}

// A FITS verdict and fewer than one request at once cannot stand
// together: a plan fits when one request of max-model-len fits in the
// cache. gpt-oss-120b on one H100-80GB at its full 131,072 tokens: 18
// full-attention layers hold 8,192 blocks of 16 a request, 18 sliding ones
// (window 128) cdiv(min(127 + 8,192, 131,072), 16) + 1 = 521, 8,713 in all
// (two groups of 18), where tokens / L would count 16,384 blocks.
func TestConcurrencySlidingFits(t *testing.T) {
	spec, ok := catalog.Lookup("openai/gpt-oss-120b")
	if !ok {
		t.Fatal("gpt-oss-120b not in the catalog")
	}
	sel, err := gpu.Resolve("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	b, err := memory.Plan(memory.Input{Model: spec, Device: sel.Device, Settings: vllm.Settings{MaxModelLen: 131072, MaxNumBatchedTokens: 8192, Version: vllm.MustVersion("0.19.0")}})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Fits {
		t.Fatalf("gpt-oss-120b does not fit one H100: %+v", b.Problems)
	}
	want := float64(b.NumBlocks) / 8713
	if math.Abs(b.MaxConcurrency-want) > 1e-9 || b.MaxConcurrency < 1 {
		t.Errorf("max concurrency %.4f, want %d blocks / 8,713 = %.4f (at least 1: it fits)", b.MaxConcurrency, b.NumBlocks, want)
	}
	for _, p := range b.Frontier() {
		if p.ContextTokens == 131072 && p.Concurrency != math.Round(want*100)/100 {
			t.Errorf("frontier at 131,072: %.2f, want %.2f", p.Concurrency, want)
		}
	}
	for _, w := range b.Warnings {
		if w.Code == memory.CodeLowConcurrency && w.Message != "the KV cache holds 1.51 requests of 131,072 tokens at once (as vLLM counts them, 105,152 tokens); longer queues and preemption under load" {
			t.Errorf("warning %q", w.Message)
		}
	}
}
