package cli

import (
	"strings"
	"testing"
)

// cardLines returns the plan table's bar, legend and GiB lines.
func cardLines(t *testing.T, args ...string) (bar, legend, gib string) {
	t.Helper()
	code, out, errs := run(t, offline, append([]string{"plan"}, args...)...)
	if code == ExitBadInput {
		t.Fatalf("plan %v: %s", args, errs)
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Per GPU [") && i+2 < len(lines) {
			return l, lines[i+1], lines[i+2]
		}
	}
	t.Fatalf("plan %v printed no card:\n%s", args, out)
	return
}

// The card never shows a negative slice, free space on a card the parts
// outgrow, or slices that add up to more than the card.
func TestCardNeverImpossible(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		last string // the legend's last column
		gib  string // its value
	}{
		// 131.45 GiB of weights on a 79.19 GiB card: every cell is
		// weights, and the card is over by their sum less 79.19.
		{"70B on one H100", []string{"--gpu", "H100-80GB", "--model", "meta-llama/Llama-3.1-70B-Instruct"}, "! over the card", ""},
		// vLLM 0.20.0 captures CUDA graphs outside the 0.99 budget:
		// 78.40 budget + 0.51 context + 0.89 graphs = 79.80 > 79.19 by
		// 0.61 GiB (before: "left unused -0.61 GiB").
		{"graphs past a 0.99 budget", []string{"--gpu", "H100-80GB", "--vllm-version", "0.20.0", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.99"}, "! over the card", "0.61 GiB"},
		// A pinned pool of 20 GiB beside 17.15 GiB of the rest on a
		// 22.03 GiB L4: 37.15 − 22.03 = 15.12 GiB over (before: the
		// slices added up to 37 GiB on a 22 GiB card).
		{"pinned pool past an L4", []string{"--gpu", "L4", "--vllm-version", "0.19.0", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--kv-cache-memory-bytes", "21474836480"}, "! over the card", "15.12 GiB"},
		// A pinned pool of 2 GiB leaves 22.03 − 19.15 = 2.88 GiB free,
		// not the utilization budget's 22.03 − 19.83 − 0.51 − 0.89.
		{"pinned pool inside an L4", []string{"--gpu", "L4", "--vllm-version", "0.19.0", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--kv-cache-memory-bytes", "2147483648"}, "· left unused", "2.88 GiB"},
	} {
		bar, legend, gib := cardLines(t, tc.args...)
		if n := len([]rune(bar)); n != len([]rune("Per GPU []"))+barWidth {
			t.Errorf("%s: the bar is %d runes wide, not the card's %d cells: %s", tc.name, n, barWidth, bar)
		}
		if !strings.HasSuffix(strings.TrimSpace(legend), tc.last) || strings.Contains(gib, "-") {
			t.Errorf("%s:\n%s\n%s", tc.name, legend, gib)
		}
		if tc.gib != "" && !strings.HasSuffix(strings.TrimSpace(gib), tc.gib) {
			t.Errorf("%s: last column %q, want %s", tc.name, gib, tc.gib)
		}
	}
	// Weights past the card fill it: no cell is left for anything else.
	bar, _, _ := cardLines(t, "--gpu", "H100-80GB", "--model", "meta-llama/Llama-3.1-70B-Instruct")
	if cells := strings.TrimSuffix(strings.TrimPrefix(bar, "Per GPU ["), "]"); strings.Trim(cells, "█") != "" {
		t.Errorf("weights past the card, yet %s", bar)
	}
}

func TestCardSlices(t *testing.T) {
	shown, unused, over := cardSlices([]float64{15, 1, 60}, 70)
	if shown[0] != 15 || shown[1] != 1 || shown[2] != 54 || unused != 0 || over != 6 {
		t.Errorf("15 + 1 + 60 on 70: %v, unused %v, over %v; want 15, 1, 54, 0, 6", shown, unused, over)
	}
	shown, unused, over = cardSlices([]float64{15, -1, 5}, 70)
	if shown[1] != 0 || unused != 50 || over != 0 {
		t.Errorf("a negative part: %v, unused %v, over %v", shown, unused, over)
	}
}
