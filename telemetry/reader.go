package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Sources of GPU readings.
const (
	SourceNVML      = "nvml"
	SourceNvidiaSMI = "nvidia-smi"
)

// GPUReader reads every visible GPU's memory, with its compute processes.
type GPUReader interface {
	GPUs(ctx context.Context) ([]GPU, error)
	// Source is SourceNVML or SourceNvidiaSMI.
	Source() string
	Close() error
}

// OpenOptions choose how GPUs are read.
type OpenOptions struct {
	// SMIPath, when set, reads through that nvidia-smi binary and skips
	// NVML: the user picked the tool.
	SMIPath string
	// LookPath finds nvidia-smi when NVML is not there; nil is exec.LookPath.
	LookPath func(string) (string, error)
	// ProcName names a process by PID; nil reads /proc/PID/comm.
	ProcName func(pid int) string
}

// OpenGPUs returns NVML when libnvidia-ml loads and sees a device, else
// nvidia-smi from PATH. With neither the error wraps ErrNoGPU and says in
// one line what was tried.
func OpenGPUs(opt OpenOptions) (GPUReader, error) {
	if opt.SMIPath != "" {
		return &SMIReader{Path: opt.SMIPath, Why: "the binary named"}, nil
	}
	procName := opt.ProcName
	if procName == nil {
		procName = ProcComm
	}
	r, nvmlErr := openSystemNVML(procName)
	if nvmlErr == nil {
		return r, nil
	}
	look := opt.LookPath
	if look == nil {
		look = exec.LookPath
	}
	path, err := look("nvidia-smi")
	if err != nil {
		reason := strings.TrimPrefix(nvmlErr.Error(), ErrNoGPU.Error()+": ")
		return nil, fmt.Errorf("%w here: NVML is not usable (%s) and nvidia-smi is not on PATH", ErrNoGPU, reason)
	}
	return &SMIReader{Path: path, Why: "no NVML: " + strings.TrimPrefix(nvmlErr.Error(), ErrNoGPU.Error()+": ")}, nil
}

// Via says in words which way r reads the GPUs, and for nvidia-smi why
// not NVML, for the line snapshot, watch and the exporter print: the same
// binary reads through NVML on one machine and nvidia-smi on another.
func Via(r GPUReader) string {
	s, ok := r.(*SMIReader)
	if !ok {
		return r.Source()
	}
	v := SourceNvidiaSMI + " at " + s.Path
	if s.Why != "" {
		v += " (" + s.Why + ")"
	}
	return v
}

// ProcComm returns a process's command name from /proc/PID/comm, or "" when
// it cannot be read. NVML reports PIDs of the host's PID namespace; inside a
// container without it, /proc has no such PID (or another process under
// it), so the name is best effort.
func ProcComm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SMIReader reads GPUs by running nvidia-smi's CSV queries.
type SMIReader struct {
	// Path is the nvidia-smi binary.
	Path string
	// Why says why nvidia-smi reads the GPUs and not NVML (OpenGPUs fills
	// it in; empty for a reader built by hand).
	Why string
}

// Source is SourceNvidiaSMI.
func (r *SMIReader) Source() string { return SourceNvidiaSMI }

// Close does nothing: every reading is a separate nvidia-smi run.
func (r *SMIReader) Close() error { return nil }

// GPUs runs --query-gpu and --query-compute-apps and joins them by UUID.
func (r *SMIReader) GPUs(ctx context.Context) ([]GPU, error) {
	out, err := r.run(ctx, QueryGPUArgs())
	if err != nil {
		return nil, err
	}
	gpus, err := ParseQueryGPU(strings.NewReader(out))
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("%w: %s lists no device", ErrNoGPU, r.Path)
	}
	out, err = r.run(ctx, ComputeAppsArgs())
	if err != nil {
		return nil, err
	}
	procs, err := ParseComputeApps(strings.NewReader(out))
	if err != nil {
		return nil, err
	}
	return AttachProcesses(gpus, procs), nil
}

func (r *SMIReader) run(ctx context.Context, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, r.Path, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return string(out), nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%w: %s does not exist", ErrNoGPU, r.Path)
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %v", r.Path, ctx.Err())
	}
	// nvidia-smi prints its reasons on stdout ("No devices were found",
	// exit 6; "NVIDIA-SMI has failed ...", exit 9).
	text := strings.TrimSpace(string(out) + "\n" + stderr.String())
	for _, line := range strings.Split(text, "\n") {
		if ferr := smiFailure(line); ferr != nil {
			return "", ferr
		}
	}
	first, _, _ := strings.Cut(text, "\n")
	return "", fmt.Errorf("%s %s: %v: %s", r.Path, args[0], err, first)
}
