//go:build !nvml || !cgo

package telemetry

import (
	"strings"
	"testing"
)

// A default build has no NVML: it reads through nvidia-smi and says why,
// with how to build one that has NVML.
func TestNoNVMLSaysWhy(t *testing.T) {
	path, _ := fakeSMI(t, "query-gpu-470-noheader.csv", "compute-apps-empty.csv", 0)
	r, err := OpenGPUs(OpenOptions{LookPath: func(string) (string, error) { return path, nil }})
	if err != nil {
		t.Fatal(err)
	}
	want := "nvidia-smi at " + path + " (no NVML: this headroom was built without NVML; build with cgo and -tags nvml, as the image is)"
	if v := Via(r); v != want {
		t.Errorf("Via = %q, want %q", v, want)
	}
	_, err = OpenGPUs(OpenOptions{LookPath: func(string) (string, error) { return "", errNoNVML }})
	if err == nil || !strings.Contains(err.Error(), "-tags nvml") {
		t.Errorf("err = %v, want the way to NVML", err)
	}
}
