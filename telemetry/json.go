package telemetry

import "encoding/json"

// JSON renders Unknown as null, so a reader never mistakes -1 for a size.

func opt[T int | int64](v T) *T {
	if v == Unknown {
		return nil
	}
	return &v
}

func unopt[T int | int64](p *T) T {
	if p == nil {
		return Unknown
	}
	return *p
}

type gpuJSON struct {
	Index              *int      `json:"index"`
	Name               string    `json:"name"`
	UUID               string    `json:"uuid,omitempty"`
	BusID              string    `json:"bus_id,omitempty"`
	TotalBytes         *int64    `json:"total_bytes"`
	UsedBytes          *int64    `json:"used_bytes"`
	FreeBytes          *int64    `json:"free_bytes"`
	ReservedBytes      *int64    `json:"reserved_bytes,omitempty"`
	UtilizationPercent *int      `json:"utilization_percent,omitempty"`
	Processes          []Process `json:"processes,omitempty"`
}

// MarshalJSON writes Unknown values as null.
func (g GPU) MarshalJSON() ([]byte, error) {
	return json.Marshal(gpuJSON{opt(g.Index), g.Name, g.UUID, g.BusID, opt(g.TotalBytes), opt(g.UsedBytes),
		opt(g.FreeBytes), opt(g.ReservedBytes), opt(g.UtilizationPercent), g.Processes})
}

// UnmarshalJSON reads null or absent values as Unknown.
func (g *GPU) UnmarshalJSON(b []byte) error {
	var j gpuJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*g = GPU{Index: unopt(j.Index), Name: j.Name, UUID: j.UUID, BusID: j.BusID, TotalBytes: unopt(j.TotalBytes),
		UsedBytes: unopt(j.UsedBytes), FreeBytes: unopt(j.FreeBytes), ReservedBytes: unopt(j.ReservedBytes),
		UtilizationPercent: unopt(j.UtilizationPercent), Processes: j.Processes}
	return nil
}

type processJSON struct {
	GPUIndex  *int   `json:"gpu_index"`
	GPUUUID   string `json:"gpu_uuid,omitempty"`
	GI        *int   `json:"gi,omitempty"`
	CI        *int   `json:"ci,omitempty"`
	PID       *int   `json:"pid"`
	Type      string `json:"type,omitempty"`
	Name      string `json:"name"`
	UsedBytes *int64 `json:"used_bytes"`
}

// MarshalJSON writes Unknown values as null.
func (p Process) MarshalJSON() ([]byte, error) {
	return json.Marshal(processJSON{opt(p.GPUIndex), p.GPUUUID, opt(p.GI), opt(p.CI), opt(p.PID),
		p.Type, p.Name, opt(p.UsedBytes)})
}

// UnmarshalJSON reads null or absent values as Unknown.
func (p *Process) UnmarshalJSON(b []byte) error {
	var j processJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Process{GPUIndex: unopt(j.GPUIndex), GPUUUID: j.GPUUUID, GI: unopt(j.GI), CI: unopt(j.CI),
		PID: unopt(j.PID), Type: j.Type, Name: j.Name, UsedBytes: unopt(j.UsedBytes)}
	return nil
}
