package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
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
	{"kv-cache-memory", "vLLM --kv-cache-memory (fixed KV bytes per GPU)"},
	{"cpu-offload-gb", "vLLM --cpu-offload-gb"},
	{"max-cudagraph-capture-size", "vLLM --max-cudagraph-capture-size (default 512)"},
}

type planFlags struct {
	model, gpuName, gpuMemory, version, output, policy string
	gpuCount, typicalContext                           int
	enforceEager, allGPUs, offline                     bool
	vllm                                               map[string]*string
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

Exit codes: 0 fits, 1 does not fit, 2 bad input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd, env, f, args)
		},
	}
	fl := cmd.Flags()
	addPlanFlags(fl, &f)
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json, yaml, args, kaito")
	fl.IntVar(&f.typicalContext, "typical-context", 0, "tokens (prompt + output) of a typical request, for --max-num-seqs (default: max-model-len / 4)")
	fl.BoolVar(&f.allGPUs, "all-gpus", false, "plan the model on every catalog GPU, one row each")
	return cmd
}

// addPlanFlags registers the flags that name a deployment (model, GPU,
// version, policy and vLLM's own settings), for every command that plans
// one.
func addPlanFlags(fl *pflag.FlagSet, f *planFlags) {
	fl.StringVar(&f.model, "model", "", "model: a catalog id, a local directory or config.json, or a Hugging Face id")
	fl.StringVar(&f.gpuName, "gpu", "", "GPU: a device (H100-80GB, L4, ...), a cloud instance type, a GFD product label, or a MIG profile")
	fl.IntVar(&f.gpuCount, "gpu-count", 0, "number of GPUs (default: the instance type's count, or what the parallelism needs)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "a GPU by its usable memory instead of a name, e.g. 24GiB")
	fl.StringVar(&f.version, "vllm-version", "", "the vLLM version whose rules apply (default: the newest known, "+vllm.Newest().String()+")")
	fl.StringVar(&f.policy, "policy", memory.PolicyHeadroom, "utilization policy: headroom (computed from the sizes) or kaito (KAITO's 1.5 GiB curve)")
	fl.BoolVar(&f.enforceEager, "enforce-eager", false, "vLLM --enforce-eager (no CUDA graphs)")
	fl.BoolVar(&f.offline, "offline", false, "never fetch from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
	for _, v := range vllmStringFlags {
		f.vllm[v.name] = fl.String(v.name, "", v.usage)
	}
}

// settingsFrom merges the pasted command and headroom's own vLLM flags.
func settingsFrom(cmd *cobra.Command, f planFlags, pasted []string) (vllm.Settings, error) {
	var args []string
	if len(pasted) > 0 {
		args = append(args, pasted...)
	} else {
		args = []string{"vllm", "serve"}
		if f.model != "" {
			args = append(args, f.model)
		}
	}
	for _, v := range vllmStringFlags {
		if cmd.Flags().Changed(v.name) {
			args = append(args, "--"+v.name, *f.vllm[v.name])
		}
	}
	if cmd.Flags().Changed("enforce-eager") {
		args = append(args, fmt.Sprintf("--enforce-eager=%t", f.enforceEager))
	}
	s, err := vllm.ParseCommand(args)
	if err != nil {
		return vllm.Settings{}, usageError{err}
	}
	if f.model != "" {
		s.Model = f.model
	}
	if f.version != "" {
		v, err := vllm.ParseVersion(f.version)
		if err != nil {
			return vllm.Settings{}, usageError{err}
		}
		s.Version = v
	}
	return s, nil
}

// evidence is a resolved planning request.
type evidence struct {
	spec     model.Spec
	sel      gpu.Selection
	settings vllm.Settings
	note     []string
	// autoCount is true when the user named one device without a count:
	// the plan then uses as many as the parallelism needs.
	autoCount bool
	// measured holds a matching calibration record's numbers (calibration.go).
	measured *memory.Measured
}

func gather(ctx context.Context, cmd *cobra.Command, env Env, f planFlags, args []string) (evidence, error) {
	var e evidence
	pasted := args
	if n := cmd.ArgsLenAtDash(); n > 0 {
		return e, badInput("unexpected arguments before --: %s (put the vLLM command after --)", strings.Join(args[:n], " "))
	} else if n < 0 && len(args) > 0 {
		return e, badInput("unexpected argument %q: give the model with --model, or paste the vLLM command after --", args[0])
	}
	var err error
	if e.settings, err = settingsFrom(cmd, f, pasted); err != nil {
		return e, err
	}
	if e.settings.Model == "" {
		return e, badInput("no model: give --model (a catalog id, a directory, or a Hugging Face id) or paste `-- vllm serve MODEL ...`")
	}
	if e.spec, err = resolveModel(ctx, env, e.settings.Model, f.offline); err != nil {
		return e, usageError{err}
	}
	if !f.allGPUs {
		if e.sel, err = resolveGPU(f); err != nil {
			return e, usageError{err}
		}
		e.autoCount = f.gpuCount == 0 && e.sel.SKU == "" && e.sel.Count == 1
	}
	if e.settings.Version.IsZero() {
		e.settings.Version = vllm.Newest()
		e.note = append(e.note, fmt.Sprintf("vLLM %s assumed (the newest these rules know); set --vllm-version to yours", e.settings.Version))
	}
	if m, note := calibrationFor(env.Getenv, e); note != "" {
		e.measured = m
		e.note = append(e.note, note)
	}
	return e, nil
}

func resolveModel(ctx context.Context, env Env, ref string, offline bool) (model.Spec, error) {
	opt := model.ResolveOptions{Catalog: catalog.Lookup, Suggest: func(id string) []string { return catalog.Suggest(id, 3) }}
	if !offline && env.Getenv("HF_HUB_OFFLINE") != "1" {
		client := env.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 30 * time.Second}
		}
		hub := model.NewHubFromEnv(env.Getenv, client)
		opt.Hub = &hub
	}
	return model.Resolve(ctx, ref, opt)
}

func resolveGPU(f planFlags) (gpu.Selection, error) {
	var sel gpu.Selection
	switch {
	case f.gpuMemory != "" && f.gpuName != "":
		return sel, fmt.Errorf("give either --gpu or --gpu-memory, not both")
	case f.gpuMemory != "":
		n, err := gpu.ParseBytes(f.gpuMemory)
		if err != nil {
			return sel, fmt.Errorf("--gpu-memory: %v", err)
		}
		sel = gpu.Selection{Device: gpu.Custom(n), Count: 1}
	case f.gpuName != "":
		var err error
		if sel, err = gpu.Resolve(f.gpuName); err != nil {
			return sel, err
		}
	default:
		return sel, fmt.Errorf("no GPU: give --gpu (e.g. H100-80GB, L4, g5.12xlarge) or --gpu-memory 24GiB; `headroom gpus` lists them")
	}
	if f.gpuCount < 0 {
		return sel, fmt.Errorf("--gpu-count must be positive")
	}
	if f.gpuCount > 0 {
		sel.Count = f.gpuCount
	}
	return sel, nil
}

func runPlan(cmd *cobra.Command, env Env, f planFlags, args []string) error {
	switch f.output {
	case "table", "json", "yaml", "args", "kaito":
	default:
		return badInput("unknown output format %q: use table, json, yaml, args or kaito", f.output)
	}
	switch f.policy {
	case memory.PolicyHeadroom, memory.PolicyKAITO:
	default:
		return badInput("unknown --policy %q: use headroom or kaito", f.policy)
	}
	if f.typicalContext < 0 {
		return badInput("--typical-context must be positive")
	}
	e, err := gather(cmd.Context(), cmd, env, f, args)
	if err != nil {
		return err
	}
	opt := memory.Options{Policy: f.policy, TypicalContext: f.typicalContext}
	if f.allGPUs {
		return runAllGPUs(cmd, f, e, opt)
	}
	rep, err := buildReport(e, opt)
	if err != nil {
		return usageError{err}
	}
	if err := render(cmd.OutOrStdout(), f.output, rep); err != nil {
		return err
	}
	if !rep.Fits {
		return errNoFit
	}
	return nil
}

func buildReport(e evidence, opt memory.Options) (Report, error) {
	in := memory.Input{Model: e.spec, Device: e.sel.Device, Count: e.sel.Count, Settings: e.settings, Measured: e.measured}
	if e.autoCount {
		in.Count = 0
	}
	b, err := memory.Plan(in)
	if err != nil {
		return Report{}, err
	}
	rec, err := memory.Recommend(in, opt)
	if err != nil {
		return Report{}, err
	}
	// A plan that does not fit is recommended for its first alternative
	// (the least change that fits), so the block and its command agree
	// with it; with none, only a recommendation that fits by itself stays.
	var alts []memory.Alternative
	var chosen *memory.Alternative
	run := e.settings
	if !b.Fits {
		alts = memory.AlternativesFrom(in, b, gpu.Devices())
		switch {
		case len(alts) > 0:
			chosen = &alts[0]
			if rec, err = memory.Recommend(chosen.Input, opt); err != nil {
				return Report{}, err
			}
			if run, err = withArgs(e.settings, chosen.Args); err != nil {
				return Report{}, err
			}
		case !rec.Budget.Fits:
			rec = memory.Recommendation{Policy: rec.Policy, Why: []string{
				"nothing tried fits (more or fewer shards, more GPUs, fp8 weights or KV cache, a shorter context, another utilization, a bigger GPU): see the problems"}}
		}
	}
	notes := e.note
	if used := b.Settings.TensorParallelSize * b.Settings.PipelineParallelSize * max(b.Settings.DataParallelSize, 1); b.Count > used {
		notes = append(notes, fmt.Sprintf("%d GPUs given but the settings use %d; set --tensor-parallel-size %d to shard the model over all of them", b.Count, used, b.Count))
	}
	if e.sel.Note != "" {
		notes = append(notes, e.sel.Note)
	}
	if d := e.sel.Device; d.Estimated {
		notes = append(notes, fmt.Sprintf("%s's usable memory (%s) is an estimate (%s); if nvidia-smi on your card shows another total, pass --gpu-memory with it", d.Name, memory.GiB(d.TotalBytes), d.Source))
	}
	return newReport(e, b, rec, alts, chosen, run, notes), nil
}

// withArgs is the user's settings with an alternative's flags applied.
func withArgs(user vllm.Settings, args []string) (vllm.Settings, error) {
	if len(args) == 0 {
		return user, nil
	}
	s, err := vllm.ParseFlags(append(user.Args(), args...))
	if err != nil {
		return user, err
	}
	s.Model, s.Env, s.Version = user.Model, user.Env, user.Version
	return s, nil
}
