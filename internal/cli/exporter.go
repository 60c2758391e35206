package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newExporterCmd is replaced by the exporter command's implementation.
func newExporterCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "exporter",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("exporter is not built yet") },
	}
}
