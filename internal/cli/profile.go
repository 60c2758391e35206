package cli

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/progress"
	"headroom.dev/headroom/traffic"
)

// maxListedWindows is how many windows the table lists before it shows
// only the surging ones.
const maxListedWindows = 24

type profileFlags struct {
	plan    planFlags
	buckets string
	window  time.Duration
}

func newProfileCmd(env Env) *cobra.Command {
	f := profileFlags{plan: planFlags{vllm: map[string]*string{}}}
	cmd := &cobra.Command{
		Use:   "profile FILE... [--model MODEL --gpu GPU] [-- vllm serve MODEL FLAGS...]",
		Short: "Size the traffic in request logs: token distributions, S/M/L/XL buckets, surges, pool split",
		Example: `  headroom profile requests.log
  headroom profile access-*.log.gz --window 10m -o json
  headroom profile requests.log --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-80GB
  kubectl logs deploy/gateway | headroom profile - --buckets 1k,4k,16k`,
		Long: `Streams request logs (plain or gzip) in bounded memory and prints the distribution
of input, output and total tokens per request (count, mean, p50/p90/p99, max), the
S/M/L/XL buckets by total tokens (S <= 512, M <= 2048, L <= 8192, XL above, or
--buckets), and per time window the share of long (L/XL) requests with a flag where
it surges above its baseline: more than twice the median window share and more
than 10 points above it, in windows of at least 10 requests.

Lines are recognised one by one: key=value (input_tokens=, output_tokens=,
prompt_tokens=, completion_tokens=), JSON lines with an OpenAI usage object, and
vLLM's "Received request" log lines (their output is max_tokens, a limit).

With --model and --gpu (or a pasted vllm command), it also shows how many requests
of each bucket the KV cache holds at once (KV tokens / the bucket's p90 total
tokens), and splits the traffic into a short and a long pool, each with its own
vllm serve flags from the planner; a pool's --max-num-seqs is chosen by replaying
its requests of the log (one file with times) through the simulated engine.

Percentiles are read from log-linear histograms: exact below 256 tokens, within
0.4% above.

Exit codes: 0 done, 1 a pool's replayed traffic is more than every max-num-seqs
of its deployment serves, 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProfile(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.buckets, "buckets", "512,2048,8192", "bucket upper bounds in total tokens (S,M,L; XL above the last)")
	fl.DurationVar(&f.window, "window", traffic.DefaultWindow, "time window for the long-request share (0 turns windows off)")
	addDeploymentFlags(fl, &f.plan, "model, for the KV concurrency and the pool split", "GPU, for the KV concurrency and the pool split",
		"the vLLM version whose rules apply (default: the newest known)")
	fl.StringVar(&f.plan.policy, "policy", memory.PolicyHeadroom, "utilization policy: headroom or kaito")
	fl.StringVarP(&f.plan.output, "output", "o", "table", "output format: table, json, yaml")
	return cmd
}

// ProfileReport is `headroom profile -o json`; plan --profile reads it.
type ProfileReport = report.ProfileReport

func runProfile(cmd *cobra.Command, env Env, f profileFlags, args []string) error {
	switch f.plan.output {
	case "table", "text", "json", "yaml":
	default:
		return badInput("unknown output format %q: use table, json or yaml", f.plan.output)
	}
	if err := checkPolicy(f.plan.policy); err != nil {
		return err
	}
	bounds, err := traffic.ParseBounds(f.buckets)
	if err != nil {
		return badInput("--buckets: %v", err)
	}
	files, pasted := args, []string(nil)
	if n := cmd.ArgsLenAtDash(); n >= 0 {
		files, pasted = args[:n], args[n:]
	}
	if len(files) == 0 {
		return badInput("no request log: give files (plain or .gz) or - for stdin")
	}
	req := report.ProfileRequest{Files: files, Stdin: cmd.InOrStdin(), Options: traffic.Options{Bounds: bounds, Window: f.window},
		Policy: f.plan.policy, ReplayRequests: report.PlanTrafficRequests, ReplaySeed: report.PlanTrafficSeed, Reading: readingProgress(env.Stderr)}
	if len(pasted) > 0 || f.plan.model != "" || f.plan.gpuName != "" || f.plan.gpuMemory != "" {
		plan := request(cmd, f.plan, pasted)
		req.Plan = &plan
	}
	rep, err := report.Profile(cmd.Context(), reportEnv(env), req)
	if err != nil {
		return usageError{err}
	}
	err = writeAs(cmd.OutOrStdout(), f.plan.output, rep, formats[ProfileReport]{"": writeProfileTable})
	if err != nil {
		return err
	}
	if pl := rep.Plan; pl != nil {
		// The deployment's plan as `headroom plan` and simulate judge it:
		// one vLLM would not start with is said and is exit 1, not sized
		// silently at lengths it clamped.
		for _, w := range pl.Warnings {
			fmt.Fprintf(env.Stderr, "headroom: warning: %s\n", w.Message)
		}
		for _, p := range pl.Problems {
			fmt.Fprintf(env.Stderr, "headroom: %s\n", p.Message)
		}
		if len(pl.Problems) > 0 {
			fmt.Fprintln(env.Stderr, "headroom: vLLM would not start with the deployment given, so its KV concurrency above is not one it serves; see `headroom plan`")
			return errNoFit
		}
	}
	if len(overloadedPools(rep)) > 0 {
		return errNoFit
	}
	return nil
}

// overloadedPools are the pools whose replayed traffic every max-num-seqs
// fell behind, with the line that says so.
func overloadedPools(r report.ProfileReport) []string {
	var out []string
	for _, p := range r.Pools {
		if ev := r.PoolSeqs[p.Name]; ev != nil && ev.FellBehind != nil {
			out = append(out, p.Name+" pool: "+ev.Overload)
		}
	}
	return out
}

// readingProgress shows how far the reading of each log is.
func readingProgress(w io.Writer) func(name string, size int64, done *atomic.Int64) func() {
	return func(name string, size int64, done *atomic.Int64) func() {
		return progress.Show(w, func() string {
			msg := fmt.Sprintf("headroom profile: %s: %d MiB read", name, done.Load()>>20)
			if size > 0 {
				msg += fmt.Sprintf(" of %d MiB", size>>20)
			}
			return msg
		})
	}
}

func writeProfileTable(w io.Writer, r report.ProfileReport) error {
	for _, o := range overloadedPools(r) {
		fmt.Fprintf(w, "DOES NOT MEET THE TRAFFIC: %s\n", o)
	}
	fmt.Fprintf(w, "%s requests from %s", humanInt(r.Requests), strings.Join(r.Sources, ", "))
	if r.SkippedLines > 0 {
		fmt.Fprintf(w, " (%s lines without token counts skipped)", humanInt(r.SkippedLines))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tokens\tmean\tp50\tp90\tp99\tmax\t")
	for _, row := range []struct {
		name string
		s    traffic.Summary
	}{{"input", r.Input}, {"output", r.Output}, {"total", r.Total}} {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%s\t%s\t\n", row.name, row.s.Mean, humanInt(row.s.P50), humanInt(row.s.P90), humanInt(row.s.P99), humanInt(row.s.Max))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bucket\ttotal tokens\trequests\tshare\tp90\tmax\t")
	for _, b := range r.Buckets {
		rng := fmt.Sprintf("%s-%s", humanInt(b.MinTokens), humanIntPtr(b.MaxTokens))
		if b.MaxTokens == nil {
			rng = "> " + humanInt(b.MinTokens-1)
		} else if b.MinTokens == 0 {
			rng = "<= " + humanIntPtr(b.MaxTokens)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%s\t%s\t\n", b.Name, rng, humanInt(b.Count), 100*b.Share, humanInt(b.Total.P90), humanInt(b.Total.Max))
	}
	tw.Flush()
	if len(r.Windows) > 0 {
		surges := 0
		for _, win := range r.Windows {
			if win.Surge {
				surges++
			}
		}
		fmt.Fprintf(w, "\nWindows of %s: %d, baseline long (L+XL) share %.1f%%, %d surging\n", time.Duration(r.WindowSeconds)*time.Second, len(r.Windows), 100*r.Baseline, surges)
		layout := "2006-01-02 15:04"
		if r.NoYear {
			layout = "01-02 15:04"
		}
		for _, win := range r.Windows {
			if len(r.Windows) > maxListedWindows && !win.Surge {
				continue
			}
			flag := ""
			if win.Surge {
				flag = "  SURGE"
			}
			fmt.Fprintf(w, "  %s  %8s requests  long %5.1f%%%s\n", win.Start.Format(layout), humanInt(win.Requests), 100*win.LongShare, flag)
		}
	}
	if pl := r.Plan; pl != nil {
		fmt.Fprintf(w, "\nKV cache: %s tokens for %s on %s (vLLM %s, --gpu-memory-utilization %.2f, --max-model-len %d, --max-num-seqs %d)\n",
			humanInt(pl.KVCacheTokens), pl.Model, pl.GPU, pl.VLLMVersion, pl.Utilization, pl.MaxModelLen, pl.MaxNumSeqs)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "bucket\tp90 tokens\tat once (KV)\tmax-num-seqs\teffective\t")
		for _, c := range r.Concurrency {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%d\t%.1f\t\n", c.Bucket, humanInt(c.Tokens), c.KVConcurrency, c.MaxNumSeqs, c.Effective)
		}
		tw.Flush()
	}
	if len(r.Pools) > 0 {
		fmt.Fprintln(w, "\nPool split:")
		for _, p := range r.Pools {
			fmt.Fprintf(w, "  %s pool (%s: %s-%s tokens, %.1f%% of requests, p90 %s)\n", p.Name, strings.Join(p.Buckets, ", "),
				humanInt(p.MinTokens), humanInt(p.MaxTokens), 100*p.Share, humanInt(p.P90Tokens))
			if !p.Fits {
				fmt.Fprintln(w, "    does not fit on this GPU")
			}
			if ev := r.PoolSeqs[p.Name]; ev != nil && ev.FellBehind != nil {
				fmt.Fprintf(w, "    does not meet its traffic: %s\n", ev.Overload)
			}
			fmt.Fprintf(w, "    %s\n", p.Command)
			for _, why := range p.Why {
				fmt.Fprintf(w, "    - %s\n", why)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	return nil
}

func humanIntPtr(p *int64) string {
	if p == nil {
		return ""
	}
	return humanInt(*p)
}
