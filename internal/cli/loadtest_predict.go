package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// prediction is simulate's engine for the served model on the given GPU,
// built before the load goes out so that bad input stops the run first.
type prediction struct {
	env    Env
	calOut string
	engine *report.Engine
	// standIn is set when the server is headroom's own simulated engine:
	// its steps are the simulator's, not a GPU's, and never calibrate one.
	standIn bool
}

func newPrediction(cmd *cobra.Command, env Env, f loadtestFlags, args []string) (*prediction, error) {
	e, err := report.NewEngine(cmd.Context(), reportEnv(env), nil, report.EngineRequest{
		Plan: request(cmd, f.plan, args), StepTime: f.stepTime, Calibration: f.calibration})
	if err != nil {
		return nil, simError(env, err)
	}
	return &prediction{env: env, calOut: f.calOut, engine: e}, nil
}

// run simulates the traffic the run sent (the same Spec, so the same
// requests at the same times) and, against a real server with the
// roofline, fits and appends a calibration from the run's measured steps.
func (p *prediction) run(ctx context.Context, spec workload.Spec, res *loadtest.Result) error {
	if p.standIn {
		// The stand-in's API server is Go's HTTP server, not vLLM's.
		p.engine.FrontEnd = sim.FrontEnd{}
		res.Notes = append(res.Notes, "the prediction has no API-server time: the server is headroom's simulated engine (its /v1/models says so), whose HTTP front end is not vLLM's")
	}
	rep, _, err := p.engine.Run(ctx, nil, spec, sim.RunOptions{})
	if err != nil {
		return usageError{fmt.Errorf("simulating the traffic: %v", err)}
	}
	e := p.engine
	sm := loadtest.NewSimulated(rep)
	sm.Model, sm.GPU, sm.StepTime = e.Evidence.Settings.Model, e.Evidence.Sel.Device.Name, e.StepTime
	res.Simulated = &sm
	res.Notes = append(res.Notes, e.Notes...)

	roof, ok := e.Timer.(*sim.Roofline)
	if !ok {
		return nil
	}
	samples := loadtest.StepSamples(res)
	if len(samples) == 0 {
		res.Notes = append(res.Notes, "no calibration written: the run has no ITL or no running count from the server")
		return nil
	}
	// The fit corrects the calibration the prediction ran with.
	c := sim.Fit(*roof, e.Calibration, samples)
	c.GPU = e.Evidence.Sel.Device.Name
	c.Source = fmt.Sprintf("loadtest of %s (%s) at %s: ITL p50 %.2f ms", res.Target.URL, e.Evidence.Settings.Model,
		time.Now().UTC().Format(time.RFC3339), res.ITL.P50)
	if p.standIn {
		// Shown, never written: a stand-in's steps are the simulator's own
		// clock, and would calibrate the GPU by itself for every later run.
		res.StepCalibration = &c
		res.Notes = append(res.Notes, "no calibration written: the server is headroom's simulated engine, whose steps are the simulator's own clock, not a GPU's (the fit is shown only)")
		return nil
	}
	path := p.calOut
	if path == "" {
		if path, err = report.StepCalibrationPath(p.env.Getenv); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("no calibration written: %v (give --calibration-out)", err))
			return nil
		}
	}
	if err := appendJSONLine(path, c); err != nil {
		return usageError{fmt.Errorf("--calibration-out: %v", err)}
	}
	res.StepCalibration, res.StepCalibrationFile = &c, path
	return nil
}

// appendJSONLine appends v as one JSON line to path, creating it and its
// directory; telemetry.LineFile writes the line whole, as the probe's
// records are written.
func appendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lf, err := telemetry.OpenLineFile(path, telemetry.LineFileOptions{})
	if err != nil {
		return err
	}
	if err := lf.WriteLine(b); err != nil {
		lf.Close()
		return err
	}
	return lf.Close()
}
