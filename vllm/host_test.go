package vllm

import (
	"strings"
	"testing"
)

func TestHostFlags(t *testing.T) {
	s, err := ParseCommand(strings.Fields("vllm serve m --kv-offloading-size 64 --kv-offloading-backend native --api-server-count 4 --safetensors-load-strategy eager --mm-processor-cache-gb 0 --mm-processor-cache-type shm --max-cpu-loras 8 --enable-lora --max-loras 2"))
	if err != nil {
		t.Fatal(err)
	}
	if s.KVOffloadingGiB != 64 || s.KVOffloadingBackend != "native" || s.APIServers() != 4 || s.SafetensorsLoadStrategy != "eager" || s.MaxCPULoRAs != 8 {
		t.Fatalf("settings %+v", s)
	}
	if b, from := s.KVOffloadBytes(); b != 64<<30 || from != "--kv-offloading-size" {
		t.Fatalf("KV offload %d from %q", b, from)
	}
	if b, shm := s.MMProcessorCache(); b != 0 || !shm {
		t.Fatalf("processor cache %d shm %v: --mm-processor-cache-gb 0 turns it off", b, shm)
	}
	if n := s.CPULoRAs(); n != 8 {
		t.Fatalf("CPU LoRAs %d, want 8", n)
	}
	// Rendered and read again, nothing is lost.
	again, err := ParseFlags(s.Args())
	if err != nil {
		t.Fatal(err)
	}
	if again.KVOffloadingGiB != 64 || again.APIServerCount != 4 || again.MMProcessorCacheType != "shm" || again.MaxCPULoRAs != 8 {
		t.Fatalf("round trip %v -> %+v", s.Args(), again)
	}
	def, _ := ParseCommand(strings.Fields("vllm serve m"))
	if b, shm := def.MMProcessorCache(); b != DefaultMMProcessorCacheGiB<<30 || shm {
		t.Fatalf("default processor cache %d %v", b, shm)
	}
	if def.APIServers() != 1 || def.CPULoRAs() != 0 {
		t.Fatalf("defaults: %d API servers, %d CPU LoRAs", def.APIServers(), def.CPULoRAs())
	}
}

func TestHostFlagErrors(t *testing.T) {
	for cmd, want := range map[string]string{
		"--kv-offloading-size -1":           "negative",
		"--kv-offloading-size 2e6":          "more host memory than any node has",
		"--kv-offloading-size lots":         "not a number",
		"--kv-offloading-backend redis":     "not one of native, lmcache",
		"--safetensors-load-strategy quick": "not one of lazy, eager, prefetch",
		"--api-server-count 0":              "must be 1 or more",
		"--kv-transfer-config {":            "not a JSON object",
		"--mm-processor-cache-type disk":    "not one of lru, shm",
		`--kv-transfer-config {"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":-5}}`: "between 0 and 1 PiB",
	} {
		_, err := ParseCommand(append([]string{"vllm", "serve", "m"}, strings.SplitN(cmd, " ", 2)...))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", cmd, err, want)
		}
	}
}

// The OffloadingConnector's cpu_bytes_to_use, alone and inside a
// MultiConnector (#51080's command); other connectors hold no CPU cache
// here.
func TestKVTransferConfig(t *testing.T) {
	for raw, want := range map[string]int64{
		`{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"block_size":256,"cpu_bytes_to_use":600000000000}}`:                                  600000000000,
		`{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9}}]}}`: 1000000000,
		`{"kv_connector":"NixlConnector","kv_role":"kv_both"}`: 0,
	} {
		c, err := ParseKVTransferConfig("--kv-transfer-config", raw)
		if err != nil {
			t.Fatal(err)
		}
		if c.CPUBytes != want {
			t.Errorf("%s: %d B, want %d", raw, c.CPUBytes, want)
		}
		s := Settings{KVTransfer: c}
		if b, _ := s.KVOffloadBytes(); b != want {
			t.Errorf("%s: KVOffloadBytes %d, want %d", raw, b, want)
		}
	}
}

// KV offloading moved to a region in /dev/shm with #50094, taken as 0.27.0.
func TestKVOffloadSharedRegion(t *testing.T) {
	if KVOffloadSharedRegion(Version{0, 26, 0, ""}) || !KVOffloadSharedRegion(Version{0, 27, 0, ""}) || !KVOffloadSharedRegion(Version{}) {
		t.Fatal("the shared region starts at 0.27.0 and the newest release has it")
	}
}

func FuzzKVTransferConfig(f *testing.F) {
	for _, seed := range []string{
		`{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":600000000000}}`,
		`{"kv_connector":"MultiConnector","kv_connector_extra_config":{"connectors":[{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e9}}]}}`,
		`{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"cpu_bytes_to_use":1e400}}`,
		`{"kv_connector":"LMCacheConnectorV1"}`, `[]`, `null`, `{`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := ParseKVTransferConfig("--kv-transfer-config", raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if c.CPUBytes < 0 || c.CPUBytes > maxHostGiB<<30 {
			t.Fatalf("%q: %d bytes", raw, c.CPUBytes)
		}
	})
}

func TestStreamerMemoryLimit(t *testing.T) {
	s, err := ParseCommand([]string{"vllm", "serve", "m", "--load-format", "runai_streamer", "--model-loader-extra-config", `{"concurrency":16,"memory_limit":5368709120}`})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s.StreamerMemoryLimit(); !ok || b != 5<<30 || s.LoadFormat() != "runai_streamer" {
		t.Fatalf("memory_limit %d %v, load format %q", b, ok, s.LoadFormat())
	}
	none, _ := ParseCommand([]string{"vllm", "serve", "m", "--model-loader-extra-config", `{"concurrency":16}`})
	if _, ok := none.StreamerMemoryLimit(); ok {
		t.Fatal("a memory_limit read where none is given")
	}
}

// FuzzStreamerMemoryLimit reads any --model-loader-extra-config: never a
// panic, and a limit only when it is a positive size within a node.
func FuzzStreamerMemoryLimit(f *testing.F) {
	for _, seed := range []string{`{"memory_limit":5368709120}`, `{"memory_limit":-1}`, `{"memory_limit":1e300}`, `{"concurrency":16}`, `[]`, `{`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseFlags([]string{"m", "--model-loader-extra-config", raw})
		if err != nil {
			return
		}
		if b, ok := s.StreamerMemoryLimit(); ok && (b <= 0 || b > maxHostGiB<<30) {
			t.Fatalf("%q: %d bytes", raw, b)
		}
	})
}
