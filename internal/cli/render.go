package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/vllm"
)

func render(w io.Writer, format string, r report.Report) error {
	switch format {
	case "json":
		return writeJSON(w, r)
	case "yaml":
		return writeYAML(w, r)
	case "args":
		_, err := fmt.Fprintln(w, vllm.ShellJoin(r.VLLMArgs))
		return err
	case "args-pinned":
		_, err := fmt.Fprintln(w, vllm.ShellJoin(r.PinnedArgs))
		return err
	case "kaito":
		return writeKAITO(w, r)
	default:
		return writeTable(w, r)
	}
}

// checkFormat refuses an -o the command does not write, naming those it does.
func checkFormat(format string, formats ...string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	last := len(formats) - 1
	return badInput("unknown output format %q: use %s or %s", format, strings.Join(formats[:last], ", "), formats[last])
}

// formats are a command's own writers by -o value; "" is the default.
type formats[T any] map[string]func(io.Writer, T) error

// writeAs writes v as JSON or YAML, or with the command's own writer.
func writeAs[T any](w io.Writer, format string, v T, own formats[T]) error {
	switch format {
	case "json":
		return writeJSON(w, v)
	case "yaml":
		return writeYAML(w, v)
	}
	if write, ok := own[format]; ok {
		return write(w, v)
	}
	return own[""](w, v)
}

// checkPolicy refuses a --policy the planner does not have.
func checkPolicy(policy string) error {
	if _, err := memory.ParsePolicy(policy); err != nil {
		return badInput("--policy: %v", err)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error { return report.WriteJSON(w, v) }

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// barWidth is the width of the memory picture in characters.
const barWidth = 64

// bar draws the card as one line split into its parts; every non-empty
// part gets at least one cell so small parts stay visible.
func bar(parts []float64, glyphs []rune, total float64) string {
	cells := make([]int, len(parts))
	used := 0
	for i, p := range parts {
		if p <= 0 || total <= 0 {
			continue
		}
		cells[i] = max(1, int(p/total*barWidth+0.5))
		used += cells[i]
	}
	// Take any excess from the largest part.
	for used > barWidth {
		big := 0
		for i := range cells {
			if cells[i] > cells[big] {
				big = i
			}
		}
		cells[big]--
		used--
	}
	var sb strings.Builder
	sb.WriteRune('[')
	for i, c := range cells {
		sb.WriteString(strings.Repeat(string(glyphs[i]), c))
	}
	sb.WriteString(strings.Repeat(" ", barWidth-used))
	sb.WriteRune(']')
	return sb.String()
}

func writeTable(w io.Writer, r report.Report) error {
	p := r.PerGPU
	fmt.Fprintln(w, r.Answer)
	if r.Layout != "" {
		fmt.Fprintf(w, "  %s\n", r.Layout)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s on %s (%.2f GiB as CUDA reports it), vLLM %s%s\n", r.Model.Name, report.GPUCount(r.GPU.Count, r.GPU.Name), p.TotalGiB, r.Settings.VLLMVersion, assumedRelease(r.Settings.VLLMVersionFrom))
	fmt.Fprintf(w, "  %s params, %d layers (%s), %.2f GiB of weights (%s)\n\n",
		humanCount(r.Model.Params), r.Model.Layers, r.Model.Attention, float64(r.Model.WeightsBytes)/(1<<30), r.Model.WeightsSource)

	writeCard(w, p)
	inside := "outside the budget"
	if p.CUDAGraphInBudget {
		inside = "inside the budget"
	}
	fmt.Fprintf(w, "  budget %.2f GiB = %.2f × %.2f GiB; the CUDA context is outside the budget, CUDA graphs %s\n\n",
		p.RequestedGiB, r.Settings.GPUMemoryUtilization, p.TotalGiB, inside)

	fmt.Fprintf(w, "KV cache   %s tokens in %s blocks of %d at --gpu-memory-utilization %.2f; %.2f requests of %s tokens at once\n",
		humanInt(r.KVCacheTokens), humanInt(r.NumGPUBlocks), r.Settings.BlockSize, r.Settings.GPUMemoryUtilization, r.MaxConcurrency, humanInt(int64(r.Settings.MaxModelLen)))
	if band := r.KVCacheTokensBand; band.High > band.Low {
		fmt.Fprintf(w, "           between %s and %s tokens (%s)\n", humanInt(band.Low), humanInt(band.High), band.Basis)
	}
	fmt.Fprintf(w, "Settings   tp %d, pp %d, max-model-len %d, max-num-seqs %d, max-num-batched-tokens %d, dtype %s, kv-cache-dtype %s\n",
		r.Settings.TensorParallelSize, r.Settings.PipelineParallelSize, r.Settings.MaxModelLen, r.Settings.MaxNumSeqs,
		r.Settings.MaxNumBatchedTokens, r.Settings.Dtype, r.Settings.KVCacheDtype)
	if line := report.FeaturesLine(r.Features); line != "" {
		fmt.Fprintf(w, "Features   %s\n", line)
	}
	runner := "V1 model runner"
	if r.Settings.ModelRunnerV2 {
		runner = "Model Runner V2"
	}
	fmt.Fprintf(w, "Profile    %s, dummy sampler's top-k/top-p: %s (vLLM %s, %s install)\n\n", runner, r.Settings.SamplerPath, r.Settings.VLLMVersion, r.Settings.VLLMInstall)
	if len(r.Evidence) > 0 {
		fmt.Fprintln(w, "How sure")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range r.Evidence {
			basis := e.CalibratedOn
			if e.Class == memory.EvidenceExtrapolated {
				basis = e.Why
			}
			fmt.Fprintf(tw, "  %s\t%s\t± %.2f GiB\t%s\n", termName(e.Term), e.Class, float64(e.UncertaintyBytes)/(1<<30), basis)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	if t := r.Recommended.FromTraffic; t != nil && t.FellBehind != nil {
		fmt.Fprintf(w, "Verdict    DOES NOT MEET THE TRAFFIC: %s\n", t.Overload)
		if r.Fits {
			fmt.Fprintf(w, "  memory   vLLM starts and serves requests of %s tokens\n", humanInt(int64(r.Settings.MaxModelLen)))
		}
	} else if r.Fits {
		fmt.Fprintf(w, "Verdict    FITS: vLLM starts and serves requests of %s tokens\n", humanInt(int64(r.Settings.MaxModelLen)))
	} else {
		fmt.Fprintln(w, "Verdict    DOES NOT FIT")
	}
	for _, f := range r.Problems {
		fmt.Fprintf(w, "  problem  %s\n", tableCounts(f.Message))
	}
	for _, f := range r.Warnings {
		fmt.Fprintf(w, "  warning  %s\n", tableCounts(f.Message))
	}
	for _, a := range r.Alternatives {
		fmt.Fprintf(w, "  would fit: %s\n", tableCounts(a.Message))
	}
	fmt.Fprintln(w)
	writeHost(w, r.Host)
	rec := r.Recommended
	fmt.Fprintf(w, "\nRecommended (%s policy)\n", rec.Policy)
	if rec.Alternative != "" && len(r.Alternatives) > 0 {
		fmt.Fprintf(w, "  with the first alternative: %s\n", r.Alternatives[0].Message)
	}
	if rec.MaxModelLen > 0 {
		fmt.Fprintf(w, "  --gpu-memory-utilization %.2f --max-model-len %d --max-num-seqs %d (KV cache %s tokens at --gpu-memory-utilization %.2f)\n", rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs, humanInt(rec.KVCacheTokens), rec.GPUMemoryUtilization)
	} else {
		fmt.Fprintf(w, "  no settings make this model fit on this GPU\n")
	}
	for _, why := range rec.Why {
		fmt.Fprintf(w, "  - %s\n", tableCounts(why))
	}
	if t := rec.FromTraffic; t != nil {
		fmt.Fprintf(w, "  - traffic simulated: %s; step time %s\n", t.Traffic, provenance(t.StepTime, "-o json"))
		fmt.Fprintf(w, "    figures below: TTFT ±%.0f%%, E2E ±%.0f%% (%s)\n", t.Confidence.TTFTPct, t.Confidence.E2EPct, t.Confidence.Evidence)
		writeEvidence(w, "    ", t.Confidence)
		for _, c := range t.Candidates {
			fmt.Fprintf(w, "      max-num-seqs %4d: E2E p99 %s, TTFT p99 %s, %d preemptions, %d rejected, peak KV %s\n",
				c.MaxNumSeqs, msUnit(c.E2EP99MS), msUnit(c.TTFTP99MS), c.Preemptions, c.Rejected, pct(c.MaxKVUsage))
		}
	}
	if rec.MaxModelLen > 0 {
		fmt.Fprintf(w, "\n  %s\n", r.Command)
	}
	if p := r.PinnedKV; p != nil {
		verdict := "fits"
		if !p.Fits {
			verdict = "does not fit"
		}
		fmt.Fprintf(w, "\nPinned KV pool (same cache on every release, node and co-tenant; -o args --pin-kv):\n  %s %d (%.2f GiB per GPU, %s KV tokens, %s): %s\n",
			p.Flag, p.Bytes, gibs(p.Bytes), humanCount(p.KVTokens), verdict, p.Why)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	return nil
}

// termName is a budget part's name in the table.
func termName(term string) string {
	switch term {
	case "weights_bytes":
		return "weights"
	case "activation_bytes":
		return "activation"
	case "non_torch_bytes":
		return "non-torch"
	case "cudagraph_bytes":
		return "CUDA graphs"
	}
	return term
}

// countRe is a count of tokens written without separators in a message
// (the messages are shared with -o json, which never has them).
var countRe = regexp.MustCompile(`\b(\d{4,})( tokens)`)

// tableCounts writes the token counts of a message as a table writes
// every count, with thousands separators; a flag's value ("--max-model-len
// 30064", "max-model-len 30064:") is not a count of tokens and stays as it
// is pasted.
func tableCounts(s string) string {
	return countRe.ReplaceAllStringFunc(s, func(m string) string {
		sub := countRe.FindStringSubmatch(m)
		n, err := strconv.ParseInt(sub[1], 10, 64)
		if err != nil {
			return m
		}
		return humanInt(n) + sub[2]
	})
}

// Helpers of the commands, from the packages that own them.
var (
	// humanInt prints a count as vLLM's logs do.
	humanInt     = vllm.Thousands
	showProgress = progress.Show
	humanFloat   = telemetry.FormatCount
	// unwrapPathError is err without what an *fs.PathError repeats.
	unwrapPathError = report.FileError
)

func humanCount(n int64) string {
	switch {
	case n >= 999_500_000: // what would round to "1000M" reads as billions
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	default:
		return humanInt(n)
	}
}

// writeKAITO prints the KAITO inference ConfigMap of the recommended flags.
func writeKAITO(w io.Writer, r report.Report) error {
	cm, err := admission.KAITOConfigMap(r.Model.Name, fmt.Sprintf("%s on %s: fits=%t", r.Model.Name, report.GPUCount(r.GPU.Count, r.GPU.Name), r.Recommended.Fits), r.VLLMArgs)
	if err != nil {
		return err
	}
	return writeYAML(w, cm)
}

func gibs(b int64) float64 { return report.GiBs(b) }
