package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/traffic"
)

// FuzzRead feeds any text through every reader (vLLM lines, OOM text,
// nvidia-smi, Prometheus, describe, request lines, commands, manifests)
// and the diagnosis: nothing panics, and every finding is well formed.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.*"))
	more, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "*"))
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, true)
		}
	}
	f.Add([]byte("| NVIDIA-SMI 550 |\n|   0  NVIDIA H100 80GB HBM3  On |\n"), false)
	f.Add([]byte("# gpu fb\n 0 x\n"), false)
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- kind: List\n  items: []\n"), false)
	f.Add([]byte("non-default args: {'max_model_len': {'a': [1, (2, {3: 4})]}, 'model': 'Qwen/Qwen3-8B'"), true)
	// A --config file in a ConfigMap of the same input.
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f}\ndata: {c.yaml: 'max-model-len: 9'}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: v, image: vllm/vllm-openai, args: [m, --config, /c/c.yaml], volumeMounts: [{name: f, mountPath: /c}]}\n      volumes: [{name: f, configMap: {name: f}}]\n"), false)
	// kubectl describe of a pod whose --config comes from a projected
	// volume's ConfigMaps.
	f.Add([]byte("Name: p\nContainers:\n  v:\n    Image: vllm/vllm-openai:v0.19.0\n    Args:\n      m\n      --config\n      /c/c.yaml\n    Mounts:\n      /c from f (ro,path=\"c.yaml\")\nVolumes:\n  f:\n    Type: Projected (a volume that contains injected data from multiple sources)\n    ConfigMapName: f\n"), false)
	h100, _ := gpu.Resolve("H100-80GB")
	f.Fuzz(func(t *testing.T, data []byte, withGPU bool) {
		ev, err := NewEvidence(traffic.Options{Window: traffic.DefaultWindow})
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Read(context.Background(), "fuzz", bytes.NewReader(data)); err != nil {
			return
		}
		opt := Options{ResolveModel: catalogModel}
		if withGPU {
			opt.GPU, opt.HasGPU = h100, true
		}
		d := Diagnose(ev, opt)
		for _, fd := range d.Findings {
			if fd.Code == "" || fd.Confidence <= 0 || fd.Confidence > confidenceCap || len(fd.Reasons) == 0 || fd.Remedies == nil {
				t.Fatalf("finding %+v", fd)
			}
		}
		for _, l := range ev.OOMs {
			if l.OOM.Tried < 0 || l.OOM.Total < 0 || l.Line.Line <= 0 {
				t.Fatalf("OOM %+v", l)
			}
		}
	})
}

// FuzzParsePyDict: the settings reader never panics or loops, on any text.
func FuzzParsePyDict(f *testing.F) {
	f.Add("{'model': 'x', 'max_model_len': 8192, 'gpu_memory_utilization': 0.95}")
	f.Add("{'a': <Enum.X: 'x'>, 'b': [1, 2, (3,)], 'c': {'d': None}}")
	f.Add("{'unterminated: 'x")
	f.Add("model='x', dtype=torch.bfloat16, max_seq_len=8192, cfg={\"a\": [1,")
	f.Add("{)(}][")
	f.Fuzz(func(t *testing.T, s string) {
		if m, ok := parsePyDict(s); ok && m == nil {
			t.Fatal("ok with a nil map")
		}
		parseKeywords(s)
		settingsFromMap(parseKeywords(s))
	})
}
