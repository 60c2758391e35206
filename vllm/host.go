package vllm

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// This file holds the flags that move host memory and /dev/shm, not GPU
// memory: KV-cache offloading to the CPU, the number of API-server
// processes, how safetensors are read, the multimodal processor cache and
// the LoRA adapters kept in host memory. They are typed fields of Settings
// (hostFlags); the host plan (package host) reads them.

// Flag names of the host settings (keys of Settings.Set).
const (
	// FlagKVOffloadingSize is CacheConfig.kv_offloading_size: GiB of CPU
	// KV cache summed over the tensor-parallel ranks (#32421, 0.14).
	FlagKVOffloadingSize = "kv-offloading-size"
	// FlagKVOffloadingBackend is "native" (the default, the
	// OffloadingConnector) or "lmcache".
	FlagKVOffloadingBackend = "kv-offloading-backend"
	// FlagKVTransferConfig is the long form of a KV connector, as JSON;
	// the OffloadingConnector's cpu_bytes_to_use sizes its CPU cache
	// (#24498).
	FlagKVTransferConfig = "kv-transfer-config"
	// FlagAPIServerCount is how many API-server processes the front end
	// runs; each has its own tokenizer and processor cache.
	FlagAPIServerCount = "api-server-count"
	// FlagSafetensorsLoadStrategy is lazy (mmap, the default), eager
	// (whole files read into memory) or prefetch (the page cache warmed
	// first), in weight_utils.py.
	FlagSafetensorsLoadStrategy = "safetensors-load-strategy"
	// FlagMMProcessorCacheGB is the multimodal processor cache in GiB
	// per process that keeps one (4 by default, 0 turns it off);
	// FlagMMProcessorCacheType is "lru" (process memory) or "shm" (a ring
	// in /dev/shm).
	FlagMMProcessorCacheGB   = "mm-processor-cache-gb"
	FlagMMProcessorCacheType = "mm-processor-cache-type"
	// FlagMaxCPULoRAs is how many LoRA adapters each worker keeps in
	// host memory (default --max-loras, at least it).
	FlagMaxCPULoRAs = "max-cpu-loras"
	// FlagSwapSpace is V0's CPU swap space; V1 never allocates it.
	FlagSwapSpace = "swap-space"
)

// Environment variables of the host plan.
const (
	// EnvWeightOffloadNoPin turns off pinning of --cpu-offload-gb's host
	// copies (vllm/envs.py VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY):
	// plain pages, sized exactly, not rounded by torch's host allocator.
	EnvWeightOffloadNoPin = "VLLM_WEIGHT_OFFLOADING_DISABLE_PIN_MEMORY"
)

// DefaultMMProcessorCacheGiB is --mm-processor-cache-gb when not given
// (vllm/config/multimodal.py).
const DefaultMMProcessorCacheGiB = 4

// maxHostGiB bounds a host-memory flag: 1 PiB, more than any node holds,
// so a size past it is a typo, and bytes stay far inside an int64.
const maxHostGiB = 1 << 20

// hostFlags are the valued host flags Settings holds, rendered after the
// features' (engineFlags). Read-only.
var hostFlags = []engineFlag{
	{name: FlagKVOffloadingSize,
		set: func(s *Settings, f, r string) (err error) {
			s.KVOffloadingGiB, err = parseHostGiB(f, r, "GiB of CPU KV cache summed over the tensor-parallel ranks, such as 64")
			return
		},
		get: func(s Settings) string { return ftoa(s.KVOffloadingGiB) }},
	{name: FlagKVOffloadingBackend,
		set: func(s *Settings, f, r string) (err error) {
			s.KVOffloadingBackend, err = parseChoice(f, r, "native", "lmcache")
			return
		},
		get: func(s Settings) string { return s.KVOffloadingBackend }},
	{name: FlagKVTransferConfig, jsonValue: true,
		set: func(s *Settings, f, r string) (err error) { s.KVTransfer, err = ParseKVTransferConfig(f, r); return },
		get: func(s Settings) string {
			if s.KVTransfer == nil {
				return ""
			}
			return s.KVTransfer.raw
		}},
	{name: FlagAPIServerCount,
		set: func(s *Settings, f, r string) (err error) { s.APIServerCount, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.APIServerCount)) }},
	{name: FlagSafetensorsLoadStrategy,
		set: func(s *Settings, f, r string) (err error) {
			s.SafetensorsLoadStrategy, err = parseChoice(f, r, "lazy", "eager", "prefetch")
			return
		},
		get: func(s Settings) string { return s.SafetensorsLoadStrategy }},
	{name: FlagMMProcessorCacheGB,
		set: func(s *Settings, f, r string) (err error) {
			s.MMProcessorCacheGiB, err = parseHostGiB(f, r, "GiB per process, 0 to turn the cache off, such as 4")
			return
		},
		get: func(s Settings) string { return ftoa(s.MMProcessorCacheGiB) }},
	{name: FlagMMProcessorCacheType,
		set: func(s *Settings, f, r string) (err error) {
			s.MMProcessorCacheType, err = parseChoice(f, r, "lru", "shm")
			return
		},
		get: func(s Settings) string { return s.MMProcessorCacheType }},
	{name: FlagMaxCPULoRAs,
		set: func(s *Settings, f, r string) (err error) { s.MaxCPULoRAs, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxCPULoRAs)) }},
}

// parseHostGiB reads a size in GiB of host memory: a number, 0 or more,
// at most maxHostGiB.
func parseHostGiB(flag, raw, want string) (float64, error) {
	f, err := parseFloat(flag, raw, want)
	if err != nil {
		return 0, err
	}
	if f < 0 {
		return 0, fmt.Errorf("%s: %s is negative; give %s", flag, fmtFloat(f), want)
	}
	if f > maxHostGiB {
		return 0, fmt.Errorf("%s: %s GiB is more host memory than any node has; give %s", flag, fmtFloat(f), want)
	}
	return f, nil
}

// parseChoice reads one of a flag's choices.
func parseChoice(flag, raw string, choices ...string) (string, error) {
	v := strings.TrimSpace(raw)
	for _, c := range choices {
		if v == c {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: %q is not one of %s", flag, clip(raw), strings.Join(choices, ", "))
}

// Connector names of --kv-transfer-config that hold host memory.
const (
	// ConnectorOffloading is vLLM's native CPU offloading connector.
	ConnectorOffloading = "OffloadingConnector"
	// connectorMulti wraps several connectors
	// (kv_connector_extra_config.connectors).
	connectorMulti = "MultiConnector"
)

// KVTransferConfig is --kv-transfer-config as far as host memory goes.
type KVTransferConfig struct {
	// Connector is kv_connector: the OffloadingConnector when a
	// MultiConnector wraps one, else the connector named.
	Connector string `json:"kv_connector"`
	// CPUBytes is the OffloadingConnector's cpu_bytes_to_use, summed over
	// the tensor-parallel ranks as --kv-offloading-size is; 0 when the
	// connector is another or the key is absent.
	CPUBytes int64 `json:"cpu_bytes_to_use,omitempty"`
	raw      string
}

// connectorJSON is the part of a KV transfer config the host plan reads.
type connectorJSON struct {
	Connector string `json:"kv_connector"`
	Extra     struct {
		CPUBytes   *float64        `json:"cpu_bytes_to_use"`
		Connectors []connectorJSON `json:"connectors"`
	} `json:"kv_connector_extra_config"`
}

// ParseKVTransferConfig reads --kv-transfer-config's JSON: the connector
// and, for the OffloadingConnector (alone or inside a MultiConnector),
// cpu_bytes_to_use.
func ParseKVTransferConfig(flag, raw string) (*KVTransferConfig, error) {
	var c connectorJSON
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object (%v); give one such as '{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\",\"kv_connector_extra_config\":{\"cpu_bytes_to_use\":68719476736}}'", flag, firstError(err))
	}
	out := &KVTransferConfig{Connector: c.Connector, raw: raw}
	found := c
	if c.Connector == connectorMulti {
		for _, inner := range c.Extra.Connectors {
			if inner.Connector == ConnectorOffloading {
				found = inner
				out.Connector = ConnectorOffloading
				break
			}
		}
	}
	if found.Connector != ConnectorOffloading || found.Extra.CPUBytes == nil {
		return out, nil
	}
	b := *found.Extra.CPUBytes
	if b < 0 || b > maxHostGiB*(1<<30) || math.IsNaN(b) {
		return nil, fmt.Errorf("%s: cpu_bytes_to_use %g is not a size in bytes between 0 and 1 PiB", flag, b)
	}
	out.CPUBytes = int64(b)
	return out, nil
}

// firstError is the first line of a JSON error.
func firstError(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// KVOffloadBytes is the CPU KV cache one engine (one data-parallel rank)
// offloads, summed over its tensor-parallel ranks: --kv-offloading-size
// in GiB, or the OffloadingConnector's cpu_bytes_to_use; from names the
// flag. 0 without offloading.
func (s Settings) KVOffloadBytes() (bytes int64, from string) {
	if s.KVOffloadingGiB > 0 {
		return int64(s.KVOffloadingGiB * (1 << 30)), "--" + FlagKVOffloadingSize
	}
	if s.KVTransfer != nil && s.KVTransfer.CPUBytes > 0 {
		return s.KVTransfer.CPUBytes, "--" + FlagKVTransferConfig + " cpu_bytes_to_use"
	}
	return 0, ""
}

// KVOffloadSharedRegion reports whether the release backs the offloaded
// KV cache with one mmap in /dev/shm registered with cudaHostRegister,
// sized exactly as asked (#50094, "Move CPUOffloadingSpec onto
// SharedOffloadRegion"), rather than one pinned torch tensor per KV
// tensor, each rounded up to a power of two by torch's host allocator.
// #50094 merged between 2026-07-29 and 08-02; a 0.26.1rc1 development
// build already maps the region in /dev/shm (#51080) while 0.26.0 pins
// (#53042), so 0.27.0 is taken as its first release (unverified: 0.27 or
// 0.28 by the notes read).
func KVOffloadSharedRegion(v Version) bool {
	return orNewest(v).AtLeast(kvOffloadSharedRegionSince)
}

// kvOffloadSharedRegionSince is KVOffloadSharedRegion's boundary.
var kvOffloadSharedRegionSince = Version{0, 27, 0, ""}

// APIServers is the API-server processes the front end runs: the flag, or
// one.
func (s Settings) APIServers() int { return max(s.APIServerCount, 1) }

// MMProcessorCache is the multimodal processor cache per process that
// keeps one, in bytes, and whether it lives in /dev/shm: the flag, or its
// default; 0 when the flag turns it off.
func (s Settings) MMProcessorCache() (bytes int64, shm bool) {
	gib := float64(DefaultMMProcessorCacheGiB)
	if s.Set[FlagMMProcessorCacheGB] {
		gib = s.MMProcessorCacheGiB
	}
	return int64(gib * (1 << 30)), s.MMProcessorCacheType == "shm"
}

// CPULoRAs is how many adapters each worker keeps in host memory with
// --enable-lora: --max-cpu-loras, or the slots (--max-loras) when it is
// not given or fewer (vLLM refuses fewer); 0 when LoRA is off.
func (s Settings) CPULoRAs() int {
	slots, _ := s.LoRASlots()
	if slots == 0 {
		return 0
	}
	return max(s.MaxCPULoRAs, slots)
}

// StreamerMemoryLimit is the CPU buffer of a weight streamer (the Run:ai
// streamer's memory_limit in --model-loader-extra-config, bytes); ok is
// false when none is given, or the value is not a positive size.
func (s Settings) StreamerMemoryLimit() (bytes int64, ok bool) {
	raw := s.extraValue("model-loader-extra-config")
	if raw == "" {
		return 0, false
	}
	var c struct {
		MemoryLimit *float64 `json:"memory_limit"`
	}
	if json.Unmarshal([]byte(raw), &c) != nil || c.MemoryLimit == nil || *c.MemoryLimit <= 0 || *c.MemoryLimit > maxHostGiB*(1<<30) {
		return 0, false
	}
	return int64(*c.MemoryLimit), true
}
