package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newProbeCmd is replaced by the probe command's implementation.
func newProbeCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "probe",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("probe is not built yet") },
	}
}
