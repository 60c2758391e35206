package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSnapshotCmd is replaced by the snapshot command's implementation.
func newSnapshotCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "snapshot",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("snapshot is not built yet") },
	}
}
