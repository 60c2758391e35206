package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/vllm"
)

// A GPU's process list holds vLLM's own process beside any other: the
// other-processes finding and its remedy name only the others, so that
// the user is never told to stop vLLM.

// footprintMatch is how close a process's memory must come to the plan's
// footprint to be taken for vLLM's (nvidia-smi counts the CUDA context
// and the graphs with the budget; the plan predicts them within a few
// percent).
const footprintMatch = 0.15

// holder is one process that holds GPU memory.
type holder struct {
	pid   int
	name  string
	bytes int64
	line  Line
}

func (h holder) String() string {
	if h.name != "" {
		return fmt.Sprintf("PID %d %s (%s)", h.pid, h.name, gib(max(h.bytes, 0)))
	}
	return fmt.Sprintf("PID %d (%s)", h.pid, gib(max(h.bytes, 0)))
}

// cardHolders is what one reading of a GPU says of its processes: vLLM's
// (when one is told apart), how it was told, and the others.
type cardHolders struct {
	gpu    int
	vllm   *holder
	how    string
	others []holder
	// held is what the others hold together.
	held int64
}

// gpuPIDs are the engine and worker process ids the logs name.
func (g *diag) gpuPIDs() []int {
	var out []int
	for _, l := range g.ev.Logs {
		out = append(out, l.GPUPIDs...)
	}
	return out
}

// vllmEvidence reports whether anything but the process list says a vLLM
// server uses the card: a log, an OOM, a command or a model.
func (g *diag) vllmEvidence() bool {
	return len(g.ev.Logs) > 0 || len(g.ev.OOMs) > 0 || len(g.ev.Commands) > 0 || g.opt.HasSettings || g.dep.Model != ""
}

// startFailedForMemory reports a start-up refused for lack of free
// memory: vLLM's process may be gone from a later process list.
func (g *diag) startFailedForMemory() bool {
	for _, l := range g.ev.Logs {
		for _, e := range l.Events {
			if e.Event.Kind == vllm.LogErrFreeMemory {
				return true
			}
		}
	}
	return false
}

// split tells vLLM's process from the others among procs: by the
// engine's process id in the logs, by a name that says vLLM, by the
// plan's footprint, else (with vLLM in the evidence and no start-up that
// failed for memory) the largest.
func (g *diag) split(gpu int, procs []holder) cardHolders {
	c := cardHolders{gpu: gpu}
	pick := -1
	pids := g.gpuPIDs()
	for i, p := range procs {
		if slices.Contains(pids, p.pid) {
			pick, c.how = i, "the engine's process id in the log"
			break
		}
	}
	if pick < 0 {
		for i, p := range procs {
			if strings.Contains(strings.ToLower(p.name), "vllm") {
				pick, c.how = i, "its name"
				break
			}
		}
	}
	if pick < 0 && g.base != nil && g.base.Footprint > 0 {
		best := footprintMatch
		for i, p := range procs {
			if d := float64(p.bytes-g.base.Footprint) / float64(g.base.Footprint); d < best && d > -best {
				pick, best = i, max(d, -d)
				c.how = fmt.Sprintf("its memory is the plan's footprint, %s", gib(g.base.Footprint))
			}
		}
	}
	switch {
	case pick >= 0:
	case g.startFailedForMemory():
		c.how = "its start-up failed for lack of free memory"
	default:
		for i, p := range procs {
			if pick < 0 || p.bytes > procs[pick].bytes {
				pick = i
			}
		}
		c.how = "the largest, taken to be vLLM's"
		if !g.vllmEvidence() {
			c.how += " as nothing else in the evidence names it; give the vLLM log, whose engine lines carry its pid"
		}
	}
	for i, p := range procs {
		if i == pick {
			v := p
			c.vllm = &v
			continue
		}
		c.others = append(c.others, p)
		c.held += max(p.bytes, 0)
	}
	sort.SliceStable(c.others, func(i, j int) bool { return c.others[i].bytes > c.others[j].bytes })
	return c
}

// smiHolders are the compute processes of each GPU nvidia-smi lists, split.
func (g *diag) smiHolders() []cardHolders {
	var out []cardHolders
	for _, gf := range g.ev.GPUs {
		for _, x := range gf.GPUs {
			var procs []holder
			for _, p := range x.Processes {
				if p.Type == "" || strings.Contains(p.Type, "C") {
					procs = append(procs, holder{pid: p.PID, name: p.Name, bytes: p.UsedBytes, line: gf.ProcessLines[p.PID]})
				}
			}
			if len(procs) >= 2 {
				out = append(out, g.split(x.Index, procs))
			}
		}
	}
	return out
}

// oomHolders are the processes an OOM message lists, split.
func (g *diag) oomHolders(o OOMFacts) cardHolders {
	var procs []holder
	for _, p := range o.OOM.Processes {
		procs = append(procs, holder{pid: p.PID, bytes: p.Bytes, line: o.Line})
	}
	c := g.split(o.GPU, procs)
	if c.vllm == nil && len(procs) > 0 {
		// The message is vLLM's own: one of the processes it lists is
		// the one that raised it, the largest unless a pid says else.
		c = cardHolders{gpu: o.GPU}
		sort.SliceStable(procs, func(i, j int) bool { return procs[i].bytes > procs[j].bytes })
		v := procs[0]
		c.vllm, c.how = &v, "the largest, the process that raised the error"
		c.others = procs[1:]
		for _, p := range c.others {
			c.held += max(p.bytes, 0)
		}
	}
	return c
}

// holderRules signal memory that processes other than vLLM hold, from
// nvidia-smi's process list and the OOM message's.
func (g *diag) holderRules() {
	for _, c := range g.smiHolders() {
		if c.held < otherMemoryMin || len(c.others) == 0 {
			continue
		}
		var lines []Line
		for _, p := range c.others {
			lines = append(lines, p.line)
		}
		g.signal(CodeOtherProcesses, wStrong, fmt.Sprintf("nvidia-smi shows %s on GPU %d beside vLLM%s", holders(c.others), c.gpu, c.vllmSaid()), lines...)
	}
	for _, o := range g.ev.OOMs {
		if len(o.OOM.Processes) < 2 {
			continue
		}
		if c := g.oomHolders(o); c.held >= otherMemoryMin {
			g.signal(CodeOtherProcesses, wNamed, fmt.Sprintf("the out-of-memory message lists %s on GPU %d beside vLLM%s", holders(c.others), o.GPU, c.vllmSaid()), o.Line)
		}
	}
}

// vllmSaid names vLLM's process and how it was told apart.
func (c cardHolders) vllmSaid() string {
	if c.vllm == nil {
		return " (vLLM's own process is not among them: " + c.how + ")"
	}
	return fmt.Sprintf(" (vLLM is %s: %s)", c.vllm, c.how)
}

func holders(hs []holder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.String()
	}
	return strings.Join(parts, ", ")
}

// otherRemedies free the card of the others, or, where vLLM fits beside
// them, share it at the utilization they leave.
func (g *diag) otherRemedies() []Remedy {
	var named []holder
	var others, total int64
	for _, c := range g.smiHolders() {
		named = append(named, c.others...)
		others = max(others, c.held)
	}
	for _, o := range g.ev.OOMs {
		total = max(total, o.OOM.Total)
		if len(o.OOM.Processes) >= 2 {
			c := g.oomHolders(o)
			if len(named) == 0 {
				named = c.others
			}
			others = max(others, c.held)
		} else if o.OOM.Total > 0 && o.OOM.ProcessInUse > 0 {
			others = max(others, o.OOM.Total-o.OOM.Free-o.OOM.ProcessInUse)
		}
	}
	for _, l := range g.ev.Logs {
		if r := l.Report; r.TotalBytes > 0 && r.FreeBytes > 0 {
			// At start-up nothing of vLLM's is on the card yet: all that
			// is not free is the others'.
			others = max(others, r.TotalBytes-r.FreeBytes)
			total = max(total, r.TotalBytes)
		}
	}
	free := Remedy{Action: ActionFreeGPU, Args: []string{}, Why: "give vLLM a GPU of its own: stop or move the other processes"}
	if len(named) > 0 {
		free.Why = "give vLLM a GPU of its own: stop or move " + holders(named)
	} else if others > 0 {
		free.Why += fmt.Sprintf(" (%s held)", gib(others))
	}
	if g.base == nil || others <= 0 {
		return []Remedy{free}
	}
	if total == 0 {
		total = g.base.PerGPU.Total
	}
	u := memory.UtilizationBeside(total, others, g.base.PerGPU)
	beside := fmt.Sprintf("%s is held by others, so vLLM may ask for at most %.2f of %s", gib(others), u, gib(total))
	if u <= 0 {
		beside = fmt.Sprintf("%s is held by others, which leaves vLLM nothing of %s", gib(others), gib(total))
	}
	if u > 0 {
		if nb, ok := g.with(func(s *vllm.Settings) { s.GPUMemoryUtilization = u }); ok && nb.Fits {
			return []Remedy{free, {Action: ActionSetFlag, Args: []string{"--" + vllm.FlagGPUMemoryUtilization, fmt.Sprintf("%.2f", u)},
				Why: fmt.Sprintf("or share the card: %s; the KV cache is then %s (%s tokens)", beside, gib(nb.PerGPU.KVCache), vllm.Thousands(nb.KVTokens))}}
		}
	}
	// No utilization serves the model beside them: freeing the card is
	// the answer, and no flag is offered that would fail the same way.
	free.Why += fmt.Sprintf("; sharing the card does not work: %s, and at that the model does not fit", beside)
	g.mustFree = fmt.Sprintf("once the other processes have left the GPU (%s), which is the fix: beside them the model fits at no utilization", beside)
	return []Remedy{free}
}
