package telemetry

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"headroom.dev/headroom/vllm"
)

func addFiles(f *testing.F, dir string, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", dir, n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func saneBytes(t *testing.T, what string, v int64) {
	if v < Unknown {
		t.Fatalf("%s = %d: neither Unknown nor a byte count", what, v)
	}
}

func saneGPU(t *testing.T, g GPU) {
	saneBytes(t, "total", g.TotalBytes)
	saneBytes(t, "used", g.UsedBytes)
	saneBytes(t, "free", g.FreeBytes)
	saneBytes(t, "reserved", g.ReservedBytes)
	if g.Index < Unknown || g.UtilizationPercent < Unknown {
		t.Fatalf("index %d, utilization %d", g.Index, g.UtilizationPercent)
	}
	for _, p := range g.Processes {
		saneProcess(t, p)
	}
}

func saneProcess(t *testing.T, p Process) {
	saneBytes(t, "process used", p.UsedBytes)
	if p.PID < Unknown || p.GPUIndex < Unknown || p.GI < Unknown || p.CI < Unknown {
		t.Fatalf("process %+v", p)
	}
}

func FuzzParseQueryGPU(f *testing.F) {
	addFiles(f, "smi", "query-gpu-535-units.csv", "query-gpu-570-nounits.csv", "query-gpu-470-noheader.csv", "query-gpu-550-na.csv")
	f.Add([]byte("index, name\n0, a, b, c\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		gpus, err := ParseQueryGPU(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, g := range gpus {
			saneGPU(t, g)
		}
	})
}

func FuzzParseComputeApps(f *testing.F) {
	addFiles(f, "smi", "compute-apps-535.csv", "compute-apps-570-container.csv", "compute-apps-empty.csv", "compute-apps-noheader-nounits.csv")
	f.Add([]byte("pid, process_name, used_gpu_memory [MiB], gpu_uuid\n1, a, b, c, 5 MiB, GPU-1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		procs, err := ParseComputeApps(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, p := range procs {
			saneProcess(t, p)
		}
	})
}

func FuzzParseSMIScreen(f *testing.F) {
	addFiles(f, "smi", "screen-418-v100.txt", "screen-470-t4.txt", "screen-535-a100x2.txt",
		"screen-550-h100-noproc.txt", "screen-570-l4-container.txt", "screen-535-a100-mig.txt")
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseSMIScreen(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, g := range s.GPUs {
			saneGPU(t, g)
			if g.FreeBytes != Unknown && g.FreeBytes > g.TotalBytes {
				t.Fatalf("free %d > total %d", g.FreeBytes, g.TotalBytes)
			}
		}
		for _, p := range s.Processes {
			saneProcess(t, p)
		}
		for _, d := range s.MIG {
			for _, v := range []int64{d.UsedBytes, d.TotalBytes, d.BAR1UsedBytes, d.BAR1TotalBytes} {
				saneBytes(t, "MIG", v)
			}
		}
	})
}

func FuzzParseDmon(f *testing.F) {
	addFiles(f, "smi", "dmon-470.txt", "dmon-550-dt.txt")
	f.Fuzz(func(t *testing.T, in []byte) {
		rows, err := ParseDmon(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range rows {
			saneBytes(t, "fb", r.FBBytes)
			saneBytes(t, "bar1", r.BAR1Bytes)
			if r.GPU < Unknown || r.SMPercent < Unknown || r.MemPercent < Unknown {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

func FuzzParseVLLMMetrics(f *testing.F) {
	// Small excerpts of the recorded expositions: the fuzzer minimizes
	// every new input it finds, which is slow for 15 KiB pages. The whole
	// pages are read by TestParseVLLMMetrics.
	f.Add([]byte(`# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.9473684210526315
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 600.0
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="m"} 985.0
vllm:time_to_first_token_seconds_bucket{le="2.5",model_name="m"} 998.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 1000.0
vllm:time_to_first_token_seconds_count{model_name="m"} 1000.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 196.42
`))
	f.Add([]byte(`# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="q",engine="0"} 0.62
vllm:kv_cache_usage_perc{model_name="q",engine="1"} 0.97
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="q",engine="0"} 0.0
vllm:num_requests_waiting{model_name="q",engine="1"} 6.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.9",num_gpu_blocks="29751"} 1.0
`))
	f.Add([]byte("vllm:kv_cache_usage_perc 7\nvllm:num_requests_running -3\n"))
	f.Add([]byte("# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"1\"} 5\nvllm:time_to_first_token_seconds_bucket{le=\"0.5\"} 9\nvllm:time_to_first_token_seconds_count 9\n"))
	f.Add([]byte("vllm:num_preemptions_total 1e308\n# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"1e308\"} 1\nvllm:time_to_first_token_seconds_count 1\n"))
	f.Add([]byte(specExposition))
	f.Add([]byte("vllm:spec_decode_num_drafts_total 5\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"99999999\"} 1\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"-1\"} 1\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 1e308\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseVLLMMetrics(bytes.NewReader(in))
		if err != nil {
			return
		}
		if s.KVCacheUsage < 0 || s.KVCacheUsage > 1 || math.IsNaN(s.KVCacheUsage) {
			t.Fatalf("KV usage %v outside 0..1", s.KVCacheUsage)
		}
		if c := s.SpecDecode; c != nil {
			if len(c.AcceptedPerPos) > vllm.MaxSpeculativeTokens {
				t.Fatalf("%d draft positions", len(c.AcceptedPerPos))
			}
			for _, v := range append([]float64{c.Drafts, c.DraftTokens, c.Accepted}, c.AcceptedPerPos...) {
				if !finiteNonNeg(v) || v > maxCount {
					t.Fatalf("a spec-decode count is %v in %+v", v, c)
				}
			}
		}
		for _, v := range []float64{s.RequestsRunning, s.RequestsWaiting, s.PreemptionsTotal, s.TTFTP99Seconds, s.TTFT.Count} {
			if !finiteNonNeg(v) || v > maxCount {
				t.Fatalf("a count or latency is %v in %+v", v, s)
			}
		}
		if _, err := json.Marshal(s); err != nil {
			t.Fatalf("the sample does not encode: %v", err)
		}
	})
}
