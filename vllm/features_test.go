package vllm

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoRASettings(t *testing.T) {
	for _, tt := range []struct {
		line        string
		slots, rank int
		extra       int
		sharded     bool
	}{
		{"vllm serve m --max-loras 4", 0, 0, 0, false},
		{"vllm serve m --enable-lora", DefaultMaxLoRAs, DefaultMaxLoRARank, 0, false},
		{"vllm serve m --enable-lora --max-loras 4 --max-lora-rank 64 --fully-sharded-loras", 4, 64, 0, true},
		{"vllm serve m --enable-lora=false --max-loras 4", 0, 0, 0, false},
		{"vllm serve m --enable-lora --no-enable-lora", 0, 0, 0, false},
	} {
		s, err := ParseCommand(strings.Fields(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		slots, rank := s.LoRASlots()
		if slots != tt.slots || rank != tt.rank || s.FullyShardedLoRAs() != tt.sharded || s.LoRAExtraVocab() != tt.extra {
			t.Errorf("%s: %d slots of rank %d, sharded %v, extra %d", tt.line, slots, rank, s.FullyShardedLoRAs(), s.LoRAExtraVocab())
		}
	}
	// The extra vocabulary: 256 by default before 0.12.0, none from it.
	s, _ := ParseCommand(strings.Fields("vllm serve m --enable-lora"))
	for v, want := range map[string]int{"0.11.2": 256, "0.12.0": 0} {
		s.Version = MustVersion(v)
		if got := s.LoRAExtraVocab(); got != want {
			t.Errorf("%s: %d extra rows, want %d", v, got, want)
		}
	}
	if LoRAOnExperts(MustVersion("0.11.1")) || !LoRAOnExperts(MustVersion("0.11.2")) {
		t.Error("expert LoRA boundary is not 0.11.2")
	}
}

func TestMMLimits(t *testing.T) {
	m, err := ParseMMLimits("--limit-mm-per-prompt", `{"image": 2, "video": {"count": 1, "num_frames": 32}, "audio": 0}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]MMLimit{"image": {Count: 2}, "video": {Count: 1, NumFrames: 32}, "audio": {Count: 0}}
	if !reflect.DeepEqual(m.Limits, want) {
		t.Errorf("limits %+v", m.Limits)
	}
	if m.Of(ModalityAudio).Count != 0 || (*MMLimits)(nil).Of(ModalityImage).Count != DefaultMMLimit {
		t.Error("Of")
	}
	old, err := ParseMMLimits("--limit-mm-per-prompt", "image=16,video=2")
	if err != nil || old.Of(ModalityImage).Count != 16 || old.Of(ModalityVideo).Count != 2 {
		t.Errorf("the key=value form: %+v, %v", old, err)
	}
	for raw, msg := range map[string]string{
		`{"image": -1}`:             "from 0",
		`{"image": "two"}`:          "whole number",
		`{"image": {"count": 1.5}}`: "whole number",
		"image=x":                   "MODALITY=COUNT",
		"[1]":                       "MODALITY=COUNT",
		`{"image": 2`:               "not JSON",
	} {
		if _, err := ParseMMLimits("--limit-mm-per-prompt", raw); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", raw, err, msg)
		}
	}
	k, err := ParseMMProcessorKwargs("--mm-processor-kwargs", `{"max_pixels": 1003520, "fps": 2}`)
	if err != nil || k.MaxPixels != 1003520 || !reflect.DeepEqual(k.Keys, []string{"fps", "max_pixels"}) {
		t.Errorf("kwargs %+v, %v", k, err)
	}
}

func TestFlagWords(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        []string
	}{
		{"enable-lora", "true", []string{"--enable-lora"}},
		{"enable-lora", "false", nil},
		{"enable-prefix-caching", "false", []string{"--no-enable-prefix-caching"}},
		{"max-loras", "4", []string{"--max-loras", "4"}},
		{"max_model_len", "8k", []string{"--max-model-len", "8000"}},
		{"speculative-config", `{"method":"ngram","num_speculative_tokens":3}`, []string{"--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`}},
		{"model", "Qwen/Qwen2.5-7B-Instruct", []string{"--model=Qwen/Qwen2.5-7B-Instruct"}},
		{"port", "8000", []string{"--port", "8000"}},
	} {
		got, err := FlagWords(tt.name, tt.value)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %q: %q, %v; want %q", tt.name, tt.value, got, err, tt.want)
		}
	}
	if _, err := FlagWords("enable-lora", "maybe"); err == nil {
		t.Error("a switch took maybe")
	}
}

func FuzzMMLimits(f *testing.F) {
	for _, seed := range []string{`{"image":0}`, `{"image": 2, "video": {"count": 1, "num_frames": 32, "width": 512}}`, "image=16,video=2", `{"audio":{"count":1,"length":30}}`, `{}`, "image=", `{"image":1e2}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		m, err := ParseMMLimits("--limit-mm-per-prompt", raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for mod, l := range m.Limits {
			for _, n := range []int{l.Count, l.Width, l.Height, l.NumFrames, l.Length} {
				if n < 0 || n > maxMMItems {
					t.Fatalf("%s: %+v", mod, l)
				}
			}
		}
		roundTrip(t, []string{"vllm", "serve", "m", "--limit-mm-per-prompt", raw})
	})
}

func FuzzMMProcessorKwargs(f *testing.F) {
	for _, seed := range []string{`{"max_pixels": 1003520}`, `{"num_crops": 4, "min_pixels": 3136}`, `{"max_pixels": "big"}`, `[]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, err := ParseMMProcessorKwargs("--mm-processor-kwargs", raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if k.MaxPixels < 0 || k.MinPixels < 0 {
			t.Fatalf("%+v", k)
		}
		roundTrip(t, []string{"vllm", "serve", "m", "--mm-processor-kwargs", raw})
	})
}

func FuzzFlagWords(f *testing.F) {
	f.Add("enable-lora", "true")
	f.Add("max-loras", "4")
	f.Add("limit-mm-per-prompt", `{"image":0}`)
	f.Add("x", "--y")
	f.Fuzz(func(t *testing.T, name, value string) {
		words, err := FlagWords(name, value)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if _, err := ParseFlags(words); err != nil {
			t.Fatalf("FlagWords(%q, %q) = %q, which does not parse: %v", name, value, words, err)
		}
	})
}

// --hf-overrides (a JSON object, or its keys one by one after a dot) and
// --rope-scaling are the keys vLLM sets on the model's config, the
// latter's value as rope_scaling after the former's keys; the line
// renders back with them.
func TestModelOverrides(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // ModelOverrides as JSON
	}{
		{`vllm serve m`, `null`},
		{`vllm serve m --hf-overrides '{"max_position_embeddings": 65536}'`, `{"max_position_embeddings":65536}`},
		{`vllm serve m --hf-overrides.max_position_embeddings 65536 --hf-overrides.num_hidden_layers=4`, `{"max_position_embeddings":65536,"num_hidden_layers":4}`},
		{`vllm serve m --rope-scaling '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}'`, `{"rope_scaling":{"factor":4.0,"original_max_position_embeddings":32768,"rope_type":"yarn"}}`},
		{`vllm serve m --hf-overrides '{"rope_scaling": {"rope_type": "linear", "factor": 2}}' --rope-scaling '{"rope_type":"dynamic","factor":3}'`, `{"rope_scaling":{"factor":3,"rope_type":"dynamic"}}`},
	} {
		words, err := SplitCommandLine(tt.line)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseCommand(words)
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if got := renderJSON(s.ModelOverrides()); got != tt.want {
			t.Errorf("%s: overrides %s, want %s", tt.line, got, tt.want)
		}
		again, err := ParseFlags(s.Args())
		if err != nil || renderJSON(again.ModelOverrides()) != tt.want {
			t.Errorf("%s: rendered %q, read back %v %v", tt.line, s.Args(), again.ModelOverrides(), err)
		}
		if len(s.NotModelled()) != 0 {
			t.Errorf("%s: not modelled %v", tt.line, s.NotModelled())
		}
	}
	for _, bad := range []string{`vllm serve m --hf-overrides '[1]'`, `vllm serve m --hf-overrides '{"a": '`, `vllm serve m --rope-scaling yarn`, `vllm serve m --hf-overrides.bad-key! 1`} {
		words, _ := SplitCommandLine(bad)
		if _, err := ParseCommand(words); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line", bad, err)
		}
	}
}

// EPLB's redundant experts: --eplb-config's num_redundant_experts, else
// the older --num-redundant-experts (0 is vLLM's default and a value);
// the key must be a whole number from 0.
func TestRedundantExperts(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"--num-redundant-experts", "0"}, 0},
		{[]string{"--num-redundant-experts", "32"}, 32},
		{[]string{"--eplb-config", `{"window_size": 1000}`, "--num-redundant-experts", "16"}, 16},
		{[]string{"--eplb-config", `{"num_redundant_experts": 32}`, "--num-redundant-experts", "16"}, 32},
	} {
		s, err := ParseFlags(append([]string{"--enable-eplb"}, tt.args...))
		if err != nil || s.RedundantExperts() != tt.want || !s.EPLB() {
			t.Errorf("%v: %d redundant experts, EPLB %t, %v; want %d", tt.args, s.RedundantExperts(), s.EPLB(), err, tt.want)
		}
	}
	for _, bad := range [][]string{{"--eplb-config", `{"num_redundant_experts": -1}`}, {"--eplb-config", `{"num_redundant_experts": "x"}`}, {"--num-redundant-experts", "-2"}} {
		if _, err := ParseFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// The linear-attention states' element sizes: --mamba-cache-dtype (auto:
// the model's --dtype) for the conv state, --mamba-ssm-cache-dtype (auto:
// the conv state's) for the SSM state.
func TestStateDtypeBytes(t *testing.T) {
	for _, tt := range []struct {
		args      []string
		conv, ssm int
	}{
		{nil, 2, 2},
		{[]string{"--mamba-ssm-cache-dtype", "float32"}, 2, 4},
		{[]string{"--mamba-cache-dtype", "float32"}, 4, 4},
		{[]string{"--dtype", "float32"}, 4, 4},
		{[]string{"--mamba_ssm_cache_dtype=float32", "--mamba-cache-dtype", "auto"}, 2, 4},
	} {
		s, err := ParseFlags(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		conv, ssm, err := s.StateDtypeBytes("bfloat16")
		if err != nil || conv != tt.conv || ssm != tt.ssm || len(s.NotModelled()) != 0 {
			t.Errorf("%v: conv %d B, SSM %d B, %v, not modelled %v; want %d, %d", tt.args, conv, ssm, err, s.NotModelled(), tt.conv, tt.ssm)
		}
	}
	if _, err := ParseFlags([]string{"--mamba-ssm-cache-dtype", "fp8"}); err == nil {
		t.Error("--mamba-ssm-cache-dtype fp8 read")
	}
}

// --mamba-cache-mode's state blocks a request keeps a Mamba layer (vLLM
// 0.16, #30877): none 1, align 2, all one every --mamba-block-size tokens
// (the block size by default); prefix caching off makes it none; the flag
// is outside releases before 0.16.
func TestMambaStateBlocks(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int64
	}{
		{nil, 1},
		{[]string{"--mamba-cache-mode", "none"}, 1},
		{[]string{"--mamba-cache-mode", "align"}, 2},
		{[]string{"--mamba-cache-mode", "all"}, 2048},
		{[]string{"--mamba-cache-mode", "all", "--mamba-block-size", "256"}, 128},
		{[]string{"--mamba-cache-mode", "all", "--no-enable-prefix-caching"}, 1},
	} {
		s, err := ParseFlags(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MambaStateBlocks(32768, 16); got != tt.want {
			t.Errorf("%v: %d state blocks, want %d", tt.args, got, tt.want)
		}
	}
	s, _ := ParseFlags([]string{"--mamba-cache-mode", "align"})
	s.Version = MustVersion("0.15.1")
	if out := s.OutsideRelease(); len(out) != 1 || out[0].Flag != FlagMambaCacheMode {
		t.Errorf("0.15.1: %v", out)
	}
	if _, err := ParseFlags([]string{"--mamba-cache-mode", "some"}); err == nil {
		t.Error("--mamba-cache-mode some read")
	}
}
