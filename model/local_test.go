package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func testdataFile(t *testing.T, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadLocal(t *testing.T) {
	llama := testdataFile(t, "configs", "meta-llama--Llama-3.1-8B-Instruct.json")
	index := testdataFile(t, "index", "Llama-3.1-8B-Instruct.model.safetensors.index.json")
	// Shards whose data section is missing: only headers may be read, so
	// the sizes come out all the same. twoTensors holds 32 bytes of data.
	shard := safetensorsFile(twoTensors, 0)
	fsys := fstest.MapFS{
		"indexed/config.json":                  {Data: llama},
		"indexed/model.safetensors.index.json": {Data: index},

		"shards/config.json":                      {Data: llama},
		"shards/model-00001-of-00002.safetensors": {Data: shard},
		"shards/model-00002-of-00002.safetensors": {Data: shard},
		"shards/README.md":                        {Data: []byte("not weights")},
		"shards/odd.safetensors/inner":            {Data: []byte("a directory, skipped")},

		"nototal/config.json":                  {Data: llama},
		"nototal/model.safetensors.index.json": {Data: []byte(`{"weight_map": {"a": "one.safetensors", "b": "two.safetensors", "c": "two.safetensors"}}`)},
		"nototal/one.safetensors":              {Data: shard},
		"nototal/two.safetensors":              {Data: safetensorsFile(`{"x": {"dtype": "BF16", "shape": [1000], "data_offsets": [0, 2000]}}`, 0)},

		"bare/config.json": {Data: llama},
	}
	tests := []struct {
		name   string
		bytes  int64
		source string
	}{
		{"indexed", 16_060_522_496, "model.safetensors.index.json total_size"},
		{"indexed/config.json", 16_060_522_496, "model.safetensors.index.json total_size"},
		{"shards", 64, "safetensors headers (2 files)"},    // 2 × 32
		{"nototal", 2032, "safetensors headers (2 files)"}, // 32 + 1000 × 2
		{"bare", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := LoadLocal(fsys, tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if s.CheckpointBytes != tt.bytes || s.CheckpointSource != tt.source || s.ID != tt.name {
				t.Errorf("got %d %q id %q; want %d %q id %q", s.CheckpointBytes, s.CheckpointSource, s.ID, tt.bytes, tt.source, tt.name)
			}
			if s.Layers != 32 || s.Architecture != "LlamaForCausalLM" {
				t.Errorf("config not read: %+v", shapeOf(s))
			}
		})
	}
}

func TestLoadLocalErrors(t *testing.T) {
	llama := testdataFile(t, "configs", "meta-llama--Llama-3.1-8B-Instruct.json")
	fsys := fstest.MapFS{
		"noconfig/model.safetensors":                {Data: safetensorsFile(twoTensors, 0)},
		"badconfig/config.json":                     {Data: []byte(`{"model_type": "llama"}`)},
		"badindex/config.json":                      {Data: llama},
		"badindex/model.safetensors.index.json":     {Data: []byte(`{"weight_map": {"a": "../x"}}`)},
		"missingshard/config.json":                  {Data: llama},
		"missingshard/model.safetensors.index.json": {Data: []byte(`{"weight_map": {"a": "gone.safetensors"}}`)},
		"badshard/config.json":                      {Data: llama},
		"badshard/model.safetensors":                {Data: []byte("tiny")},
	}
	tests := []struct{ name, want string }{
		{"nowhere", `cannot read model path "nowhere"`},
		{"noconfig", "noconfig/config.json does not exist: a model directory needs the config.json"},
		{"badconfig", "badconfig/config.json: config.json has no num_hidden_layers"},
		{"badindex", "badindex/model.safetensors.index.json: safetensors index maps"},
		{"missingshard", "missingshard/gone.safetensors"},
		{"badshard", "badshard/model.safetensors: safetensors file is shorter"},
	}
	for _, tt := range tests {
		_, err := LoadLocal(fsys, tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestLoadPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config.json", testdataFile(t, "configs", "Qwen--Qwen3-8B.json"))
	write("model.safetensors", safetensorsFile(twoTensors, 32))

	for _, p := range []string{dir, filepath.Join(dir, "config.json")} {
		s, err := LoadPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if s.ID != p || s.Layers != 36 || s.CheckpointBytes != 32 || s.CheckpointSource != "safetensors header (1 file)" {
			t.Errorf("%s: id %q layers %d bytes %d source %q", p, s.ID, s.Layers, s.CheckpointBytes, s.CheckpointSource)
		}
	}
	missing := filepath.Join(dir, "nope")
	if _, err := LoadPath(missing); err == nil || !strings.Contains(err.Error(), "no such file or directory") ||
		!strings.Contains(err.Error(), missing) {
		t.Errorf("err = %v", err)
	}
	write("broken.json", []byte("{"))
	if _, err := LoadPath(filepath.Join(dir, "broken.json")); err == nil ||
		!strings.Contains(err.Error(), filepath.Join(dir, "broken.json")+": config.json is not valid JSON") {
		t.Errorf("err = %v", err)
	}
}
