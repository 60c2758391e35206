//go:build !(linux && cgo)

package probe

import (
	"context"
	"errors"
)

// NVMLGauge is unavailable in a build without cgo on Linux; nvidia-smi
// stands in.
type NVMLGauge struct{}

// NewNVMLGauge fails: this build has no NVML bindings.
func NewNVMLGauge() (*NVMLGauge, error) {
	return nil, errors.New("NVML: not in this build (needs cgo on Linux)")
}

// Close does nothing.
func (g *NVMLGauge) Close() {}

// Source is "nvml".
func (g *NVMLGauge) Source() string { return "nvml" }

// Read fails.
func (g *NVMLGauge) Read(context.Context) ([]GPUMemory, error) {
	return nil, errors.New("NVML: not in this build")
}
