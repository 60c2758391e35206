package doctor

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/traffic"
	"headroom.dev/headroom/vllm"
)

// A Deployment whose vLLM line names --config /etc/vllm/serve.yaml, item
// serve.yaml of ConfigMap vllm-flags: the ConfigMap's flags join the
// container's settings whichever input comes first, as the webhook reads
// them from the cluster (the line's own flags win). Without the ConfigMap
// the line alone stays.
func TestConfigFileFromConfigMap(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: llama}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.19.0
        command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]
        args: [--config, /etc/vllm/serve.yaml, --max-num-seqs, "32"]
        volumeMounts: [{name: flags, mountPath: /etc/vllm}]
      volumes:
      - name: flags
        configMap: {name: vllm-flags, items: [{key: flags.yaml, path: serve.yaml}]}
`
	const configMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-flags}
data:
  flags.yaml: |
    max-model-len: 8192
    max-num-seqs: 256
`
	read := func(inputs ...string) *Evidence { return readOneContainer(t, inputs...) }
	for name, ev := range map[string]*Evidence{
		"ConfigMap after":  read(deployment, configMap),
		"ConfigMap before": read(configMap, deployment),
		"one file":         read(deployment + "---\n" + configMap),
	} {
		s := ev.K8s.Containers[0].Settings
		if s.MaxModelLen != 8192 || s.MaxNumSeqs != 32 || s.ConfigFile == nil || s.ConfigFile.Path != "/etc/vllm/serve.yaml" {
			t.Errorf("%s: max-model-len %d (the file's 8192), max-num-seqs %d (the line's 32), file %+v", name, s.MaxModelLen, s.MaxNumSeqs, s.ConfigFile)
		}
	}
	s := read(deployment).K8s.Containers[0].Settings
	if s.MaxModelLen != 0 || s.ConfigFile != nil || s.MaxNumSeqs != 32 {
		t.Errorf("without the ConfigMap: %+v", s)
	}
}

// `kubectl describe pod` of a vLLM container whose line names --config:
// its "Mounts:" and the pod's "Volumes:" say which ConfigMap holds the
// file, as kubectl prints them (a whole volume, a subPath, a projected
// volume's ConfigMaps), and the ConfigMap among the inputs gives the
// flags, the line's own winning. describe prints no items, so the file's
// key is its name.
func TestConfigFileFromDescribe(t *testing.T) {
	const head = `Name:             llama-7d9c-x2v
Namespace:        llm
Containers:
  vllm:
    Image:         vllm/vllm-openai:v0.19.0
    Args:
      meta-llama/Llama-3.1-8B-Instruct
      --config
      /etc/vllm/serve.yaml
      --max-num-seqs
      32
    Mounts:
`
	const configMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-flags}
data:
  serve.yaml: |
    max-model-len: 8192
    max-num-seqs: 256
  flags.yaml: |
    max-model-len: 4096
`
	for _, c := range []struct {
		name, mounts, volumes string
		want                  int
	}{
		{"the whole volume", "      /etc/vllm from flags (ro)\n", "  flags:\n    Type:      ConfigMap (a volume populated by a ConfigMap)\n    Name:      vllm-flags\n    Optional:  false\n", 8192},
		{"a subPath", "      /etc/vllm/serve.yaml from flags (ro,path=\"flags.yaml\")\n", "  flags:\n    Type:      ConfigMap (a volume populated by a ConfigMap)\n    Name:      vllm-flags\n    Optional:  false\n", 4096},
		{"a projected volume", "      /dev/shm from dshm (rw)\n      /etc/vllm from all (ro)\n", "  dshm:\n    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)\n    Medium:     Memory\n  all:\n    Type:                    Projected (a volume that contains injected data from multiple sources)\n    ConfigMapName:           other\n    ConfigMapOptional:       <nil>\n    ConfigMapName:           vllm-flags\n    ConfigMapOptional:       <nil>\n", 8192},
		{"another kind of volume", "      /etc/vllm from flags (ro)\n", "  flags:\n    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)\n", 0},
	} {
		describe := head + c.mounts + "Conditions:\n  Type              Status\n  Ready             False\nVolumes:\n" + c.volumes + "Events:  <none>\n"
		for order, inputs := range [][]string{{describe, configMap}, {configMap, describe}} {
			s := readOneContainer(t, inputs...).K8s.Containers[0].Settings
			if s.MaxModelLen != c.want || s.MaxNumSeqs != 32 {
				t.Errorf("%s (order %d): max-model-len %d, want %d; max-num-seqs %d (the line's 32)", c.name, order, s.MaxModelLen, c.want, s.MaxNumSeqs)
			}
		}
	}
}

// readOneContainer reads the inputs in order, as doctor's files, into
// evidence of one container.
func readOneContainer(t *testing.T, inputs ...string) *Evidence {
	t.Helper()
	ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		if err := ev.Read(context.Background(), "input"+string(rune('0'+i)), strings.NewReader(in)); err != nil {
			t.Fatal(err)
		}
	}
	if len(ev.K8s.Containers) != 1 {
		t.Fatalf("%d containers", len(ev.K8s.Containers))
	}
	return ev
}

// The flags that change the model vLLM serves reach the doctor's plan:
// Qwen3-8B at --max-model-len 131072 with Qwen's YaRN override is the
// model of 131,072 tokens vLLM derives (32,768 × 4), not the config's
// 40,960, which a plan would refuse.
func TestServedModelInDoctor(t *testing.T) {
	set, err := vllm.ParseFlags([]string{"Qwen/Qwen3-8B", "--max-model-len", "131072", "--hf-overrides",
		`{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}`})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := resolve(ev, Options{ResolveModel: catalogModel, Settings: set, HasSettings: true})
	if !d.hasSpec || d.spec.MaxPositions != 131072 {
		t.Errorf("the doctor's model: %t, %d tokens", d.hasSpec, d.spec.MaxPositions)
	}
}
