package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Screen is what nvidia-smi's default screen (plain `nvidia-smi`) shows.
type Screen struct {
	DriverVersion string `json:"driver_version,omitempty"`
	CUDAVersion   string `json:"cuda_version,omitempty"`
	// GPUs carry the name as printed (drivers before R525 cut long names
	// to 18 characters and "..."), the bus id and used/total memory. The
	// screen shows no free figure: FreeBytes is Total - Used.
	GPUs []GPU       `json:"gpus"`
	MIG  []MIGDevice `json:"mig,omitempty"`
	// Processes is the process table; each is also attached to its GPU.
	Processes []Process `json:"processes"`
	// NoProcesses is true when the table said "No running processes found".
	NoProcesses bool `json:"no_processes"`
}

// Patterns of the screen. The column widths changed between drivers (R470,
// R535, R560 widened the Bus-Id and PID columns), so rows are matched by
// their fields, not by position.
var (
	reDriver   = regexp.MustCompile(`Driver Version:\s*(\S+)`)
	reCUDA     = regexp.MustCompile(`CUDA Version:\s*(\S+)`)
	reGPUFirst = regexp.MustCompile(`^\s*(\d+)\s+(.*?)\s+(On|Off|WDDM|TCC|N/A)\s*$`)
	reBusID    = regexp.MustCompile(`[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]`)
	reMemUsage = regexp.MustCompile(`^\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB\s*$`)
	reMIGRow   = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)
	// GPU GI CI PID Type Name Memory (R450 and later).
	reProcMIG = regexp.MustCompile(`^\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)\s*$`)
	// GPU PID Type Name Memory (drivers before R450 had no GI/CI columns).
	reProcOld = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\d+\s*MiB|N/A)\s*$`)
)

type screenSection int

const (
	secNone screenSection = iota
	secGPUs
	secMIG
	secProcs
)

// ParseSMIScreen reads the default `nvidia-smi` screen: the banner
// (driver and CUDA versions), the GPU table, the "MIG devices" table and
// the "Processes" table, of drivers from R418 to R580. Text with no
// nvidia-smi banner and no GPU row is an error, as is nvidia-smi's own
// "No devices were found" (wrapping ErrNoGPU).
func ParseSMIScreen(r io.Reader) (Screen, error) {
	var s Screen
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	sec := secNone
	banner := false
	cur := -1 // index into s.GPUs of the block being read
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), " \r\t")
		if err := smiFailure(line); err != nil {
			return s, err
		}
		if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, "|") && !strings.HasPrefix(line, "+") {
			if sec != secNone && strings.TrimSpace(line) == "" {
				sec = secNone
			}
			continue
		}
		if strings.Contains(line, "NVIDIA-SMI") {
			banner = true
			if m := reDriver.FindStringSubmatch(line); m != nil {
				s.DriverVersion = m[1]
			}
			if m := reCUDA.FindStringSubmatch(line); m != nil {
				s.CUDAVersion = m[1]
			}
			continue
		}
		switch {
		case strings.Contains(line, "GPU  Name"):
			sec = secGPUs
			continue
		case strings.Contains(line, "MIG devices:"):
			sec = secMIG
			continue
		case strings.Contains(line, "Processes:"):
			sec = secProcs
			continue
		}
		if strings.HasPrefix(line, "+") || strings.HasPrefix(line, "|=") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		var err error
		switch sec {
		case secGPUs:
			cur, err = s.gpuLine(cells, cur)
		case secMIG:
			err = s.migLine(cells)
		case secProcs:
			err = s.procLine(cells)
		}
		if err != nil {
			return s, fmt.Errorf("nvidia-smi screen line %d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading nvidia-smi output: %v", err)
	}
	if !banner && len(s.GPUs) == 0 {
		return s, fmt.Errorf("this is not nvidia-smi's screen (no \"NVIDIA-SMI\" banner, no GPU row): give the output of plain `nvidia-smi`")
	}
	for i, g := range s.GPUs {
		if g.TotalBytes != Unknown && g.UsedBytes != Unknown && g.UsedBytes <= g.TotalBytes {
			s.GPUs[i].FreeBytes = g.TotalBytes - g.UsedBytes
		}
	}
	s.GPUs = AttachProcesses(s.GPUs, s.Processes)
	return s, nil
}

func (s *Screen) gpuLine(cells []string, cur int) (int, error) {
	if m := reGPUFirst.FindStringSubmatch(cells[0]); m != nil {
		g := newGPU()
		var err error
		if g.Index, err = parseInt(m[1]); err != nil {
			return cur, fmt.Errorf("GPU index: %v", err)
		}
		g.Name = m[2]
		if len(cells) > 1 {
			g.BusID = reBusID.FindString(cells[1])
		}
		s.GPUs = append(s.GPUs, g)
		return len(s.GPUs) - 1, nil
	}
	if cur < 0 || len(cells) < 2 {
		return cur, nil
	}
	g := &s.GPUs[cur]
	if m := reMemUsage.FindStringSubmatch(cells[1]); m != nil && g.TotalBytes == Unknown {
		used, err := parseMemory(m[1], "MiB")
		if err != nil {
			return cur, err
		}
		total, err := parseMemory(m[2], "MiB")
		if err != nil {
			return cur, err
		}
		g.UsedBytes, g.TotalBytes = used, total
		if len(cells) > 2 {
			if f := strings.Fields(cells[2]); len(f) > 0 && strings.HasSuffix(f[0], "%") {
				if u, err := parseInt(f[0]); err == nil {
					g.UtilizationPercent = u
				}
			}
		}
	}
	return cur, nil
}

func (s *Screen) migLine(cells []string) error {
	if len(cells) < 2 {
		return nil
	}
	if m := reMIGRow.FindStringSubmatch(cells[0]); m != nil {
		d := MIGDevice{UsedBytes: Unknown, TotalBytes: Unknown, BAR1UsedBytes: Unknown, BAR1TotalBytes: Unknown}
		ids := []*int{&d.GPUIndex, &d.GI, &d.CI, &d.Index}
		for i, p := range ids {
			v, err := strconv.Atoi(m[i+1])
			if err != nil || v > 1<<20 {
				return fmt.Errorf("MIG device id %q is not a small integer", m[i+1])
			}
			*p = v
		}
		var err error
		if d.UsedBytes, d.TotalBytes, err = memPair(cells[1]); err != nil {
			return err
		}
		s.MIG = append(s.MIG, d)
		return nil
	}
	// The line under a MIG device holds its BAR1 usage.
	if strings.TrimSpace(cells[0]) == "" && len(s.MIG) > 0 {
		d := &s.MIG[len(s.MIG)-1]
		if d.BAR1TotalBytes == Unknown {
			used, total, err := memPair(cells[1])
			if err != nil {
				return err
			}
			d.BAR1UsedBytes, d.BAR1TotalBytes = used, total
		}
	}
	return nil
}

// memPair reads "4712MiB / 19968MiB"; anything else is Unknown.
func memPair(cell string) (used, total int64, err error) {
	m := reMemUsage.FindStringSubmatch(cell)
	if m == nil {
		return Unknown, Unknown, nil
	}
	if used, err = parseMemory(m[1], "MiB"); err != nil {
		return 0, 0, err
	}
	if total, err = parseMemory(m[2], "MiB"); err != nil {
		return 0, 0, err
	}
	return used, total, nil
}

func (s *Screen) procLine(cells []string) error {
	row := strings.Join(cells, "|")
	if strings.Contains(row, "No running processes found") {
		s.NoProcesses = true
		return nil
	}
	p := newProcess()
	var gpu, gi, ci, pid, typ, name, mem string
	if m := reProcMIG.FindStringSubmatch(row); m != nil {
		gpu, gi, ci, pid, typ, name, mem = m[1], m[2], m[3], m[4], m[5], m[6], m[7]
	} else if m := reProcOld.FindStringSubmatch(row); m != nil {
		gpu, gi, ci, pid, typ, name, mem = m[1], "N/A", "N/A", m[2], m[3], m[4], m[5]
	} else {
		return nil // header lines ("GPU   GI   CI  PID ...", "ID   ID  Usage")
	}
	var err error
	if p.GPUIndex, err = parseInt(gpu); err != nil {
		return fmt.Errorf("process GPU: %v", err)
	}
	if p.GI, err = parseInt(gi); err != nil {
		return fmt.Errorf("process GI: %v", err)
	}
	if p.CI, err = parseInt(ci); err != nil {
		return fmt.Errorf("process CI: %v", err)
	}
	if p.PID, err = parseInt(pid); err != nil {
		return fmt.Errorf("process PID: %v", err)
	}
	if p.UsedBytes, err = parseMemory(strings.ReplaceAll(mem, " ", ""), "MiB"); err != nil {
		return err
	}
	p.Type, p.Name = typ, strings.TrimSpace(name)
	s.Processes = append(s.Processes, p)
	return nil
}
