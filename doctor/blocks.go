package doctor

import (
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"headroom.dev/headroom/telemetry"
)

// startBlock begins collecting multi-line evidence: nvidia-smi's screen,
// dmon, --query-gpu / --query-compute-apps CSV (with or without header),
// or Prometheus text.
func (s *textScanner) startBlock(l string) bool {
	t := strings.TrimSpace(l)
	var k blockKind
	switch {
	case strings.HasPrefix(t, "|") && strings.Contains(t, "NVIDIA-SMI"):
		k = blockScreen
	case strings.HasPrefix(t, "# gpu"):
		k = blockDmon
	case csvHeader(t):
		k = blockCSV
	case csvRowNoHeader(t):
		k = blockCSVNoHeader
	case promStart(t):
		k = blockProm
	default:
		return false
	}
	s.block, s.blockStart, s.blockLines, s.blanks = k, s.n, append(s.blockLines[:0], l), 0
	return true
}

// continues reports whether l belongs to the open block.
func (s *textScanner) continues(l string) bool {
	t := strings.TrimSpace(l)
	if t == "" {
		s.blanks++
		return s.block == blockScreen && s.blanks <= 3
	}
	s.blanks = 0
	switch s.block {
	case blockScreen:
		return strings.HasPrefix(t, "|") || strings.HasPrefix(t, "+")
	case blockDmon:
		return strings.HasPrefix(t, "#") || startsWithDigit(t)
	case blockCSV:
		return strings.Contains(t, ",") && (startsWithDigit(t) || strings.HasPrefix(t, "["))
	case blockCSVNoHeader:
		return csvRowNoHeader(t)
	case blockProm:
		return strings.HasPrefix(t, "# ") || metricLine(t)
	}
	return false
}

func startsWithDigit(t string) bool { return t != "" && t[0] >= '0' && t[0] <= '9' }

// csvHeader matches nvidia-smi's CSV header ("index, name, memory.used
// [MiB], ..." or "pid, process_name, used_gpu_memory [MiB]").
func csvHeader(t string) bool {
	if !strings.Contains(t, ",") || strings.Contains(t, "|") || strings.Contains(t, "=") {
		return false
	}
	return strings.Contains(t, "memory.used") || strings.Contains(t, "memory.total") ||
		strings.Contains(t, "used_gpu_memory") || strings.Contains(t, "used_memory")
}

// csvRowNoHeader matches a --format=csv,noheader row of --query-gpu:
// "0, 97 %, 63 %, 14466 MiB, 15109 MiB" (index first, sizes in MiB).
func csvRowNoHeader(t string) bool {
	if !startsWithDigit(t) || strings.Count(t, ",") < 2 || !strings.Contains(t, "MiB") {
		return false
	}
	first := strings.TrimSpace(t[:strings.IndexByte(t, ',')])
	_, err := strconv.Atoi(first)
	return err == nil && !strings.ContainsAny(t, "|=")
}

// promStart matches the start of Prometheus text: a # HELP / # TYPE line,
// or a sample whose name is plainly a metric's (with ':' or '_').
func promStart(t string) bool {
	if strings.HasPrefix(t, "# HELP ") || strings.HasPrefix(t, "# TYPE ") {
		return true
	}
	if !metricLine(t) {
		return false
	}
	name := t
	if i := strings.IndexAny(t, "{ \t"); i >= 0 {
		name = t[:i]
	}
	return strings.ContainsAny(name, ":_")
}

// metricLine matches `name{labels} value [timestamp]`.
func metricLine(t string) bool {
	i := 0
	for i < len(t) && (t[i] == '_' || t[i] == ':' || t[i] >= 'a' && t[i] <= 'z' || t[i] >= 'A' && t[i] <= 'Z' || i > 0 && t[i] >= '0' && t[i] <= '9') {
		i++
	}
	if i == 0 || t[i-1] == ':' {
		// "KEY:  1" is a YAML or describe field, not a sample.
		return false
	}
	rest := t[i:]
	if strings.HasPrefix(rest, "{") {
		j := strings.LastIndexByte(rest, '}')
		if j < 0 {
			return false
		}
		rest = rest[j+1:]
	}
	if rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return false
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return false
	}
	if _, err := strconv.ParseFloat(f[0], 64); err != nil {
		return false
	}
	if len(f) == 2 {
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			return false
		}
	}
	return true
}

// flush parses the open block.
func (s *textScanner) flush() {
	k, lines, start := s.block, s.blockLines, s.blockStart
	s.block = blockNone
	text := strings.Join(lines, "\n") + "\n"
	first := newLine(s.src, start, lines[0])
	note := func(what string, err error) {
		s.in.Notes = append(s.in.Notes, "line "+strconv.Itoa(start)+": "+what+": "+err.Error())
	}
	switch k {
	case blockScreen:
		scr, err := telemetry.ParseSMIScreen(strings.NewReader(text))
		if err != nil {
			note("nvidia-smi screen", err)
			return
		}
		g := GPUFacts{Line: first, Kind: KindSMIScreen, GPUs: scr.GPUs, MIG: scr.MIG, ProcessLines: map[int]Line{}}
		for _, p := range scr.Processes {
			pid := strconv.Itoa(p.PID)
			for i, bl := range lines {
				if strings.Contains(bl, " "+pid+" ") && strings.Contains(bl, "MiB") {
					g.ProcessLines[p.PID] = newLine(s.src, start+i, bl)
					break
				}
			}
		}
		for i, bl := range lines {
			if strings.Contains(bl, "MiB /") {
				g.Line = newLine(s.src, start+i, bl)
				break
			}
		}
		s.e.GPUs = append(s.e.GPUs, g)
		s.in.addKind(KindSMIScreen)
	case blockDmon:
		samples, err := telemetry.ParseDmon(strings.NewReader(text))
		if err != nil {
			note("nvidia-smi dmon", err)
			return
		}
		peak := map[int]int64{}
		var order []int
		for _, d := range samples {
			if _, ok := peak[d.GPU]; !ok {
				order = append(order, d.GPU)
			}
			peak[d.GPU] = max(peak[d.GPU], d.FBBytes)
		}
		g := GPUFacts{Line: first, Kind: KindSMIDmon, Dmon: samples}
		for _, i := range order {
			gp := telemetry.GPU{Index: i, TotalBytes: telemetry.Unknown, UsedBytes: peak[i], FreeBytes: telemetry.Unknown,
				ReservedBytes: telemetry.Unknown, UtilizationPercent: telemetry.Unknown}
			g.GPUs = append(g.GPUs, gp)
		}
		s.e.GPUs = append(s.e.GPUs, g)
		s.in.addKind(KindSMIDmon)
	case blockCSV:
		if strings.Contains(lines[0], "pid") {
			procs, err := telemetry.ParseComputeApps(strings.NewReader(text))
			if err != nil {
				note("nvidia-smi --query-compute-apps", err)
				return
			}
			s.attachProcesses(procs, first)
			return
		}
		gpus, err := telemetry.ParseQueryGPU(strings.NewReader(text))
		if err != nil {
			note("nvidia-smi --query-gpu", err)
			return
		}
		s.e.GPUs = append(s.e.GPUs, GPUFacts{Line: newLine(s.src, start+min(1, len(lines)-1), lines[min(1, len(lines)-1)]), Kind: KindSMIQuery, GPUs: gpus})
		s.in.addKind(KindSMIQuery)
	case blockCSVNoHeader:
		gpus, err := telemetry.ParseQueryGPUFields(strings.NewReader(text), noHeaderFields(lines[0]))
		if err != nil {
			note("nvidia-smi --query-gpu (no header)", err)
			return
		}
		s.e.GPUs = append(s.e.GPUs, GPUFacts{Line: first, Kind: KindSMIQuery, GPUs: gpus})
		s.in.addKind(KindSMIQuery)
	case blockProm:
		s.metrics(text, lines, start)
	}
}

// noHeaderFields guesses the columns of a header-less --query-gpu row:
// headroom's own query (telemetry.QueryGPUFields) when the count matches,
// the seed's snapshot script (index, utilization.gpu, utilization.memory,
// memory.used, memory.total) for five columns with two percentages, and
// index, name, memory.used, memory.total for four.
func noHeaderFields(row string) []string {
	cols := strings.Split(row, ",")
	switch {
	case len(cols) == len(telemetry.QueryGPUFields):
		return telemetry.QueryGPUFields
	case len(cols) == 5 && strings.Contains(cols[1], "%") && strings.Contains(cols[2], "%"):
		return []string{"index", "utilization.gpu", "utilization.memory", "memory.used", "memory.total"}
	case len(cols) == 4:
		return []string{"index", "name", "memory.used", "memory.total"}
	case len(cols) == 3:
		return []string{"index", "memory.used", "memory.total"}
	}
	return telemetry.QueryGPUFields
}

// attachProcesses adds --query-compute-apps processes to the last GPU
// reading of this source, or keeps them on a reading of their own.
func (s *textScanner) attachProcesses(procs []telemetry.Process, at Line) {
	for i := len(s.e.GPUs) - 1; i >= 0; i-- {
		if s.e.GPUs[i].Line.Source == s.src && s.e.GPUs[i].Kind == KindSMIQuery {
			s.e.GPUs[i].GPUs = telemetry.AttachProcesses(s.e.GPUs[i].GPUs, procs)
			s.in.addKind(KindSMIQuery)
			return
		}
	}
	g := telemetry.GPU{Index: telemetry.Unknown, TotalBytes: telemetry.Unknown, UsedBytes: telemetry.Unknown,
		FreeBytes: telemetry.Unknown, ReservedBytes: telemetry.Unknown, UtilizationPercent: telemetry.Unknown, Processes: procs}
	s.e.GPUs = append(s.e.GPUs, GPUFacts{Line: at, Kind: KindSMIQuery, GPUs: []telemetry.GPU{g}})
	s.in.addKind(KindSMIQuery)
}

// Generic GPU-memory metric names: the seed's exporter
// (gpu_memory_used_bytes, gpu_memory_total_bytes) and dcgm-exporter's
// frame-buffer gauges in MiB (peers.md §5.1: FB_USED and FB_FREE are in the
// default counters; FB_RESERVED and FB_TOTAL only in custom ones).
const (
	genericUsed  = "gpu_memory_used_bytes"
	genericTotal = "gpu_memory_total_bytes"
	dcgmUsed     = "DCGM_FI_DEV_FB_USED"
	dcgmFree     = "DCGM_FI_DEV_FB_FREE"
	dcgmReserved = "DCGM_FI_DEV_FB_RESERVED"
	dcgmTotal    = "DCGM_FI_DEV_FB_TOTAL"
)

// metrics parses a Prometheus block with expfmt (and, when it holds vLLM
// metrics, with telemetry's reader, which maps old and new names).
func (s *textScanner) metrics(text string, lines []string, start int) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		s.in.Notes = append(s.in.Notes, "line "+strconv.Itoa(start)+": Prometheus text that does not parse: "+err.Error())
		return
	}
	m := MetricFacts{Line: newLine(s.src, start, lines[0]), Lines: map[string]Line{}}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") {
			continue
		}
		name := t
		if j := strings.IndexAny(t, "{ \t"); j >= 0 {
			name = t[:j]
		}
		if _, seen := m.Lines[name]; !seen {
			m.Lines[name] = newLine(s.src, start+i, l)
		}
	}
	found := false
	if sample, err := telemetry.ParseVLLMMetrics(strings.NewReader(text)); err == nil {
		m.VLLM = &sample
		found = true
		if len(sample.Dropped) > 0 {
			s.in.Notes = append(s.in.Notes, "line "+strconv.Itoa(start)+": values of /metrics left out (no figure is taken from them): "+strings.Join(sample.Dropped, "; "))
		}
	}
	gauge := func(name string, scale float64) (float64, bool) {
		f, ok := fams[name]
		if !ok {
			return 0, false
		}
		best, any := 0.0, false
		for _, x := range f.GetMetric() {
			v := 0.0
			switch {
			case x.GetGauge() != nil:
				v = x.GetGauge().GetValue()
			case x.GetUntyped() != nil:
				v = x.GetUntyped().GetValue()
			default:
				continue
			}
			if v >= 0 && v < 1<<60 && v > best {
				best, any = v, true
			}
		}
		return best * scale, any
	}
	if u, ok := gauge(genericUsed, 1); ok {
		m.GPUUsedBytes = int64(u)
		found = true
	}
	if t, ok := gauge(genericTotal, 1); ok {
		m.GPUTotalBytes = int64(t)
		found = true
	}
	if u, ok := gauge(dcgmUsed, 1<<20); ok && m.GPUUsedBytes == 0 {
		m.GPUUsedBytes = int64(u)
		found = true
		if t, ok := gauge(dcgmTotal, 1<<20); ok {
			m.GPUTotalBytes = int64(t)
		} else if f, ok := gauge(dcgmFree, 1<<20); ok {
			r, _ := gauge(dcgmReserved, 1<<20)
			m.GPUTotalBytes = m.GPUUsedBytes + int64(f) + int64(r)
		}
	}
	if !found {
		return
	}
	s.e.Metrics = append(s.e.Metrics, m)
	s.in.addKind(KindMetrics)
}
