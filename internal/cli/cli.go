// Package cli holds headroom's commands, flags and output formats (table,
// json, yaml, args, kaito). It gathers evidence, asks the memory core, and
// renders; it computes no budget of its own.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes: the plan's verdict or an input error.
const (
	ExitFits     = 0
	ExitNoFit    = 1
	ExitBadInput = 2
)

// Env is what the commands may touch of the outside world; tests pass
// their own.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// HTTPClient reaches the Hugging Face Hub; nil uses a client with timeouts.
	HTTPClient *http.Client
	// ModelFS is where local model paths are looked up; nil means the
	// operating system's (the web server passes an empty one).
	ModelFS fs.FS
}

// usageError marks bad input: exit code 2 with one line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func badInput(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// noFit is returned by a plan that does not fit: exit code 1, the reasons
// are already printed.
var errNoFit = errors.New("does not fit")

// Main runs headroom with args and returns the process exit code.
func Main(ctx context.Context, args []string, env Env) int {
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitFits
	case errors.Is(err, errNoFit):
		return ExitNoFit
	default:
		msg := err.Error()
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		fmt.Fprintf(env.Stderr, "headroom: %s\n", msg)
		return ExitBadInput
	}
}

// addDeploymentFlags registers the flags that name a deployment, under
// plan's names: the model, the GPU (by name or usable memory, and a
// count), the vLLM version, --offline and vLLM's own flags; model, gpu and
// version are what the command says of its three.
func addDeploymentFlags(fl *pflag.FlagSet, f *planFlags, model, gpu, version string) {
	fl.StringVar(&f.model, "model", "", model)
	fl.StringVar(&f.gpuName, "gpu", "", gpu)
	fl.IntVar(&f.gpuCount, "gpu-count", 0, "number of GPUs")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "a GPU by its usable memory instead of a name, e.g. 24GiB")
	fl.StringVar(&f.version, "vllm-version", "", version)
	fl.BoolVar(&f.offline, "offline", false, "never fetch from the Hugging Face Hub (also HF_HUB_OFFLINE=1)")
	addVLLMStringFlags(fl, f)
}

// addVLLMStringFlags registers vLLM's own flags under their names; one
// without a usage is a spelling read as another and left out of --help.
func addVLLMStringFlags(fl *pflag.FlagSet, f *planFlags) {
	for _, v := range vllmStringFlags {
		f.vllm[v.name] = fl.String(v.name, "", v.usage)
		if v.usage == "" {
			_ = fl.MarkHidden(v.name)
		}
	}
}

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "headroom",
		Short: "Keep vLLM inside its GPU memory: plan the budget, recommend settings",
		Long: `headroom predicts, without a GPU, every GiB vLLM will use for a model on a GPU
(weights, activation peak, non-torch memory, CUDA graphs, KV cache), says whether
it will start, and recommends --gpu-memory-utilization, --max-model-len and
--max-num-seqs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `headroom version` prints.
		Version: versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%v (see --help)", err)}
	})
	// Every command's number flags refuse NaN before the command runs: a
	// check written "v <= 0 || v > 1" lets NaN through (--kv-threshold
	// NaN was taken, and its alert could never fire).
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return refuseNaN(cmd.Flags()) }
	root.AddCommand(newPlanCmd(env), newGPUsCmd(env), newModelsCmd(env), newVersionCmd(env),
		newProbeCmd(env), newWebhookCmd(env), newDoctorCmd(env), newProfileCmd(env),
		newSnapshotCmd(env), newWatchCmd(env), newExporterCmd(env), newSimulateCmd(env), newServeCmd(env),
		newAuditCmd(env), newLoadtestCmd(env), newCheckCmd(env), newCapacityCmd(env))
	return root
}

// refuseNaN fails on a float flag given as NaN, naming it.
func refuseNaN(fl *pflag.FlagSet) error {
	var bad string
	fl.Visit(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "float64", "float32", "float64Slice", "float32Slice":
		default:
			return
		}
		for _, v := range strings.Split(strings.Trim(f.Value.String(), "[]"), ",") {
			if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && math.IsNaN(x) && bad == "" {
				bad = f.Name
			}
		}
	})
	if bad != "" {
		return badInput("--%s NaN is not a number: give one (see --help)", bad)
	}
	return nil
}
