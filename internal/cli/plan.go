package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// vllmStringFlags are vLLM's own flags that headroom accepts under the same
// names, so a user can paste them; their values are parsed by the vllm
// package exactly as in a pasted `vllm serve` command.
var vllmStringFlags = []struct{ name, usage string }{
	{"tensor-parallel-size", "vLLM --tensor-parallel-size (GPUs per model replica)"},
	{"pipeline-parallel-size", "vLLM --pipeline-parallel-size"},
	{"data-parallel-size", "vLLM --data-parallel-size"},
	{"gpu-memory-utilization", "vLLM --gpu-memory-utilization (default: the version's default)"},
	{"max-model-len", "vLLM --max-model-len (tokens, 32k, or auto; default: the model's maximum)"},
	{"max-num-seqs", "vLLM --max-num-seqs (default: vLLM's default for the GPU)"},
	{"max-num-batched-tokens", "vLLM --max-num-batched-tokens (default: vLLM's default for the GPU)"},
	{"dtype", "vLLM --dtype (auto, bfloat16, float16, float32)"},
	{"quantization", "vLLM --quantization (e.g. fp8 to quantize on load)"},
	{"kv-cache-dtype", "vLLM --kv-cache-dtype (auto, fp8, ...)"},
	{"block-size", "vLLM --block-size (default 16)"},
	{"kv-cache-memory-bytes", "vLLM --kv-cache-memory-bytes (a fixed KV pool per GPU: bytes, or 20G with G = 2^30)"},
	// --kv-cache-memory is the prefix vLLM's own start-up hint prints, and
	// argparse takes it: read as the flag, not shown in --help.
	{"kv-cache-memory", ""},
	{"cpu-offload-gb", "vLLM --cpu-offload-gb"},
	{"max-cudagraph-capture-size", "vLLM --max-cudagraph-capture-size (default 512)"},
	{"speculative-config", `vLLM --speculative-config, JSON as vLLM takes it, e.g. '{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":3}'`},
}

type planFlags struct {
	model, gpuName, gpuMemory, version, output, policy string
	install, image                                     string
	gpuCount, gpusPerNode, typicalContext              int
	enforceEager, allGPUs, offline                     bool
	vllm                                               map[string]*string
	// profile and rate are plan's traffic: --max-num-seqs chosen by
	// simulating it (plan_traffic.go).
	profile string
	rate    float64
	// upgradeTo and maxKVLoss are the upgrade preflight (plan_upgrade.go).
	upgradeTo, maxKVLoss string
	// pinKV writes -o args with a pinned KV pool (--kv-cache-memory-bytes).
	pinKV bool
}

func newPlanCmd(env Env) *cobra.Command {
	f := planFlags{vllm: map[string]*string{}}
	cmd := &cobra.Command{
		Use:   "plan [--model MODEL] --gpu GPU [vLLM flags] [-- vllm serve MODEL FLAGS...]",
		Short: "Predict vLLM's GPU memory budget and recommend settings",
		Example: `  headroom plan --gpu H100-80GB -- vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768
  headroom plan --model ./Llama-3.1-8B-Instruct/ --gpu L4 --gpu-count 2 --tensor-parallel-size 2
  headroom plan --model Qwen/Qwen2.5-7B-Instruct --gpu Standard_NC24ads_A100_v4 -o json
  headroom plan --model deepseek-ai/DeepSeek-V2-Lite-Chat --gpu A100-40GB --kv-cache-dtype fp8 -o args
  headroom plan --all-gpus --model meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4`,
		Long: `Predicts, per GPU, what vLLM will measure and allocate: weights, the activation
peak of its profile run, non-torch memory, CUDA graphs and the KV cache; whether it
starts and serves one max-length request; and the settings to use.

Settings can be given as headroom flags (vLLM's own names) or as a pasted command
after --; a headroom flag overrides the same flag in the pasted command.

--max-num-seqs: without a traffic, the value in use is kept (vLLM's default
unless you set one): a lower cap only makes requests the KV cache could hold
wait. With --profile FILE (a 'headroom profile -o json' output or a request
log) it is chosen by simulating that traffic (up to 20,000 requests per
candidate); with --typical-context N it is as many requests of N tokens as
the KV cache holds. doctor (with a request log), audit and the webhook
follow the same rule.

Several GPUs given (--gpu 2xA100-80GB, an instance type, --gpu-count) with no
parallelism set are planned at the fewest of them that fit, tensor parallel
inside a node and pipeline parallel across nodes; the second line says which.

With --upgrade-to B, plans the deployment on --vllm-version (or the image's
release) and on B side by side: every planned term that changes with the release
boundary that changes it, KV tokens and the largest context before and after, and
the verdict. It exits 1 when B does not start the deployment or loses more KV
cache than --max-kv-loss (default 20%).

Exit codes: 0 fits, 1 does not fit (or, with --profile, no max-num-seqs meets the traffic; with --upgrade-to, the upgrade is blocked), 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	addPlanFlags(fl, &f)
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml, args, kaito")
	fl.IntVar(&f.typicalContext, "typical-context", 0, "tokens (prompt + output) of a typical request: --max-num-seqs becomes as many as the KV cache holds (default: none, the value in use is kept)")
	fl.BoolVar(&f.allGPUs, "all-gpus", false, "plan the model on every catalog GPU, one row each")
	fl.StringVar(&f.profile, "profile", "", "choose --max-num-seqs by simulating this traffic: a 'headroom profile -o json' file or a request log")
	fl.Float64Var(&f.rate, "rate", 0, "with a --profile json: simulate at R requests per second instead of its busiest window's rate")
	addUpgradeFlags(fl, &f)
	fl.BoolVar(&f.pinKV, "pin-kv", false, "with -o args: a pinned KV pool (--kv-cache-memory-bytes, vLLM 0.10.2+) in place of --gpu-memory-utilization")
	return cmd
}

// addPlanFlags registers the flags that name a deployment (model, GPU,
// version, policy and vLLM's own settings), for every command that plans
// one.
func addPlanFlags(fl *pflag.FlagSet, f *planFlags) {
	fl.StringVar(&f.model, "model", "", "model: a catalog id, a local directory or config.json, or a Hugging Face id")
	fl.StringVar(&f.gpuName, "gpu", "", "GPU: a device (H100-80GB, L4, ...), a cloud instance type, a GFD product label, or a MIG profile")
	fl.IntVar(&f.gpuCount, "gpu-count", 0, "number of GPUs (default: the instance type's count, or what the parallelism needs)")
	fl.IntVar(&f.gpusPerNode, "gpus-per-node", 0, "GPUs of one node: past it, what would fit shards with tensor parallel inside a node and pipeline parallel across nodes (default: the instance type's count, or 8)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "a GPU by its usable memory instead of a name, e.g. 24GiB")
	fl.StringVar(&f.version, "vllm-version", "", "the vLLM version whose rules apply (default: the newest known, "+vllm.Newest().String()+")")
	fl.StringVar(&f.install, "vllm-install", "", "how vLLM is installed: image (vLLM's official image, with FlashInfer; the default) or pip (without FlashInfer), which decides the profile run's sampler in some releases")
	fl.StringVar(&f.image, "vllm-image", "", "the container image vLLM runs from: vLLM's official image names the install, and its tag the release when --vllm-version is not given")
	fl.StringVar(&f.policy, "policy", memory.PolicyHeadroom, "utilization policy: headroom (computed from the sizes) or kaito (KAITO's 1.5 GiB curve)")
	fl.BoolVar(&f.enforceEager, "enforce-eager", false, "vLLM --enforce-eager (no CUDA graphs)")
	fl.BoolVar(&f.offline, "offline", false, "never fetch from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
	addVLLMStringFlags(fl, f)
}

// request turns the command's flags and pasted command into a report
// request: headroom's own vLLM flags, where given, follow the pasted ones
// and so win over them.
func request(cmd *cobra.Command, f planFlags, pasted []string) report.Request {
	req := report.Request{Model: f.model, GPU: f.gpuName, GPUMemory: f.gpuMemory, GPUCount: f.gpuCount, GPUsPerNode: f.gpusPerNode,
		Version: f.version, Install: f.install, Image: f.image, Command: pastedWords(pasted), ReadConfig: readConfigFile, Offline: f.offline, AllGPUs: f.allGPUs}
	for _, v := range append(vllmStringFlags, schedulerFlags...) {
		if cmd.Flags().Changed(v.name) {
			req.Flags = append(req.Flags, "--"+v.name, *f.vllm[v.name])
		}
	}
	for _, v := range schedulerBools {
		if on, _ := cmd.Flags().GetBool(v.name); on && cmd.Flags().Changed(v.name) {
			req.Flags = append(req.Flags, "--"+v.name)
		}
	}
	if cmd.Flags().Changed("enforce-eager") {
		req.Flags = append(req.Flags, fmt.Sprintf("--enforce-eager=%t", f.enforceEager))
	}
	return req
}

// readConfigFile reads the file a pasted `--config` names, from the
// directory headroom runs in as vLLM reads it from its own, at most
// vllm.MaxConfigFileBytes (and one byte more, so that a longer file is
// told apart).
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, vllm.MaxConfigFileBytes+1))
}

func reportEnv(env Env) report.Env {
	return report.Env{Getenv: env.Getenv, HTTPClient: env.HTTPClient, FS: env.ModelFS}
}

// evidence is a resolved planning request.
type evidence = report.Evidence

func gather(ctx context.Context, cmd *cobra.Command, env Env, f planFlags, args []string) (evidence, error) {
	if n := cmd.ArgsLenAtDash(); n > 0 {
		return evidence{}, badInput("unexpected arguments before --: %s (put the vLLM command after --)", strings.Join(args[:n], " "))
	} else if n < 0 && len(args) > 0 {
		return evidence{}, badInput("unexpected argument %q: give the model with --model, or paste the vLLM command after --", args[0])
	}
	if err := outputAfterDash(args); err != nil {
		return evidence{}, err
	}
	e, err := report.Gather(ctx, reportEnv(env), request(cmd, f, args))
	if err != nil {
		return e, usageError{err}
	}
	return e, nil
}

func firstProblem(p []memory.Finding) string {
	if len(p) == 0 {
		return "see headroom plan"
	}
	return p[0].Message
}

func runPlan(cmd *cobra.Command, env Env, f planFlags, args []string) error {
	switch f.output {
	case "table", "json", "yaml", "args", "kaito":
	default:
		return badInput("unknown output format %q: use table, json, yaml, args or kaito", f.output)
	}
	if err := checkPolicy(f.policy); err != nil {
		return err
	}
	if f.typicalContext < 0 {
		return badInput("--typical-context must be positive")
	}
	e, err := gather(cmd.Context(), cmd, env, f, args)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("upgrade-to") || cmd.Flags().Changed("max-kv-loss") {
		return runUpgrade(cmd, f, e)
	}
	// A typical request is no longer than the longest one served.
	most := e.Spec.MaxPositions
	if e.Settings.MaxModelLen > 0 {
		most = e.Settings.MaxModelLen
	}
	if f.typicalContext > 0 && most > 0 && f.typicalContext > most {
		return badInput("--typical-context %d is longer than the longest request served (%d tokens): give the tokens of a typical request, prompt and output", f.typicalContext, most)
	}
	opt := memory.Options{Policy: f.policy, TypicalContext: f.typicalContext}
	if f.allGPUs {
		if f.output != "table" && f.output != "json" && f.output != "yaml" {
			return badInput("--all-gpus prints a table, json or yaml, not %s: plan one GPU with --gpu for its flags", f.output)
		}
		if f.profile != "" {
			return badInput("--profile chooses one deployment's --max-num-seqs: give --gpu, not --all-gpus")
		}
		if f.gpuName != "" || f.gpuMemory != "" {
			return badInput("--all-gpus plans every catalog GPU: drop --gpu (or drop --all-gpus to plan that one)")
		}
		return runAllGPUs(cmd, f, e, opt)
	}
	var rep report.Report
	if f.profile != "" {
		t, err := report.PlanTraffic(nil, f.profile, f.rate)
		if err != nil {
			return usageError{err}
		}
		if rep, err = report.BuildWithTraffic(cmd.Context(), e, opt, t); err != nil {
			var ue usageError
			if errors.As(err, &ue) || errors.Is(err, context.Canceled) {
				return err
			}
			return usageError{err}
		}
	} else if f.rate != 0 {
		return badInput("--rate needs --profile FILE")
	} else if rep, err = report.Build(e, opt); err != nil {
		return usageError{err}
	}
	format := f.output
	if f.pinKV {
		switch {
		case format != "args":
			return badInput("--pin-kv writes -o args: add -o args (the table and JSON show the pinned pool anyway)")
		case rep.PinnedKV == nil:
			return badInput("no pinned KV pool to offer: vLLM %s has no --%s (0.10.2 and newer do), or the recommendation does not fit", rep.Settings.VLLMVersion, vllm.FlagKVCacheMemory)
		case !rep.PinnedKV.Fits:
			return badInput("the pinned KV pool does not fit: %s", firstProblem(rep.PinnedKV.Budget.Problems))
		}
		format = "args-pinned"
	}
	if err := render(cmd.OutOrStdout(), format, rep); err != nil {
		return err
	}
	if !rep.Fits {
		return errNoFit
	}
	if t := rep.Recommended.FromTraffic; t != nil && t.FellBehind != nil {
		// The memory fits; the traffic does not: no setting of this one
		// deployment serves it.
		return errNoFit
	}
	return nil
}
