// Command headroom keeps LLM inference servers inside their GPU memory: it
// plans vLLM's memory budget for a model on a GPU and recommends settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"headroom.dev/headroom/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}
