package vllm

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sane checks what any successfully parsed Settings must satisfy.
func sane(t *testing.T, s Settings) {
	t.Helper()
	for _, n := range []int{s.TensorParallelSize, s.PipelineParallelSize, s.DataParallelSize, s.MaxNumSeqs, s.MaxNumBatchedTokens, s.BlockSize, s.MaxCudagraphCaptureSize} {
		if n < 0 {
			t.Fatalf("negative count in %+v", s)
		}
	}
	if s.MaxModelLen < AutoMaxModelLen {
		t.Fatalf("max-model-len %d", s.MaxModelLen)
	}
	if u := s.GPUMemoryUtilization; u < 0 || u > 1 || math.IsNaN(u) {
		t.Fatalf("utilization %v", u)
	}
	if c := s.CPUOffloadGiB; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		t.Fatalf("cpu offload %v", c)
	}
	if s.KVCacheMemoryBytes < 0 {
		t.Fatalf("kv cache memory %d", s.KVCacheMemoryBytes)
	}
	for k := range s.Set {
		if k == "" {
			t.Fatalf("Set holds %q", k)
		}
	}
}

// withoutSet drops Set: a flag given with its zero value (--cpu-offload-gb
// 0) is not rendered, so only the values survive a round trip.
func withoutSet(s Settings) Settings {
	s.Set = nil
	return s
}

func FuzzParseCommand(f *testing.F) {
	for _, line := range []string{
		"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --tensor-parallel-size=2 -tp 2 --gpu-memory-utilization 0.92 --enforce-eager",
		"python3 -u -m vllm.entrypoints.openai.api_server --model m -q awq -O3 --served-model-name a b",
		"A=1 vllm serve m --max_model_len=32K --kv-cache-memory 20G --cpu-offload-gb 0 --no-enforce-eager -- x",
		"--model m --max-model-len -1 --swap-space 4 --trust-remote-code",
		"vllm serve m -qfp8 -O.level=3 --compilation-config.mode 3 --enforce-eager=false",
		`vllm serve m --compilation-config {"cudagraph_mode":"PIECEWISE","cudagraph_capture_sizes":[1,2,2048]} --cuda-graph-sizes 8 16 --compilation-config.cudagraph_mode=full`,
		`vllm serve m --enable-lora --max-loras 4 --speculative-config {"method":"ngram","num_speculative_tokens":3} --speculative-config.draft_tensor_parallel_size 1 --limit-mm-per-prompt image=2 --device-memory-utilization 0.9`,
		`vllm serve m --hf-overrides {"rope_scaling":{"rope_type":"yarn","factor":4}} --hf-overrides.max_position_embeddings 65536 --rope-scaling {"rope_type":"linear","factor":2}`,
		`vllm serve m --enable-expert-parallel --enable-eplb --eplb-config {"num_redundant_experts":32} --num-redundant-experts 0 --disable-sliding-window`,
		"vllm serve m --stream-interval 10 --stream-interval=0x10",
	} {
		f.Add(strings.ReplaceAll(line, " ", "\n"))
	}
	f.Fuzz(func(t *testing.T, line string) {
		// Words are separated by newlines so that fuzzed words may hold
		// spaces; the same text is also read as a pasted one-liner.
		roundTrip(t, strings.Split(line, "\n"))
		if words, err := SplitCommandLine(line); err == nil {
			roundTrip(t, words)
		}
		// The same line with a --config file of flags spliced in: the
		// file's flags before the line's, and what comes back still
		// renders to the same settings.
		words := append(strings.Split(line, "\n"), "--config", "c.yaml")
		s, err := ParseCommandWith(words, func(string) ([]byte, error) {
			return []byte("max-model-len: 4096\nenforce-eager: true\ncuda-graph-sizes: [1, 2]\nserved-model-name: x\nenable-chunked-prefill: false"), nil
		})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		sane(t, s)
		if s.ConfigFile == nil || slices.Contains(s.Extra, "--config") {
			t.Fatalf("the --config of %q: file %+v, extra %q", words, s.ConfigFile, s.Extra)
		}
		roundTrip(t, append([]string{"vllm", "serve"}, s.Args()...))
	})
}

// roundTrip checks that parsed settings are sane and survive
// CommandLine → SplitCommandLine → ParseCommand.
func roundTrip(t *testing.T, args []string) {
	t.Helper()
	s, err := ParseCommand(args)
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans lines: %q", err)
		}
		return
	}
	sane(t, s)
	rendered := s.CommandLine()
	words, err := SplitCommandLine(rendered)
	if err != nil {
		t.Fatalf("SplitCommandLine(CommandLine()) = %v for %q", err, rendered)
	}
	s2, err := ParseCommand(words)
	if err != nil {
		t.Fatalf("ParseCommand(CommandLine()) = %v for %q (from %q)", err, rendered, args)
	}
	if !reflect.DeepEqual(withoutSet(s), withoutSet(s2)) {
		t.Fatalf("round trip of %q through %q\n got %+v\nwant %+v", args, rendered, s2, s)
	}
	for k := range s2.Set {
		if !s.Set[k] {
			t.Fatalf("round trip invented flag %q", k)
		}
	}
}

func FuzzSplitCommandLine(f *testing.F) {
	f.Add("vllm serve m \\\n  --tp 2 \\\n  --chat-template '{{ x }}' \"$HOME/a b\"")
	f.Add("nohup vllm serve m > log 2>&1 &")
	f.Add(`--x "a \"b\" \\ \$X" 'it'\''s' # comment`)
	f.Add("vllm\u00a0serve m \\\r\n --tp 2 | tee")
	f.Fuzz(func(t *testing.T, line string) {
		words, err := SplitCommandLine(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellQuote(w)
		}
		again, err := SplitCommandLine(strings.Join(quoted, " "))
		if err != nil {
			t.Fatalf("re-split: %v", err)
		}
		if len(words) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(words, again) {
			t.Fatalf("split(quote(%q)) = %q", words, again)
		}
	})
}

// FuzzSplitScriptCommand: the first command of a script ends where it says:
// a word written there (as autofix writes flags) is its last word.
func FuzzSplitScriptCommand(f *testing.F) {
	f.Add("ray start --head; vllm serve m --tp 8 2>&1 | tee log\necho done")
	f.Add("vllm serve m \\\n  --pipeline_parallel_size 2 # nodes\nwait")
	f.Add(`exec vllm serve "a b" 'c;d' > /tmp/log &`)
	f.Fuzz(func(t *testing.T, script string) {
		words, end, err := SplitScriptCommand(script)
		if err != nil || len(words) == 0 {
			return
		}
		if end < 0 || end > len(script) {
			t.Fatalf("end %d outside %d bytes", end, len(script))
		}
		again, _, err := SplitScriptCommand(script[:end] + " --x=1" + script[end:])
		if want := append(slices.Clone(words), "--x=1"); err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("%q with a word at %d: %q, want %q (%v)", script, end, again, want, err)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"0.19.0", "v0.11.0+cu128", "0.19.1rc1", "0.10.1.1", "1", "0..1", "V0.8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("negative part in %+v", v)
		}
		again, err := ParseVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("ParseVersion(%q) = %+v, %v; want %+v", v.String(), again, err, v)
		}
	})
}

func FuzzFromMapJSON(f *testing.F) {
	f.Add(`{"cpu-offload-gb": 0, "swap-space": 4}`)
	f.Add(`{"max-model-len": 4096, "gpu_memory_utilization": 0.85, "enforce-eager": "true", "enable-prefix-caching": false}`)
	f.Add(`{"served-model-name": ["a", "b"], "compilation-config": {"level": 3}, "model": "/w", "kv-cache-memory": "16G"}`)
	f.Add(`{"tensor-parallel-size": [2], "x": null, "y": -1}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var m map[string]any
		if json.Unmarshal([]byte(doc), &m) != nil {
			return
		}
		s, err := FromMap(m)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		sane(t, s)
		args := s.Args()
		if s.Model != "" {
			args = append([]string{"--model=" + s.Model}, args...)
		}
		s2, err := ParseFlags(args)
		if err != nil {
			t.Fatalf("ParseFlags(Args()) = %v for %q", err, args)
		}
		if !reflect.DeepEqual(withoutSet(s), withoutSet(s2)) {
			t.Fatalf("FromMap(%s) and ParseFlags(%q) differ\n got %+v\nwant %+v", doc, args, s2, s)
		}
	})
}

// FuzzParseRelease: a release taken is one ParseVersion takes back, at or
// after vLLM's first release; an error is one line.
func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"0.33.0", "0.34.0rc1", "0.0.0", "5", "1e308", "99.99.99", "0.19.1rc2.dev153+g1b2c3d4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRelease(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseRelease(%q): a multi-line error %q", s, err)
			}
			return
		}
		if v.Compare(oldestRelease) < 0 {
			t.Fatalf("ParseRelease(%q) = %v, before vLLM's first release", s, v)
		}
		if again, err := ParseRelease(v.String()); err != nil || again != v {
			t.Fatalf("ParseRelease(%q) = %v, and %v again: %v, %v", s, v, v, again, err)
		}
	})
}
