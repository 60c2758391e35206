package catalog

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"headroom.dev/headroom/model"
)

// hfConfigs holds reference copies of Hugging Face config.json files, byte
// for byte as their model repositories publish them (testdata/hf-configs/
// README.md names each file's repository).
const hfConfigs = "testdata/hf-configs"

func TestCatalogChecksClean(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatalf("Check:\n%v", err)
	}
}

// TestRequiredModels lists the models the catalog promises to know.
func TestRequiredModels(t *testing.T) {
	want := []string{
		"meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-13b-chat-hf", "meta-llama/Llama-2-70b-chat-hf",
		"meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-70B-Instruct",
		"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
		"meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
		"mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-Instruct-v0.2", "mistralai/Mistral-7B-Instruct-v0.3",
		"mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x22B-Instruct-v0.1", "mistralai/Mistral-Nemo-Instruct-2407",
		"mistralai/Mistral-Small-24B-Instruct-2501", "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
		"Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
		"Qwen/Qwen2.5-14B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
		"Qwen/Qwen2.5-Coder-7B-Instruct", "Qwen/Qwen2.5-Coder-32B-Instruct",
		"Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B",
		"Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B", "Qwen/QwQ-32B", "Qwen/Qwen2.5-VL-7B-Instruct",
		"google/gemma-2b", "google/gemma-7b", "google/gemma-2-2b-it", "google/gemma-2-9b-it", "google/gemma-2-27b-it",
		"google/gemma-3-1b-it", "google/gemma-3-4b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it",
		"microsoft/Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-128k-instruct", "microsoft/Phi-3-medium-4k-instruct",
		"microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4", "microsoft/Phi-4-mini-instruct",
		"deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1",
		"deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
		"deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
		"openai/gpt-oss-20b", "openai/gpt-oss-120b",
		"ibm-granite/granite-3.1-2b-instruct", "ibm-granite/granite-3.1-8b-instruct", "ibm-granite/granite-3.3-8b-instruct",
		"ibm-granite/granite-vision-3.3-2b",
		"tiiuae/falcon-7b-instruct", "tiiuae/falcon-40b-instruct",
		"moonshotai/Kimi-Dev-72B", "moonshotai/Kimi-VL-A3B-Instruct",
		"RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8",
		"RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
		"RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-235B-A22B-FP8",
		"Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen3-8B-AWQ", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
	}
	ids := IDs()
	if !slices.IsSorted(ids) {
		t.Errorf("IDs() is not sorted")
	}
	for _, id := range want {
		if _, ok := slices.BinarySearch(ids, id); !ok {
			t.Errorf("catalog lacks %s", id)
		}
	}
	if len(ids) < 40 {
		t.Errorf("catalog has %d models, want at least 40", len(ids))
	}
}

func TestEntriesAreCopies(t *testing.T) {
	a := Entries()
	i := slices.IndexFunc(a, func(e Entry) bool { return len(e.Aliases) > 0 })
	if i < 0 {
		t.Fatal("no entry has aliases")
	}
	orig := a[i].Aliases[0]
	a[i].Aliases[0] = "changed"
	a[i].ID = "changed"
	if b := Entries(); b[i].Aliases[0] != orig || b[i].ID == "changed" {
		t.Errorf("changing the result of Entries changed the catalog")
	}
}

// TestVerbatimConfigsMatchHF: the catalog carries these Hugging Face
// config.json files unchanged, byte for byte.
func TestVerbatimConfigsMatchHF(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(hfConfigs, "*--*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no reference configs in %s (%v)", hfConfigs, err)
	}
	for _, p := range paths {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := embedded.ReadFile(configDir + "/" + filepath.Base(p))
		if err != nil {
			t.Errorf("%s: not in the catalog: %v", filepath.Base(p), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("configs/%s differs from %s", filepath.Base(p), p)
		}
	}
}

func mustLookup(t *testing.T, name string) model.Spec {
	t.Helper()
	s, ok := Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q) found nothing", name)
	}
	return s
}

// TestPublishedFacts spot-checks values against the models' published
// config.json files.
func TestPublishedFacts(t *testing.T) {
	// Llama-3.1-70B: 80 layers, 8 KV heads, hidden 8192, 131072 positions.
	s := mustLookup(t, "meta-llama/Llama-3.1-70B-Instruct")
	if s.Layers != 80 || s.KVHeads != 8 || s.Hidden != 8192 || s.Heads != 64 || s.MaxPositions != 131072 {
		t.Errorf("Llama-3.1-70B: layers %d kv %d hidden %d heads %d maxpos %d, want 80 8 8192 64 131072",
			s.Layers, s.KVHeads, s.Hidden, s.Heads, s.MaxPositions)
	}
	// Qwen2.5-72B: intermediate 29568, vocab 152064, QKV bias.
	s = mustLookup(t, "Qwen/Qwen2.5-72B-Instruct")
	if s.Intermediate != 29568 || s.Vocab != 152064 || !s.QKVBias {
		t.Errorf("Qwen2.5-72B: intermediate %d vocab %d bias %v, want 29568 152064 true", s.Intermediate, s.Vocab, s.QKVBias)
	}
	// gemma-3-27b: 62 layers, head_dim 128, 16 KV heads; 5 of every 6 layers
	// slide over 1024 tokens, so layers 5, 11, ..., 59 (10 of them) are global
	// and 52 are sliding.
	s = mustLookup(t, "google/gemma-3-27b-it")
	if s.Layers != 62 || s.HeadDim != 128 || s.KVHeads != 16 {
		t.Errorf("gemma-3-27b: layers %d head_dim %d kv %d, want 62 128 16", s.Layers, s.HeadDim, s.KVHeads)
	}
	if got := s.CountKind(); got[model.Sliding] != 52 || got[model.Full] != 10 {
		t.Errorf("gemma-3-27b attention kinds %v, want 52 sliding and 10 full", got)
	}
	if s.LayerKind(0).Window != 1024 || s.LayerKind(5).Kind != model.Full {
		t.Errorf("gemma-3-27b layer 0 %+v, layer 5 %+v; want sliding 1024 and full", s.LayerKind(0), s.LayerKind(5))
	}
	if s.Vision == nil {
		t.Errorf("gemma-3-27b has no vision encoder")
	}
	// gemma-3-4b's text_config gives only 3 widths; the rest are
	// Gemma3TextConfig defaults: 8 heads, 4 KV heads, head_dim 256, vocab 262208.
	s = mustLookup(t, "google/gemma-3-4b-it")
	if s.Layers != 34 || s.Hidden != 2560 || s.Heads != 8 || s.KVHeads != 4 || s.HeadDim != 256 || s.Vocab != 262208 {
		t.Errorf("gemma-3-4b: layers %d hidden %d heads %d kv %d head_dim %d vocab %d, want 34 2560 8 4 256 262208",
			s.Layers, s.Hidden, s.Heads, s.KVHeads, s.HeadDim, s.Vocab)
	}
	// gpt-oss-120b: 36 layers, 128 experts, top-4, 18 layers sliding over 128 tokens.
	s = mustLookup(t, "openai/gpt-oss-120b")
	if s.Layers != 36 || s.MoE == nil || s.MoE.Experts != 128 || s.MoE.TopK != 4 {
		t.Errorf("gpt-oss-120b: layers %d moe %+v, want 36 layers, 128 experts, top-4", s.Layers, s.MoE)
	}
	if got := s.CountKind(); got[model.Sliding] != 18 || s.LayerKind(0).Window != 128 {
		t.Errorf("gpt-oss-120b attention kinds %v, layer 0 %+v; want 18 sliding with window 128", got, s.LayerKind(0))
	}
	// DeepSeek-V3: 61 layers, kv_lora_rank 512, 256 experts + 1 shared,
	// first_k_dense_replace 3, FP8 weights.
	s = mustLookup(t, "deepseek-ai/DeepSeek-V3")
	if s.Layers != 61 || s.MLA == nil || s.MLA.KVLoraRank != 512 || s.MLA.QLoraRank != 1536 {
		t.Errorf("DeepSeek-V3: layers %d mla %+v, want 61 layers, kv_lora_rank 512, q_lora_rank 1536", s.Layers, s.MLA)
	}
	if s.MoE == nil || s.MoE.Experts != 256 || s.MoE.DenseLayers != 3 || s.MoE.Shared != 1 || s.MoE.TopK != 8 {
		t.Errorf("DeepSeek-V3 moe %+v, want 256 experts, 3 dense layers, 1 shared, top-8", s.MoE)
	}
	if s.Quant == nil || s.Quant.Bits != 8 || !s.Quant.Float {
		t.Errorf("DeepSeek-V3 quantization %+v, want 8-bit float", s.Quant)
	}
	// DeepSeek-V2-Lite: MLA without query compression (q_lora_rank null).
	s = mustLookup(t, "deepseek-ai/DeepSeek-V2-Lite-Chat")
	if s.MLA == nil || s.MLA.KVLoraRank != 512 || s.MLA.QLoraRank != 0 || s.MoE == nil || s.MoE.Experts != 64 || s.MoE.Shared != 2 {
		t.Errorf("DeepSeek-V2-Lite: mla %+v moe %+v, want kv_lora_rank 512, no q_lora_rank, 64 experts, 2 shared", s.MLA, s.MoE)
	}
	// Phi-3-mini-4k: full multi-head attention, 32 KV heads.
	if s = mustLookup(t, "microsoft/Phi-3-mini-4k-instruct"); s.KVHeads != 32 || s.Heads != 32 {
		t.Errorf("Phi-3-mini-4k: heads %d kv %d, want 32 32", s.Heads, s.KVHeads)
	}
	// Mistral-7B-v0.1 slides over 4096 tokens on every one of its 32 layers.
	if s = mustLookup(t, "mistralai/Mistral-7B-v0.1"); s.CountKind()[model.Sliding] != 32 || s.LayerKind(31).Window != 4096 {
		t.Errorf("Mistral-7B-v0.1 attention kinds %v, want 32 sliding with window 4096", s.CountKind())
	}
	// Gemma 1 has no sliding window (GemmaConfig has no such key; only Gemma 2
	// added one): all 28 layers of gemma-7b attend globally.
	if s = mustLookup(t, "google/gemma-7b"); s.CountKind()[model.Full] != 28 {
		t.Errorf("gemma-7b attention kinds %v, want 28 full", s.CountKind())
	}
	// Qwen2.5-7B declares sliding_window 131072 but use_sliding_window false.
	if s = mustLookup(t, "Qwen/Qwen2.5-7B-Instruct"); s.CountKind()[model.Full] != 28 {
		t.Errorf("Qwen2.5-7B attention kinds %v, want 28 full", s.CountKind())
	}
	// Llama-2 as released has 4096 positions (the MLC copy's 2048 is an edit).
	if s = mustLookup(t, "meta-llama/Llama-2-7b-chat-hf"); s.MaxPositions != 4096 || s.KVHeads != 32 {
		t.Errorf("Llama-2-7b-chat: maxpos %d kv %d, want 4096 32", s.MaxPositions, s.KVHeads)
	}
	// Llama-3.2-1B ties its embeddings and has head_dim 64.
	if s = mustLookup(t, "meta-llama/Llama-3.2-1B-Instruct"); !s.TieEmbeddings || s.HeadDim != 64 {
		t.Errorf("Llama-3.2-1B: tie %v head_dim %d, want true 64", s.TieEmbeddings, s.HeadDim)
	}
	// Falcon-7B is multi-query: one KV head for 71 query heads.
	if s = mustLookup(t, "tiiuae/falcon-7b-instruct"); s.KVHeads != 1 || s.Heads != 71 {
		t.Errorf("falcon-7b: heads %d kv %d, want 71 1", s.Heads, s.KVHeads)
	}
	// Qwen3-30B-A3B: 128 experts of width 768, top-8.
	if s = mustLookup(t, "Qwen/Qwen3-30B-A3B"); s.MoE == nil || s.MoE.Experts != 128 || s.MoE.TopK != 8 || s.MoE.Intermediate != 768 {
		t.Errorf("Qwen3-30B-A3B moe %+v, want 128 experts of 768, top-8", s.MoE)
	}
	// Mixtral-8x7B: 8 experts, top-2.
	if s = mustLookup(t, "mistralai/Mixtral-8x7B-Instruct-v0.1"); s.MoE == nil || s.MoE.Experts != 8 || s.MoE.TopK != 2 {
		t.Errorf("Mixtral-8x7B moe %+v, want 8 experts, top-2", s.MoE)
	}
	// Mistral-Small-3.1: 40-layer text model under text_config plus Pixtral.
	if s = mustLookup(t, "mistralai/Mistral-Small-3.1-24B-Instruct-2503"); s.Layers != 40 || s.Vision == nil || s.HeadDim != 128 {
		t.Errorf("Mistral-Small-3.1: layers %d head_dim %d vision %v, want 40 128 present", s.Layers, s.HeadDim, s.Vision)
	}
	// Kimi-VL: MLA text model under text_config plus MoonViT.
	if s = mustLookup(t, "moonshotai/Kimi-VL-A3B-Instruct"); s.MLA == nil || s.MoE == nil || s.MoE.Experts != 64 || s.Vision == nil {
		t.Errorf("Kimi-VL: mla %+v moe %+v vision %v, want MLA, 64 experts, vision", s.MLA, s.MoE, s.Vision)
	}
	// Quantized checkpoints: int4 groups of 128 for GPTQ and AWQ.
	for _, id := range []string{"RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "Qwen/Qwen3-8B-AWQ", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"} {
		if s = mustLookup(t, id); s.Quant == nil || s.Quant.Bits != 4 || s.Quant.GroupSize != 128 || s.Quant.Float {
			t.Errorf("%s quantization %+v, want int4 group 128", id, s.Quant)
		}
	}
	for _, id := range []string{"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"} {
		if s = mustLookup(t, id); s.Quant == nil || s.Quant.Bits != 8 || !s.Quant.Float {
			t.Errorf("%s quantization %+v, want 8-bit float", id, s.Quant)
		}
	}
	if s = mustLookup(t, "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8"); s.Quant == nil || s.Quant.Bits != 8 || s.Quant.Float {
		t.Errorf("Qwen2.5-7B w8a8 quantization %+v, want 8-bit int", s.Quant)
	}
}

// TestCheckpointBytesMatchArchitecture compares the recorded checkpoint
// sizes of 16-bit checkpoints with 2 bytes per parameter. Llama-2 files also
// carry float32 rotary inv_freq buffers: layers x 64 x 4 bytes (8 KiB for
// 32 layers), far below the 0.01% allowed here.
func TestCheckpointBytesMatchArchitecture(t *testing.T) {
	n := 0
	for _, e := range Entries() {
		if e.CheckpointBytes == 0 {
			continue
		}
		s := mustLookup(t, e.ID)
		if s.Quant != nil {
			continue
		}
		n++
		want := 2 * s.Params()
		if diff := float64(e.CheckpointBytes-want) / float64(e.CheckpointBytes); diff < -1e-4 || diff > 1e-4 {
			t.Errorf("%s: checkpoint_bytes %d, architecture gives %d bytes (%.3f%%)", e.ID, e.CheckpointBytes, want, 100*diff)
		}
	}
	if n < 10 {
		t.Errorf("only %d unquantized entries record checkpoint_bytes", n)
	}
}

// statedSize reads the parameter count a model's name states ("8B", "0.5B",
// "30B" in "30B-A3B"); active-parameter tokens ("A3B") and expert products
// ("8x7B") do not state the total.
func statedSize(id string) (float64, bool) {
	for _, tok := range strings.FieldsFunc(nameOf(id), func(r rune) bool { return r == '-' || r == '_' }) {
		if m := sizeToken.FindStringSubmatch(tok); m != nil {
			v, err := strconv.ParseFloat(m[1], 64)
			return v * 1e9, err == nil
		}
	}
	return 0, false
}

var sizeToken = regexp.MustCompile(`^(\d+(?:\.\d+)?)[bB]$`)

// publishedParams holds total parameter counts for models whose name rounds
// far from the truth, with their source.
var publishedParams = map[string]float64{
	// Gemma paper, table 1: 524,288,000 embedding + 1,981,884,416 other.
	"google/gemma-2b": 2.506e9,
	// Gemma paper, table 1: 786,432,000 embedding + 7,751,248,896 other.
	"google/gemma-7b": 8.538e9,
	// Gemma 2 paper, table 2: 590,118,912 embedding + 2,024,517,888 other.
	"google/gemma-2-2b-it": 2.615e9,
	// Meta's Llama 3.2 model card: 1.23B parameters.
	"meta-llama/Llama-3.2-1B-Instruct": 1.23e9,
	// Qwen2.5 model cards: "Number of Parameters: 7.61B" (also for Coder and
	// the Qwen2.5-Math-7B base of the R1 distill).
	"Qwen/Qwen2.5-7B-Instruct":                    7.61e9,
	"Qwen/Qwen2.5-Coder-7B-Instruct":              7.61e9,
	"Qwen/Qwen2.5-7B-Instruct-AWQ":                7.61e9,
	"RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic":    7.61e9,
	"RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": 7.61e9,
	"deepseek-ai/DeepSeek-R1-Distill-Qwen-7B":     7.61e9,
	// Hugging Face's safetensors parameter count for Qwen2.5-VL-7B-Instruct: 8.29B.
	"Qwen/Qwen2.5-VL-7B-Instruct": 8.29e9,
	// Measured: vLLM 0.19 loaded 4.74 GiB of bf16 weights
	// (memory/testdata/vllm-0.19.0-h100.csv): 4.74 * 2^30 / 2 = 2.545e9 parameters.
	"ibm-granite/granite-3.1-2b-instruct": 2.545e9,
	// Measured: 5.54 GiB of bf16 weights: 5.54 * 2^30 / 2 = 2.974e9.
	"ibm-granite/granite-vision-3.3-2b": 2.974e9,
}

// TestParamsMatchStatedSize checks each model's parameter count against the
// size in its name, within 8%.
func TestParamsMatchStatedSize(t *testing.T) {
	checked := 0
	for _, id := range IDs() {
		want, ok := publishedParams[id]
		if !ok {
			want, ok = statedSize(id)
		}
		if !ok {
			continue
		}
		checked++
		got := float64(mustLookup(t, id).Params())
		if r := got / want; r < 0.92 || r > 1.08 {
			t.Errorf("%s: %.3gB parameters, its name or card says %.3gB", id, got/1e9, want/1e9)
		}
	}
	if checked < 50 {
		t.Errorf("only %d models had a stated size", checked)
	}
}

// TestActiveParams checks mixture-of-experts models against the activated
// parameter counts their makers publish, within 8%.
func TestActiveParams(t *testing.T) {
	for _, c := range []struct {
		id     string
		active float64
		// noEmbed: the count leaves out the input embedding (a table lookup,
		// not a matrix product). OpenAI's gpt-oss model card, table 1, adds
		// attention, the active MLP share and the unembedding: for 120b
		// 0.96B + 114.71B x 4/128 + 0.58B = 5.13B.
		noEmbed bool
	}{
		{"Qwen/Qwen3-30B-A3B", 3.3e9, false},                    // model card: 3.3B activated
		{"Qwen/Qwen3-235B-A22B", 22e9, false},                   // model card: 22B activated
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", 12.9e9, false}, // Mistral: 12.9B active of 46.7B
		{"openai/gpt-oss-20b", 3.61e9, true},                    // model card: 3.61B active of 20.91B
		{"openai/gpt-oss-120b", 5.13e9, true},                   // model card: 5.13B active of 116.83B
		{"deepseek-ai/DeepSeek-V3", 37e9, false},                // DeepSeek-V3 report: 37B activated of 671B
	} {
		s := mustLookup(t, c.id)
		got := float64(s.ActiveParams())
		if c.noEmbed {
			got -= float64(s.EmbeddingParams())
		}
		if r := got / c.active; r < 0.92 || r > 1.08 {
			t.Errorf("%s: %.3gB active parameters, published %.3gB", c.id, got/1e9, c.active/1e9)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct{ name, id string }{
		{"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"},
		{"META-LLAMA/llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct"},
		{"  Llama-3.1-8B-Instruct ", "meta-llama/Llama-3.1-8B-Instruct"},              // name without org
		{"llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct"},                           // ollama tag alias
		{"meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"}, // renamed repo
		{"https://huggingface.co/Qwen/Qwen3-8B/", "Qwen/Qwen3-8B"},
		{"hf.co/google/gemma-3-27b-it", "google/gemma-3-27b-it"},
		{"RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic", "RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic"}, // as the calibration logs spell it
		{"redhatai/Llama-3.3-70B-Instruct-quantized.w8a8", "RedHatAI/Llama-3.3-70B-Instruct-quantized.w8a8"},
		{"phi-4", "microsoft/phi-4"},
		{"mistral-7b-instruct", "mistralai/Mistral-7B-Instruct-v0.3"}, // KAITO preset name
	} {
		if s := mustLookup(t, c.name); s.ID != c.id {
			t.Errorf("Lookup(%q).ID = %q, want %q", c.name, s.ID, c.id)
		}
	}
	for _, name := range []string{"", "nobody/nothing", "llama", "meta-llama/", "/Llama-3.1-8B", strings.Repeat("a", 10000)} {
		if s, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %s, want not found", name, s.ID)
		}
	}
	// The published safetensors index total_size of Llama-3.1-8B-Instruct.
	if s := mustLookup(t, "meta-llama/Llama-3.1-8B-Instruct"); s.CheckpointBytes != 16060522496 || s.CheckpointSource == "" {
		t.Errorf("Llama-3.1-8B-Instruct checkpoint %d (%q), want 16060522496 with a source", s.CheckpointBytes, s.CheckpointSource)
	}
	// No size is recorded for Qwen3-8B: the planner derives it.
	if s := mustLookup(t, "Qwen/Qwen3-8B"); s.CheckpointBytes != 0 {
		t.Errorf("Qwen3-8B checkpoint %d, want 0", s.CheckpointBytes)
	}
	// Each call returns its own Spec.
	a := mustLookup(t, "openai/gpt-oss-20b")
	if len(a.Attention) == 0 || a.MoE == nil {
		t.Fatalf("gpt-oss-20b has no per-layer attention or no MoE: %+v", a)
	}
	a.Attention[0].Window = 1
	a.MoE.Experts = 1
	if b := mustLookup(t, "openai/gpt-oss-20b"); b.Attention[0].Window == 1 || b.MoE.Experts == 1 {
		t.Errorf("changing one Lookup result changed the next")
	}
}

func TestSuggest(t *testing.T) {
	for _, c := range []struct{ typed, first string }{
		{"lama-3.1-8b", "meta-llama/Llama-3.1-8B"},
		{"llama-3.1-8b-instrct", "meta-llama/Llama-3.1-8B-Instruct"},
		{"qwen3-8", "Qwen/Qwen3-8B"},
		{"mistral-7b-instruct-v0.3-awq", "mistralai/Mistral-7B-Instruct-v0.3"},
		{"gemma3-27b", "google/gemma-3-27b-it"},
		{"deepseek-v3-0324", "deepseek-ai/DeepSeek-V3"},
		{"gpt-oss-21b", "openai/gpt-oss-20b"},
	} {
		got := Suggest(c.typed, 3)
		if len(got) == 0 || got[0] != c.first {
			t.Errorf("Suggest(%q) = %v, want %s first", c.typed, got, c.first)
		}
	}
	if got := Suggest("qwen", 5); len(got) != 5 {
		t.Errorf("Suggest(qwen, 5) = %v, want 5 ids", got)
	}
	for _, typed := range []string{"", "zzzzzzzzzzzz", "x"} {
		if got := Suggest(typed, 3); len(got) != 0 {
			t.Errorf("Suggest(%q) = %v, want nothing", typed, got)
		}
	}
	if got := Suggest("llama", 0); got != nil {
		t.Errorf("Suggest(llama, 0) = %v, want nil", got)
	}
}

// goodConfig is a minimal config.json the parser accepts (Llama-3.2-1B's widths).
const goodConfig = `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":2048,
"intermediate_size":8192,"num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,
"head_dim":64,"vocab_size":128256,"max_position_embeddings":131072,"torch_dtype":"bfloat16"}`

func testFS(catalog string, configs ...string) fstest.MapFS {
	m := fstest.MapFS{indexFile: {Data: []byte(catalog)}}
	for _, c := range configs {
		m[configDir+"/"+c] = &fstest.MapFile{Data: []byte(goodConfig)}
	}
	return m
}

// TestCheckReportsBrokenCatalogs feeds broken catalogs through the same
// index builder and checker the embedded one uses.
func TestCheckReportsBrokenCatalogs(t *testing.T) {
	const src = `"config_source":"test"`
	for _, c := range []struct {
		name, catalog string
		configs       []string
		want          string
	}{
		{"missing index", "", nil, "catalog.json"},
		{"not json", `{"models": [`, []string{"a.json"}, "not valid"},
		{"unknown field", `{"models":[{"id":"a/b","config":"a.json",` + src + `,"size":1}]}`, []string{"a.json"}, "unknown field"},
		{"duplicate id", `{"models":[{"id":"a/b","config":"a.json",` + src + `},{"id":"A/B","config":"a.json",` + src + `}]}`, []string{"a.json"}, "listed twice"},
		{"bad id", `{"models":[{"id":"ab","config":"a.json",` + src + `}]}`, []string{"a.json"}, "org/name"},
		{"config path", `{"models":[{"id":"a/b","config":"../a.json",` + src + `}]}`, []string{"a.json"}, "must name"},
		{"missing config", `{"models":[{"id":"a/b","config":"x.json",` + src + `}]}`, []string{"a.json"}, "x.json"},
		{"unused config", `{"models":[{"id":"a/b","config":"a.json",` + src + `}]}`, []string{"a.json", "b.json"}, "b.json is not used"},
		{"alias clash", `{"models":[{"id":"a/b","config":"a.json","aliases":["c"],` + src + `},{"id":"x/c","config":"a.json",` + src + `}]}`, []string{"a.json"}, "is the name of x/c"},
		{"alias twice", `{"models":[{"id":"a/b","config":"a.json","aliases":["z"],` + src + `},{"id":"x/c","config":"a.json","aliases":["Z"],` + src + `}]}`, []string{"a.json"}, "already taken"},
		{"bytes without source", `{"models":[{"id":"a/b","config":"a.json","checkpoint_bytes":5,` + src + `}]}`, []string{"a.json"}, "checkpoint_source"},
		{"no config source", `{"models":[{"id":"a/b","config":"a.json"}]}`, []string{"a.json"}, "config_source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := testFS(c.catalog, c.configs...)
			if c.catalog == "" {
				delete(fsys, indexFile)
			}
			err := check(newIndex(fsys))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("check = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	// A config the parser rejects is reported with the entry's id.
	fsys := testFS(`{"models":[{"id":"a/b","config":"a.json","config_source":"test"}]}`)
	fsys[configDir+"/a.json"] = &fstest.MapFile{Data: []byte(`{"hidden_size": "wide"}`)}
	if err := check(newIndex(fsys)); err == nil || !strings.Contains(err.Error(), "a/b") {
		t.Errorf("check of an unparsable config = %v, want an error naming a/b", err)
	}
	// A clean catalog checks clean, and an ambiguous bare name finds nothing.
	ix := newIndex(testFS(`{"models":[{"id":"a/m","config":"a.json",`+src+`},{"id":"b/m","config":"a.json",`+src+`}]}`, "a.json"))
	if err := check(ix); err != nil {
		t.Errorf("check of a clean catalog: %v", err)
	}
	if _, ok := ix.find("m"); ok {
		t.Errorf("find(m) resolved a name two organisations share")
	}
	if i, ok := ix.find("B/M"); !ok || ix.entries[i].ID != "b/m" {
		t.Errorf("find(B/M) = %d, %v; want b/m", i, ok)
	}
}
