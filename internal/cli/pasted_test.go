package cli

import (
	"slices"
	"strings"
	"testing"
)

// A command quoted as one word is split as a shell would; headroom's -o
// after -- is refused, vLLM's own -O3 is not.
func TestPastedWords(t *testing.T) {
	got := pastedWords([]string{"vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192"})
	if want := []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"}; !slices.Equal(got, want) {
		t.Errorf("split %q, want %q", got, want)
	}
	if got := pastedWords([]string{"vllm", "serve", "m"}); !slices.Equal(got, []string{"vllm", "serve", "m"}) {
		t.Errorf("words kept %q", got)
	}
	for _, c := range []struct {
		words string
		bad   bool
	}{
		{"vllm serve m --max-model-len auto -o args", true},
		{"vllm serve m --output=json", true},
		{"vllm serve m -ojson", true},
		{"vllm serve m -O3 -q fp8", false},
	} {
		err := outputAfterDash(strings.Fields(c.words))
		if (err != nil) != c.bad {
			t.Errorf("%q: %v", c.words, err)
		}
	}
}
