package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newWatchCmd is replaced by the watch command's implementation.
func newWatchCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "watch",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("watch is not built yet") },
	}
}
