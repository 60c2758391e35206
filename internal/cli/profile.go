package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newProfileCmd is replaced by the profile command's implementation.
func newProfileCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "profile",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("profile is not built yet") },
	}
}
