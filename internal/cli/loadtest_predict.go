package cli

import (
	"github.com/spf13/cobra"

	"headroom.dev/headroom/internal/report"
)

// newPrediction builds simulate's engine for the served model on the given
// GPU before the load goes out, so that bad input stops the run first.
func newPrediction(cmd *cobra.Command, env Env, f loadtestFlags, args []string) (*report.Prediction, error) {
	e, err := report.SimEngine(cmd.Context(), reportEnv(env), nil, report.EngineRequest{
		Plan: request(cmd, f.plan, args), StepTime: f.stepTime, Calibration: f.calibration, AcceptanceRate: f.acceptance})
	if err != nil {
		return nil, simError(env, err)
	}
	return &report.Prediction{Engine: e, CalibrationOut: f.calOut, Getenv: env.Getenv}, nil
}
