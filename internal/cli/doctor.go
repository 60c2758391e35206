package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDoctorCmd is replaced by the doctor command's implementation.
func newDoctorCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "doctor",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("doctor is not built yet") },
	}
}
