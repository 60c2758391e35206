package vllm

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recipeConfig is a config.yaml of the kind public gpt-oss serving recipes
// pass with --config: async scheduling, no prefix caching, CUDA graphs up
// to 2,048 tokens, the concurrency left to --max-num-seqs on the line.
const recipeConfig = `compilation-config: '{"cudagraph_mode":"PIECEWISE"}'
async-scheduling: true
no-enable-prefix-caching: true
cuda-graph-sizes: 2048
max-num-batched-tokens: 8192
max-model-len: 10240
`

func TestConfigFileArgs(t *testing.T) {
	cf, err := ConfigFileArgs([]byte(recipeConfig))
	if err != nil {
		t.Fatal(err)
	}
	// vLLM's loader: the file's order, a true boolean as the bare flag,
	// every other value after its flag as written.
	want := []string{"--compilation-config", `{"cudagraph_mode":"PIECEWISE"}`, "--async-scheduling", "--no-enable-prefix-caching",
		"--cuda-graph-sizes", "2048", "--max-num-batched-tokens", "8192", "--max-model-len", "10240"}
	if !slices.Equal(cf.Flags, want) {
		t.Fatalf("flags %q, want %q", cf.Flags, want)
	}

	for _, c := range []struct {
		name, yaml string
		flags      []string
		dropped    []string
	}{
		// PyYAML (YAML 1.1) reads a plain yes as true; quoted it is text.
		{"yaml 1.1 booleans", "enforce-eager: yes\ntrust-remote-code: on\nserved-model-name: 'yes'", []string{"--enforce-eager", "--trust-remote-code", "--served-model-name", "yes"}, nil},
		{"false is dropped", "enable-chunked-prefill: false\nmax-num-seqs: 16", []string{"--max-num-seqs", "16"}, []string{"enable-chunked-prefill"}},
		{"a list", "cuda-graph-sizes: [1, 2, 4]\nserved-model-name: []", []string{"--cuda-graph-sizes", "1", "2", "4"}, nil},
		{"a mapping as JSON", "speculative-config:\n  method: ngram\n  num_speculative_tokens: 3", []string{"--speculative-config", `{"method":"ngram","num_speculative_tokens":3}`}, nil},
		{"snake case and a model", "model: Qwen/Qwen3-8B\nmax_model_len: 8192", []string{"--model", "Qwen/Qwen3-8B", "--max_model_len", "8192"}, nil},
		{"empty", "", nil, nil},
		{"only a comment", "# nothing\n", nil, nil},
	} {
		cf, err := ConfigFileArgs([]byte(c.yaml))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(cf.Flags, c.flags) || !slices.Equal(cf.Dropped, c.dropped) {
			t.Errorf("%s: flags %q dropped %q, want %q and %q", c.name, cf.Flags, cf.Dropped, c.flags, c.dropped)
		}
	}

	for _, c := range []struct{ name, yaml, says string }{
		{"a list at the top", "- max-model-len\n- 8192", "not a mapping"},
		{"not YAML", "a: [", "not YAML"},
		{"null value", "max-model-len:", "has no value"},
		{"a config in a config", "config: other.yaml", "names another"},
		{"a key with a space", "max model len: 8192", "not a flag name"},
		{"too large", "max-model-len: 8192\n" + strings.Repeat("#", MaxConfigFileBytes), "more than the"},
	} {
		_, err := ConfigFileArgs([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.says)
		}
	}
}

func TestParseCommandWithConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(recipeConfig+"max-num-seqs: 256\ntensor-parallel-size: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }

	// The recipes' line: the concurrency as --max-num-seqs on the line
	// wins over the file's, the file's TP holds where the line has none.
	line := []string{"vllm", "serve", "openai/gpt-oss-120b", "--config", path, "--max-num-seqs", "16", "--gpu-memory-utilization", "0.9"}
	s, err := ParseCommandWith(line, read)
	if err != nil {
		t.Fatal(err)
	}
	if s.Model != "openai/gpt-oss-120b" || s.MaxNumSeqs != 16 || s.TensorParallelSize != 2 || s.MaxModelLen != 10240 || s.MaxNumBatchedTokens != 8192 || s.GPUMemoryUtilization != 0.9 {
		t.Fatalf("settings %+v", s)
	}
	if s.ConfigFile == nil || s.ConfigFile.Path != path || slices.Contains(s.Extra, "--config") {
		t.Fatalf("config file %+v, extra %q", s.ConfigFile, s.Extra)
	}
	if !s.Set[FlagAsyncScheduling] || !AsyncScheduling(s) {
		t.Error("the file's async-scheduling was lost")
	}
	if !s.Set[FlagNoPrefixCaching] {
		t.Error("the file's no-enable-prefix-caching was lost")
	}
	if mode, size, err := s.graphConfig(); err != nil || size != 2048 || mode != "PIECEWISE" {
		t.Errorf("graphs %q up to %d (%v), want PIECEWISE up to 2048", mode, size, err)
	}
	// The rendered line holds the file's flags, so it stands without it.
	again, err := ParseCommand(splitOrDie(t, s.CommandLine()))
	if err != nil || again.MaxNumSeqs != 16 || again.TensorParallelSize != 2 || again.MaxModelLen != 10240 {
		t.Fatalf("rendered %q: %+v %v", s.CommandLine(), again, err)
	}

	// --config=FILE, and a model only in the file.
	if err := os.WriteFile(filepath.Join(dir, "m.yml"), []byte("model: Qwen/Qwen3-8B\nmax-model-len: 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = ParseCommandWith([]string{"vllm", "serve", "--config=" + filepath.Join(dir, "m.yml"), "--max-model-len", "8192"}, read)
	if err != nil || s.Model != "Qwen/Qwen3-8B" || s.MaxModelLen != 8192 {
		t.Fatalf("model from the file: %+v %v", s, err)
	}

	// Without a reader (the webhook, the web page) the flag stays as it is.
	s, err = ParseCommand(line)
	if err != nil || s.ConfigFile != nil || !slices.Contains(s.Extra, "--config") || s.TensorParallelSize != 0 {
		t.Fatalf("no reader: %+v %v", s, err)
	}

	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"missing file", []string{"vllm", "serve", "m", "--config", filepath.Join(dir, "none.yaml")}, "none.yaml: no such file"},
		{"not YAML by name", []string{"vllm", "serve", "m", "--config", "flags.json"}, ".yaml or .yml"},
		{"no value", []string{"vllm", "serve", "m", "--config"}, "needs a value"},
		{"twice", []string{"vllm", "serve", "m", "--config", "a.yaml", "--config", "b.yaml"}, "given twice"},
	} {
		_, err := ParseCommandWith(c.args, func(p string) ([]byte, error) {
			if strings.HasSuffix(p, "none.yaml") {
				return nil, errors.New("no such file")
			}
			return []byte("max-model-len: 8192"), nil
		})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.says)
		}
		// A file the reader cannot reach is told from one that is not flags.
		var unread *ConfigReadError
		if errors.As(err, &unread) != (c.name == "missing file") {
			t.Errorf("%s: %v is a ConfigReadError: %v", c.name, err, errors.As(err, &unread))
		}
	}

	// A bad value in the file names the file.
	_, err = ParseCommandWith([]string{"vllm", "serve", "m", "--config", "c.yaml"}, func(string) ([]byte, error) {
		return []byte("max-model-len: lots"), nil
	})
	if err == nil || !strings.Contains(err.Error(), "c.yaml") {
		t.Errorf("a bad value from the file: %v", err)
	}
}

func splitOrDie(t *testing.T, line string) []string {
	t.Helper()
	w, err := SplitCommandLine(line)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func FuzzConfigFileArgs(f *testing.F) {
	for _, s := range []string{recipeConfig, "enforce-eager: yes\nmax-num-seqs: [1, {a: b}]", "a: &x [1]\nb: *x", "- 1", "model: m\nspeculative-config: {method: ngram}", "k: ~", "x: !!binary aGk="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		cf, err := ConfigFileArgs([]byte(text))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		for _, a := range cf.Flags {
			if a == "--config" {
				t.Fatalf("a --config in a --config file's flags: %q", cf.Flags)
			}
		}
		if s, err := ParseFlags(cf.Flags); err == nil {
			sane(t, s)
		}
	})
}
