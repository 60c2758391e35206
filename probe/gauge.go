package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GPUMemory is one GPU's memory as the driver reports it.
type GPUMemory struct {
	Index      int    `json:"index"`
	Name       string `json:"name"`
	TotalBytes int64  `json:"total_bytes"`
	UsedBytes  int64  `json:"used_bytes"`
}

// MemoryGauge reads the GPUs' memory, so that a launch can wait until the
// previous one's memory is released. It is kept this small so that a
// fuller GPU telemetry source can stand behind it.
type MemoryGauge interface {
	// Read returns every visible GPU.
	Read(ctx context.Context) ([]GPUMemory, error)
	// Source names where the numbers come from ("nvml", "nvidia-smi").
	Source() string
}

// SMIGauge reads nvidia-smi's CSV output.
type SMIGauge struct {
	// Bin is the nvidia-smi executable (default "nvidia-smi" on PATH).
	Bin string
}

// smiQuery is the nvidia-smi query; memory is in MiB with nounits.
var smiQuery = []string{"--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader,nounits"}

// Read runs nvidia-smi once (at most 30 seconds).
func (g SMIGauge) Read(ctx context.Context) ([]GPUMemory, error) {
	bin := g.Bin
	if bin == "" {
		bin = "nvidia-smi"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, smiQuery...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", bin, err)
	}
	return ParseSMI(string(out))
}

// Source is "nvidia-smi".
func (g SMIGauge) Source() string { return "nvidia-smi" }

// ParseSMI reads the output of
// `nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits`:
// one line per GPU, e.g. "0, NVIDIA H100 80GB HBM3, 81559, 1234" (MiB).
// GPU names hold no commas; a line that does not parse is an error, and so
// is output with no GPU.
func ParseSMI(out string) ([]GPUMemory, error) {
	var gpus []GPUMemory
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("nvidia-smi line %q: want index, name, total, used", clip(line, 80))
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		total, err2 := mibBytes(f[2])
		used, err3 := mibBytes(f[3])
		if err := errors.Join(err1, err2, err3); err != nil || idx < 0 || used > total {
			return nil, fmt.Errorf("nvidia-smi line %q: want index, name, total MiB, used MiB (used ≤ total)", clip(line, 80))
		}
		gpus = append(gpus, GPUMemory{Index: idx, Name: strings.TrimSpace(f[1]), TotalBytes: total, UsedBytes: used})
	}
	if len(gpus) == 0 {
		return nil, errors.New("nvidia-smi listed no GPU")
	}
	return gpus, nil
}

// mibBytes reads a MiB figure ("81559", or "[N/A]" which is an error).
func mibBytes(s string) (int64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 1<<30 {
		return 0, fmt.Errorf("not a MiB figure: %q", s)
	}
	return int64(f * (1 << 20)), nil
}

// FindGauge picks the best gauge there is: NVML, else nvidia-smi, else
// none (nil), with a note saying what that means.
func FindGauge(ctx context.Context) (MemoryGauge, string) {
	nv, nvErr := NewNVMLGauge()
	if nvErr == nil {
		if _, err := nv.Read(ctx); err == nil {
			return nv, ""
		}
		nv.Close()
	}
	smi := SMIGauge{}
	if _, err := smi.Read(ctx); err == nil {
		return smi, ""
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
