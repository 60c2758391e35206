package telemetry

import "encoding/json"

// JSON renders Unknown as null, so a reader never mistakes -1 for a size.

func opt(v int64) *int64 {
	if v == Unknown {
		return nil
	}
	return &v
}

func optInt(v int) *int {
	if v == Unknown {
		return nil
	}
	return &v
}

func unopt(p *int64) int64 {
	if p == nil {
		return Unknown
	}
	return *p
}

func unoptInt(p *int) int {
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
	return json.Marshal(gpuJSON{optInt(g.Index), g.Name, g.UUID, g.BusID, opt(g.TotalBytes), opt(g.UsedBytes),
		opt(g.FreeBytes), opt(g.ReservedBytes), optInt(g.UtilizationPercent), g.Processes})
}

// UnmarshalJSON reads null or absent values as Unknown.
func (g *GPU) UnmarshalJSON(b []byte) error {
	var j gpuJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*g = GPU{Index: unoptInt(j.Index), Name: j.Name, UUID: j.UUID, BusID: j.BusID, TotalBytes: unopt(j.TotalBytes),
		UsedBytes: unopt(j.UsedBytes), FreeBytes: unopt(j.FreeBytes), ReservedBytes: unopt(j.ReservedBytes),
		UtilizationPercent: unoptInt(j.UtilizationPercent), Processes: j.Processes}
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
	return json.Marshal(processJSON{optInt(p.GPUIndex), p.GPUUUID, optInt(p.GI), optInt(p.CI), optInt(p.PID),
		p.Type, p.Name, opt(p.UsedBytes)})
}

// UnmarshalJSON reads null or absent values as Unknown.
func (p *Process) UnmarshalJSON(b []byte) error {
	var j processJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Process{GPUIndex: unoptInt(j.GPUIndex), GPUUUID: j.GPUUUID, GI: unoptInt(j.GI), CI: unoptInt(j.CI),
		PID: unoptInt(j.PID), Type: j.Type, Name: j.Name, UsedBytes: unopt(j.UsedBytes)}
	return nil
}
