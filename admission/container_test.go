package admission

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/startup"
)

func TestReadLaunch(t *testing.T) {
	const llama = "meta-llama/Llama-3.1-8B-Instruct"
	tests := []struct {
		name       string
		c          corev1.Container
		vllm       bool
		model      string
		maxLen     int
		appendable bool
		shell      bool
		version    string
		err        string
	}{
		{name: "image entrypoint, flags in args", c: corev1.Container{Image: "vllm/vllm-openai:v0.9.2", Args: []string{"--model", llama, "--max-model-len=8192"}},
			vllm: true, model: llama, maxLen: 8192, appendable: true, version: "0.9.2"},
		// vLLM reads 32K as 32 × 1024 (and 32k as 32000).
		{name: "image entrypoint, positional model", c: corev1.Container{Image: "docker.io/vllm/vllm-openai:latest", Args: []string{llama, "--max-model-len", "32K"}},
			vllm: true, model: llama, maxLen: 32768, appendable: true},
		{name: "image from a mirror with a digest", c: corev1.Container{Image: "mirror.example.com/vllm/vllm-openai@sha256:0123", Args: []string{"--model", llama}},
			vllm: true, model: llama, appendable: true},
		{name: "vllm serve in command", c: corev1.Container{Image: "acme/llm:1", Command: []string{"vllm", "serve", llama}, Args: []string{"--max_model_len", "4096"}},
			vllm: true, model: llama, maxLen: 4096, appendable: true},
		{name: "python -m api_server", c: corev1.Container{Image: "acme/llm:1", Command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, Args: []string{"--model", llama}},
			vllm: true, model: llama, appendable: true},
		{name: "command in args, no command", c: corev1.Container{Image: "acme/llm:1", Args: []string{"/opt/venv/bin/vllm", "serve", llama}},
			vllm: true, model: llama, appendable: true},
		{name: "bare -- ends the options", c: corev1.Container{Image: "vllm/vllm-openai:v0.19.0", Args: []string{"--max-model-len", "4096", "--", llama}},
			vllm: true, model: llama, maxLen: 4096, appendable: false, version: "0.19.0"},
		{name: "sh -c script with exec", c: corev1.Container{Image: "acme/llm:1", Command: []string{"/bin/sh", "-c"}, Args: []string{"huggingface-cli download x && exec vllm serve " + llama + " --max-model-len 2048 | tee log"}},
			vllm: true, model: llama, maxLen: 2048, shell: true},
		{name: "bash -o pipefail -ec with python", c: corev1.Container{Image: "acme/llm:1", Command: []string{"bash", "-o", "pipefail", "-ec", "python3 -u -m vllm.entrypoints.openai.api_server --model " + llama}},
			vllm: true, model: llama, shell: true},
		{name: "shell without vLLM", c: corev1.Container{Image: "busybox", Command: []string{"sh", "-c", "sleep 3600"}}},
		{name: "another python module", c: corev1.Container{Image: "acme/llm:1", Command: []string{"python", "-m", "http.server"}}},
		{name: "vllm image running something else", c: corev1.Container{Image: "vllm/vllm-openai:v0.9.2", Command: []string{"sleep", "infinity"}}},
		{name: "not vLLM at all", c: corev1.Container{Image: "nginx:1.27"}},
		{name: "a vLLM image lookalike", c: corev1.Container{Image: "acme/vllm/vllm-openai-fork:1", Args: []string{"--model", llama}}},
		{name: "bad flag in a shell script", c: corev1.Container{Image: "acme/llm:1", Command: []string{"sh", "-c", "vllm serve m --max-model-len lots"}},
			vllm: true, err: "max-model-len"},
		// A vLLM command whose flags are wrong is still vLLM: the error is
		// reported, not mistaken for another program.
		{name: "bad flag value", c: corev1.Container{Image: "vllm/vllm-openai:v0.9.2", Args: []string{"--model", llama, "--max-model-len", "$(MAX_LEN)"}},
			vllm: true, err: "max-model-len"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, ok, err := readLaunch(tc.c, nil)
			if ok != tc.vllm {
				t.Fatalf("vLLM = %v, want %v", ok, tc.vllm)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			s := l.settings
			if s.Model != tc.model || s.MaxModelLen != tc.maxLen || l.appendable != tc.appendable || l.shell != tc.shell {
				t.Errorf("model %q maxLen %d appendable %v shell %v; want %q %d %v %v", s.Model, s.MaxModelLen, l.appendable, l.shell, tc.model, tc.maxLen, tc.appendable, tc.shell)
			}
			if got := s.Version; (tc.version == "") != got.IsZero() || (tc.version != "" && got.String() != tc.version) {
				t.Errorf("version %q, want %q", got, tc.version)
			}
		})
	}
}

func TestImageVersion(t *testing.T) {
	tests := map[string]string{
		"vllm/vllm-openai:v0.10.1.1":                      "0.10.1",
		"vllm/vllm-openai:0.8.5-cu128":                    "0.8.5",
		"vllm/vllm-openai:nightly":                        "",
		"vllm/vllm-openai":                                "",
		"registry:5000/vllm/vllm-openai:v0.9.0@sha256:ab": "0.9.0",
		"acme/vllm:v0.9.0":                                "0.9.0",
		"acme/llm-server:v0.9.0":                          "",
	}
	for image, want := range tests {
		v := imageVersion(image)
		got := ""
		if !v.IsZero() {
			got = v.String()
		}
		// 0.10.1.1 keeps its fourth part as a suffix; compare the release.
		if got != want && !strings.HasPrefix(got, want+".") {
			t.Errorf("imageVersion(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestProbeWarning(t *testing.T) {
	// Llama-3.1-8B's 16,060,522,496-byte checkpoint on one GPU, local
	// storage: 16.06 GB at 1 GB/s = 16.1 s -> 16 s of load; 30 + 16 + 60 =
	// 106 s expected, a window of twice that, 212 s.
	est := startup.Of(startup.Input{CheckpointBytes: 16060522496, RankWeightBytes: 16060522496, Ranks: 1})
	if est.Total != 106*time.Second || est.ProbeWindow() != 212*time.Second {
		t.Fatalf("estimate %s, window %s; want 1m46s and 3m32s", est.Total, est.ProbeWindow())
	}
	// A startup probe of 10 min covers it; a liveness probe alone of 30 s
	// does not, and the advice is a startup probe: ceil(212 / 10) = 22.
	long := corev1.Container{Name: "v", StartupProbe: &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 60}, LivenessProbe: &corev1.Probe{}}
	if w := probeWarning(long, est); w != "" {
		t.Errorf("10-minute startup probe warned: %s", w)
	}
	short := corev1.Container{Name: "v", LivenessProbe: &corev1.Probe{}}
	if w := probeWarning(short, est); !strings.Contains(w, "livenessProbe restarts it after 30s") || !strings.Contains(w, "add a startupProbe with periodSeconds 10 and failureThreshold 22") ||
		!strings.Contains(w, "about 1m46s (30s pod start + 16s reading 16 GB from local storage + 1m0s engine start)") {
		t.Errorf("warning %q", w)
	}
	// The advice passes the check: a startup probe of 22 × 10 s.
	fixed := corev1.Container{Name: "v", StartupProbe: &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 22}}
	if w := probeWarning(fixed, est); w != "" {
		t.Errorf("the advised probe warned: %s", w)
	}
	if w := probeWarning(corev1.Container{Name: "v"}, est); w != "" {
		t.Errorf("no probe, yet %q", w)
	}
	// From a network volume: 16,060,522,496 B / 131,072,000 B/s = 122.5 s
	// -> 123 s; 30 + 123 + 60 = 213 s, window 426 s; the 10-minute probe
	// still covers it, a 5-minute one (30 × 10 s) does not.
	st, bad := storageOf(map[string]string{AnnotationStorage: "network"}, "")
	net := startup.Of(startup.Input{CheckpointBytes: 16060522496, RankWeightBytes: 16060522496, Ranks: 1, Storage: st})
	five := corev1.Container{Name: "v", StartupProbe: &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 30}}
	if bad != "" || probeWarning(long, net) != "" || !strings.Contains(probeWarning(five, net), "set its failureThreshold to 43 or more") {
		t.Errorf("network storage: %q, %q", bad, probeWarning(five, net))
	}
	if st, bad := storageOf(map[string]string{AnnotationStorage: "nfs"}, startup.Network); st != startup.Network || !strings.Contains(bad, `unknown storage class "nfs"`) || !strings.Contains(bad, "the probe check assumes network") {
		t.Errorf("a bad storage annotation: %q", bad)
	}
}
