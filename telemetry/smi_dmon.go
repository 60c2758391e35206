package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// DmonSample is one data row of `nvidia-smi dmon -s mu`.
type DmonSample struct {
	// Date and Time are set when dmon ran with -o D / -o T ("20240612",
	// "10:21:34"), empty otherwise.
	Date string `json:"date,omitempty"`
	Time string `json:"time,omitempty"`
	GPU  int    `json:"gpu"`
	// FBBytes is the frame buffer (device memory) in use; BAR1Bytes the
	// BAR1 mapping. Unknown where dmon printed "-".
	FBBytes   int64 `json:"fb_bytes"`
	BAR1Bytes int64 `json:"bar1_bytes"`
	// SMPercent and MemPercent are SM and memory-controller utilization;
	// Unknown where absent.
	SMPercent  int `json:"sm_percent"`
	MemPercent int `json:"mem_percent"`
}

// ParseDmon reads `nvidia-smi dmon -s mu [-d N] [-o DT]`. Columns come from
// the "# gpu ..." header lines, which dmon repeats every few screens, so
// every driver's column set and order works: R470 prints
// "gpu sm mem enc dec fb bar1", R535 and later add jpg, ofa and ccpm. dmon's
// "MB" is 2^20 bytes.
func ParseDmon(r io.Reader) ([]DmonSample, error) {
	var out []DmonSample
	var cols []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == "" {
			continue
		}
		if err := smiFailure(line); err != nil {
			return out, err
		}
		if strings.HasPrefix(line, "#") {
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			for i := range f {
				f[i] = strings.ToLower(f[i])
			}
			if len(f) > 0 && slices.Contains(f, "gpu") {
				cols = f
			}
			continue
		}
		if cols == nil {
			return out, fmt.Errorf("dmon line %d comes before the \"# gpu ...\" header: give the whole output of `nvidia-smi dmon -s mu`", n)
		}
		f := strings.Fields(line)
		if len(f) != len(cols) {
			return out, fmt.Errorf("dmon line %d has %d columns, the header has %d (%s)", n, len(f), len(cols), strings.Join(cols, " "))
		}
		s := DmonSample{GPU: Unknown, FBBytes: Unknown, BAR1Bytes: Unknown, SMPercent: Unknown, MemPercent: Unknown}
		for i, c := range cols {
			var err error
			switch c {
			case "date":
				s.Date = f[i]
			case "time":
				s.Time = f[i]
			case "gpu":
				s.GPU, err = parseInt(f[i])
			case "fb":
				s.FBBytes, err = parseMemory(f[i], "MB")
			case "bar1":
				s.BAR1Bytes, err = parseMemory(f[i], "MB")
			case "sm":
				s.SMPercent, err = parseInt(f[i])
			case "mem":
				s.MemPercent, err = parseInt(f[i])
			}
			if err != nil {
				return out, fmt.Errorf("dmon line %d, %s: %v", n, c, err)
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading dmon output: %v", err)
	}
	if cols == nil {
		return nil, fmt.Errorf("no \"# gpu ...\" header: give the output of `nvidia-smi dmon -s mu`")
	}
	return out, nil
}
