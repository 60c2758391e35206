package report

import (
	"context"
	"errors"
	"fmt"
	"time"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/probe"
	"headroom.dev/headroom/startup"
	"headroom.dev/headroom/vllm"
)

// ProbeReport is `headroom probe -o json`. Fields may be added, never renamed.
type ProbeReport struct {
	Model               string         `json:"model"`
	GPU                 GPUReport      `json:"gpu"`
	MaxModelLen         int            `json:"max_model_len"`
	Launches            int            `json:"launches"`
	KVCacheTokens       int64          `json:"kv_cache_tokens"`
	AvailableKVCacheGiB float64        `json:"available_kv_cache_gib"`
	VLLMVersion         string         `json:"vllm_version"`
	Seconds             float64        `json:"seconds"`
	Strategy            string         `json:"strategy"`
	Predicted           int            `json:"predicted_max_model_len"`
	ModelMaxLen         int            `json:"model_max_len"`
	History             []LaunchReport `json:"history"`
	Notes               []string       `json:"notes,omitempty"`
	CalibrationFile     string         `json:"calibration_file,omitempty"`
}

// LaunchReport is one launch of the history.
type LaunchReport struct {
	// MaxModelLen is the length launched with; "auto" for --max-model-len auto.
	MaxModelLen any      `json:"max_model_len"`
	Args        []string `json:"args"`
	Outcome     string   `json:"outcome"`
	Reason      string   `json:"reason,omitempty"`
	// Numbers are the figures read from the engine's log.
	Numbers  vllm.StartupReport `json:"numbers"`
	ExitCode int                `json:"exit_code"`
	Seconds  float64            `json:"seconds"`
	Notes    []string           `json:"notes,omitempty"`
}

// ProbeOptions are the probe's own choices, beyond the deployment its
// Request names.
type ProbeOptions struct {
	// Bin is the vllm executable; "" finds it (probe.FindBinary).
	Bin                  string
	Strategy             probe.Strategy
	Steps, MaxLaunches   int
	LaunchTimeout, Grace time.Duration
	// Storage is where the checkpoint is read from, for the launch
	// timeout's start-up estimate ("" = the default class).
	Storage startup.Storage
	// LogDir, when set, keeps each launch's output.
	LogDir string
	// NoCalibration writes no calibration record.
	NoCalibration bool
	Progress      func(probe.Progress)
}

// Probe resolves the request (settings, model, and the GPU it names or
// else the one NVML or nvidia-smi sees), launches the engine as probe.Run
// does and reports what started. When no length starts, the report is
// whole and the error wraps probe.ErrNothingStarts; every other error is
// one line and no report, an interruption (ctx ended) saying so.
func Probe(ctx context.Context, env Env, req Request, opt ProbeOptions) (ProbeReport, error) {
	s, err := Settings(req)
	if err != nil {
		return ProbeReport{}, err
	}
	if s.Model == "" {
		return ProbeReport{}, errors.New("no model: give --model or paste `-- vllm serve MODEL ...`")
	}
	bin, err := probe.FindBinary(opt.Bin, req.Command)
	if err != nil {
		return ProbeReport{}, err
	}
	spec, err := ResolveModel(ctx, env, s.Model, req.Offline)
	if err != nil {
		return ProbeReport{}, err
	}
	var notes []string
	gauge, note := probe.FindGauge(ctx)
	if note != "" {
		notes = append(notes, note)
	}
	if c, ok := gauge.(interface{ Close() }); ok {
		defer c.Close()
	}
	var sel gpu.Selection
	if req.GPU != "" || req.GPUMemory != "" {
		sel, err = ResolveGPU(req.GPU, req.GPUMemory, req.GPUCount)
	} else {
		sel, note, err = probe.GaugeGPU(ctx, gauge, req.GPUCount)
		if note != "" {
			notes = append(notes, note)
		}
	}
	if err != nil {
		return ProbeReport{}, err
	}
	cfg := probe.Config{
		Engine:   &probe.Process{Bin: bin, Env: probe.Assignments(s.Env), Gauge: gauge, Grace: opt.Grace, LogDir: opt.LogDir},
		Settings: s, Model: spec, Device: sel.Device, Count: sel.Count, Version: s.Version,
		Strategy: opt.Strategy, Steps: opt.Steps, MaxLaunches: opt.MaxLaunches, LaunchTimeout: opt.LaunchTimeout, Storage: opt.Storage,
		Progress: opt.Progress,
	}
	calPath := ""
	if !opt.NoCalibration {
		if calPath, err = probe.CalibrationPath(env.Getenv); err != nil {
			notes, calPath = append(notes, err.Error()), ""
		} else {
			cfg.Calibration = func(r probe.Record) error { return probe.AppendRecord(calPath, r) }
		}
	}
	res, err := probe.Run(ctx, cfg)
	if err != nil && !errors.Is(err, probe.ErrNothingStarts) {
		if ctx.Err() != nil {
			return ProbeReport{}, fmt.Errorf("interrupted during launch %d; every engine process it started was stopped", len(res.History))
		}
		return ProbeReport{}, err
	}
	if res.Launches == 0 || res.MaxModelLen == 0 {
		calPath = "" // nothing was written
	}
	return newProbeReport(spec.ID, sel, res, append(notes, res.Notes...), calPath), err
}

func newProbeReport(modelID string, sel gpu.Selection, r probe.Result, notes []string, calPath string) ProbeReport {
	out := ProbeReport{
		Model:               modelID,
		GPU:                 GPUReport{Name: sel.Device.Name, Count: max(sel.Count, 1), TotalBytes: sel.Device.TotalBytes, SKU: sel.SKU},
		MaxModelLen:         r.MaxModelLen,
		Launches:            r.Launches,
		KVCacheTokens:       r.KVCacheTokens,
		AvailableKVCacheGiB: GiBs(r.AvailableKVBytes),
		Seconds:             r.Seconds,
		Strategy:            string(r.Strategy),
		Predicted:           r.Predicted,
		ModelMaxLen:         r.ModelMaxLen,
		History:             []LaunchReport{},
		Notes:               notes,
		CalibrationFile:     calPath,
	}
	if !r.Version.IsZero() {
		out.VLLMVersion = r.Version.String()
	}
	for _, a := range r.History {
		l := LaunchReport{MaxModelLen: a.MaxModelLen, Args: a.Args, Outcome: string(a.Outcome), Reason: a.Reason,
			Numbers: a.Report, ExitCode: a.ExitCode, Seconds: a.Seconds, Notes: a.Notes}
		if a.MaxModelLen == vllm.AutoMaxModelLen {
			l.MaxModelLen = "auto"
		}
		out.History = append(out.History, l)
	}
	return out
}
