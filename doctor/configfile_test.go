package doctor

import (
	"context"
	"strings"
	"testing"

	"headroom.dev/headroom/traffic"
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
	read := func(inputs ...string) *Evidence {
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
