package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/probe"
)

// calibrationFor looks for the newest calibration record (written by
// `headroom probe`) measured under the plan's model, GPU, release,
// parallelism, dtype, quantization and batch, and returns its numbers for
// the planner with a note saying so. The file is found through getenv
// (XDG_CACHE_HOME, HOME), so a test environment without them reads none.
// A missing file is no news; an unreadable one is a note.
func calibrationFor(getenv func(string) string, e Evidence) (*memory.Measured, string) {
	if e.Sel.Device.TotalBytes <= 0 {
		return nil, ""
	}
	path, err := probe.CalibrationPath(getenv)
	if err != nil {
		return nil, ""
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("calibration records not read: %v", err)
	}
	defer f.Close()
	recs, _, err := probe.ReadRecords(f)
	if err != nil {
		return nil, fmt.Sprintf("calibration records not read: %v", err)
	}
	key := probe.KeyFor(e.Spec, e.Sel.Device, e.Settings)
	rec, ok := probe.LatestMatch(recs, key)
	if !ok {
		return nil, otherRelease(recs, key)
	}
	m := rec.Measured()
	if m == nil {
		return nil, ""
	}
	what := fmt.Sprintf("the probe of %s on %s with vLLM %s at %s", rec.Model, rec.GPU, rec.VLLMVersion, rec.Time.Local().Format(time.DateTime))
	return m, fmt.Sprintf("using measured numbers from %s (calibration.jsonl): %s", what, measuredParts(m))
}

// measuredParts lists the parts a record replaces.
func measuredParts(m *memory.Measured) string {
	s := ""
	add := func(name string, b int64) {
		if b <= 0 {
			return
		}
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %s", name, memory.GiB(b))
	}
	add("weights", m.Weights)
	add("activation", m.Activation)
	add("non-torch", m.NonTorch)
	add("CUDA graphs", m.CUDAGraph)
	return s
}

// otherRelease says when a record would match but for the vLLM release
// (the plan assumed the newest, the probe ran another).
func otherRelease(recs []probe.Record, k probe.Key) string {
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		k.Version = r.VLLMVersion
		if r.Matches(k) && r.Measured() != nil {
			return fmt.Sprintf("a calibration record measured with vLLM %s matches this plan but for the release; pass --vllm-version %s to use its numbers", r.VLLMVersion, r.VLLMVersion)
		}
	}
	return ""
}
