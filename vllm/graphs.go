package vllm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// What a serve line says of CUDA graphs beyond --max-cudagraph-capture-size
// and --enforce-eager. vLLM's CompilationConfig (config/compilation.py)
// holds the mode (cudagraph_mode, from 0.10.2; FULL_AND_PIECEWISE the default
// from 0.11.0, PR #25444) and the capture sizes (cudagraph_capture_sizes, or
// max_cudagraph_capture_size from 0.11.1). A line gives them as a JSON
// object (--compilation-config '{"cudagraph_mode": "PIECEWISE"}', or -O
// with the object), as dotted keys (--compilation-config.cudagraph_mode
// FULL_DECODE_ONLY), or as lists (--cuda-graph-sizes, the scheduler's
// before it moved into the compilation config; --cudagraph-capture-sizes):
// a list's largest size is the largest graph. Benchmark recipes write them
// this way (gpt-oss sweeps capture up to 2,048 tokens).

// The cudagraph_mode values (CUDAGraphMode in config/compilation.py).
const (
	GraphModeNone             = "NONE"
	GraphModePiecewise        = "PIECEWISE"
	GraphModeFull             = "FULL"
	GraphModeFullDecodeOnly   = "FULL_DECODE_ONLY"
	GraphModeFullAndPiecewise = "FULL_AND_PIECEWISE"
)

// maxCaptureSize bounds a capture size read from a line: vLLM captures one
// graph per size, and no release captures batches past a few thousand
// tokens (the scheduler's budget); a larger number is a typo.
const maxCaptureSize = 1 << 20

// graphFlags are the Extra flags read here, by canonical name.
const (
	flagCompilationConfig     = "compilation-config"
	flagCudaGraphSizes        = "cuda-graph-sizes"
	flagCudagraphCaptureSizes = "cudagraph-capture-sizes"
)

// graphConfig is the mode and the largest capture size a line gives (""
// and 0 where it gives none); err names the first value it cannot read.
func (s Settings) graphConfig() (mode string, largest int, err error) {
	for i := 0; i < len(s.Extra); i++ {
		tok := s.Extra[i]
		if !isFlag(tok) {
			continue
		}
		o := splitOption(tok)
		var values []string
		if o.hasValue {
			values = []string{o.value}
		} else {
			for j := i + 1; j < len(s.Extra) && !isFlag(s.Extra[j]); j++ {
				values = append(values, s.Extra[j])
			}
		}
		switch o.name {
		case flagCudaGraphSizes, flagCudagraphCaptureSizes, flagCompilationConfig + ".cudagraph-capture-sizes",
			flagCompilationConfig + ".max-cudagraph-capture-size":
			if n, err := largestSize(o.spelled, values); err != nil {
				return "", 0, err
			} else if n > 0 {
				largest = n
			}
		case flagCompilationConfig + ".cudagraph-mode":
			if len(values) == 0 {
				return "", 0, fmt.Errorf("%s needs a value, one of %s", o.spelled, graphModes)
			}
			if mode, err = graphMode(o.spelled, values[0]); err != nil {
				return "", 0, err
			}
		case flagCompilationConfig:
			if len(values) == 0 || !strings.HasPrefix(strings.TrimSpace(values[0]), "{") {
				continue // -O3: an optimisation level, no graph settings
			}
			obj, err := decodeConfigObject(o.spelled, values[0])
			if err != nil {
				return "", 0, err
			}
			if v, ok := obj["cudagraph_mode"]; ok {
				if mode, err = graphMode(o.spelled+" cudagraph_mode", fmt.Sprint(v)); err != nil {
					return "", 0, err
				}
			}
			for _, key := range []string{"cudagraph_capture_sizes", "max_cudagraph_capture_size"} {
				v, ok := obj[key]
				if !ok {
					continue
				}
				var words []string
				switch x := v.(type) {
				case []any:
					for _, e := range x {
						words = append(words, fmt.Sprint(e))
					}
				case json.Number:
					words = []string{x.String()}
				default:
					return "", 0, fmt.Errorf("%s %s: %q is not a number or a list of numbers", o.spelled, key, clip(fmt.Sprint(v)))
				}
				if n, err := largestSize(o.spelled+" "+key, words); err != nil {
					return "", 0, err
				} else if n > 0 {
					largest = n
				}
			}
		}
	}
	return mode, largest, nil
}

var graphModes = strings.Join([]string{GraphModeNone, GraphModePiecewise, GraphModeFull, GraphModeFullDecodeOnly, GraphModeFullAndPiecewise}, ", ")

// graphMode reads a cudagraph_mode (any case, as vLLM's enum lookup by
// name upper-cases it).
func graphMode(flag, raw string) (string, error) {
	m := strings.ToUpper(strings.TrimSpace(raw))
	switch m {
	case GraphModeNone, GraphModePiecewise, GraphModeFull, GraphModeFullDecodeOnly, GraphModeFullAndPiecewise:
		return m, nil
	}
	return "", fmt.Errorf("%s: %q is not a CUDA-graph mode; give one of %s", flag, clip(raw), graphModes)
}

// largestSize is the largest of a list of capture sizes written as words,
// commas or a JSON list ("2048", "1 2 4 8", "[1,2,4]"); 0 for an empty list.
func largestSize(flag string, words []string) (int, error) {
	largest := 0
	for _, w := range words {
		for _, f := range strings.FieldsFunc(w, func(r rune) bool { return r == ',' || r == '[' || r == ']' || r == ' ' }) {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 || n > maxCaptureSize {
				return 0, fmt.Errorf("%s: %q is not a capture size (a whole number of tokens from 0 to %d)", flag, clip(f), maxCaptureSize)
			}
			largest = max(largest, n)
		}
	}
	return largest, nil
}

// CUDAGraphMode is the cudagraph_mode the engine runs: NONE under
// --enforce-eager, else the line's, else the release's default
// (FULL_AND_PIECEWISE from 0.11.0, PIECEWISE before).
func CUDAGraphMode(s Settings) string {
	if s.EnforceEager {
		return GraphModeNone
	}
	if mode, _, err := s.graphConfig(); err == nil && mode != "" {
		return mode
	}
	if orNewest(s.Version).AtLeast(fullDecodeGraphsSince) {
		return GraphModeFullAndPiecewise
	}
	return GraphModePiecewise
}

// PiecewiseGraphs reports whether a step that is not all decodes (a
// prefill chunk, drafts to verify) replays the layers' pieces between the
// attention calls: every mode but NONE and FULL_DECODE_ONLY, which runs
// such steps eagerly. FULL, which captures mixed steps whole where the
// attention backend can, is read as FULL_AND_PIECEWISE: the backends of
// the releases known fall back to pieces for them.
func PiecewiseGraphs(s Settings) bool {
	m := CUDAGraphMode(s)
	return m != GraphModeNone && m != GraphModeFullDecodeOnly
}
