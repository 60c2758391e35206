package vllm

import "testing"

func TestLoadFormat(t *testing.T) {
	for cmd, want := range map[string]string{
		"vllm serve m":                                    "",
		"vllm serve m --load-format dummy":                "dummy",
		"vllm serve m --load_format=runai_streamer":       "runai_streamer",
		"vllm serve m --load-format safetensors --seed 1": "safetensors",
	} {
		words, err := SplitCommandLine(cmd)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseCommand(words)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if got := s.LoadFormat(); got != want {
			t.Errorf("%s: LoadFormat() = %q, want %q", cmd, got, want)
		}
	}
}
