package cli

import (
	"headroom.dev/headroom/sim"
)

func plotSeries(name string, r *sim.Report) error {
	return badInput("--plot is not available yet")
}
