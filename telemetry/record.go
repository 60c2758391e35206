package telemetry

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"headroom.dev/headroom/vllm"
)

// TimeFormat is the time of every record snapshot and watch write: UTC to
// the millisecond.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// SnapshotCSVHeader names the columns of SnapshotCSV. A "gpu" row
// describes a device; a "process" row one process on it (name is then the
// process's, used_bytes its memory). Unknown values are empty.
const SnapshotCSVHeader = "time,source,kind,gpu,uuid,name,pid,total_bytes,used_bytes,free_bytes"

// snapshotRecord is one reading in JSON.
type snapshotRecord struct {
	Time   string `json:"time"`
	Source string `json:"source"`
	GPUs   []GPU  `json:"gpus"`
}

// SnapshotJSON is one reading of the GPUs from source at t as one JSON
// object, unknown values null.
func SnapshotJSON(t time.Time, source string, gpus []GPU) ([]byte, error) {
	return json.Marshal(snapshotRecord{Time: t.UTC().Format(TimeFormat), Source: source, GPUs: gpus})
}

// SnapshotCSV is one reading as CSV rows (SnapshotCSVHeader's columns):
// a row for each GPU followed by one for each of its processes.
func SnapshotCSV(t time.Time, source string, gpus []GPU) ([][]byte, error) {
	ts := t.UTC().Format(TimeFormat)
	var out [][]byte
	row := func(cells ...string) error {
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.Write(cells); err != nil {
			return err
		}
		w.Flush()
		out = append(out, buf.Bytes())
		return w.Error()
	}
	for _, g := range gpus {
		if err := row(ts, source, "gpu", csvInt(int64(g.Index)), g.UUID, oneLine(g.Name), "",
			csvInt(g.TotalBytes), csvInt(g.UsedBytes), csvInt(g.FreeBytes)); err != nil {
			return nil, err
		}
		for _, p := range g.Processes {
			if err := row(ts, source, "process", csvInt(int64(g.Index)), g.UUID, oneLine(p.Name), csvInt(int64(p.PID)),
				"", csvInt(p.UsedBytes), ""); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func csvInt(v int64) string {
	if v == Unknown {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// oneLine keeps a name from breaking a record over lines: process names
// come from /proc and may hold control characters.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// Record is a Reading as `watch -o json` writes it, one object a line.
// A value not known is null.
type Record struct {
	Time                 string            `json:"time"`
	KVCacheUsage         *float64          `json:"kv_cache_usage"`
	RequestsRunning      *float64          `json:"num_requests_running"`
	RequestsWaiting      *float64          `json:"num_requests_waiting"`
	PreemptionsTotal     *float64          `json:"num_preemptions_total"`
	PreemptionsPerMinute *float64          `json:"preemptions_per_minute"`
	TTFTP99Seconds       *float64          `json:"ttft_p99_seconds"`
	TTFTWindowSeconds    *float64          `json:"ttft_window_seconds"`
	OOMRisk              *float64          `json:"oom_risk"`
	GPUUsedBytes         *int64            `json:"gpu_used_bytes"`
	GPUTotalBytes        *int64            `json:"gpu_total_bytes"`
	GPUMinFreeBytes      *int64            `json:"gpu_min_free_bytes"`
	GPUs                 []GPU             `json:"gpus,omitempty"`
	MetricNames          map[string]string `json:"metric_names,omitempty"`
	Alerts               []Alert           `json:"alerts"`
	Error                string            `json:"error,omitempty"`
	// Dropped says what the exposition held that was left out (a value
	// past what any server exports), as VLLMSample.Dropped.
	Dropped []string `json:"dropped,omitempty"`
	// SpecDecode is what the speculative-decoding counters say of the
	// drafts verified over the window (vllm.SpecAcceptance); absent
	// without counters or drafts in the window.
	SpecDecode *vllm.SpecAcceptance `json:"spec_decode,omitempty"`
}

// Record is the reading with the alerts it raised and the error of the
// reading, if any: a metric the server does not export is null, not 0.
func (r Reading) Record(alerts []Alert, readErr error) Record {
	// A value that is not finite is null: the sample's bounds keep every
	// value finite, and this keeps the record encodable whatever a
	// derived value does.
	f := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	rec := Record{Time: r.Time.UTC().Format(TimeFormat), Alerts: alerts}
	if rec.Alerts == nil {
		rec.Alerts = []Alert{}
	}
	if readErr != nil {
		rec.Error = readErr.Error()
	}
	if v := r.VLLM; v != nil {
		rec.Dropped = v.Dropped
		rec.MetricNames = map[string]string{}
		for m, name := range v.Names {
			rec.MetricNames[string(m)] = name
		}
		if v.Has(vllm.MetricKVCacheUsage) {
			rec.KVCacheUsage = f(v.KVCacheUsage)
		}
		if v.Has(vllm.MetricRequestsRunning) {
			rec.RequestsRunning = f(v.RequestsRunning)
		}
		if v.Has(vllm.MetricRequestsWaiting) {
			rec.RequestsWaiting = f(v.RequestsWaiting)
		}
		if v.Has(vllm.MetricPreemptions) {
			rec.PreemptionsTotal = f(v.PreemptionsTotal)
			rec.PreemptionsPerMinute = f(r.Delta.PreemptionsPerMinute)
		}
		if r.TTFTKnown && r.TTFTWindowSeconds > 0 {
			// Over the window only, as watch's help says: a window without
			// a first token has no TTFT, and the server's lifetime p99
			// (which the exporter falls back to) would read as current.
			rec.TTFTP99Seconds, rec.TTFTWindowSeconds = f(r.TTFTP99Seconds), f(r.TTFTWindowSeconds)
		}
		rec.OOMRisk = f(r.OOMRisk)
		if c := r.Delta.SpecDecode; c != nil {
			if a, ok := c.Acceptance(); ok {
				rec.SpecDecode = &a
			}
		}
	}
	if len(r.GPUs) > 0 {
		rec.GPUs = r.GPUs
		if used, total, ok := Sum(r.GPUs); ok {
			rec.GPUUsedBytes, rec.GPUTotalBytes = &used, &total
		}
		if r.MinFreeBytes != Unknown {
			m := r.MinFreeBytes
			rec.GPUMinFreeBytes = &m
		}
	}
	return rec
}
