//go:build !cgo

package telemetry

import "errors"

// openSystemNVML: NVML's Go bindings need cgo; a binary built without it
// reads GPUs through nvidia-smi only.
func openSystemNVML(func(int) string) (GPUReader, error) {
	return nil, errors.New("headroom was built without cgo, so without NVML")
}
