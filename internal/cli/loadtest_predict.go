package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"headroom.dev/headroom/loadtest"
	"headroom.dev/headroom/sim"
	"headroom.dev/headroom/telemetry"
)

// prediction is simulate's engine for the served model on the given GPU,
// built before the load goes out so that bad input stops the run first.
type prediction struct {
	env      Env
	dep      deployment
	timer    sim.StepTimer
	timeDesc string
	config   sim.Config
	cal      sim.Calibration
}

func newPrediction(cmd *cobra.Command, env Env, f loadtestFlags, args []string) (*prediction, error) {
	setup, err := setupEngine(cmd, env, f.plan, simulateFlags{}, f.calibration, args)
	if err != nil {
		return nil, err
	}
	ev, d, sched := setup.given.ev, setup.given, setup.sched
	timer, desc, err := stepTimer(f.stepTime, d.budget, setup.cal)
	if err != nil {
		return nil, err
	}
	cfg, err := engineConfig(d, sched, timer)
	if err != nil {
		return nil, badInput("the plan for %s on %s leaves no KV cache: nothing to simulate", ev.Settings.Model, d.ev.Sel.Device.Name)
	}
	return &prediction{env: env, dep: d, timer: timer, timeDesc: desc, config: cfg, cal: setup.cal.Calibration}, nil
}

// run simulates the traffic the run sent (its schedule rebuilt from the
// same flags and seed) and, with the roofline, fits and appends a
// calibration from the run's measured steps.
func (p *prediction) run(ctx context.Context, f loadtestFlags, bursts []loadtest.Burst, res *loadtest.Result) error {
	e, err := sim.New(p.config)
	if err != nil {
		return usageError{err}
	}
	sched, closer, _, err := loadtestSchedule(f, bursts)
	if err != nil {
		return err
	}
	if closer != nil {
		defer closer.Close()
	}
	rep, err := loadtest.Predict(ctx, e, sched, f.numRequests, f.duration)
	if err != nil {
		return usageError{fmt.Errorf("simulating the traffic: %v", err)}
	}
	sm := loadtest.NewSimulated(rep)
	sm.Model, sm.GPU, sm.StepTime = p.dep.ev.Settings.Model, p.dep.ev.Sel.Device.Name, p.timeDesc
	res.Simulated = &sm
	res.Notes = append(res.Notes, p.dep.ev.Notes...)

	roof, ok := p.timer.(*sim.Roofline)
	samples := loadtest.StepSamples(res)
	if !ok || len(samples) == 0 {
		if ok {
			res.Notes = append(res.Notes, "no calibration written: the run has no ITL or no running count from the server")
		}
		return nil
	}
	// The fit corrects the calibration the prediction ran with (the
	// roofline's own, --calibration's records included).
	c := sim.Fit(*roof, p.cal, samples)
	c.GPU = p.dep.ev.Sel.Device.Name
	c.Source = fmt.Sprintf("loadtest of %s (%s) at %s: ITL p50 %.2f ms", res.Target.URL, p.dep.ev.Settings.Model,
		time.Now().UTC().Format(time.RFC3339), res.ITL.P50)
	path := f.calOut
	if path == "" {
		var err error
		if path, err = stepCalibrationPath(p.env.Getenv); err != nil {
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
