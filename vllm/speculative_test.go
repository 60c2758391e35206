package vllm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The configs are the ones published start-ups and vLLM's docs pass
// (memory/testdata/features/README.md names them).
func TestParseSpeculativeConfig(t *testing.T) {
	for _, tt := range []struct {
		raw          string
		method       SpecMethod
		model        string
		k            int
		needsModel   bool
		onGPU        bool
		lookaheadAt3 int
	}{
		// The example: a 0.5B draft, method inferred.
		{`{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}`, SpecDraftModel, "Qwen/Qwen2.5-0.5B-Instruct", 5, true, true, 3},
		// Row 204: n-gram on one L4.
		{`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}`, SpecNgram, "", 3, false, false, 0},
		// Row 202: MTP from the target's own checkpoint.
		{`{"method":"mtp","num_speculative_tokens":2}`, SpecMTP, "", 2, false, true, 3},
		// Row 225: a per-model MTP name, renamed.
		{`{"method":"qwen3_5_mtp","num_speculative_tokens":1}`, SpecMTP, "", 1, false, true, 3},
		{`{"method":"deepseek_mtp"}`, SpecMTP, "", 0, false, true, 3},
		// Row 214: method eagle with an EAGLE-3 head stays eagle.
		{`{"method": "eagle", "model": "RedHatAI/gemma-4-26B-A4B-it-speculator.eagle3", "num_speculative_tokens": 3}`, SpecEagle, "RedHatAI/gemma-4-26B-A4B-it-speculator.eagle3", 3, true, true, 3},
		// Without a method the head's name decides.
		{`{"model":"yuhuili/EAGLE-LLaMA3.1-Instruct-8B","num_speculative_tokens":4}`, SpecEagle, "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", 4, true, true, 3},
		{`{"model":"RedHatAI/Qwen3-8B-speculator.eagle3","num_speculative_tokens":3}`, SpecEagle3, "RedHatAI/Qwen3-8B-speculator.eagle3", 3, true, true, 3},
		{`{"model":"z-lab/Qwen3-8B-DFlash-b16","num_speculative_tokens":15}`, SpecDFlash, "z-lab/Qwen3-8B-DFlash-b16", 15, true, true, 4},
		{`{"model":"ngram","num_speculative_tokens":3}`, SpecNgram, "", 3, false, false, 0},
		{`{"model":"my_pkg.proposers.Lookup","num_speculative_tokens":2}`, SpecCustomClass, "my_pkg.proposers.Lookup", 2, false, true, 3},
		{`{"method":"suffix"}`, SpecSuffix, "", 0, false, false, 0},
		{`{"method":"[ngram]","num_speculative_tokens":2}`, SpecNgram, "", 2, false, false, 0},
	} {
		c, err := ParseSpeculativeConfig("--speculative-config", tt.raw)
		if err != nil {
			t.Errorf("%s: %v", tt.raw, err)
			continue
		}
		if c.Method != tt.method || c.Model != tt.model || c.NumSpeculativeTokens != tt.k {
			t.Errorf("%s: method %s model %q k %d; want %s %q %d", tt.raw, c.Method, c.Model, c.NumSpeculativeTokens, tt.method, tt.model, tt.k)
		}
		if c.NeedsDraftModel() != tt.needsModel || c.ProposesOnGPU() != tt.onGPU || c.LookaheadTokens(3) != tt.lookaheadAt3 {
			t.Errorf("%s: needs model %v, on GPU %v, lookahead(3) %d; want %v %v %d", tt.raw, c.NeedsDraftModel(), c.ProposesOnGPU(), c.LookaheadTokens(3), tt.needsModel, tt.onGPU, tt.lookaheadAt3)
		}
		if c.String() != tt.raw {
			t.Errorf("%s: rendered as %q", tt.raw, c.String())
		}
	}
}

func TestSpeculativeKeys(t *testing.T) {
	c, err := ParseSpeculativeConfig("--speculative-config", `{"method":"draft_model","model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":1,"use_heterogeneous_vocab":true,"draft_tensor_parallel_size":1,"quantization":"fp8","kv_cache_dtype":"fp8","max_model_len":4096,"revision":"main"}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.DraftTensorParallelSize != 1 || c.Quantization != "fp8" || c.KVCacheDtype != "fp8" || c.MaxModelLen != 4096 {
		t.Errorf("typed keys: %+v", c)
	}
	if want := []string{"revision", "use_heterogeneous_vocab"}; !reflect.DeepEqual(c.Ignored, want) {
		t.Errorf("ignored keys %q, want %q", c.Ignored, want)
	}
}

func TestSpeculativeErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`{"method":"ngram","num_speculative_tokens":0}`:   "from 1 to 256",
		`{"method":"ngram","num_speculative_tokens":"3"}`: `num_speculative_tokens is "3"`,
		`{"method":"ngram","num_speculative_tokens":2.5}`: "whole number",
		`{"method":"lookahead"}`:                          "not one vLLM knows",
		`{"method":"eagle"}`:                              "needs a draft checkpoint",
		`{"num_speculative_tokens":3}`:                    "neither method nor model",
		`{"model":"m","tensor_parallel_size":2}`:          "draft_tensor_parallel_size",
		`["ngram"]`:                                       "not a JSON object",
		`{"method":"ngram"`:                               "not JSON",
		`{"method":"ngram"} {}`:                           "text after",
		`$SPEC`:                                           "variable",
		`{"method":"ngram","prompt_lookup_min":5,"prompt_lookup_max":2}`: "above prompt_lookup_max",
		``: "needs a JSON object",
	} {
		_, err := ParseSpeculativeConfig("--speculative-config", raw)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", raw, err, want)
		}
	}
}

// WithDraftType infers from the draft's config what the name could not.
func TestWithDraftType(t *testing.T) {
	c, err := ParseSpeculativeConfig("f", `{"model":"org/some-draft","num_speculative_tokens":2}`)
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]SpecMethod{"medusa": SpecMedusa, "mlp_speculator": SpecMLPSpeculator, "deepseek_mtp": SpecMTP, "qwen2": SpecDraftModel} {
		if got := c.WithDraftType(typ).Method; got != want {
			t.Errorf("draft type %s: %s, want %s", typ, got, want)
		}
	}
	given, _ := ParseSpeculativeConfig("f", `{"method":"draft_model","model":"org/m","num_speculative_tokens":2}`)
	if got := given.WithDraftType("medusa").Method; got != SpecDraftModel {
		t.Errorf("a method given changed to %s", got)
	}
}

// The flag on a command line: JSON, dotted keys, a KAITO map, and the
// rendering back.
func TestSpeculativeFlag(t *testing.T) {
	s, err := ParseCommand(strings.Fields(`vllm serve Qwen/Qwen2.5-7B-Instruct --speculative_config {"method":"ngram","num_speculative_tokens":3} --max-model-len 4096`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Speculative == nil || s.Speculative.Method != SpecNgram || !s.Set[FlagSpeculativeConfig] || len(s.Extra) != 0 {
		t.Fatalf("parsed %+v (extra %q)", s.Speculative, s.Extra)
	}
	if got := s.CommandLine(); got != `vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --speculative-config '{"method":"ngram","num_speculative_tokens":3}'` {
		t.Errorf("rendered %s", got)
	}

	d, err := ParseCommand(strings.Fields(`vllm serve m --speculative-config.method mtp --speculative-config.num_speculative_tokens=2`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Speculative == nil || d.Speculative.Method != SpecMTP || d.Speculative.NumSpeculativeTokens != 2 || len(d.Extra) != 0 {
		t.Fatalf("dotted keys: %+v, extra %q", d.Speculative, d.Extra)
	}
	if got := d.Speculative.String(); got != `{"method":"mtp","num_speculative_tokens":2}` {
		t.Errorf("dotted keys merged as %s", got)
	}

	var m map[string]any
	if err := json.Unmarshal([]byte(`{"speculative-config": {"method": "eagle3", "model": "h", "num_speculative_tokens": 3}}`), &m); err != nil {
		t.Fatal(err)
	}
	k, err := FromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	if k.Speculative == nil || k.Speculative.Method != SpecEagle3 || k.Speculative.NumSpeculativeTokens != 3 {
		t.Fatalf("from a map: %+v", k.Speculative)
	}
	if _, err := ParseCommand(strings.Fields(`vllm serve m --speculative-config {"method":"nope"}`)); err == nil {
		t.Error("a bad method parsed")
	}
}

func TestSpeculativeForcesRunnerV1(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"method":"ngram","num_speculative_tokens":3}`:                     true,
		`{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":1}`: true,
		`{"method":"suffix"}`:                                                       true,
		`{"method":"mtp","num_speculative_tokens":1}`:                               false,
		`{"method":"eagle3","model":"h","num_speculative_tokens":3}`:                false,
		`{"method":"eagle","model":"h","parallel_drafting":true}`:                   true,
		`{"model":"z-lab/Qwen3-8B-DFlash-b16","num_speculative_tokens":15}`:         false,
		`{"method":"medusa","model":"FasterDecoding/medusa-vicuna-7b-v1.3"}`:        true,
		`{"method":"extract_hidden_states","model":"h","num_speculative_tokens":1}`: false,
	} {
		c, err := ParseSpeculativeConfig("f", raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := SpeculativeForcesRunnerV1(c, 1); got != want {
			t.Errorf("%s: forces V1 %v, want %v", raw, got, want)
		}
	}
	e3, _ := ParseSpeculativeConfig("f", `{"method":"eagle3","model":"h","num_speculative_tokens":3}`)
	if !SpeculativeForcesRunnerV1(e3, 2) {
		t.Error("EAGLE-3 under pipeline parallelism stays on Model Runner V2")
	}
	if SpeculativeForcesRunnerV1(nil, 1) {
		t.Error("no speculative config forces V1")
	}
}

func FuzzSpeculativeConfig(f *testing.F) {
	for _, seed := range []string{
		`{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}`,
		`{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}`,
		`{"method":"mtp","num_speculative_tokens":2,"draft_tensor_parallel_size":1}`,
		`{"method":"eagle","model":"x.eagle3","parallel_drafting":true,"kv_cache_dtype":"fp8"}`,
		`{"model":"a.b.C"}`,
		`{"method":"deepseek_mtp","x":{"y":[1,2]}}`,
		`[1]`,
		`{"num_speculative_tokens":1e3}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := ParseSpeculativeConfig("--speculative-config", raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if c.NumSpeculativeTokens < 0 || c.NumSpeculativeTokens > MaxSpeculativeTokens || c.DraftTensorParallelSize < 0 {
			t.Fatalf("out of bounds: %+v", c)
		}
		known := false
		for _, m := range specMethods {
			known = known || m == c.Method
		}
		if !known {
			t.Fatalf("method %q", c.Method)
		}
		again, err := ParseSpeculativeConfig("--speculative-config", c.String())
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-parse of %q: %+v, %v; want %+v", c.String(), again, err, c)
		}
		// On a command line it survives rendering and parsing again.
		roundTrip(t, []string{"vllm", "serve", "m", "--speculative-config", raw})
	})
}
