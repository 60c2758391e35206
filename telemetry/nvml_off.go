//go:build !nvml || !cgo

package telemetry

import "errors"

// errNoNVML says why a binary without NVML (a default build, or any
// build without cgo) reads GPUs through nvidia-smi, and how to get NVML.
var errNoNVML = errors.New("this headroom was built without NVML; build with cgo and -tags nvml, as the image is")

// openSystemNVML: the NVML reader is compiled only with the nvml tag and
// cgo (nvml.go).
func openSystemNVML(func(int) string) (GPUReader, error) { return nil, errNoNVML }
