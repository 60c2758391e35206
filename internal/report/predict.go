package report

import (
	"context"
	"fmt"
	"time"

	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
	"headroom.dev/headroom/workload"
)

// Prediction is simulate's engine for a load test's server: the same
// traffic runs through it beside the measurement, and the measured decode
// steps refit its clock.
type Prediction struct {
	Engine *Engine
	// CalibrationOut is where a fit from a real vLLM is appended; "" is
	// StepCalibrationPath's file.
	CalibrationOut string
	Getenv         func(string) string
	// StandIn is set when the server is headroom's own simulated engine:
	// its steps are the simulator's, not a GPU's, and never calibrate one.
	StandIn bool
}

// Run simulates the traffic the run sent (the same Spec, so the same
// requests at the same times) and, against a real server with the
// roofline, fits and appends a calibration from the run's measured steps.
func (p *Prediction) Run(ctx context.Context, spec workload.Spec, res *loadtest.Result) error {
	if p.StandIn {
		// The stand-in's API server is Go's HTTP server, not vLLM's.
		p.Engine.NoAPIServer = true
		res.Notes = append(res.Notes, "the prediction has no API-server time: the server is headroom's simulated engine (its /v1/models says so), whose HTTP front end is not vLLM's")
	}
	if err := p.measuredAcceptance(res); err != nil {
		return err
	}
	rep, _, err := p.Engine.Run(ctx, nil, spec, sim.RunOptions{})
	if err != nil {
		return fmt.Errorf("simulating the traffic: %v", err)
	}
	e := p.Engine
	sm := loadtest.NewSimulated(rep)
	sm.Model, sm.GPU, sm.StepTime = e.Evidence.Settings.Model, e.Evidence.Sel.Device.Name, e.StepTime
	res.Simulated = &sm
	res.Notes = append(res.Notes, e.Notes...)
	if _, ok := e.Timer.(*sim.Roofline); ok && !p.StandIn {
		c := sim.ConfidenceOfRun(e.Budget, rep)
		res.Notes = append(res.Notes, "the prediction's bands, from "+c.Source+": "+c.Summary())
	}

	roof, ok := e.Timer.(*sim.Roofline)
	if !ok {
		return nil
	}
	if res.SpecDecode != nil || e.Config.Speculation != nil {
		res.Notes = append(res.Notes, "no calibration written: the server decodes speculatively, so its inter-token gap is a verification of drafts and the drafter's passes, not a decode step of the model")
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
	if p.StandIn {
		// Shown, never written: a stand-in's steps are the simulator's own
		// clock, and would calibrate the GPU by itself for every later run.
		res.StepCalibration = &c
		res.Notes = append(res.Notes, "no calibration written: the server is headroom's simulated engine, whose steps are the simulator's own clock, not a GPU's (the fit is shown only)")
		return nil
	}
	path := p.CalibrationOut
	if path == "" {
		if path, err = StepCalibrationPath(p.Getenv); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("no calibration written: %v (give --calibration-out)", err))
			return nil
		}
	}
	if err := telemetry.AppendJSON(path, c); err != nil {
		return fmt.Errorf("--calibration-out: %v", err)
	}
	res.StepCalibration, res.StepCalibrationFile = &c, path
	return nil
}

// measuredAcceptance makes the prediction run at the acceptance the
// server's counters measured, when the command decodes speculatively and
// --acceptance-rate did not say otherwise: the default is a guess, the
// measurement is this traffic's.
func (p *Prediction) measuredAcceptance(res *loadtest.Result) error {
	e := p.Engine
	m := res.SpecDecode
	if e.Config.Speculation == nil || e.acceptance != 0 || m == nil || !(m.TokenAcceptance > 0) {
		return nil
	}
	e.acceptance = m.TokenAcceptance
	e.acceptanceSource = fmt.Sprintf("measured by this run: %.0f drafts, %.1f%% of their tokens accepted", m.Drafts, 100*m.DraftAcceptanceRate)
	if err := e.speculate(e.Budget); err != nil {
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("the prediction decodes speculatively at the per-token acceptance the server's counters measured, %.2f, not the method's default", m.TokenAcceptance))
	return nil
}
