package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newWebhookCmd is replaced by the webhook command's implementation.
func newWebhookCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    "webhook",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("webhook is not built yet") },
	}
}
