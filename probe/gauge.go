package probe

import (
	"context"
	"fmt"
	"time"

	"headroom.dev/headroom/telemetry"
)

// GPUMemory is one GPU's memory as the driver reports it.
type GPUMemory struct {
	Index      int    `json:"index"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
}

// MemoryGauge reads the GPUs' memory, so that a launch can wait until the
// previous one's memory is released. It is kept this small so that tests
// can stand in for a GPU.
type MemoryGauge interface {
	// Read returns every visible GPU.
	Read(ctx context.Context) ([]GPUMemory, error)
	// Source names where the numbers come from ("nvml", "nvidia-smi").
	Source() string
}

// gaugeReadTimeout bounds one reading: nvidia-smi can hang on a driver
// that stopped answering.
const gaugeReadTimeout = 30 * time.Second

// telemetryGauge reads through telemetry's GPU reader, which owns NVML
// and the nvidia-smi fallback.
type telemetryGauge struct{ r telemetry.GPUReader }

// Read fails when a GPU's total or used memory is not reported: the wait
// for the release compares them.
func (g telemetryGauge) Read(ctx context.Context) ([]GPUMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, gaugeReadTimeout)
	defer cancel()
	gpus, err := g.r.GPUs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]GPUMemory, 0, len(gpus))
	for _, d := range gpus {
		if d.TotalBytes == telemetry.Unknown || d.UsedBytes == telemetry.Unknown {
			return nil, fmt.Errorf("%s does not report the memory of GPU %d", g.r.Source(), d.Index)
		}
		out = append(out, GPUMemory{Index: d.Index, Name: d.Name, TotalBytes: d.TotalBytes, UsedBytes: d.UsedBytes})
	}
	return out, nil
}

func (g telemetryGauge) Source() string { return g.r.Source() }

// Close releases NVML; callers find it through interface{ Close() }.
func (g telemetryGauge) Close() { _ = g.r.Close() }

// FindGauge picks the best gauge there is: NVML, else nvidia-smi on PATH,
// else none (nil), with a note saying what that means.
func FindGauge(ctx context.Context) (MemoryGauge, string) {
	return findGauge(ctx, telemetry.OpenOptions{})
}

func findGauge(ctx context.Context, opt telemetry.OpenOptions) (MemoryGauge, string) {
	// Process names are not read: the gauge uses the devices' totals only.
	opt.ProcName = func(int) string { return "" }
	if r, err := telemetry.OpenGPUs(opt); err == nil {
		g := telemetryGauge{r}
		if _, err := g.Read(ctx); err == nil {
			return g, ""
		}
		g.Close()
	}
	return nil, "neither NVML nor nvidia-smi answers here: launches do not wait for the GPU memory to be released"
}

// releaseSlack is how far above the level before a launch the used memory
// may stay and still count as released: other processes move a little,
// and the driver keeps some memory per context for a while. 512 MiB, or 1%
// of the card when that is more.
func releaseSlack(total int64) int64 { return max(512<<20, total/100) }

// released reports whether every GPU is back to its level before the
// launch (within releaseSlack); ok is false when the two readings do not
// list the same GPUs.
func released(before, now []GPUMemory) (done bool, worst int64, ok bool) {
	if len(before) != len(now) {
		return false, 0, false
	}
	done = true
	for i := range now {
		if now[i].Index != before[i].Index {
			return false, 0, false
		}
		over := now[i].UsedBytes - before[i].UsedBytes
		worst = max(worst, over)
		if over > releaseSlack(now[i].TotalBytes) {
			done = false
		}
	}
	return done, worst, true
}
