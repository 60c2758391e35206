package vllm

import "testing"

// get_mxfp4_backend's choices, each environment switch on both sides:
// it matters only on the architecture it names.
func TestMXFP4Backend(t *testing.T) {
	for _, c := range []struct {
		major int
		env   map[string]string
		want  MXFP4Backend
	}{
		{8, nil, MXFP4Marlin},
		{8, map[string]string{EnvFlashInferMXFP4BF16: "1"}, MXFP4Marlin},
		{12, map[string]string{EnvFlashInferMXFP4MXFP8: "1"}, MXFP4Marlin},
		{9, nil, MXFP4Triton},
		{9, map[string]string{EnvFlashInferMXFP4BF16: "1"}, MXFP4FlashInferCutlassBF16},
		{9, map[string]string{EnvFlashInferMXFP4MXFP8: "1"}, MXFP4Triton},
		{10, nil, MXFP4FlashInferBF16},
		{10, map[string]string{EnvFlashInferMXFP4MXFP8: "1"}, MXFP4FlashInferMXFP8},
		{10, map[string]string{EnvFlashInferMXFP4MXFP8: "1", EnvFlashInferMXFP4MXFP8Cutlass: "true"}, MXFP4FlashInferCutlassMXFP8},
		{10, map[string]string{EnvFlashInferMXFP4MXFP8: "0"}, MXFP4FlashInferBF16},
	} {
		if got := MXFP4BackendFor(c.major, c.env); got != c.want {
			t.Errorf("sm_%d0 with %v: backend %d, want %d", c.major, c.env, got, c.want)
		}
	}
	if !MXFP4FlashInferMXFP8.MXFP8Activations() || MXFP4FlashInferBF16.MXFP8Activations() || MXFP4Triton.FlashInfer() || !MXFP4FlashInferCutlassBF16.FlashInfer() {
		t.Error("the backends' kinds")
	}
}
