package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"headroom.dev/headroom/internal/report"
)

// cardSlices fits the parts, in the order the card is filled, into the
// card: each part keeps what is left of it, so the slices never add up to
// more than total and none is negative. over is what the parts need past
// the card (weights that do not fit, a pinned pool beside them), unused
// what they leave free.
func cardSlices(parts []float64, total float64) (shown []float64, unused, over float64) {
	left := max(total, 0)
	shown = make([]float64, len(parts))
	for i, p := range parts {
		p = max(p, 0)
		shown[i] = min(p, left)
		left -= shown[i]
		over += p - shown[i]
	}
	return shown, left, over
}

// writeCard draws one GPU's memory as a bar and a legend with each part's
// GiB, the same numbers as -o json's per_gpu (non-torch without the CUDA
// context, which is its own part). Parts past the card are drawn up to
// its edge, and the legend says by how much they overflow it instead of a
// negative "left unused".
func writeCard(w io.Writer, p report.PerGPUReport) {
	parts := []float64{p.WeightsGiB, p.ActivationGiB, p.NonTorchGiB, p.ContextGiB, p.CUDAGraphGiB, p.KVCacheGiB}
	shown, unused, over := cardSlices(parts, p.TotalGiB)
	glyphs := []rune{'█', '▓', '▒', '▪', '░', '=', '·'}
	fmt.Fprintf(w, "Per GPU %s\n", bar(append(shown, unused), glyphs, p.TotalGiB))
	last, value := "· left unused", max(p.UnusedGiB, 0)
	if over > 0.005 {
		last, value = "! over the card", over
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  █ weights\t▓ activation\t▒ non-torch\t▪ CUDA context\t░ CUDA graphs\t= KV cache\t%s\n", last)
	fmt.Fprintf(tw, "  %.2f GiB\t%.2f GiB\t%.2f GiB\t%.2f GiB\t%.2f GiB\t%.2f GiB\t%.2f GiB\n", p.WeightsGiB, p.ActivationGiB, p.NonTorchGiB, p.ContextGiB, p.CUDAGraphGiB, p.KVCacheGiB, value)
	tw.Flush()
}

// assumedRelease says, beside the release a plan names, that nothing
// named it: the plan then takes that release's defaults (its utilization
// among them), so a user reads it before the numbers.
func assumedRelease(from string) string {
	if from != report.VersionAssumed {
		return ""
	}
	return ", assumed: the newest release headroom knows, whose defaults this plan takes (set --vllm-version to yours)"
}
