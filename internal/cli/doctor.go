package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/doctor"
	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
)

func newDoctorCmd(env Env) *cobra.Command {
	f := planFlags{vllm: map[string]*string{}}
	cmd := &cobra.Command{
		Use:   "doctor [FILE|DIR|-]... [--gpu GPU] [-- vllm serve MODEL FLAGS...]",
		Short: "Name the cause of a vLLM out-of-memory failure and what to change",
		Example: `  headroom doctor oom.txt
  kubectl logs deploy/vllm --tail=500 | headroom doctor - --gpu H100-80GB
  headroom doctor ./incident/ -o markdown
  headroom doctor vllm.log nvidia-smi.txt metrics.txt requests.log.gz --gpu L4 -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 256`,
		Long: `Reads what you already have, in any mix, recognising each by its content:
a CUDA out-of-memory message, vLLM start-up and runtime logs, nvidia-smi output
(the screen, --query-gpu CSV, dmon), Prometheus text from vLLM's /metrics,
request logs, Kubernetes manifests and kubectl get -o yaml / kubectl describe output.
Directories are read file by file (a file that is not text is skipped, with a
note); - reads stdin.

It names the causes (` + wrapWords(strings.Join(doctor.Codes(), ", "), 80, len("It names the causes (")) + `), most likely first, with the
lines they rest on, a confidence, and remedies whose values come from the planner.
Give --gpu and the vLLM command after -- when the evidence does not show them.
Counts and capacities come from the logs where they give them; inputs that
disagree with each other or with the flags (another model, another GPU, a KV
cache the GPU cannot hold) are warned about before the findings. Without a
request log --max-num-seqs keeps the value in use, as plan does.

Exit codes: 0 nothing wrong, 1 findings, 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	addDeploymentFlags(fl, &f, "model, when the evidence does not name it: a catalog id, a directory or a Hugging Face id",
		"GPU: a device (H100-80GB, L4, ...), a cloud instance type, a GFD product label, or a MIG profile",
		"the vLLM version in use (default: what the evidence shows, else the newest known)")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table (also text), json, yaml, markdown")
	fl.StringVar(&f.policy, "policy", memory.PolicyHeadroom, "utilization policy: headroom or kaito")
	return cmd
}

func runDoctor(cmd *cobra.Command, env Env, f planFlags, args []string) error {
	switch f.output {
	case "text", "table", "json", "yaml", "markdown", "md":
	default:
		return badInput("unknown output format %q: use table, json, yaml or markdown", f.output)
	}
	if err := checkPolicy(f.policy); err != nil {
		return err
	}
	files, pasted := args, []string(nil)
	if n := cmd.ArgsLenAtDash(); n >= 0 {
		files, pasted = args[:n], args[n:]
	}
	inputs, err := report.FileInputs(files, cmd.InOrStdin())
	if err != nil {
		return usageError{err}
	}
	d, err := report.Diagnose(cmd.Context(), reportEnv(env), request(cmd, f, pasted), f.policy, inputs)
	switch {
	case errors.Is(err, report.ErrNoEvidence):
		return badInput("no evidence: give files, directories or - (stdin), e.g. headroom doctor oom.txt vllm.log")
	case errors.Is(err, report.ErrNothingRecognised):
		return badInput("nothing recognised in %s: give a CUDA OOM message, vLLM logs, nvidia-smi output, /metrics text, request logs or Kubernetes manifests", strings.Join(files, ", "))
	case err != nil:
		return usageError{err}
	}
	md := writeDoctorMarkdown
	if err := writeAs(cmd.OutOrStdout(), f.output, d, formats[doctor.Diagnosis]{"markdown": md, "md": md, "": writeDoctorText}); err != nil {
		return err
	}
	if !d.Healthy() {
		return errNoFit
	}
	return nil
}

func writeDoctorText(w io.Writer, d doctor.Diagnosis) error {
	if d.Healthy() {
		fmt.Fprintln(w, "headroom doctor: nothing wrong found in the evidence")
	} else {
		// The answer first: the likeliest cause and the first change.
		f := d.Findings[0]
		line := fmt.Sprintf("%s (%s confidence): %s", f.Code, f.Level, f.Title)
		if len(f.Remedies) > 0 {
			// The first remedy as it stands: a later one is an
			// alternative, not the answer.
			r := f.Remedies[0]
			t := r.Paste()
			if t == "" {
				t, _, _ = strings.Cut(r.Why, ";")
			}
			line += "; first remedy: " + t
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "headroom doctor: %d finding(s), most likely first\n", len(d.Findings))
	}
	for _, x := range d.Disagreements {
		fmt.Fprintf(w, "warning: %s\n", x.Message)
		for _, l := range x.Lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for i, f := range d.Findings {
		fmt.Fprintf(w, "\n%d. %s: %s\n   confidence %.2f (%s)\n", i+1, f.Code, f.Title, f.Confidence, f.Level)
		if f.Predicted {
			fmt.Fprintf(w, "   %s\n", predictedNote)
		}
		for _, r := range f.Reasons {
			fmt.Fprintf(w, "   - %s\n", tableCounts(r))
		}
		if len(f.Evidence) > 0 {
			fmt.Fprintln(w, "   evidence:")
			for _, l := range f.Evidence {
				fmt.Fprintf(w, "     %s\n", l)
			}
		}
		if len(f.Remedies) > 0 {
			fmt.Fprintln(w, "   remedies:")
			for j, r := range f.Remedies {
				if t := r.Paste(); t != "" {
					fmt.Fprintf(w, "     %d) %s\n        %s\n", j+1, t, tableCounts(r.Why))
				} else {
					fmt.Fprintf(w, "     %d) %s\n", j+1, tableCounts(r.Why))
				}
			}
		}
	}
	if len(d.DeadEnds) > 0 {
		fmt.Fprintln(w, "\nDead ends (these will not help):")
		for _, de := range d.DeadEnds {
			fmt.Fprintf(w, "  - %s\n", de.Message)
		}
	}
	if d.Command != "" {
		fmt.Fprintf(w, "\nSuggested command%s:\n  %s\n", commandWhen(d), d.Command)
	}
	writeNumbers(w, d, "  ")
	writeInputs(w, d)
	return nil
}

// predictedNote marks a finding no evidence shows: the planner's
// prediction for the settings in use.
const predictedNote = "predicted by the planner for these settings; nothing in the evidence shows it yet"

// commandWhen is the suggested command's condition, as a heading's
// parenthesis: when it applies, where not at once.
func commandWhen(d doctor.Diagnosis) string {
	if d.CommandWhen == "" {
		return ""
	}
	return " (" + d.CommandWhen + ")"
}

// writeNumbers prints the figures read and planned.
func writeNumbers(w io.Writer, d doctor.Diagnosis, indent string) {
	m := d.Memory
	fmt.Fprintln(w, "\nNumbers read:")
	if o := m.OOM; o != nil {
		n := o.OOM
		fmt.Fprintf(w, "%sOOM (%s): tried %s, total %s, free %s, this process %s, allocated by PyTorch %s, reserved but unallocated %s; phase %s\n",
			indent, o.Line.Source, gibText(n.Tried), gibText(n.Total), gibText(n.Free), gibText(n.ProcessInUse), gibText(n.Allocated),
			gibText(n.ReservedUnallocated), orUnknown(o.Phase))
	}
	if s := m.Startup; s != nil && (s.WeightsBytes > 0 || s.AvailableKVBytes > 0 || s.NumGPUBlocks > 0) {
		tokens := "tokens not logged"
		switch m.StartupKVTokensFrom {
		case doctor.SourceLog:
			tokens = humanInt(m.StartupKVTokens) + " tokens"
			if s.KVTokens == 0 && s.NumGPUBlocks > 0 {
				tokens = fmt.Sprintf("%s GPU blocks = %s tokens", humanInt(s.NumGPUBlocks), humanInt(m.StartupKVTokens))
			}
		case doctor.SourceDerived:
			tokens = humanInt(m.StartupKVTokens) + " tokens, derived from the GiB and the page size"
		}
		fmt.Fprintf(w, "%sstart-up: weights %s, activation %s, non-torch %s, CUDA graphs %s, KV cache %s (%s)\n", indent,
			gibText(s.WeightsBytes), gibText(s.ActivationBytes), gibText(s.NonTorchBytes), gibText(s.CUDAGraphBytes), gibText(s.AvailableKVBytes), tokens)
	}
	for _, g := range m.GPUs {
		if g.TotalBytes > 0 {
			fmt.Fprintf(w, "%sGPU %d %s: %s used of %s\n", indent, g.Index, g.Name, gibText(g.UsedBytes), gibText(g.TotalBytes))
		}
	}
	var load []string
	if m.MaxKVUsage != nil {
		load = append(load, fmt.Sprintf("KV cache usage up to %.1f%%", 100**m.MaxKVUsage))
	}
	if m.Preemptions != nil {
		load = append(load, fmt.Sprintf("%.0f preemptions", *m.Preemptions))
	}
	switch {
	case len(load) > 0:
		fmt.Fprintf(w, "%s%s\n", indent, strings.Join(load, ", "))
	case m.Metrics != nil:
		// The input's notes say which values were left out.
		fmt.Fprintf(w, "%sno KV cache usage or preemption count in the evidence\n", indent)
	}
	if t := m.Traffic; t != nil {
		fmt.Fprintf(w, "%straffic: %s requests, total tokens p50 %s, p90 %s, p99 %s, max %s\n", indent, humanInt(t.Requests),
			humanInt(t.Total.P50), humanInt(t.Total.P90), humanInt(t.Total.P99), humanInt(t.Total.Max))
	}
	if p := m.Plan; p != nil {
		src := p.Sources
		fmt.Fprintf(w, "%splan (%s on %s, vLLM %s): budget %s = %.2f × %s; weights %s (%s), activation %s (%s), non-torch %s (%s), CUDA graphs %s (%s), KV %s (%s) = %s tokens (%s; %.2f × %d)\n",
			indent, orUnknown(d.Deployment.Model), orUnknown(d.Deployment.GPU), d.Deployment.Version, memory.GiB(p.RequestedBytes), p.Utilization, memory.GiB(p.TotalBytes),
			memory.GiB(p.WeightsBytes), src.Weights, memory.GiB(p.ActivationBytes), src.Activation, memory.GiB(p.NonTorchBytes), src.NonTorch,
			memory.GiB(p.CUDAGraphBytes), src.CUDAGraph, memory.GiB(p.KVCacheBytes), src.KVCache, humanInt(p.KVTokens), src.KVTokens, p.MaxConcurrency, p.MaxModelLen)
		fmt.Fprintf(w, "%s  (log: read from the start-up log; metrics: vllm:cache_config_info's blocks; derived: computed from those; plan: predicted where the evidence has no number)\n", indent)
	}
	// The planner's own recommendation stays in -o json (memory.recommended);
	// the text gives one, the suggested command, which the findings and
	// dead ends agree with.
}

func writeInputs(w io.Writer, d doctor.Diagnosis) {
	fmt.Fprintln(w, "\nRead:")
	for _, in := range d.Inputs {
		kinds := "nothing recognised"
		if len(in.Kinds) > 0 {
			kinds = strings.Join(in.Kinds, ", ")
		}
		fmt.Fprintf(w, "  %s: %s\n", in.Source, kinds)
		for _, n := range in.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	dep := d.Deployment
	if dep.Model != "" {
		fmt.Fprintf(w, "  model %s (from %s)\n", dep.Model, orUnknown(dep.ModelSource))
	}
	if dep.GPU != "" {
		fmt.Fprintf(w, "  GPU %s (from %s)\n", dep.GPU, orUnknown(dep.GPUSource))
	}
	fmt.Fprintf(w, "  vLLM %s (%s)\n", dep.Version, dep.VersionSource)
	for _, n := range d.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func gibText(b int64) string {
	if b <= 0 {
		return "?"
	}
	return memory.GiB(b)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func writeDoctorMarkdown(w io.Writer, d doctor.Diagnosis) error {
	fmt.Fprintln(w, "## headroom doctor")
	fmt.Fprintln(w)
	if d.Healthy() {
		fmt.Fprintln(w, "Nothing wrong found in the evidence.")
	}
	for i, f := range d.Findings {
		fmt.Fprintf(w, "### %d. `%s`: %s\n\n**Confidence:** %.2f (%s)\n\n", i+1, f.Code, f.Title, f.Confidence, f.Level)
		if f.Predicted {
			fmt.Fprintf(w, "*%s*\n\n", predictedNote)
		}
		for _, r := range f.Reasons {
			fmt.Fprintf(w, "- %s\n", r)
		}
		if len(f.Evidence) > 0 {
			fmt.Fprintln(w, "\n**Evidence**\n\n```")
			for _, l := range f.Evidence {
				fmt.Fprintln(w, l.String())
			}
			fmt.Fprintln(w, "```")
		}
		if len(f.Remedies) > 0 {
			fmt.Fprintln(w, "\n**Remedies**")
			fmt.Fprintln(w)
			for j, r := range f.Remedies {
				if t := r.Paste(); t != "" {
					fmt.Fprintf(w, "%d. `%s` — %s\n", j+1, t, r.Why)
				} else {
					fmt.Fprintf(w, "%d. %s\n", j+1, r.Why)
				}
			}
		}
		fmt.Fprintln(w)
	}
	if len(d.DeadEnds) > 0 {
		fmt.Fprintln(w, "### Dead ends")
		fmt.Fprintln(w)
		for _, de := range d.DeadEnds {
			fmt.Fprintf(w, "- %s\n", de.Message)
		}
		fmt.Fprintln(w)
	}
	if d.Command != "" {
		fmt.Fprintf(w, "### Suggested command\n\n")
		if d.CommandWhen != "" {
			fmt.Fprintf(w, "Applies %s.\n\n", d.CommandWhen)
		}
		fmt.Fprintf(w, "```sh\n%s\n```\n\n", d.Command)
	}
	fmt.Fprintln(w, "<details><summary>Numbers and inputs</summary>")
	fmt.Fprintln(w, "\n```")
	writeNumbers(w, d, "")
	writeInputs(w, d)
	fmt.Fprintln(w, "```")
	fmt.Fprintln(w, "</details>")
	return nil
}

// wrapWords breaks s at spaces so that no line passes width, the first
// line starting at column first (after the text that precedes it).
func wrapWords(s string, width, first int) string {
	var b strings.Builder
	col := first
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if col+1+len(w) > width {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}
