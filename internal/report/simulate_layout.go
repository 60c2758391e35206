package report

import (
	"fmt"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// withPlanLayout is e at the parallel layout `headroom plan` takes for the
// GPUs given (ChooseLayout: the fewest of them whose layout fits) when the
// user set no parallelism, or e itself. Its count is the GPUs the layout
// uses, which a replica is billed for and the engine line names; the
// choice is said in a note, as plan says it. An engine whose given GPUs
// are one device without a count is e: plan plans it as given.
func withPlanLayout(e *Engine) (*Engine, error) {
	ev := e.Evidence
	if ev.AutoCount {
		return e, nil
	}
	in := memory.Input{Model: ev.Spec, Device: ev.Sel.Device, Count: ev.Sel.Count, Settings: ev.Settings, Measured: ev.Measured, GPUsPerNode: ev.GPUsPerNode, Draft: ev.Draft}
	tp, pp, why := ChooseLayout(in)
	if tp == 0 {
		return e, nil
	}
	set := e.Input.Settings
	if tp == e.Budget.Settings.TensorParallelSize && pp == e.Budget.Settings.PipelineParallelSize && tp*pp == e.Budget.Count {
		return e, nil
	}
	set.TensorParallelSize, set.PipelineParallelSize = tp, pp
	c := *e
	c.Input.Count = tp * pp
	if tp != max(ev.Settings.TensorParallelSize, 1) || pp != max(ev.Settings.PipelineParallelSize, 1) {
		c.Input.Measured = nil // measured at another layout
	}
	o, err := c.At(set)
	if err != nil {
		return nil, err
	}
	o.Notes = append(append([]string(nil), o.Notes...), layoutNote(why))
	return o, nil
}

// layoutNote says the layout chosen, in plan's words ("set
// --tensor-parallel-size 4: the fewest of the 8 × H100-80GB given that
// fit").
func layoutNote(why string) string {
	return why + " (as `headroom plan` lays out the GPUs given, with no parallelism set)"
}

// planAlternative is, for an engine whose plan does not fit, the engine
// `headroom plan` recommends in its place on the same GPU: its first
// alternative (the least change that fits, ranked as plan ranks them, a
// GPU of another kind left out: that is another option) at the settings
// plan recommends for it. It returns the engine and the change in words;
// nil when nothing on this GPU fits.
func planAlternative(e *Engine, policy string) (*Engine, string, error) {
	dev := e.Evidence.Sel.Device
	in := e.Input
	alts := memory.AlternativesFrom(in, e.Budget, []gpu.Device{dev})
	for _, a := range alts {
		if a.Input.Device.Name != dev.Name {
			continue
		}
		rec, err := memory.Recommend(a.Input, memory.Options{Policy: policy})
		if err != nil {
			return nil, "", err
		}
		set := a.Input.Settings
		what := a.Message
		if rec.MaxModelLen > 0 && rec.Budget.Fits {
			set.GPUMemoryUtilization, set.MaxModelLen, set.MaxNumSeqs = rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs
			what = fmt.Sprintf("%s; with it, the settings plan recommends: --gpu-memory-utilization %.2f --max-model-len %d --max-num-seqs %d", what, rec.GPUMemoryUtilization, rec.MaxModelLen, rec.MaxNumSeqs)
		}
		set.NumGPUBlocksOverride = 0
		c := *e
		c.Input = a.Input
		o, err := c.At(set)
		if err != nil {
			return nil, "", err
		}
		if !o.Budget.Fits {
			continue
		}
		return o, what, nil
	}
	return nil, "", nil
}

// alternativeLines are what plan says would fit, for a simulation that
// stops because its plan does not ("would fit: use 4 × H100-80GB with
// --tensor-parallel-size 4").
func alternativeLines(e *Engine) []string {
	var out []string
	for _, a := range memory.AlternativesFrom(e.Input, e.Budget, gpu.Devices()) {
		out = append(out, "would fit: "+a.Message)
		if len(out) == 2 {
			break
		}
	}
	return out
}

// poolCovers are the problems --num-gpu-blocks-override answers: what
// the plan's memory would leave short, which the pool given replaces.
// Any other problem (a flag vLLM's parser refuses, a layout or scheduler
// limit it rejects, a GPU it does not run on) stops the server whatever
// its pool.
var poolCovers = map[string]bool{
	memory.CodeFreeMemory: true, memory.CodeWeightsDontFit: true, memory.CodeNoCacheMemory: true,
	memory.CodeRequestDoesntFit: true, memory.CodeGraphsOverflow: true, memory.CodeColdStart: true,
	memory.CodeOnlineQuantLoad: true, memory.CodePinnedPoolDoesntFit: true, memory.CodeThinMargin: true,
	memory.CodeLowConcurrency: true, memory.CodeFixedKVMemory: true, memory.CodeGDNGraphTransient: true,
}

// startProblems are the plan's problems a given KV pool does not answer.
func startProblems(b memory.Budget) []string {
	if b.Settings.NumGPUBlocksOverride == 0 {
		return nil
	}
	var out []string
	for _, p := range b.Problems {
		if !poolCovers[p.Code] {
			out = append(out, p.Message)
		}
	}
	return out
}
