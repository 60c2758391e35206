package vllm

import (
	"strings"
	"testing"
)

// TestReadImage: official tags, vendors' tags, tags that name no release,
// and images that are not vLLM's.
func TestReadImage(t *testing.T) {
	for _, tc := range []struct {
		image, version string
		vllm, official bool
		note           string
	}{
		{"vllm/vllm-openai:v0.21.0", "0.21.0", true, true, "read from the image tag"},
		{"docker.io/vllm/vllm-openai:v0.10.1.1", "0.10.1.1", true, true, "read from the image tag"},
		{"registry:5000/vllm/vllm-openai:0.8.5-cu128@sha256:ab", "0.8.5", true, true, "read from the image tag"},
		{"vllm/vllm-openai:latest", "", true, true, "names no vLLM release"},
		{"vllm/vllm-openai", "", true, true, "(none) names no vLLM release"},
		{"rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", "0.8.5", true, false, "vendor image"},
		{"quay.io/acme/vllm:v0.20.0-cuda12", "0.20.0", true, false, "vendor image"},
		{"nvcr.io/nvidia/vllm:25.09-py3", "", true, false, "names no vLLM release"},
		{"rocm/vllm-dev:nightly", "", true, false, "names no vLLM release"},
		{"vllm/vllm-openai:v0.99.0", "0.99.0", true, true, "newer than the newest release these rules know"},
		{"vllm/vllm-openai:v1e308", "", true, true, "names no vLLM release"},
		{"vllm/vllm-openai:0.0.0", "", true, true, "names no vLLM release"},
		{"acme/llm-server:1.2.3", "", false, false, ""},
		{"", "", false, false, ""},
	} {
		r := ReadImage(tc.image)
		got := ""
		if !r.Version.IsZero() {
			got = r.Version.String()
		}
		if got != tc.version || r.VLLM != tc.vllm || r.Official != tc.official || !strings.Contains(r.Note, tc.note) {
			t.Errorf("ReadImage(%q) = %+v; want version %q vllm %t official %t note ~%q", tc.image, r, tc.version, tc.vllm, tc.official, tc.note)
		}
	}
}

// FuzzReadImage: any reference gives a release that prints and parses
// back, and a note exactly for vLLM images.
func FuzzReadImage(f *testing.F) {
	for _, s := range []string{"vllm/vllm-openai:v0.21.0", "rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", "nvcr.io/nvidia/vllm:25.09-py3", "a/b:c", ":", "@", "vllm:1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, image string) {
		r := ReadImage(image)
		if r.VLLM != (r.Note != "") {
			t.Fatalf("ReadImage(%q) = %+v: a note exactly for vLLM images", image, r)
		}
		if !r.Version.IsZero() {
			if _, err := ParseVersion(r.Version.String()); err != nil {
				t.Fatalf("ReadImage(%q) version %v does not parse back: %v", image, r.Version, err)
			}
		}
	})
}
