package memory_test

import (
	"slices"
	"strings"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// alt is what a test asserts of an alternative.
type alt struct {
	code  string
	args  string
	gpu   string
	count int
	cost  int
}

func checkAlternatives(t *testing.T, in memory.Input, want []alt) {
	t.Helper()
	alts := memory.Alternatives(in, gpu.Devices())
	var got []alt
	for _, a := range alts {
		got = append(got, alt{a.Code, strings.Join(a.Args, " "), a.GPU, a.Count, a.Cost})
		// Every alternative is planned on the GPUs it names, and fits.
		b := plan(t, a.Input)
		if !b.Fits {
			t.Errorf("%s: re-planned, it does not fit: %v", a.Code, b.Problems)
		}
		if a.Count > 0 && b.Count != a.Count {
			t.Errorf("%s: planned on %d GPUs, names %d", a.Code, b.Count, a.Count)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("alternatives\n got %+v\nwant %+v", got, want)
	}
}

// Llama-3.1-8B with --tensor-parallel-size 8 on one H100 fails on the GPU
// count alone. What answers it: 8 GPUs (cost 2: more of the same GPU), or
// tp 1 on the one given (cost 2: a flag the user set). The tie keeps the
// user's flag. Not offered: 16 GPUs at tp 16, fp8, a bigger GPU: none of
// them gives the 8 GPUs tp 8 needs, or they change what did not fail.
func TestAlternativesGPUCount(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--tensor-parallel-size", "8"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Count: 1, Settings: set}
	if b := plan(t, in); b.Fits || len(b.Problems) != 1 || b.Problems[0].Code != memory.CodeNotEnoughGPUs {
		t.Fatalf("want only %s, got %v", memory.CodeNotEnoughGPUs, b.Problems)
	}
	checkAlternatives(t, in, []alt{
		{code: memory.AltGPUCount, gpu: "H100-80GB", count: 8, cost: 2},
		{code: memory.AltTensorShards, args: "--tensor-parallel-size 1", cost: 2},
	})
}

// Llama-3.1-70B-Instruct on one A10G at 8192 tokens (vLLM 0.19.0): 131
// GiB of bf16 weights on a 22 GiB card. fp8 weights (~66 GiB) do not fit
// either, nor do 2 or 4 A10Gs. Eight do, at tensor parallel 8 in one node:
// 16.46 GiB of weights a GPU, and A10Gs have no NVLink, so the TP group's
// non-torch memory is the PCIe figure, 0.25 + 0.185 × 8192 / 8 / 1024 =
// 0.435 GiB (not the H100 NVLink group's 2.2). The CUDA graphs (1.12 GiB)
// and the context (1.54) stay outside vLLM 0.19.0's budget, so the card
// needs room beside it: --gpu-memory-utilization 0.83 (18.42 GiB, 0.98 GiB
// of KV cache, three 8192-token requests of 40,960 B a token a rank).
// What fits, the least change first: the GPU in use (more of it) before
// another GPU, whatever the flags it adds (hardwareTier); the costs are
//
//	8 × A10G at tp 8: tp (default) 1 + more of the same GPU 2 +
//	  --gpu-memory-utilization 0.83 (default) 1 = 4
//	B200 (178.40 GiB), the smallest card that holds it: another GPU = 3
func TestAlternativesMemoryBound(t *testing.T) {
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-70B-Instruct"), Device: device(t, "A10G"),
		Settings: vllm.Settings{MaxModelLen: 8192, Version: v019}}
	checkAlternatives(t, in, []alt{
		{code: memory.AltMoreGPUs, args: "--tensor-parallel-size 8 --gpu-memory-utilization 0.83", gpu: "A10G", count: 8, cost: 4},
		{code: memory.AltBiggerGPU, gpu: "B200", count: 1, cost: 3},
	})
	// On nodes of four A10Gs (g5.12xlarge) the same eight are tp 4 × pp
	// 2 across two nodes (32.9 GiB of weights a stage's GPU at tp 4 is too
	// much; 16.5 at tp 4 × pp 2 fits at 0.85): cost 1 + 1 + 2 + 1 = 5.
	in.GPUsPerNode = 4
	checkAlternatives(t, in, []alt{
		{code: memory.AltMoreGPUs, args: "--tensor-parallel-size 4 --pipeline-parallel-size 2 --gpu-memory-utilization 0.85", gpu: "A10G", count: 8, cost: 5},
		{code: memory.AltBiggerGPU, gpu: "B200", count: 1, cost: 3},
	})
}

// Llama-3.1-405B-Instruct at tp 8 on one node of eight H100-80GB (vLLM
// 0.19.0). Its weights per GPU, from its config (hidden 16384, 126 layers,
// 128 heads of 128 with 8 KV heads, intermediate 53248, vocabulary 128256
// untied), in bf16, sharded 8 ways:
//
//	a layer: (q 16384² + k,v 2 × 16384 × 1024 + o 16384² + MLP 3 × 16384 ×
//	  53248) / 8 + two norms of 16384 = 398,491,648 parameters; × 126
//	embedding and head: 2 × 128256 × 16384 / 8 = 525,336,576; final norm 16384
//	50,735,300,608 parameters × 2 bytes + the rotary table (131072 × 128 × 2)
//	= 101,504,155,648 bytes = 94.53 GiB per GPU, on a 79.19 GiB card.
//
// The multi-node fix is the second node as a second pipeline stage: tp 8
// stays inside each node and pp 2 spans them (pp, at its default, 1 + more
// of the same GPU 2 = 3), not tp 16 across the nodes. fp8 weights on load
// (cost 1) come first; the H200 (cost 3) ties with the second node and
// ranks after it (more GPUs before another GPU).
func TestAlternativesMultiNode(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--tensor-parallel-size", "8"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-405B-Instruct"), Device: device(t, "H100-80GB"), Count: 8, Settings: set}
	b := plan(t, in)
	layer := int64((16384*16384+2*16384*1024+16384*16384+3*16384*53248)/8 + 2*16384)
	params := 126*layer + 2*128256*16384/8 + 16384
	want := params*2 + 131072*128*2
	if want != 101_504_155_648 || b.PerGPU.Weights != want {
		t.Errorf("weights per GPU %d, worked %d (= 94.53 GiB)", b.PerGPU.Weights, want)
	}
	if b.Fits || b.Problems[0].Code != memory.CodeWeightsDontFit {
		t.Fatalf("tp 8 on one node: %v", b.Problems)
	}
	// fp8 on load is no lever: the 94.53 GiB of bf16 weights a GPU load
	// first (CodeOnlineQuantLoad).
	checkAlternatives(t, in, []alt{
		{code: memory.AltMoreGPUs, args: "--pipeline-parallel-size 2", gpu: "H100-80GB", count: 16, cost: 3},
		{code: memory.AltBiggerGPU, gpu: "H200", count: 8, cost: 3},
	})
	// Planned on its two nodes, each GPU holds half the layers: 63 × the
	// layer above + the embedding (first stage) or the head and final norm
	// (last stage), + the rotary table.
	alts := memory.Alternatives(in, gpu.Devices())
	two := plan(t, alts[0].Input)
	first := (63*layer+128256*16384/8)*2 + 131072*128*2
	if len(two.Stages) != 2 || two.Stages[0].Weights != first {
		t.Errorf("tp 8 × pp 2: first stage weights %+v, worked %d", two.Stages, first)
	}
}

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		gpus, perNode, heads, kv int
		tp, pp                   int
		ok                       bool
	}{
		{8, 8, 128, 8, 8, 1, true},
		{16, 8, 128, 8, 8, 2, true},  // two nodes: pipeline across them
		{16, 0, 128, 8, 8, 2, true},  // the default node of eight
		{32, 4, 64, 8, 4, 8, true},   // g5.12xlarge-like nodes of four
		{12, 8, 128, 8, 0, 0, false}, // a node and a half
		{6, 8, 32, 8, 6, 1, false},   // 6 does not divide 32 heads
		{4, 8, 40, 10, 4, 1, false},  // phi-4: 4 divides 40 heads, not 10 KV heads
		{0, 8, 32, 8, 0, 0, false},
	} {
		tp, pp, ok := memory.Layout(c.gpus, c.perNode, model.Spec{Heads: c.heads, KVHeads: c.kv})
		if tp != c.tp || pp != c.pp || ok != c.ok {
			t.Errorf("Layout(%d, %d, %d/%d heads) = %d, %d, %v; want %d, %d, %v", c.gpus, c.perNode, c.heads, c.kv, tp, pp, ok, c.tp, c.pp, c.ok)
		}
	}
}

// vLLM's two divisibility rules, with the catalog's head counts: the
// attention heads must divide among the ranks; the KV heads divide among
// them or are replicated a whole number of times (QKVParallelLinear).
func TestTPShards(t *testing.T) {
	for _, c := range []struct {
		name      string
		heads, kv int
		tp        int
		ok        bool
	}{
		{"Llama-3.1-8B", 32, 8, 8, true},
		{"Llama-3.1-8B", 32, 8, 16, true}, // each KV head on two ranks
		{"Qwen2.5-7B", 28, 4, 4, true},
		{"Qwen2.5-7B", 28, 4, 7, false}, // 7 divides 28, not 4, and is no multiple of 4
		{"Qwen2.5-7B", 28, 4, 8, false}, // 8 does not divide 28
		{"phi-4", 40, 10, 2, true},
		{"phi-4", 40, 10, 4, false},
		{"phi-4", 40, 10, 8, false},
		{"Mixtral-8x22B", 48, 8, 6, false},
		{"Falcon-40B (MQA)", 128, 1, 8, true},
		{"", 32, 8, 0, false},
	} {
		if got := memory.TPShards(model.Spec{Heads: c.heads, KVHeads: c.kv}, c.tp); got != c.ok {
			t.Errorf("%s (%d heads, %d KV heads) at tp %d: %v, want %v", c.name, c.heads, c.kv, c.tp, got, c.ok)
		}
	}
}

// Llama-3.1-8B on an L4 with --max-model-len 65536 given (vLLM 0.19.0):
// one request needs 8 GiB of KV, the card has ~4 GiB for it. Each lever
// alone, by cost:
//
//	fp8 KV cache (kv-cache-dtype at its default): 1
//	fp8 weights (quantization at its default): 1 — after KV, by kind
//	the longest context that fits, 19,904 (a flag the user set): 2 — a
//	  warm start holds 33,424, and a first start with a cold
//	  torch.compile cache 1.65 GiB less, 13,517 tokens of 131,072 B:
//	  33,424 − 13,517 = 19,907, 19,904 in blocks of 16
//	2 × L4 at tp 2 and utilization 0.85: 1 + 2 + 1 = 4
//	a bigger GPU, RTX-5090 (31.36 GiB): 3, after more of the same GPU
func TestAlternativesContext(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"--max-model-len", "65536"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = v019
	in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "L4"), Settings: set}
	checkAlternatives(t, in, []alt{
		{code: memory.AltKVCacheFP8, args: "--kv-cache-dtype fp8", cost: 1},
		{code: memory.AltQuantizeFP8, args: "--quantization fp8", cost: 1},
		{code: memory.AltShorter, args: "--max-model-len 19904", cost: 2},
		{code: memory.AltMoreGPUs, args: "--tensor-parallel-size 2 --gpu-memory-utilization 0.85", gpu: "L4", count: 2, cost: 4},
		{code: memory.AltBiggerGPU, gpu: "RTX-5090", count: 1, cost: 3},
	})
}

// FewestShards tries only sizes vLLM shards the model over: phi-4 (40
// heads, 10 KV heads) on L4s at its full 16,384 tokens is tried at tp 1,
// 2 and 5, never at 4 or 8, and the answer is the first that fits; a
// size the user set is planned alone.
func TestFewestShards(t *testing.T) {
	in := memory.Input{Model: spec(t, "microsoft/phi-4"), Device: device(t, "L4"), Settings: vllm.Settings{Version: vllm.Newest()}}
	b, err := memory.FewestShards(in)
	if err != nil {
		t.Fatal(err)
	}
	tp := b.Settings.TensorParallelSize
	if !b.Fits || !memory.TPShards(in.Model, tp) || tp == 1 {
		t.Fatalf("phi-4 on L4s: tp %d, fits %v, problems %v", tp, b.Fits, b.Problems)
	}
	for smaller := 1; smaller < tp; smaller++ {
		if !memory.TPShards(in.Model, smaller) {
			continue
		}
		at := in
		at.Settings.TensorParallelSize = smaller
		if nb, err := memory.Plan(at); err != nil || nb.Fits {
			t.Errorf("tp %d fits too (%v), yet %d was chosen", smaller, err, tp)
		}
	}
	set, err := vllm.ParseFlags([]string{"--tensor-parallel-size", "4"})
	if err != nil {
		t.Fatal(err)
	}
	set.Version = vllm.Newest()
	in.Settings = set
	if b, err := memory.FewestShards(in); err != nil || b.Settings.TensorParallelSize != 4 || b.Fits {
		t.Errorf("the user's tp 4: planned at %d, fits %v (%v)", b.Settings.TensorParallelSize, b.Fits, err)
	}
}

// vLLM's SchedulerConfig refuses a --max-num-batched-tokens below
// --max-num-seqs (100 against the H100's default 1,024), and, without
// chunked prefill, one below --max-model-len (4,096 against 32,768), at
// start-up. The plan says so and offers the values vLLM accepts: 100
// sequences (a flag the user left at its default, cost 1) before the
// budget they set raised to 1,024 (cost 2), or in the second case the
// budget raised to 32,768; more GPUs or fp8, which keep the refused pair,
// are not.
func TestSchedulerLimitsRefused(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  []alt
	}{
		{[]string{"--max-num-batched-tokens", "100"}, []alt{
			{code: memory.AltScheduler, args: "--max-num-seqs 100", cost: 1},
			{code: memory.AltScheduler, args: "--max-num-batched-tokens 1024", cost: 2},
		}},
		{[]string{"--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill", "--max-model-len", "32768"}, []alt{
			{code: memory.AltScheduler, args: "--max-num-batched-tokens 32768", cost: 2},
		}},
	} {
		set, err := vllm.ParseFlags(c.flags)
		if err != nil {
			t.Fatal(err)
		}
		set.Version = v019
		in := memory.Input{Model: spec(t, "meta-llama/Llama-3.1-8B-Instruct"), Device: device(t, "H100-80GB"), Count: 1, Settings: set}
		if b := plan(t, in); b.Fits || len(b.Problems) != 1 || b.Problems[0].Code != memory.CodeSchedulerRefused {
			t.Errorf("%v: want only %s, got %v", c.flags, memory.CodeSchedulerRefused, b.Problems)
		}
		checkAlternatives(t, in, c.want)
	}
}
