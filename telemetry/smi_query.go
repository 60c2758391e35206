package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// QueryGPUFields are the --query-gpu fields headroom asks nvidia-smi for,
// and the columns ParseQueryGPU assumes when the output has no header.
// memory.reserved is left out on purpose: drivers before R510 reject the
// whole query when one field is unknown ("is not a valid field to query").
var QueryGPUFields = []string{"index", "name", "uuid", "memory.total", "memory.used", "memory.free"}

// ComputeAppsFields are the --query-compute-apps fields headroom asks for,
// and the columns ParseComputeApps assumes when the output has no header.
var ComputeAppsFields = []string{"pid", "process_name", "used_gpu_memory", "gpu_uuid"}

// QueryGPUArgs are nvidia-smi's arguments for a snapshot of every device.
// The header is kept so the parser maps columns by name.
func QueryGPUArgs() []string {
	return []string{"--query-gpu=" + strings.Join(QueryGPUFields, ","), "--format=csv,nounits"}
}

// ComputeAppsArgs are nvidia-smi's arguments for the compute processes.
func ComputeAppsArgs() []string {
	return []string{"--query-compute-apps=" + strings.Join(ComputeAppsFields, ","), "--format=csv,nounits"}
}

// maxLine bounds one line of nvidia-smi output; real lines are < 300 bytes.
const maxLine = 64 << 10

// fieldAliases maps nvidia-smi's alternative field names to one name.
// nvidia-smi --help-query-gpu / --help-query-compute-apps list them.
var fieldAliases = map[string]string{
	"gpu_name":    "name",
	"gpu_uuid":    "uuid",
	"pci.bus_id":  "bus_id",
	"gpu_bus_id":  "bus_id",
	"used_memory": "used_gpu_memory",
}

// canonicalField strips a header's unit ("memory.total [MiB]") and maps
// aliases. ok is false for text that cannot be a field name.
func canonicalField(h string) (name, unit string, ok bool) {
	h = strings.TrimSpace(h)
	if i := strings.IndexByte(h, '['); i >= 0 {
		unit = strings.TrimSuffix(strings.TrimSpace(h[i+1:]), "]")
		h = strings.TrimSpace(h[:i])
	}
	if h == "" {
		return "", "", false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_') {
			return "", "", false
		}
	}
	if a, found := fieldAliases[h]; found {
		h = a
	}
	return h, unit, true
}

// csvTable is nvidia-smi --format=csv output split into rows of fields.
type csvTable struct {
	fields []string
	units  []string
	rows   [][]string
	lines  []int // line number of each row, for errors
}

// readCSV reads nvidia-smi's CSV. A first line whose every cell is a field
// name is the header; otherwise the columns are defaults. textField is the
// free-text column that absorbs surplus commas (a process or GPU name that
// contains ", ").
func readCSV(r io.Reader, defaults []string, textField string) (csvTable, error) {
	var t csvTable
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" || strings.Contains(line, "No running processes found") {
			continue
		}
		if err := smiFailure(line); err != nil {
			return t, err
		}
		cells := strings.Split(line, ",")
		if t.fields == nil {
			if hdr, units, ok := header(cells); ok {
				t.fields, t.units = hdr, units
				continue
			}
			t.fields = defaults
			t.units = make([]string, len(defaults))
		}
		if len(cells) > len(t.fields) {
			cells = mergeText(cells, t.fields, textField)
		}
		if len(cells) != len(t.fields) {
			return t, fmt.Errorf("nvidia-smi line %d has %d columns, want %d (%s): give the whole --format=csv output of that query",
				n, len(cells), len(t.fields), strings.Join(t.fields, ","))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		t.rows = append(t.rows, cells)
		t.lines = append(t.lines, n)
	}
	if err := sc.Err(); err != nil {
		return t, fmt.Errorf("reading nvidia-smi output: %v", err)
	}
	return t, nil
}

func header(cells []string) (names, units []string, ok bool) {
	for _, c := range cells {
		n, u, ok := canonicalField(c)
		if !ok || !knownField(n) {
			return nil, nil, false
		}
		names = append(names, n)
		units = append(units, u)
	}
	return names, units, true
}

// knownField is true for names nvidia-smi prints in a CSV header. Any name
// of its query syntax (letters, dots, underscores) that starts with a
// letter counts: a data row starts with a digit, a UUID or a quoted value.
func knownField(n string) bool {
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		return false
	}
	return !strings.HasPrefix(n, "gpu-") && !strings.HasPrefix(n, "mig-")
}

// mergeText joins the surplus cells of a row into its free-text column.
func mergeText(cells, fields []string, textField string) []string {
	at := -1
	for i, f := range fields {
		if f == textField {
			at = i
		}
	}
	if at < 0 {
		return cells
	}
	extra := len(cells) - len(fields)
	out := append([]string{}, cells[:at]...)
	out = append(out, strings.Join(cells[at:at+extra+1], ","))
	return append(out, cells[at+extra+1:]...)
}

// smiFailure recognises nvidia-smi's messages for "no GPU here".
func smiFailure(line string) error {
	switch {
	case strings.Contains(line, "No devices were found"):
		return fmt.Errorf("%w: nvidia-smi says %q", ErrNoGPU, line)
	case strings.Contains(line, "NVIDIA-SMI has failed"),
		strings.Contains(line, "couldn't communicate with the NVIDIA driver"):
		return fmt.Errorf("%w: nvidia-smi cannot reach the driver (%s)", ErrNoGPU, line)
	}
	return nil
}

// notAvailable is true for nvidia-smi's placeholders for a value it does
// not have: "[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]",
// "[Unknown Error]", "[GPU is lost]" and "-" (dmon).
func notAvailable(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == "-" || v == "N/A" || strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]")
}

// parseMemory reads "81920 MiB", "81920" (with the header's unit) or a
// placeholder (Unknown) as bytes. nvidia-smi's "MiB" and dmon's "MB" are
// both 2^20 bytes.
func parseMemory(v, headerUnit string) (int64, error) {
	v = strings.TrimSpace(v)
	if notAvailable(v) {
		return Unknown, nil
	}
	num, unit := v, headerUnit
	if i := strings.IndexFunc(v, func(r rune) bool { return r == ' ' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }); i >= 0 {
		num, unit = strings.TrimSpace(v[:i]), strings.TrimSpace(v[i:])
	}
	shift := 0
	switch unit {
	case "MiB", "MB", "":
		shift = 20
	case "KiB", "KB":
		shift = 10
	case "GiB", "GB":
		shift = 30
	case "B":
		shift = 0
	default:
		return 0, fmt.Errorf("memory value %q has unit %q, want MiB", v, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("memory value %q is not a whole number of MiB", v)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("memory value %q is too large", v)
	}
	return n << shift, nil
}

// parseInt reads a small non-negative integer such as an index, a PID or a
// percentage ("45 %"); placeholders give Unknown.
func parseInt(v string) (int, error) {
	v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "%"))
	if notAvailable(v) {
		return Unknown, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return n, nil
}

// ParseQueryGPU reads the output of
//
//	nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.used,memory.free --format=csv[,noheader][,nounits]
//
// With a header, columns are matched by name, so any field order and extra
// fields (memory.reserved, utilization.gpu, pci.bus_id, ...) work. Without
// one the columns must be QueryGPUFields. Values nvidia-smi does not have
// are Unknown.
func ParseQueryGPU(r io.Reader) ([]GPU, error) {
	return ParseQueryGPUFields(r, QueryGPUFields)
}

// ParseQueryGPUFields is ParseQueryGPU for header-less output of another
// field list, e.g. the fields of a user's own script.
func ParseQueryGPUFields(r io.Reader, fields []string) ([]GPU, error) {
	fields = canonicalList(fields)
	t, err := readCSV(r, fields, "name")
	if err != nil {
		return nil, err
	}
	gpus := make([]GPU, 0, len(t.rows))
	for ri, row := range t.rows {
		g := newGPU()
		for i, f := range t.fields {
			v := row[i]
			var err error
			switch f {
			case "index":
				g.Index, err = parseInt(v)
			case "name":
				g.Name = v
			case "uuid":
				if !notAvailable(v) {
					g.UUID = v
				}
			case "bus_id":
				g.BusID = v
			case "memory.total":
				g.TotalBytes, err = parseMemory(v, t.units[i])
			case "memory.used":
				g.UsedBytes, err = parseMemory(v, t.units[i])
			case "memory.free":
				g.FreeBytes, err = parseMemory(v, t.units[i])
			case "memory.reserved":
				g.ReservedBytes, err = parseMemory(v, t.units[i])
			case "utilization.gpu":
				g.UtilizationPercent, err = parseInt(v)
			}
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi line %d, %s: %v", t.lines[ri], f, err)
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// ParseComputeApps reads the output of
//
//	nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid --format=csv[,noheader][,nounits]
//
// Columns are matched by header name (used_memory is an alias of
// used_gpu_memory); without a header they must be ComputeAppsFields. No
// processes is an empty list, whether nvidia-smi printed just the header or
// "No running processes found".
func ParseComputeApps(r io.Reader) ([]Process, error) {
	t, err := readCSV(r, canonicalList(ComputeAppsFields), "process_name")
	if err != nil {
		return nil, err
	}
	procs := make([]Process, 0, len(t.rows))
	for ri, row := range t.rows {
		p := newProcess()
		for i, f := range t.fields {
			v := row[i]
			var err error
			switch f {
			case "pid":
				p.PID, err = parseInt(v)
			case "process_name":
				p.Name = v
			case "used_gpu_memory":
				p.UsedBytes, err = parseMemory(v, t.units[i])
			case "uuid":
				if !notAvailable(v) {
					p.GPUUUID = v
				}
			}
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi line %d, %s: %v", t.lines[ri], f, err)
			}
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func canonicalList(fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		n, _, ok := canonicalField(f)
		if !ok {
			n = f
		}
		out[i] = n
	}
	return out
}
