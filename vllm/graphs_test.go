package vllm

import (
	"strings"
	"testing"
)

// A serve line's CUDA-graph settings, each spelling vLLM takes, on both
// sides of the release whose default mode changed (0.11.0).
func TestCUDAGraphsFromLine(t *testing.T) {
	for _, c := range []struct {
		line, version string
		mode          string
		capture       int
		fullDecode    bool
		pieces        bool
	}{
		// the release's defaults; 0.13's capture size min(2 × 4 seqs, 512)
		{"vllm serve m --max-num-seqs 4", "0.10.2", GraphModePiecewise, 8, false, true},
		{"vllm serve m --max-num-seqs 4", "0.13.0", GraphModeFullAndPiecewise, 8, true, true},
		{"vllm serve m --enforce-eager --max-num-seqs 4", "0.13.0", GraphModeNone, 8, false, false},
		// a gpt-oss benchmark recipe's line
		{`vllm serve m --max-num-seqs 4 --compilation-config {"cudagraph_mode":"PIECEWISE","max_cudagraph_capture_size":2048}`, "0.13.0", GraphModePiecewise, 2048, false, true},
		{`vllm serve m --compilation-config={"cudagraph_capture_sizes":[1,2,4,8,1024]}`, "0.11.0", GraphModeFullAndPiecewise, 1024, true, true},
		{"vllm serve m --cuda-graph-sizes 2048", "0.10.2", GraphModePiecewise, 2048, false, true},
		{"vllm serve m --cuda-graph-sizes 1 2 4 16 --max-model-len 4096", "0.11.0", GraphModeFullAndPiecewise, 16, true, true},
		{"vllm serve m --compilation-config.cudagraph_mode full_decode_only", "0.11.0", GraphModeFullDecodeOnly, 512, true, false},
		{"vllm serve m --compilation-config.max_cudagraph_capture_size=64", "0.13.0", GraphModeFullAndPiecewise, 64, true, true},
		// the engine flag wins over a list; -O3 is a level, no graphs
		{"vllm serve m --cuda-graph-sizes 2048 --max-cudagraph-capture-size 256 -O3", "0.13.0", GraphModeFullAndPiecewise, 256, true, true},
	} {
		s, err := ParseCommand(strings.Fields(c.line))
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		s.Version = MustVersion(c.version)
		d := s.WithDefaults(s.Version, "H100-80GB", 80<<30, 32768)
		if m := CUDAGraphMode(d); m != c.mode || d.MaxCudagraphCaptureSize != c.capture || FullDecodeGraphs(d) != c.fullDecode || PiecewiseGraphs(d) != c.pieces {
			t.Errorf("%s at %s: mode %s, capture %d, full decode %v, pieces %v; want %s, %d, %v, %v", c.line, c.version,
				m, d.MaxCudagraphCaptureSize, FullDecodeGraphs(d), PiecewiseGraphs(d), c.mode, c.capture, c.fullDecode, c.pieces)
		}
	}
}

// What vLLM would refuse is refused in one line, naming the flag.
func TestCUDAGraphsBadLine(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`vllm serve m --compilation-config {"cudagraph_mode":"SOMETIMES"}`, "not a CUDA-graph mode"},
		{`vllm serve m --compilation-config {"cudagraph_mode":`, "is not JSON"},
		{`vllm serve m --compilation-config {"max_cudagraph_capture_size":"big"}`, "not a number"},
		{"vllm serve m --cuda-graph-sizes 8 sixteen", "not a capture size"},
		{"vllm serve m --cudagraph-capture-sizes 99999999", "not a capture size"},
		{"vllm serve m --compilation-config.cudagraph_mode", "needs a value"},
	} {
		_, err := ParseCommand(strings.Fields(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", c.line, err, c.want)
		}
	}
}
