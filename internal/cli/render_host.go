package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"headroom.dev/headroom/host"
)

// writeHost prints the host plan: the pod's memory limit first, then its
// terms, each with how it is known (a mechanism read from code, a report,
// an assumption).
func writeHost(w io.Writer, p host.Plan) {
	fmt.Fprintf(w, "Host       pod memory limit %s, request the same: %.2f GiB held at most (%.2f GiB at the sources' upper end), %.2f GiB while the weights load\n",
		p.MemoryLimit, gibs(p.ServingBytes), gibs(p.RequiredHighBytes), gibs(p.LoadingBytes))
	if p.ShmNeeded {
		fmt.Fprintf(w, "           /dev/shm %.2f GiB: mount an emptyDir of medium Memory, sizeLimit %s, at /dev/shm (a container's own is 64 MiB)\n", gibs(p.ShmBytes), p.ShmSizeLimit)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  term\tGiB\tat most\twhen\tkind\tbasis\thow")
	for _, t := range p.Terms {
		kind := strings.ReplaceAll(t.Kind, "_", " ")
		if t.Reclaimable {
			kind += ", reclaimable"
		}
		if t.Shm {
			kind += ", /dev/shm"
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\n", t.Name(), gibs(t.Bytes), gibs(t.HighBytes), t.Phase, kind, t.Basis, t.Detail)
	}
	tw.Flush()
	for _, f := range p.Warnings {
		fmt.Fprintf(w, "  warning  %s\n", f.Message)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  note     %s\n", n)
	}
	fmt.Fprintln(w, "  (mechanism: read from vLLM's or PyTorch's code; report: measured in the vLLM issue named in -o json's source; assumption: our figure, where neither gives one)")
}
