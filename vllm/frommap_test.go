package vllm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestFromMapKAITOTemplate(t *testing.T) {
	// The vllm: section of KAITO's v0.5.0 default inference_config.yaml
	// (docs/kaito.md §6: "vllm: {cpu-offload-gb: 0, swap-space: 4}").
	doc := "max_probe_steps: 6\nvllm:\n  cpu-offload-gb: 0\n  swap-space: 4\n"
	var cfg struct {
		VLLM map[string]any `json:"vllm"`
	}
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	got, err := FromMap(cfg.VLLM)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Extra: []string{"--swap-space", "4"}, Set: set("cpu-offload-gb", "swap-space")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestFromMap(t *testing.T) {
	doc := `
max-model-len: 4096
gpu_memory_utilization: 0.85
tensor-parallel-size: "2"
enforce-eager: "true"
kv-cache-memory: 16G
model: /workspace/vllm/weights
enable-prefix-caching: false
enable-lora: false
trust-remote-code: true
served-model-name: [a, b]
compilation-config: {level: 3}
allowed-origins: ["*"]
some-new-switch: true
override-pooler: -x
max-num-seqs:
dtype: ""
`
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	got, err := FromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Model:                "/workspace/vllm/weights",
		TensorParallelSize:   2,
		GPUMemoryUtilization: 0.85,
		MaxModelLen:          4096,
		EnforceEager:         true,
		KVCacheMemoryBytes:   16 << 30, // 16G = 16 × 2^30
		// Keys in sorted order. enable-prefix-caching is on by default in
		// V1, so false is written out; enable-lora false is the default.
		Extra: []string{
			"--allowed-origins", `["*"]`,
			"--compilation-config", `{"level":3}`,
			"--no-enable-prefix-caching",
			"--override-pooler=-x",
			"--served-model-name", "a", "b",
			"--some-new-switch",
			"--trust-remote-code",
		},
		Set: set("model", "tensor-parallel-size", "gpu-memory-utilization", "max-model-len", "enforce-eager",
			"kv-cache-memory-bytes", "allowed-origins", "compilation-config", "enable-prefix-caching", "enable-lora",
			"override-pooler", "served-model-name", "some-new-switch", "trust-remote-code"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestFromMapNoEnforceEager(t *testing.T) {
	got, err := FromMap(map[string]any{"no-enforce-eager": false})
	if err != nil {
		t.Fatal(err)
	}
	if !got.EnforceEager || !got.Set[FlagEnforceEager] {
		t.Errorf("no-enforce-eager: false gave %+v, want eager mode on", got)
	}
}

func TestFromMapErrors(t *testing.T) {
	tests := []struct {
		json string
		want []string
	}{
		{`{"max-model-len": 0.5}`, []string{"--max-model-len", `"0.5"`}},
		{`{"max-model-len": true}`, []string{"--max-model-len", `"true"`}},
		{`{"max-model-len": 1e10}`, []string{"--max-model-len", `"10000000000"`}},
		{`{"tensor-parallel-size": [2]}`, []string{"--tensor-parallel-size", "list"}},
		{`{"gpu-memory-utilization": {"a": 1}}`, []string{"--gpu-memory-utilization", "map"}},
		{`{"trust-remote-code": "perhaps"}`, []string{"--trust-remote-code", `"perhaps"`, "true or false"}},
		{`{"served-model-name": ["a", null]}`, []string{"--served-model-name", "null"}},
		{`{"served-model-name": ["--x"]}`, []string{"--served-model-name", "reads as a flag"}},
		{`{"": 1}`, []string{`key ""`, "not a flag name"}},
		{`{"max-model-len=4096": 1}`, []string{"not a flag name"}},
	}
	for _, tt := range tests {
		var m map[string]any
		if err := json.Unmarshal([]byte(tt.json), &m); err != nil {
			t.Fatal(err)
		}
		_, err := FromMap(m)
		if err == nil {
			t.Errorf("FromMap(%s): no error", tt.json)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("FromMap(%s) = %q, want it to mention %q", tt.json, err, w)
			}
		}
	}
}

// TestToMapRoundTrip: the vllm: section ToMap writes for a command's flags
// reads back, through YAML as KAITO reads its ConfigMap, to the settings
// the flags parse to; switches are true, numbers typed.
func TestToMapRoundTrip(t *testing.T) {
	args := []string{"--max-model-len", "8192", "--gpu-memory-utilization", "0.9", "--enable-prefix-caching",
		"--kv-cache-dtype", "fp8", "--served-model-name", "llama", "llama-8b", "--compilation-config", `{"level": 3}`,
		"--seed=-1", "--enforce-eager"}
	m := ToMap(args)
	want := map[string]any{"max-model-len": int64(8192), "gpu-memory-utilization": 0.9, "enable-prefix-caching": true,
		"kv-cache-dtype": "fp8", "served-model-name": []any{"llama", "llama-8b"}, "compilation-config": `{"level": 3}`,
		"seed": int64(-1), "enforce-eager": true}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("ToMap = %#v\nwant %#v", m, want)
	}
	doc, err := yaml.Marshal(map[string]any{"vllm": m})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		VLLM map[string]any `json:"vllm"`
	}
	if err := yaml.Unmarshal(doc, &cfg); err != nil {
		t.Fatal(err)
	}
	got, err := FromMap(cfg.VLLM)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	// FromMap reads keys in sorted order, so Extra may come in another
	// order; the same flags with the same values is what counts.
	gotExtra, wantExtra := extraByFlag(got.Extra), extraByFlag(parsed.Extra)
	got.Extra, parsed.Extra = nil, nil
	if !reflect.DeepEqual(got, parsed) || !reflect.DeepEqual(gotExtra, wantExtra) {
		t.Errorf("FromMap(ToMap(args)) = %+v %v\nwant %+v %v\n%s", got, gotExtra, parsed, wantExtra, doc)
	}
}

// extraByFlag groups Extra's words by the flag they follow, an attached
// value (--seed=-1) as one that follows.
func extraByFlag(extra []string) map[string][]string {
	out := map[string][]string{}
	flag := ""
	for _, w := range extra {
		if isFlag(w) {
			var v string
			var attached bool
			flag, v, attached = strings.Cut(w, "=")
			out[flag] = []string{}
			if attached {
				out[flag] = append(out[flag], v)
			}
			continue
		}
		out[flag] = append(out[flag], w)
	}
	return out
}
