//go:build !unix

package probe

import (
	"context"
	"errors"
	"net/http"
	"time"

	"headroom.dev/headroom/vllm"
)

// Process launches the real engine; it needs process groups, so it works
// on Linux and other Unix systems only (where vLLM runs).
type Process struct {
	Bin            string
	Env            []string
	Gauge          MemoryGauge
	Grace          time.Duration
	ReleaseTimeout time.Duration
	HealthEvery    time.Duration
	LogDir         string
	HTTP           *http.Client
}

var errNoProcessGroups = errors.New("probe launches vLLM in a process group, which needs Linux or another Unix system")

// Version fails on this system.
func (p *Process) Version(context.Context) (vllm.Version, error) {
	return vllm.Version{}, errNoProcessGroups
}

// Launch fails on this system.
func (p *Process) Launch(context.Context, Launch) (Attempt, error) {
	return Attempt{}, errNoProcessGroups
}
