package probe

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// FindBinary picks the engine executable: bin (--vllm-bin) when given,
// else the pasted command's program when it is a path to vllm (a
// virtualenv's, say), else vllm on PATH. The error says what to give.
func FindBinary(bin string, pasted []string) (string, error) {
	if bin != "" {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("--vllm-bin %s: %v", bin, errors.Unwrap(err))
		}
		return p, nil
	}
	for _, a := range pasted {
		if strings.Contains(a, "=") && !strings.Contains(a, "/") {
			continue // VAR=value before the command
		}
		if strings.Contains(a, "/") && filepath.Base(a) == "vllm" {
			if _, err := exec.LookPath(a); err != nil {
				return "", fmt.Errorf("%s: %v; give --vllm-bin", a, errors.Unwrap(err))
			}
			return a, nil
		}
		break
	}
	p, err := exec.LookPath("vllm")
	if err != nil {
		return "", fmt.Errorf("vllm is not on PATH: give --vllm-bin /path/to/vllm")
	}
	return p, nil
}

// Assignments renders a command's VAR=value prefix as environment entries,
// sorted by name: every launch gets them, and so should `vllm --version`
// (Process.Env), since VLLM_USE_V1 and the like change what runs.
func Assignments(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// GaugeGPU is the GPU to plan for when the user names none: the first one
// the gauge sees, from the catalog by its name, or by its total where the
// catalog does not know the name; count GPUs of it (at least one). The
// note says where the GPU came from.
func GaugeGPU(ctx context.Context, gauge MemoryGauge, count int) (gpu.Selection, string, error) {
	if gauge == nil {
		return gpu.Selection{}, "", errors.New("no GPU: give --gpu (e.g. H100-80GB, L4); neither NVML nor nvidia-smi answers here to tell")
	}
	gpus, err := gauge.Read(ctx)
	if err == nil && len(gpus) == 0 {
		err = errors.New("no GPU listed")
	}
	if err != nil {
		return gpu.Selection{}, "", fmt.Errorf("no GPU: give --gpu (%s: %v)", gauge.Source(), err)
	}
	g := gpus[0]
	sel, err := gpu.Resolve(g.Name)
	note := fmt.Sprintf("GPU %q read from %s", g.Name, gauge.Source())
	if err != nil {
		sel = gpu.Selection{Device: gpu.Custom(g.TotalBytes)}
		note = fmt.Sprintf("GPU %q read from %s is not in the catalog; planning with its %s", g.Name, gauge.Source(), memory.GiB(g.TotalBytes))
	}
	sel.Count = max(count, 1)
	return sel, note, nil
}
