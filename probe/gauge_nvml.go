//go:build linux && cgo

package probe

import (
	"context"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLGauge reads the GPUs through NVML (libnvidia-ml, loaded at run time:
// the binary builds and runs on machines without a driver, where
// NewNVMLGauge fails).
type NVMLGauge struct {
	once sync.Once
}

// NewNVMLGauge initialises NVML; it fails where there is no driver.
func NewNVMLGauge() (*NVMLGauge, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s", nvml.ErrorString(ret))
	}
	return &NVMLGauge{}, nil
}

// Close shuts NVML down; the gauge is unusable after.
func (g *NVMLGauge) Close() {
	g.once.Do(func() { nvml.Shutdown() })
}

// Source is "nvml".
func (g *NVMLGauge) Source() string { return "nvml" }

// Read lists every GPU NVML sees.
func (g *NVMLGauge) Read(ctx context.Context) ([]GPUMemory, error) {
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %s", nvml.ErrorString(ret))
	}
	out := make([]GPUMemory, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dev, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %s", i, nvml.ErrorString(ret))
		}
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML memory of device %d: %s", i, nvml.ErrorString(ret))
		}
		name, _ := dev.GetName()
		out = append(out, GPUMemory{Index: i, Name: name, TotalBytes: int64(mem.Total), UsedBytes: int64(mem.Used)})
	}
	return out, nil
}
