package model

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readConfig parses testdata/configs/name.
func readConfig(t *testing.T, name string) Spec {
	t.Helper()
	return readConfigAt(t, filepath.Join("testdata", "configs", name))
}

func readConfigAt(t testing.TB, path string) Spec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", path, err)
	}
	return s
}

// layerCounts summarises Spec.Attention as counts per kind and window.
func layerCounts(s Spec) map[string]int {
	out := map[string]int{}
	for _, l := range s.Attention {
		k := string(l.Kind)
		if l.Kind == Sliding {
			k = fmt.Sprintf("sliding(%d)", l.Window)
			if l.Chunked {
				k = fmt.Sprintf("chunked(%d)", l.Window)
			}
		}
		if l.Kind == Linear {
			k = fmt.Sprintf("linear(%d)", l.StateBytes)
		}
		out[k]++
	}
	return out
}

// shape is the part of a Spec the table checks field by field.
type shape struct {
	Arch, Type                                string
	Layers, Hidden, Inter, Heads, KV, HeadDim int
	VHeadDim, Vocab, MaxPos                   int
	Tie, Bias, Gated                          bool
	Rotary, RopePos, RopeTables               int
	Dtype                                     string
}

func shapeOf(s Spec) shape {
	return shape{s.Architecture, s.ModelType, s.Layers, s.Hidden, s.Intermediate, s.Heads, s.KVHeads,
		s.HeadDim, s.VHeadDim, s.Vocab, s.MaxPositions, s.TieEmbeddings, s.QKVBias, s.GatedMLP,
		s.RotaryDim, s.RopePositions, s.RopeTables, s.Dtype}
}

func TestParseConfigRealFiles(t *testing.T) {
	tests := []struct {
		file   string
		want   shape
		layers map[string]int
		moe    *MoE
		mla    *MLAConfig
		quant  *Quantization
	}{
		{
			// head_dim 4096/32 = 128; llama3 rope keeps max_position_embeddings.
			file:   "meta-llama--Llama-3.1-8B-Instruct.json",
			want:   shape{"LlamaForCausalLM", "llama", 32, 4096, 14336, 32, 8, 128, 0, 128256, 131072, false, false, true, 128, 131072, 1, "bfloat16"},
			layers: map[string]int{"full": 32},
		},
		{
			file:   "meta-llama--Llama-3.2-1B-Instruct.json",
			want:   shape{"LlamaForCausalLM", "llama", 16, 2048, 8192, 32, 8, 64, 0, 128256, 131072, true, false, true, 64, 131072, 1, "bfloat16"},
			layers: map[string]int{"full": 16},
		},
		{
			// use_sliding_window false: sliding_window 131072 is ignored.
			// Qwen2 always has q/k/v biases; head_dim 3584/28 = 128.
			file:   "Qwen--Qwen2.5-7B-Instruct.json",
			want:   shape{"Qwen2ForCausalLM", "qwen2", 28, 3584, 18944, 28, 4, 128, 0, 152064, 32768, false, true, true, 128, 32768, 1, "bfloat16"},
			layers: map[string]int{"full": 28},
		},
		{
			file:   "Qwen--Qwen3-8B.json",
			want:   shape{"Qwen3ForCausalLM", "qwen3", 36, 4096, 12288, 32, 8, 128, 0, 151936, 40960, false, false, true, 128, 40960, 1, "bfloat16"},
			layers: map[string]int{"full": 36},
		},
		{
			file:   "Qwen--Qwen3-30B-A3B.json",
			want:   shape{"Qwen3MoeForCausalLM", "qwen3_moe", 48, 2048, 6144, 32, 4, 128, 0, 151936, 40960, false, false, true, 128, 40960, 1, "bfloat16"},
			layers: map[string]int{"full": 48},
			moe:    &MoE{Experts: 128, TopK: 8, Intermediate: 768, LayerFreq: 1},
		},
		{
			// MLA: head 128+64 = 192, v 128; yarn table 4096 × 40 = 163840.
			// 2 shared experts × 1408 = 2816.
			file:   "deepseek-ai--DeepSeek-V2-Lite-Chat.json",
			want:   shape{"DeepseekV2ForCausalLM", "deepseek_v2", 27, 2048, 10944, 16, 16, 192, 128, 102400, 163840, false, false, true, 64, 163840, 1, "bfloat16"},
			layers: map[string]int{"mla": 27},
			moe:    &MoE{Experts: 64, TopK: 6, Intermediate: 1408, Shared: 2, SharedInter: 2816, DenseLayers: 1, LayerFreq: 1},
			mla:    &MLAConfig{KVLoraRank: 512, QLoraRank: 0, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128},
		},
		{
			// FP8 blocks of 128 × 128 = 16384 weights per scale.
			file:   "deepseek-ai--DeepSeek-V3.json",
			want:   shape{"DeepseekV3ForCausalLM", "deepseek_v3", 61, 7168, 18432, 128, 128, 192, 128, 129280, 163840, false, false, true, 64, 163840, 1, "bfloat16"},
			layers: map[string]int{"mla": 61},
			moe:    &MoE{Experts: 256, TopK: 8, Intermediate: 2048, Shared: 1, SharedInter: 2048, DenseLayers: 3, LayerFreq: 1},
			mla:    &MLAConfig{KVLoraRank: 512, QLoraRank: 1536, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128},
			quant:  &Quantization{Method: "fp8", Bits: 8, GroupSize: 16384, Float: true, Symmetric: true},
		},
		{
			// No tie_word_embeddings key: Gemma2Config defaults to true.
			// 42 layers alternate: 21 sliding (even indices) + 21 full.
			file:   "google--gemma-2-9b-it.json",
			want:   shape{"Gemma2ForCausalLM", "gemma2", 42, 3584, 14336, 16, 8, 256, 0, 256000, 8192, true, false, true, 256, 8192, 1, "bfloat16"},
			layers: map[string]int{"full": 21, "sliding(4096)": 21},
		},
		{
			// gemma-3-4b-it: heads 8, KV 4, head_dim 256, vocab 262208 and
			// 131072 positions are Gemma3TextConfig defaults; linear ×8 →
			// 131072 × 8 = 1048576; two tables (local and global).
			file:   "google--gemma-3-4b-it.json",
			want:   shape{"Gemma3ForConditionalGeneration", "gemma3", 34, 2560, 10240, 8, 4, 256, 0, 262208, 131072, true, false, true, 256, 1048576, 2, "bfloat16"},
			layers: map[string]int{"full": 5, "sliding(1024)": 29},
		},
		{
			file:   "mistralai--Mixtral-8x7B-Instruct-v0.1.json",
			want:   shape{"MixtralForCausalLM", "mixtral", 32, 4096, 14336, 32, 8, 128, 0, 32000, 32768, false, false, true, 128, 32768, 1, "bfloat16"},
			layers: map[string]int{"full": 32},
			moe:    &MoE{Experts: 8, TopK: 2, Intermediate: 14336, LayerFreq: 1},
		},
		{
			file:   "mistralai--Mistral-7B-v0.1.json",
			want:   shape{"MistralForCausalLM", "mistral", 32, 4096, 14336, 32, 8, 128, 0, 32000, 32768, false, false, true, 128, 32768, 1, "bfloat16"},
			layers: map[string]int{"sliding(4096)": 32},
		},
		{
			// head_dim 3072/32 = 96; sliding_window 2047 applies to all layers.
			file:   "microsoft--Phi-3-mini-4k-instruct.json",
			want:   shape{"Phi3ForCausalLM", "phi3", 32, 3072, 8192, 32, 32, 96, 0, 32064, 4096, false, false, true, 96, 4096, 1, "bfloat16"},
			layers: map[string]int{"sliding(2047)": 32},
		},
		{
			// head_dim 2560/32 = 80, rotary 80 × 0.4 = 32; two-matrix MLP with biases.
			file:   "microsoft--phi-2.json",
			want:   shape{"PhiForCausalLM", "phi", 32, 2560, 10240, 32, 32, 80, 0, 51200, 2048, false, true, false, 32, 2048, 1, "float16"},
			layers: map[string]int{"full": 32},
		},
		{
			// multi_query → 1 KV head; head_dim 4544/71 = 64; MLP 4 × 4544 =
			// 18176; no max_position_embeddings key: FalconConfig's 2048;
			// tie from PretrainedConfig (true).
			file:   "tiiuae--falcon-7b.json",
			want:   shape{"FalconForCausalLM", "falcon", 32, 4544, 18176, 71, 1, 64, 0, 65024, 2048, true, false, false, 64, 2048, 1, "bfloat16"},
			layers: map[string]int{"full": 32},
		},
		{
			// RefinedWeb: n_head 128, n_head_kv 8, head_dim 8192/128 = 64,
			// MLP 4 × 8192 = 32768.
			file:   "tiiuae--falcon-40b.json",
			want:   shape{"RWForCausalLM", "RefinedWeb", 60, 8192, 32768, 128, 8, 64, 0, 65024, 2048, true, false, false, 64, 2048, 1, "bfloat16"},
			layers: map[string]int{"full": 60},
		},
		{
			// yarn: original 4096 × 32 = 131072. No dtype key → bfloat16.
			file:   "openai--gpt-oss-20b.json",
			want:   shape{"GptOssForCausalLM", "gpt_oss", 24, 2880, 2880, 64, 8, 64, 0, 201088, 131072, false, true, true, 64, 131072, 1, "bfloat16"},
			layers: map[string]int{"full": 12, "sliding(128)": 12},
			moe:    &MoE{Experts: 32, TopK: 4, Intermediate: 2880, LayerFreq: 1},
			quant:  &Quantization{Method: "mxfp4", Bits: 4, GroupSize: 32, Float: true, Symmetric: true},
		},
		{
			file:   "Qwen--Qwen2.5-7B-Instruct-GPTQ-Int4.json",
			want:   shape{"Qwen2ForCausalLM", "qwen2", 28, 3584, 18944, 28, 4, 128, 0, 152064, 32768, false, true, true, 128, 32768, 1, "float16"},
			layers: map[string]int{"full": 28},
			quant:  &Quantization{Method: "gptq", Bits: 4, GroupSize: 128, Symmetric: true},
		},
		{
			// zero_point true: asymmetric.
			file:   "Qwen--Qwen2.5-7B-Instruct-AWQ.json",
			want:   shape{"Qwen2ForCausalLM", "qwen2", 28, 3584, 18944, 28, 4, 128, 0, 152064, 32768, false, true, true, 128, 32768, 1, "float16"},
			layers: map[string]int{"full": 28},
			quant:  &Quantization{Method: "awq", Bits: 4, GroupSize: 128},
		},
		{
			// Per-channel float8 weights: GroupSize 0.
			file:   "RedHatAI--Meta-Llama-3.1-8B-Instruct-FP8-dynamic.json",
			want:   shape{"LlamaForCausalLM", "llama", 32, 4096, 14336, 32, 8, 128, 0, 128256, 131072, false, false, true, 128, 131072, 1, "bfloat16"},
			layers: map[string]int{"full": 32},
			quant:  &Quantization{Method: "compressed-tensors", Bits: 8, Float: true, Symmetric: true, Format: "float-quantized"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := readConfig(t, tt.file)
			if got := shapeOf(s); got != tt.want {
				t.Errorf("shape\n got %+v\nwant %+v", got, tt.want)
			}
			if got := layerCounts(s); !reflect.DeepEqual(got, tt.layers) {
				t.Errorf("layers = %v, want %v", got, tt.layers)
			}
			if !reflect.DeepEqual(s.MoE, tt.moe) {
				t.Errorf("moe = %+v, want %+v", s.MoE, tt.moe)
			}
			if !reflect.DeepEqual(s.MLA, tt.mla) {
				t.Errorf("mla = %+v, want %+v", s.MLA, tt.mla)
			}
			if !reflect.DeepEqual(s.Quant, tt.quant) {
				t.Errorf("quant = %+v, want %+v", s.Quant, tt.quant)
			}
		})
	}
}

func TestGemma2EvenLayersSlide(t *testing.T) {
	s := readConfig(t, "google--gemma-2-9b-it.json")
	for i, l := range s.Attention {
		if want := i%2 == 0; (l.Kind == Sliding) != want {
			t.Errorf("layer %d is %s, want sliding=%v", i, l.Kind, want)
		}
	}
}

func TestGemma3GlobalLayers(t *testing.T) {
	s := readConfig(t, "google--gemma-3-4b-it.json")
	var full []int
	for i, l := range s.Attention {
		if l.Kind == Full {
			full = append(full, i)
		}
	}
	// (i+1) % 6 == 0 for i < 34.
	if want := []int{5, 11, 17, 23, 29}; !reflect.DeepEqual(full, want) {
		t.Errorf("full layers = %v, want %v", full, want)
	}
	if s.TextModelType != "gemma3_text" {
		t.Errorf("TextModelType = %q", s.TextModelType)
	}
	// SigLIP so400m at 896 px, patch 14, h 1152, inter 4304, 27 layers:
	//   layer = 4·1152² (5,308,416) + qkvo biases 4·1152 (4,608)
	//         + MLP 2·1152·4304 (9,916,416) + biases 4304+1152 (5,456)
	//         + two LayerNorms 4·1152 (4,608)            = 15,239,504
	//   27 layers                                         = 411,466,608
	//   patch conv 3·14²·1152 + bias 1152                 = 678,528
	//   positions (896/14)² = 4096 × 1152                 = 4,718,592
	//   post LayerNorm 2·1152                             = 2,304
	//   projector 1152 × 2560 + soft-emb norm 1152        = 2,950,272
	//   total                                             = 419,816,304
	want := &Vision{Params: 419_816_304, Hidden: 1152, Layers: 27, Intermediate: 4304, ImageTokens: 256, PatchTokens: 4096}
	if !reflect.DeepEqual(s.Vision, want) {
		t.Errorf("vision = %+v, want %+v", s.Vision, want)
	}
}

// TestKimiVLVision reads the catalog's Kimi-VL config: a MoonViT encoder
// (SigLIP-so400m widths, no fixed image size) and a 2×2 patch-merging MLP
// projector onto the DeepSeek-V3-style text model.
func TestKimiVLVision(t *testing.T) {
	s := readConfigAt(t, filepath.Join("catalog", "configs", "moonshotai--Kimi-VL-A3B-Instruct.json"))
	// h 1152, inter 4304, 27 layers, patch 14, text hidden 2048:
	//   layer = 4·1152² + qkvo and MLP biases (4·1152 + 4304 + 1152)
	//         + MLP 2·1152·4304 + two LayerNorms 4·1152  = 15,239,504
	//   27 layers                                         = 411,466,608
	//   patch conv 3·14²·1152 + bias 1152                 = 678,528
	//   learned positions 64 × 64 × 1152                  = 4,718,592
	//   final LayerNorm 2·1152                            = 2,304
	//   projector: LayerNorm 2·1152 + 4608² + 4608
	//            + 4608 × 2048 + 2048                     = 30,679,808
	//   total                                             = 447,545,840
	// The cached 2-D rotary table: 512 × 512 positions × (1152/16)/2
	// complex64 values × 8 B                             = 75,497,472 B.
	want := &Vision{Params: 447_545_840, Hidden: 1152, Layers: 27, Intermediate: 4304, RopeTableBytes: 75_497_472}
	if !reflect.DeepEqual(s.Vision, want) {
		t.Errorf("vision = %+v, want %+v", s.Vision, want)
	}
}

func TestQwen25VLVision(t *testing.T) {
	s := readConfig(t, "Qwen--Qwen2.5-VL-7B-Instruct.json")
	// Text keys at the top level: Qwen2.5-7B's decoder, mrope keeps the
	// 128000-position table, use_sliding_window false.
	want := shape{"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", 28, 3584, 18944, 28, 4, 128, 0, 152064, 128000, false, true, true, 128, 128000, 1, "bfloat16"}
	if got := shapeOf(s); got != want {
		t.Errorf("shape\n got %+v\nwant %+v", got, want)
	}
	if got := layerCounts(s); !reflect.DeepEqual(got, map[string]int{"full": 28}) {
		t.Errorf("layers = %v", got)
	}
	// Encoder h 1280, SwiGLU inter 3420 with biases, RMSNorm, 32 blocks:
	//   block = 4·1280² (6,553,600) + 3·1280·3420 (13,132,800)
	//         + biases 4·1280 + 3420 + 3420 + 1280 (13,240) + norms 2·1280 (2,560)
	//         = 19,702,200; × 32 = 630,470,400
	//   patch embed 3·2·14²·1280 (Conv3d, no bias)           = 1,505,280
	//   merger RMSNorm 1280 + 5120² + 5120 + 5120·3584 + 3584 = 44,574,464
	//   total                                                 = 676,550,144
	// = 8,292,166,656 (Qwen2.5-VL-7B) − 7,615,616,512 (Qwen2.5-7B).
	wantV := &Vision{Params: 676_550_144, Hidden: 1280, Layers: 32, Intermediate: 3420}
	if !reflect.DeepEqual(s.Vision, wantV) {
		t.Errorf("vision = %+v, want %+v", s.Vision, wantV)
	}
}

func TestMistral3Vision(t *testing.T) {
	// Mistral-Small-3.1 widths: Pixtral encoder h 1024, inter 4096, 24
	// layers, patch 14 at 1540 px; text hidden 5120.
	s := parse(t, `{"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "spatial_merge_size": 2,
		"text_config": {"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 32768, "num_hidden_layers": 40,
		  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
		  "max_position_embeddings": 131072, "sliding_window": null},
		"vision_config": {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
		  "num_attention_heads": 16, "image_size": 1540, "patch_size": 14}}`)
	//   layer = 4·1024² (4,194,304) + gated 3·1024·4096 (12,582,912)
	//         + two RMSNorms 2,048 = 16,779,264; × 24 = 402,702,336
	//   patch conv 3·14²·1024 = 602,112; ln_pre 1,024
	//   projector: norm 1,024 + merger 4·1024·1024 (4,194,304)
	//             + 1024·5120 (5,242,880) + 5120² (26,214,400) = 35,652,608
	//   total 438,958,080; (1540/14)² = 12100 patches, / 2² = 3025 tokens.
	want := &Vision{Params: 438_958_080, Hidden: 1024, Layers: 24, Intermediate: 4096, ImageTokens: 3025, PatchTokens: 12100}
	if !reflect.DeepEqual(s.Vision, want) {
		t.Errorf("vision = %+v, want %+v", s.Vision, want)
	}
	if s.TextModelType != "mistral" || layerCounts(s)["full"] != 40 {
		t.Errorf("text %q layers %v", s.TextModelType, layerCounts(s))
	}
}

func TestGptOssAlternates(t *testing.T) {
	s := readConfig(t, "openai--gpt-oss-20b.json")
	for i, l := range s.Attention {
		want := Layer{Kind: Full}
		if i%2 == 0 {
			want = Layer{Kind: Sliding, Window: 128}
		}
		if l != want {
			t.Errorf("layer %d = %+v, want %+v", i, l, want)
		}
	}
}

// TestAllTestdataConfigsValidate parses every file and checks the
// invariants hold; it catches a file added without a table entry too.
func TestAllTestdataConfigsValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "configs", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d configs (%v)", len(files), err)
	}
	for _, f := range files {
		s := readConfig(t, filepath.Base(f))
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// parse is ParseConfig on an inline config that must succeed.
func parse(t *testing.T, js string) Spec {
	t.Helper()
	s, err := ParseConfig([]byte(js))
	if err != nil {
		t.Fatalf("ParseConfig: %v\n%s", err, js)
	}
	return s
}

// base is a small llama-style decoder; tests splice keys into it.
func base(extra string) string {
	js := `{"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
		"num_attention_heads": 8, "vocab_size": 1000, "max_position_embeddings": 4096`
	if extra != "" {
		js += ", " + extra
	}
	return js + "}"
}

func TestRopeScaling(t *testing.T) {
	// ctx is vLLM's longest context (_get_and_verify_max_len): a factor
	// multiplies max_position_embeddings (4096 here) but for su, longrope
	// and llama3, which already count it; YaRN's multiplies its original
	// length.
	tests := []struct {
		name              string
		extra             string
		rotary, rope, ctx int
	}{
		{"none", ``, 64, 4096, 4096},
		{"linear ×4: 4096 × 4", `"rope_scaling": {"type": "linear", "factor": 4}`, 64, 16384, 16384},
		{"dynamic ×2.5: 4096 × 2.5", `"rope_scaling": {"rope_type": "dynamic", "factor": 2.5}`, 64, 10240, 10240},
		{"yarn: original 1024 × 8", `"rope_scaling": {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 1024}`, 64, 8192, 8192},
		{"yarn without original: 4096 × 2", `"rope_scaling": {"type": "yarn", "factor": 2}`, 64, 8192, 8192},
		{"llama3 keeps max", `"rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 1024}`, 64, 4096, 4096},
		{"longrope: short 1024 + long 4096", `"rope_scaling": {"type": "longrope", "long_factor": [1], "short_factor": [1]}, "original_max_position_embeddings": 1024`, 64, 5120, 4096},
		{"v5 rope_parameters", `"rope_parameters": {"rope_type": "linear", "factor": 2, "rope_theta": 10000}`, 64, 8192, 8192},
		{"partial 0.5 of head 64", `"partial_rotary_factor": 0.5`, 32, 4096, 4096},
		{"rotary_pct 0.25 of head 64", `"rotary_pct": 0.25`, 16, 4096, 4096},
		{"rotary_dim key", `"rotary_dim": 24`, 24, 4096, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parse(t, base(tt.extra))
			if s.RotaryDim != tt.rotary || s.RopePositions != tt.rope || s.RopeTables != 1 || s.MaxPositions != tt.ctx {
				t.Errorf("rotary %d, positions %d, tables %d, context %d; want %d, %d, 1, %d", s.RotaryDim, s.RopePositions, s.RopeTables, s.MaxPositions, tt.rotary, tt.rope, tt.ctx)
			}
		})
	}
	// No RoPE at all: GPT-2 (learned positions), BLOOM (ALiBi).
	for _, js := range []string{
		`{"model_type": "gpt2", "n_layer": 2, "n_embd": 768, "n_head": 12, "n_inner": null, "vocab_size": 50257, "n_positions": 1024}`,
		`{"model_type": "bloom", "n_layer": 2, "hidden_size": 1024, "n_head": 16, "vocab_size": 250880}`,
	} {
		s := parse(t, js)
		if s.RotaryDim != 0 || s.RopePositions != 0 || s.RopeTables != 0 {
			t.Errorf("%s: rotary %d, positions %d, tables %d; want none", s.ModelType, s.RotaryDim, s.RopePositions, s.RopeTables)
		}
		// Two-matrix MLP of 4 × hidden, biases, tied (PretrainedConfig default).
		if s.GatedMLP || s.Intermediate != 4*s.Hidden || !s.QKVBias || !s.TieEmbeddings {
			t.Errorf("%s: gated %v, intermediate %d, bias %v, tie %v", s.ModelType, s.GatedMLP, s.Intermediate, s.QKVBias, s.TieEmbeddings)
		}
	}
	// bloom has no max-position key: vLLM's fallback of 2048.
	if s := parse(t, `{"model_type": "bloom", "n_layer": 2, "hidden_size": 1024, "n_head": 16, "vocab_size": 250880}`); s.MaxPositions != DefaultMaxPositions {
		t.Errorf("bloom max positions = %d, want %d", s.MaxPositions, DefaultMaxPositions)
	}
}

func TestSlidingWindowRules(t *testing.T) {
	tests := []struct {
		name string
		js   string
		want []Layer
	}{
		{"mistral without the key takes MistralConfig's 4096",
			`{"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000}`,
			[]Layer{{Kind: Sliding, Window: 4096}, {Kind: Sliding, Window: 4096}}},
		{"explicit null is None, not the default",
			`{"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000, "sliding_window": null}`,
			[]Layer{{Kind: Full}, {Kind: Full}}},
		{"use_sliding_window false wins",
			base(`"sliding_window": 256, "use_sliding_window": false`),
			[]Layer{{Kind: Full}, {Kind: Full}, {Kind: Full}, {Kind: Full}}},
		{"qwen2 slides from max_window_layers on",
			`{"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000,
			  "use_sliding_window": true, "sliding_window": 512, "max_window_layers": 2}`,
			[]Layer{{Kind: Full}, {Kind: Full}, {Kind: Sliding, Window: 512}, {Kind: Sliding, Window: 512}}},
		{"cohere2 pattern 4: every fourth layer global",
			`{"model_type": "cohere2", "num_hidden_layers": 8, "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "vocab_size": 1000, "sliding_window": 4096}`,
			[]Layer{{Kind: Sliding, Window: 4096}, {Kind: Sliding, Window: 4096}, {Kind: Sliding, Window: 4096}, {Kind: Full},
				{Kind: Sliding, Window: 4096}, {Kind: Sliding, Window: 4096}, {Kind: Sliding, Window: 4096}, {Kind: Full}}},
		{"layer_types beat everything",
			base(`"sliding_window": 64, "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]`),
			[]Layer{{Kind: Full}, {Kind: Sliding, Window: 64}, {Kind: Sliding, Window: 64}, {Kind: Full}}},
		{"llama4: chunked RoPE layers, every fourth NoPE layer full",
			`{"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 512,
			  "intermediate_size": 256, "intermediate_size_mlp": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
			  "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 8192, "attention_chunk_size": 2048,
			  "num_local_experts": 4, "num_experts_per_tok": 1}}`,
			[]Layer{{Kind: Sliding, Window: 2048, Chunked: true}, {Kind: Sliding, Window: 2048, Chunked: true},
				{Kind: Sliding, Window: 2048, Chunked: true}, {Kind: Full}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(t, tt.js).Attention; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("attention = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLlama4MoE(t *testing.T) {
	s := parse(t, `{"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 512,
		"intermediate_size": 256, "intermediate_size_mlp": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
		"head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 8192, "num_local_experts": 4,
		"num_experts_per_tok": 1, "interleave_moe_layer_step": 2}}`)
	// Dense layers use intermediate_size_mlp; experts and the one shared
	// expert use intermediate_size.
	want := &MoE{Experts: 4, TopK: 1, Intermediate: 256, Shared: 1, SharedInter: 256, LayerFreq: 2}
	if s.Intermediate != 1024 || !reflect.DeepEqual(s.MoE, want) {
		t.Errorf("intermediate %d, moe %+v; want 1024, %+v", s.Intermediate, s.MoE, want)
	}
}

func TestLinearStateLayers(t *testing.T) {
	// Gated delta-net, bf16, 16 key heads × 128, 32 value heads × 128, kernel 4:
	//   conv     = (2·16·128 + 32·128) × (4−1) = 8192 × 3 = 24,576
	//   temporal = 32 × 128 × 128             = 524,288
	//   bytes    = (24,576 + 524,288) × 2     = 1,097,728
	next := parse(t, `{"model_type": "qwen3_next", "num_hidden_layers": 8, "hidden_size": 2048, "intermediate_size": 5120,
		"num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "partial_rotary_factor": 0.25,
		"vocab_size": 151936, "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
		"linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
		"linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
		"num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512}`)
	if got, want := layerCounts(next), map[string]int{"linear(1097728)": 6, "full": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("qwen3_next layers = %v, want %v", got, want)
	}
	if next.Attention[3].Kind != Full || next.Attention[7].Kind != Full || next.RotaryDim != 64 {
		t.Errorf("qwen3_next: layers 3 and 7 should be full, rotary 256×0.25 = 64; got %+v, rotary %d", next.Attention, next.RotaryDim)
	}
	if want := (&MoE{Experts: 512, TopK: 10, Intermediate: 512, Shared: 1, SharedInter: 512, LayerFreq: 1}); !reflect.DeepEqual(next.MoE, want) {
		t.Errorf("qwen3_next moe = %+v, want %+v", next.MoE, want)
	}

	// Jamba (Mamba-1), bf16, hidden 4096, expand 2 → inner 8192, d_state 16, d_conv 4:
	//   conv = 8192 × 3 = 24,576; ssm = 8192 × 16 = 131,072; bytes = 155,648 × 2 = 311,296.
	// Attention where i % 8 == 4.
	jamba := parse(t, `{"model_type": "jamba", "num_hidden_layers": 16, "hidden_size": 4096, "intermediate_size": 14336,
		"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 65536, "max_position_embeddings": 262144,
		"torch_dtype": "bfloat16", "num_experts": 16, "num_experts_per_tok": 2}`)
	if got, want := layerCounts(jamba), map[string]int{"linear(311296)": 14, "full": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("jamba layers = %v, want %v", got, want)
	}
	if jamba.Attention[4].Kind != Full || jamba.Attention[12].Kind != Full || jamba.RotaryDim != 0 || jamba.MoE.LayerFreq != 2 {
		t.Errorf("jamba: attention at 4 and 12, no RoPE, experts every 2nd layer; got %+v", jamba)
	}

	// Nemotron-H (Mamba-2), bf16, 128 heads × 64, state 128, 8 groups, kernel 4:
	//   inner = 8192; conv = (8192 + 2·8·128) × 3 = 10240 × 3 = 30,720
	//   ssm = 128 × 64 × 128 = 1,048,576; bytes = 1,079,296 × 2 = 2,158,592.
	nh := parse(t, `{"model_type": "nemotron_h", "num_hidden_layers": 6, "hidden_size": 4096, "intermediate_size": 21504,
		"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072, "max_position_embeddings": 8192,
		"torch_dtype": "bfloat16", "hybrid_override_pattern": "M-M*-E"}`)
	// One group's conv (B and C): 2 × 128 × 3 × 2 B = 1,536.
	mamba := Layer{Kind: Linear, StateBytes: 2158592, SSMBytes: 2097152, Groups: 8, GroupConvBytes: 1536}
	want := []Layer{mamba, {Kind: NoMixer}, mamba, {Kind: Full}, {Kind: NoMixer}, {Kind: NoMixer}}
	if !reflect.DeepEqual(nh.Attention, want) || nh.GatedMLP {
		t.Errorf("nemotron_h attention = %+v (gated %v), want %+v, not gated", nh.Attention, nh.GatedMLP, want)
	}

	// --mamba-ssm-cache-dtype float32 (NVIDIA's Nemotron-H recipes give it):
	// the SSM state at 4 B, the conv state at 2: 30,720 × 2 + 1,048,576 × 4
	// = 4,255,744 B a layer. A gated delta-net's whole state follows
	// --mamba-cache-dtype: at float32 twice its 1,097,728; the SSM dtype
	// alone leaves it.
	ssm32 := nh.WithStateDtypes(2, 4)
	if l := ssm32.Attention[0]; l.StateBytes != 4255744 || l.SSMBytes != 4194304 || nh.Attention[0].StateBytes != 2158592 {
		t.Errorf("nemotron_h with a float32 SSM state: %+v (was %+v)", l, nh.Attention[0])
	}
	if l := next.WithStateDtypes(4, 4).Attention[0]; l.StateBytes != 2*1097728 {
		t.Errorf("qwen3_next at float32: %+v", l)
	}
	if l := next.WithStateDtypes(2, 4).Attention[0]; l.StateBytes != 1097728 {
		t.Errorf("qwen3_next with only the SSM dtype: %+v", l)
	}
	if l := jamba.WithStateDtypes(2, 4).Attention[0]; l.StateBytes != 24576*2+131072*4 {
		t.Errorf("jamba with a float32 SSM state: %+v", l)
	}
}

// A rank's state, as vLLM's MambaStateShapeCalculator shards it.
//
//	qwen3_next at TP 4: conv 8,192 channels / 4 × 3 × 2 B = 12,288,
//	    temporal 32 / 4 value heads × 128 × 128 × 2 B = 262,144: 274,432.
//	nemotron_h (8 groups) at TP 4: the groups split, conv 30,720 × 2 / 4
//	    = 15,360, ssm 2,097,152 / 4 = 524,288: 539,648.
//	nemotron_h at TP 16: 8 groups replicated up to 16 (8 more of 1,536 B),
//	    conv (61,440 + 12,288) / 16 = 4,608, ssm 131,072: 135,680.
//	jamba at TP 2: 311,296 / 2 = 155,648, ssm 262,144 / 2 = 131,072.
func TestStateAt(t *testing.T) {
	next := parse(t, `{"model_type": "qwen3_next", "num_hidden_layers": 8, "hidden_size": 2048, "intermediate_size": 5120,
		"num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "max_position_embeddings": 262144,
		"torch_dtype": "bfloat16", "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
		"linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4}`)
	nh := parse(t, `{"model_type": "nemotron_h", "num_hidden_layers": 6, "hidden_size": 4096, "intermediate_size": 21504,
		"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072, "max_position_embeddings": 8192,
		"torch_dtype": "bfloat16", "hybrid_override_pattern": "M-M*-E"}`)
	jamba := parse(t, `{"model_type": "jamba", "num_hidden_layers": 16, "hidden_size": 4096, "intermediate_size": 14336,
		"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 65536, "max_position_embeddings": 262144,
		"torch_dtype": "bfloat16", "num_experts": 16, "num_experts_per_tok": 2}`)
	for _, c := range []struct {
		name       string
		l          Layer
		tp         int
		state, ssm int64
	}{
		{"qwen3_next tp 1", next.Attention[0], 1, 1097728, 0},
		{"qwen3_next tp 4", next.Attention[0], 4, 274432, 0},
		{"nemotron_h tp 4", nh.Attention[0], 4, 539648, 524288},
		{"nemotron_h tp 16", nh.Attention[0], 16, 135680, 131072},
		{"jamba tp 2", jamba.Attention[0], 2, 155648, 131072},
	} {
		if state, ssm := c.l.StateAt(c.tp); state != c.state || ssm != c.ssm {
			t.Errorf("%s: state %d, ssm %d; want %d, %d", c.name, state, ssm, c.state, c.ssm)
		}
	}
}

func TestKVHeadKeys(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		kv    int
	}{
		{"absent: multi-head", ``, 8},
		{"num_key_value_heads", `"num_key_value_heads": 2`, 2},
		{"n_head_kv", `"n_head_kv": 4`, 4},
		{"multi_query", `"multi_query": true`, 1},
		{"chatglm groups", `"multi_query_attention": true, "multi_query_group_num": 2`, 2},
	}
	for _, tt := range tests {
		if s := parse(t, base(tt.extra)); s.KVHeads != tt.kv {
			t.Errorf("%s: KVHeads = %d, want %d", tt.name, s.KVHeads, tt.kv)
		}
	}
}

func TestTieDefaults(t *testing.T) {
	tests := []struct {
		modelType string
		tie       bool
	}{
		{"llama", false}, {"mistral", false}, {"qwen2", false}, {"qwen3", false}, {"phi3", false},
		{"gemma", true}, {"gemma2", true}, {"gemma3_text", true}, {"cohere", true},
		{"gpt_neox", false}, {"some_new_type", true}, // PretrainedConfig's default
	}
	for _, tt := range tests {
		js := strings.Replace(base(""), `"llama"`, fmt.Sprintf("%q", tt.modelType), 1)
		if s := parse(t, js); s.TieEmbeddings != tt.tie {
			t.Errorf("%s: tie = %v, want %v", tt.modelType, s.TieEmbeddings, tt.tie)
		}
	}
	if s := parse(t, base(`"tie_word_embeddings": true`)); !s.TieEmbeddings {
		t.Error("explicit tie_word_embeddings true ignored")
	}
}

func TestQuantMethods(t *testing.T) {
	tests := []struct {
		name string
		q    string
		want Quantization
	}{
		{"fp8 per tensor", `{"quant_method": "fp8", "activation_scheme": "dynamic"}`,
			Quantization{Method: "fp8", Bits: 8, Float: true, Symmetric: true}},
		{"gptq act order, per channel", `{"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": true, "sym": false}`,
			Quantization{Method: "gptq", Bits: 8, ActOrder: true}},
		{"awq symmetric", `{"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": false}`,
			Quantization{Method: "awq", Bits: 4, GroupSize: 64, Symmetric: true}},
		{"compressed-tensors W4A16 group 128, actorder group",
			`{"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
			  "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true, "actorder": "group"}}}}`,
			Quantization{Method: "compressed-tensors", Bits: 4, GroupSize: 128, Symmetric: true, ActOrder: true, Format: "pack-quantized"}},
		{"compressed-tensors NVFP4",
			`{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"group_0": {
			  "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true}}}}`,
			Quantization{Method: "compressed-tensors", Bits: 4, GroupSize: 16, Float: true, Symmetric: true, Format: "nvfp4-pack-quantized"}},
		{"compressed-tensors block fp8 128×128",
			`{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {
			  "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128], "symmetric": true}}}}`,
			Quantization{Method: "compressed-tensors", Bits: 8, GroupSize: 16384, Float: true, Symmetric: true, Format: "float-quantized"}},
		{"bitsandbytes nf4", `{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}`,
			Quantization{Method: "bitsandbytes", Bits: 4, GroupSize: 64, Symmetric: true}},
		{"bitsandbytes 8-bit without method", `{"load_in_8bit": true}`,
			Quantization{Method: "bitsandbytes", Bits: 8, Symmetric: true}},
		{"modelopt NVFP4", `{"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}`,
			Quantization{Method: "modelopt_fp4", Bits: 4, GroupSize: 16, Float: true, Symmetric: true}},
		{"modelopt FP8 nested", `{"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}`,
			Quantization{Method: "modelopt", Bits: 8, Float: true, Symmetric: true}},
		{"unknown method kept", `{"quant_method": "hqq", "nbits": 4}`,
			Quantization{Method: "hqq"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parse(t, base(`"quantization_config": `+tt.q))
			if s.Quant == nil || *s.Quant != tt.want {
				t.Errorf("quant = %+v, want %+v", s.Quant, tt.want)
			}
		})
	}
}

func TestLlavaDefaultsAndVision(t *testing.T) {
	// A llava-1.5 style file: text_config names only what differs from
	// LlamaConfig (hidden 4096, 32 layers, 32 heads, intermediate 11008).
	s := parse(t, `{"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
		"vision_feature_layer": -2, "vision_feature_select_strategy": "default",
		"text_config": {"model_type": "llama", "max_position_embeddings": 4096, "torch_dtype": "float16", "vocab_size": 32064},
		"vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
		  "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14}}`)
	if s.Layers != 32 || s.Hidden != 4096 || s.Heads != 32 || s.KVHeads != 32 || s.Intermediate != 11008 ||
		s.Vocab != 32064 || s.MaxPositions != 4096 || s.Dtype != "float16" || s.TieEmbeddings {
		t.Errorf("text = %+v", shapeOf(s))
	}
	// CLIP ViT-L/14 at 336 px, h 1024, inter 4096, 24 layers:
	//   layer = 4·1024² (4,194,304) + qkvo biases 4,096 + MLP 2·1024·4096
	//         (8,388,608) + biases 4096+1024 + two LayerNorms 4,096 = 12,596,224
	//   24 layers = 302,309,376; patch conv 3·14²·1024 = 602,112;
	//   class embedding 1,024; positions (24²+1)·1024 = 590,848;
	//   pre and post LayerNorms 4,096 → encoder 303,507,456
	//   projector 1024·4096 + 4096 + 4096·4096 + 4096 = 20,979,712
	//   total 324,487,168; 576 image tokens (24², CLS dropped).
	want := &Vision{Params: 324_487_168, Hidden: 1024, Layers: 24, Intermediate: 4096, ImageTokens: 576, PatchTokens: 576}
	if !reflect.DeepEqual(s.Vision, want) {
		t.Errorf("vision = %+v, want %+v", s.Vision, want)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, js, want string
	}{
		{"not JSON", `{"model_type": `, "not valid JSON"},
		{"array", `[1, 2]`, "not a JSON object"},
		{"two values", `{} {}`, "more than one JSON value"},
		{"no layers", `{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}`, "has no num_hidden_layers: is this a transformer LM config?"},
		{"no heads", `{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64}`, "has no num_attention_heads"},
		{"zero layers", base(`"num_hidden_layers": 0`), "num_hidden_layers = 0 is out of range"},
		{"absurd layers", base(`"num_hidden_layers": 2000000`), "out of range"},
		{"fraction", base(`"hidden_size": 512.5`), "want an integer"},
		{"string width", base(`"intermediate_size": "big"`), "want an integer"},
		{"heads do not divide", `{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3, "intermediate_size": 8, "vocab_size": 10}`, "not a multiple of num_attention_heads"},
		{"kv heads do not group", base(`"num_key_value_heads": 3`), "cannot be grouped"},
		{"layer_types too short", base(`"layer_types": ["full_attention"]`), "lists 1 layers but num_hidden_layers is 4"},
		{"layer_types unknown", base(`"sliding_window": 8, "layer_types": ["full_attention", "x", "full_attention", "full_attention"]`), "not an attention kind"},
		{"sliding without window", base(`"layer_types": ["sliding_attention", "full_attention", "full_attention", "full_attention"]`), "sliding_window is missing"},
		{"bad dtype", base(`"torch_dtype": "int8"`), `torch_dtype "int8"`},
		{"encoder-decoder", `{"model_type": "t5", "is_encoder_decoder": true, "num_layers": 6}`, "encoder-decoder"},
		{"mamba", `{"model_type": "mamba", "num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 10}`, "no attention layers"},
		{"top-k above experts", base(`"num_local_experts": 4, "num_experts_per_tok": 8`), "num_experts_per_tok = 8 is out of range"},
		{"experts without top-k", base(`"num_local_experts": 4`), "no num_experts_per_tok"},
		{"bad rope factor", base(`"rope_scaling": {"type": "linear", "factor": -1}`), "rope_scaling.factor"},
		{"partial rotary > 1", base(`"partial_rotary_factor": 2`), "partial_rotary_factor"},
		{"MLA without rope dim", base(`"kv_lora_rank": 512`), "has no qk_rope_head_dim"},
		{"bits out of range", base(`"quantization_config": {"quant_method": "gptq", "bits": 99}`), "bits = 99"},
		{"text_config wrong type", `{"model_type": "llava", "text_config": 3}`, "text_config is 3, want an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.js))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateCatchesBrokenSpecs(t *testing.T) {
	good := readConfig(t, "deepseek-ai--DeepSeek-V2-Lite-Chat.json")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		break_ func(*Spec)
	}{
		{"attention length", func(s *Spec) { s.Attention = s.Attention[1:] }},
		{"kv above heads", func(s *Spec) { s.KVHeads = s.Heads * 2 }},
		{"MLA layer without MLA", func(s *Spec) { s.MLA = nil }},
		{"sliding without window", func(s *Spec) { s.Attention[0] = Layer{Kind: Sliding} }},
		{"unknown kind", func(s *Spec) { s.Attention[0] = Layer{Kind: "paged"} }},
		{"top-k above experts", func(s *Spec) { s.MoE.TopK = 65 }},
		{"shared without width", func(s *Spec) { s.MoE.SharedInter = 0 }},
		{"dtype", func(s *Spec) { s.Dtype = "int4" }},
		{"rope tables without rotary", func(s *Spec) { s.RotaryDim = 0 }},
		{"negative checkpoint", func(s *Spec) { s.CheckpointBytes = -1 }},
		{"quant without method", func(s *Spec) { s.Quant = &Quantization{Bits: 4} }},
		{"zero value", func(s *Spec) { *s = Spec{} }},
	}
	for _, tt := range tests {
		s := good
		s.Attention = append([]Layer(nil), good.Attention...)
		m := *good.MoE
		s.MoE = &m
		tt.break_(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate passed", tt.name)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "configs", "*.json"))
	// Kimi-VL: a MoonViT encoder (cached rotary table) on an MLA MoE.
	files = append(files, filepath.Join("catalog", "configs", "moonshotai--Kimi-VL-A3B-Instruct.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base(`"layer_types": ["sliding_attention", "full_attention", "linear_attention", "chunked_attention"], "sliding_window": 8, "attention_chunk_size": 16`)))
	f.Add([]byte(`{"model_type": "nemotron_h", "num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 8, "num_attention_heads": 4, "vocab_size": 10, "hybrid_override_pattern": "M*-"}`))
	f.Add([]byte(`{"model_type": "nemotron_h", "num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 8, "num_attention_heads": 4, "vocab_size": 10, "hybrid_override_pattern": "M*-",
		"mamba_num_heads": 8, "mamba_head_dim": 8, "ssm_state_size": 16, "n_groups": 1, "conv_kernel": 4}`))
	f.Add([]byte(`{"model_type": "qwen2_vl", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 8, "num_attention_heads": 4, "vocab_size": 10,
		"vision_config": {"depth": 2, "embed_dim": 32, "mlp_ratio": 4, "num_heads": 4, "in_chans": 3, "hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseConfig(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Errorf("ParseConfig returned a spec that fails Validate: %v", err)
		}
		if s.Vision != nil && s.Vision.Params < 0 {
			t.Errorf("negative vision params %d", s.Vision.Params)
		}
		for _, l := range s.Attention {
			for _, tp := range []int{1, 2, 3, 8, 64} {
				if state, ssm := l.StateAt(tp); state < 0 || ssm < 0 || ssm > state || (tp > 1 && state > l.StateBytes+int64(tp)*l.GroupConvBytes) {
					t.Errorf("layer %+v at TP %d: state %d, ssm %d", l, tp, state, ssm)
				}
			}
		}
	})
}

// The longest context is the smallest of the length keys vLLM reads, or
// model_max_length in their place (Cohere's Command-R ships
// max_position_embeddings 8192 beside model_max_length 131072, and vLLM
// serves 131072); Gemma 3's linear ×8 is already in its 131072.
func TestLongestContext(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra string
		want  int
	}{
		{"the smallest key", `"seq_length": 2048`, 2048},
		{"model_max_length in their place", `"model_max_length": 131072`, 131072},
	} {
		if s := parse(t, base(c.extra)); s.MaxPositions != c.want {
			t.Errorf("%s: %d, want %d", c.name, s.MaxPositions, c.want)
		}
	}
	if s := readConfigAt(t, filepath.Join("catalog", "configs", "google--gemma-3-27b-it.json")); s.MaxPositions != 131072 || s.RopePositions != 1048576 {
		t.Errorf("gemma-3-27b: context %d (want 131072), rotary positions %d (want 1048576)", s.MaxPositions, s.RopePositions)
	}
}

// --hf-overrides as vLLM applies them to Qwen3-8B's config.json (40,960
// positions, no rope_scaling): Qwen's YaRN recipe (factor 4 from 32,768)
// gives 131,072 tokens; a nested config (Gemma 3's text_config) is
// updated key by key and keeps its other keys; a dict-valued key is
// replaced whole; the caller's fields stay.
func TestWithOverrides(t *testing.T) {
	qwen := readConfigAt(t, filepath.Join("catalog", "configs", "Qwen--Qwen3-8B.json"))
	qwen.ID, qwen.CheckpointBytes = "Qwen/Qwen3-8B", 123 // a marker the overrides must keep
	yarn, err := qwen.WithOverrides(map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})
	if err != nil {
		t.Fatal(err)
	}
	if qwen.MaxPositions != 40960 || yarn.MaxPositions != 131072 || yarn.RopePositions != 131072 || yarn.ID != qwen.ID || yarn.CheckpointBytes != qwen.CheckpointBytes || yarn.Layers != qwen.Layers {
		t.Errorf("YaRN ×4: context %d → %d, rotary %d, id %q, checkpoint %d", qwen.MaxPositions, yarn.MaxPositions, yarn.RopePositions, yarn.ID, yarn.CheckpointBytes)
	}
	if s, err := yarn.WithOverrides(nil); err != nil || s.MaxPositions != 131072 {
		t.Errorf("no overrides: %v, %d", err, s.MaxPositions)
	}
	gemma := readConfigAt(t, filepath.Join("catalog", "configs", "google--gemma-3-12b-it.json"))
	short, err := gemma.WithOverrides(map[string]any{"text_config": map[string]any{"num_hidden_layers": 12}})
	if err != nil {
		t.Fatal(err)
	}
	if short.Layers != 12 || short.Hidden != gemma.Hidden || short.MaxPositions != gemma.MaxPositions || short.Vision == nil {
		t.Errorf("gemma-3-12b with 12 layers: layers %d (from %d), hidden %d (want %d), context %d", short.Layers, gemma.Layers, short.Hidden, gemma.Hidden, short.MaxPositions)
	}
	if _, err := (Spec{ID: "x"}).WithOverrides(map[string]any{"a": 1}); err == nil {
		t.Error("a spec without its config.json took overrides")
	}
	if _, err := qwen.WithOverrides(map[string]any{"num_hidden_layers": "x"}); err == nil || !strings.Contains(err.Error(), "--hf-overrides") {
		t.Errorf("a bad override: %v", err)
	}
}

// FuzzWithOverrides: any JSON object of --hf-overrides on a real config
// gives a spec that validates, or one line of error; never a panic.
func FuzzWithOverrides(f *testing.F) {
	for _, ov := range []string{
		`{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}`,
		`{"max_position_embeddings": 1, "num_hidden_layers": 2}`,
		`{"text_config": {"num_hidden_layers": 4}, "architectures": ["Gemma3ForConditionalGeneration"]}`,
		`{"rope_scaling": {"rope_type": "linear", "factor": 1e300}}`,
		`{"model_type": "mamba"}`,
	} {
		f.Add([]byte(ov), false)
		f.Add([]byte(ov), true)
	}
	qwen := readConfigAt(f, filepath.Join("catalog", "configs", "Qwen--Qwen3-8B.json"))
	gemma := readConfigAt(f, filepath.Join("catalog", "configs", "google--gemma-3-12b-it.json"))
	f.Fuzz(func(t *testing.T, data []byte, nested bool) {
		ov, err := decodeConfig(data)
		if err != nil {
			return
		}
		base := qwen
		if nested {
			base = gemma
		}
		s, err := base.WithOverrides(ov)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if err := s.Validate(); err != nil || s.MaxPositions < 1 {
			t.Errorf("overrides %s: %v, context %d", data, err, s.MaxPositions)
		}
	})
}

// --disable-sliding-window on Gemma 3 (sliding layers of a 1,024-token
// window, five in six) and gpt-oss (every other layer, 128): every layer
// keeps the whole context, and vLLM caps the context at the window.
// Llama 4's chunked local layers are no sliding window and stay.
func TestWithoutSlidingWindow(t *testing.T) {
	for _, c := range []struct {
		file       string
		window     int
		wasSliding int
	}{
		{"google--gemma-3-12b-it.json", 1024, 40},
		{"openai--gpt-oss-20b.json", 128, 12},
	} {
		s := readConfigAt(t, filepath.Join("catalog", "configs", c.file))
		full := s.WithoutSlidingWindow()
		if s.CountKind()[Sliding] != c.wasSliding || full.CountKind()[Sliding] != 0 || full.CountKind()[Full] != s.Layers || full.MaxPositions != c.window {
			t.Errorf("%s: sliding %d → %d, full %d of %d, context %d → %d (want the window %d)", c.file, s.CountKind()[Sliding], full.CountKind()[Sliding],
				full.CountKind()[Full], s.Layers, s.MaxPositions, full.MaxPositions, c.window)
		}
		if s.CountKind()[Sliding] != c.wasSliding {
			t.Errorf("%s: the original changed", c.file)
		}
	}
	dense := readConfigAt(t, filepath.Join("catalog", "configs", "Qwen--Qwen3-8B.json"))
	if got := dense.WithoutSlidingWindow(); got.MaxPositions != dense.MaxPositions {
		t.Errorf("a model without sliding layers: context %d → %d", dense.MaxPositions, got.MaxPositions)
	}
}

// A length key out of range beside a readable one bounds nothing (a
// tokenizer's "no limit" sentinel copied into config.json); alone it is
// the file's error.
func TestLongestContextSentinel(t *testing.T) {
	if s := parse(t, base(`"model_max_length": 1000000000000000019884624838656`)); s.MaxPositions != 4096 {
		t.Errorf("context %d, want max_position_embeddings' 4096", s.MaxPositions)
	}
	if _, err := ParseConfig([]byte(`{"model_type": "gpt2", "n_layer": 2, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": -1}`)); err == nil {
		t.Error("a config whose only length is -1 parsed")
	}
}
