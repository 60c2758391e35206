package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/vllm"
)

// writeAllGPUs prints plan --all-gpus: one row a GPU, with the fewest of it
// that serve the context, their memory together, and in words whether vLLM
// starts, starts only with a shorter context, or does not start.
func writeAllGPUs(w io.Writer, e evidence, rows []report.GPURow) error {
	ctx := 0
	if len(rows) > 0 {
		ctx = rows[0].ContextTokens
	}
	how := "tensor parallel from 1 to 8 GPUs in a node, the fewest that serve it"
	if e.Settings.Set[vllm.FlagTensorParallelSize] {
		how = fmt.Sprintf("tensor parallel %d, yours", e.Settings.TensorParallelSize)
	}
	fmt.Fprintf(w, "%s at %s tokens, vLLM %s%s; %s\n\n", e.Spec.ID, humanInt(int64(ctx)), e.Settings.Version, assumedRelease(e.VersionFrom), how)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPUS\tMEMORY\tSTARTS\tAT UTIL\tMAX CONTEXT\tKV TOKENS\tREC. UTIL\tWHY NOT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%.2f\t%s\n", report.GPUCount(r.Count, r.GPU), rowMemory(r), rowStarts(r), r.Utilization, humanInt(int64(r.MaxFitLen)), humanInt(r.KVCacheTokens), r.Recommended, r.ProblemText)
	}
	return tw.Flush()
}

// rowMemory is the row's GPUs' memory together, and each one's when there
// are several.
func rowMemory(r report.GPURow) string {
	if r.Count <= 1 {
		return fmt.Sprintf("%.2f GiB", r.TotalGiB)
	}
	return fmt.Sprintf("%.2f GiB (%d × %.2f)", r.GPUsTotalGiB, r.Count, r.TotalGiB)
}

// rowStarts says whether vLLM starts: "yes", "at N tokens" where only a
// shorter context starts, or "no".
func rowStarts(r report.GPURow) string {
	switch r.Verdict {
	case report.RowFits:
		return "yes"
	case report.RowShorter:
		return "at " + humanInt(int64(r.MaxFitLen)) + " tokens"
	}
	return "no"
}
