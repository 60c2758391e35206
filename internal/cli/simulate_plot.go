package cli

import (
	"github.com/spf13/cobra"

	"headroom.dev/headroom/sim"
)

func plotSeries(name string, r *sim.Report) error {
	return badInput("--plot is not available yet")
}

func runSimulateServe(cmd *cobra.Command, env Env, f simulateFlags, args []string) error {
	return badInput("--serve is not available yet")
}
