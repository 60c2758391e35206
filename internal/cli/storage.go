package cli

import (
	"github.com/spf13/pflag"

	"headroom.dev/headroom/startup"
)

// addStorageFlag adds --storage, the storage class of the start-up estimate
// (package startup), to the commands that need a start-up time: check (a
// probe's window), capacity (a new replica's delay) and probe (a launch's
// timeout).
func addStorageFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "storage", "", "where the checkpoint is read from at start-up, for the start-up estimate: "+startup.List()+" (default "+string(startup.DefaultStorage)+"; docs/startup.md)")
}

// readStorage reads --storage; a bad value is bad input.
func readStorage(raw string) (startup.Storage, error) {
	st, err := startup.ParseStorage(raw)
	if err != nil {
		return "", badInput("--storage: %v", err)
	}
	return st, nil
}
